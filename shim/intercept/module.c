/*
 * module.c - the load hooks: modules and libraries, and the handles they
 * hand out (CUmodule, CUlibrary, CUfunction, CUkernel).
 */
#include "config.h"
#include "facts.h"
#include "hooks.h"
#include "trace.h"

/* Handles are recorded only when the shim does anything with them. */
static int recording(void)
{
	return shim_config()->mode != SHIM_MODE_OFF;
}

CUresult shim_hook_cuModuleLoad(CUmodule *module, const char *fname)
{
	SHIM_REAL_OR_RETURN(cuModuleLoad);
	SHIM_TRACE(cuModuleLoad);
	return real(module, fname);
}

CUresult shim_hook_cuModuleLoadData(CUmodule *module, const void *image)
{
	SHIM_REAL_OR_RETURN(cuModuleLoadData);
	SHIM_TRACE(cuModuleLoadData);
	return real(module, image);
}

CUresult shim_hook_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options, void **values)
{
	SHIM_REAL_OR_RETURN(cuModuleLoadDataEx);
	SHIM_TRACE(cuModuleLoadDataEx);
	return real(module, image, n, options, values);
}

CUresult shim_hook_cuModuleLoadFatBinary(CUmodule *module, const void *fatbin)
{
	SHIM_REAL_OR_RETURN(cuModuleLoadFatBinary);
	SHIM_TRACE(cuModuleLoadFatBinary);
	return real(module, fatbin);
}

CUresult shim_hook_cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuModuleGetFunction);
	SHIM_TRACE(cuModuleGetFunction);
	rc = real(fn, module, name);
	if (rc == CUDA_SUCCESS && fn && recording())
		shim_kernel(*fn, 0, name, module);
	return rc;
}

CUresult shim_hook_cuModuleUnload(CUmodule module)
{
	SHIM_REAL_OR_RETURN(cuModuleUnload);
	SHIM_TRACE(cuModuleUnload);
	handles_drop_owner(module);
	return real(module);
}

CUresult shim_hook_cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jit_options, void **jit_values, unsigned int n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned int n_lib)
{
	SHIM_REAL_OR_RETURN(cuLibraryLoadData);
	SHIM_TRACE(cuLibraryLoadData);
	return real(lib, code, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
}

CUresult shim_hook_cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jit_options, void **jit_values, unsigned int n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned int n_lib)
{
	SHIM_REAL_OR_RETURN(cuLibraryLoadFromFile);
	SHIM_TRACE(cuLibraryLoadFromFile);
	return real(lib, path, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
}

CUresult shim_hook_cuLibraryGetKernel(CUkernel *kernel, CUlibrary lib, const char *name)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuLibraryGetKernel);
	SHIM_TRACE(cuLibraryGetKernel);
	rc = real(kernel, lib, name);
	if (rc == CUDA_SUCCESS && kernel && recording())
		shim_kernel(*kernel, 1, name, lib);
	return rc;
}

CUresult shim_hook_cuLibraryUnload(CUlibrary lib)
{
	SHIM_REAL_OR_RETURN(cuLibraryUnload);
	SHIM_TRACE(cuLibraryUnload);
	handles_drop_owner(lib);
	return real(lib);
}

CUresult shim_hook_cuKernelGetFunction(CUfunction *fn, CUkernel kernel)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuKernelGetFunction);
	SHIM_TRACE(cuKernelGetFunction);
	rc = real(fn, kernel);
	if (rc == CUDA_SUCCESS && fn && recording()) {
		struct kernel_rec *k = shim_kernel(kernel, 1, NULL, NULL);

		shim_kernel(*fn, 0, k ? k->name : NULL, k ? k->owner : NULL);
	}
	return rc;
}
