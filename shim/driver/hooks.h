/*
 * hooks.h - everything generated from the one table of hooked driver entry
 * points (hook_table.h):
 *   - the slot enum SHIM_HOOK_<symbol> and SHIM_NHOOKS;
 *   - the typed declaration of each hook, exported under the exact symbol
 *     name through an asm label (so cuda.h's #define cuGetProcAddress
 *     cuGetProcAddress_v2 cannot rename it, and _ptsz variants stay
 *     distinct);
 *   - the name table dlsym and cuGetProcAddress answer from (driver.c).
 * Adding an entry point is one row in hook_table.h plus its hook function.
 */
#ifndef SM120_SHIM_DRIVER_HOOKS_H
#define SM120_SHIM_DRIVER_HOOKS_H

#include <cuda.h>

#include "../../core/hooks/hook_table.h"

enum shim_hook_id {
#define SHIM_HOOK_ENUM(sym, api, since) SHIM_HOOK_##sym,
	SHIM_HOOKS(SHIM_HOOK_ENUM)
#undef SHIM_HOOK_ENUM
	SHIM_NHOOKS
};

/* shim_fn_<symbol>: the function type; shim_hook_<symbol>: the exported hook. */
#define SHIM_HOOK_DECL(sym, api, since)                                   \
	typedef __typeof__(api) shim_fn_##sym;                            \
	shim_fn_##sym shim_hook_##sym __asm__(#sym)                       \
		__attribute__((visibility("default")));
SHIM_HOOKS(SHIM_HOOK_DECL)
#undef SHIM_HOOK_DECL

/* One row of the generated name table. */
struct shim_hook_entry {
	const char *name;   /* exact exported symbol */
	int since;          /* CUDA version that introduced it */
	void *hook;         /* our function of the same ABI */
};

/* The generated table, indexed by enum shim_hook_id. */
extern const struct shim_hook_entry shim_hook_table[SHIM_NHOOKS];

/*
 * shim_real - the driver's function for hook @id, resolving libcuda.so.1 on
 * first use (once, thread-safe).  NULL if the driver lacks the symbol or
 * cannot be loaded: hooks then return CUDA_ERROR_NOT_FOUND, never call NULL.
 */
void *shim_real(enum shim_hook_id id);

/* SHIM_REAL_OR_RETURN - bind `real` to the typed driver function or fail cleanly. */
#define SHIM_REAL_OR_RETURN(sym)                                                  \
	shim_fn_##sym *real = (shim_fn_##sym *)shim_real(SHIM_HOOK_##sym);        \
	if (!real)                                                                \
		return CUDA_ERROR_NOT_FOUND

/*
 * shim_hook_for - if @p is the address of an exported libcuda symbol that we
 * hook, our hook for that exact symbol; otherwise @p.  Uses dladdr only: it
 * never loads a library, so dlsym can call it at any time.
 */
void *shim_hook_for(void *p);

/* Driver functions the shim calls but does not hook. */
#define SHIM_CALLS(X)                                                                     \
	X(cuFuncGetName) X(cuKernelGetName) X(cuCtxGetDevice) X(cuFuncGetParamInfo)         \
	X(cuKernelGetParamInfo) X(cuDeviceGetCount) X(cuCtxGetCurrent) X(cuStreamIsCapturing)  \
	X(cuModuleGetFunctionCount) X(cuModuleEnumerateFunctions)

enum shim_call_id {
#define SHIM_CALL_ENUM(sym) SHIM_CALL_##sym,
	SHIM_CALLS(SHIM_CALL_ENUM)
#undef SHIM_CALL_ENUM
	SHIM_NCALLS
};

/* shim_call - the driver's @id function (typed by the caller), or NULL. */
void *shim_call(enum shim_call_id id);

/* shim_real_dlsym - glibc's dlsym (resolved once with dlvsym). */
void *(*shim_real_dlsym(void))(void *, const char *);

#endif
