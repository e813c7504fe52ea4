/*
 * driver.c - the real driver behind the hooks.
 *
 * libcuda.so.1 is opened once, on the first hook call that needs it (never
 * from dlsym), and every row of hooks.h is resolved by its exact name with
 * glibc's own dlsym.  Slots are written once under pthread_once and only
 * read afterwards, so the launch path reads them without a lock.
 * shim_hook_for maps a driver address back to the hook of the same symbol
 * with dladdr, which is what makes dlsym and cuGetProcAddress answers exact
 * for every version and flag: the driver chooses the symbol, we only swap in
 * the hook with the same ABI.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks.h"

const struct shim_hook_entry shim_hook_table[SHIM_NHOOKS] = {
#define SHIM_HOOK_ROW(sym, api, since) [SHIM_HOOK_##sym] = { #sym, since, (void *)shim_hook_##sym },
	SHIM_HOOKS(SHIM_HOOK_ROW)
#undef SHIM_HOOK_ROW
};

/* glibc's dlsym, found once. */
static void *(*real_dlsym)(void *, const char *);
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

/* The driver's entry points, by hook id; NULL until resolved or if absent. */
static _Atomic(void *) real_slot[SHIM_NHOOKS];
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static void *call_slot[SHIM_NCALLS];
static const char *const call_names[SHIM_NCALLS] = {
#define SHIM_CALL_NAME(sym) [SHIM_CALL_##sym] = #sym,
	SHIM_CALLS(SHIM_CALL_NAME)
#undef SHIM_CALL_NAME
};

static void dlsym_init(void)
{
	/* glibc >= 2.34 exports both versions at one address; older has 2.2.5. */
	real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!real_dlsym)
		real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym",
								     "GLIBC_2.2.5");
}

void *(*shim_real_dlsym(void))(void *, const char *)
{
	pthread_once(&dlsym_once, dlsym_init);
	return real_dlsym;
}

static void driver_init(void)
{
	void *(*sym)(void *, const char *) = shim_real_dlsym();
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int i;

	if (!lib || !sym)
		return;
	for (i = 0; i < SHIM_NHOOKS; i++) {
		void *p = sym(lib, shim_hook_table[i].name);
		void *expected = NULL;

		/* shim_hook_for may have recorded it already: keep the first. */
		if (p)
			atomic_compare_exchange_strong(&real_slot[i], &expected, p);
	}
	for (i = 0; i < SHIM_NCALLS; i++)
		call_slot[i] = sym(lib, call_names[i]);
}

void *shim_call(enum shim_call_id id)
{
	pthread_once(&driver_once, driver_init);
	return call_slot[id];
}

void *shim_real(enum shim_hook_id id)
{
	void *p = atomic_load_explicit(&real_slot[id], memory_order_acquire);

	if (p)
		return p;
	pthread_once(&driver_once, driver_init);
	return atomic_load_explicit(&real_slot[id], memory_order_acquire);
}

enum driver_kind { NOT_DRIVER = 0, LIBCUDA, TOOL_STAND_IN };

/*
 * driver_kind - does @path name the driver library (libcuda.so,
 * libcuda.so.1, ...), or a tool's stand-in for it?  Nsight Compute puts its
 * libcuda-injection.so first on LD_LIBRARY_PATH and answers dlopen of
 * libcuda.so.1 with it; it exports the driver's entry points and forwards
 * them after profiling.
 */
static enum driver_kind driver_kind(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	if (base && strncmp(base, "libcuda.so", 10) == 0)
		return LIBCUDA;
	if (base && strncmp(base, "libcuda-injection.so", 20) == 0)
		return TOOL_STAND_IN;
	return NOT_DRIVER;
}

void *shim_hook_for(void *p)
{
	Dl_info info;
	int i;

	if (!p || !dladdr(p, &info) || !info.dli_sname || info.dli_saddr != p ||
	    !driver_kind(info.dli_fname))
		return p;
	for (i = 0; i < SHIM_NHOOKS; i++) {
		if (strcmp(shim_hook_table[i].name, info.dli_sname) == 0) {
			void *expected = NULL;

			/* A tool's stand-in: the shim's own calls go through it too, so
			 * that the tool sees what the shim launches (a rerouted kernel). */
			if (driver_kind(info.dli_fname) == TOOL_STAND_IN) {
				atomic_store_explicit(&real_slot[i], p, memory_order_release);
				return shim_hook_table[i].hook;
			}
			/* Record the driver's address; a second, different driver copy
			 * in the process keeps its own functions. */
			if (!atomic_compare_exchange_strong(&real_slot[i], &expected, p) &&
			    expected != p)
				return p;
			return shim_hook_table[i].hook;
		}
	}
	return p;
}
