/*
 * dlsym.c - the dlsym hook.
 *
 * Triton takes cuLaunchKernelEx with dlopen("libcuda.so.1") + dlsym, cuBLAS
 * and PyTorch's lazy driver stub take a whole table that way: exporting the
 * symbols is not enough.  The caller's handle is always passed through
 * (never a global lookup), and only a result that is a hooked libcuda symbol
 * is swapped for our hook of the same symbol.
 * dlsym(RTLD_NEXT, ...) is forwarded as a tail call: glibc finds "next"
 * from its caller's return address, which must stay the original caller's,
 * or another interposer asking for the next malloc would find itself.
 * tests/shim checks that the forward really is a tail call.
 */
#include <dlfcn.h>

#include "../driver/hooks.h"

/* shim_dlsym - the lookup and the swap, for handles other than RTLD_NEXT. */
static void *shim_dlsym(void *handle, const char *name)
{
	void *(*real)(void *, const char *) = shim_real_dlsym();
	void *p;

	if (!real)
		return NULL;
	p = real(handle, name);
	if (!p || !name || name[0] != 'c' || name[1] != 'u')
		return p;
	return shim_hook_for(p);
}

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
	if (handle == RTLD_NEXT)
		return shim_real_dlsym()(handle, name);
	return shim_dlsym(handle, name);
}
