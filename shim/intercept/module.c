/*
 * module.c - the load hooks: modules and libraries, and the handles they
 * hand out (CUmodule, CUlibrary, CUfunction, CUkernel).
 */
#include "hooks.h"
#include "trace.h"

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
	SHIM_REAL_OR_RETURN(cuModuleGetFunction);
	SHIM_TRACE(cuModuleGetFunction);
	return real(fn, module, name);
}

CUresult shim_hook_cuModuleUnload(CUmodule module)
{
	SHIM_REAL_OR_RETURN(cuModuleUnload);
	SHIM_TRACE(cuModuleUnload);
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
	SHIM_REAL_OR_RETURN(cuLibraryGetKernel);
	SHIM_TRACE(cuLibraryGetKernel);
	return real(kernel, lib, name);
}

CUresult shim_hook_cuLibraryUnload(CUlibrary lib)
{
	SHIM_REAL_OR_RETURN(cuLibraryUnload);
	SHIM_TRACE(cuLibraryUnload);
	return real(lib);
}

CUresult shim_hook_cuKernelGetFunction(CUfunction *fn, CUkernel kernel)
{
	SHIM_REAL_OR_RETURN(cuKernelGetFunction);
	SHIM_TRACE(cuKernelGetFunction);
	return real(fn, kernel);
}
