/*
 * module.c - the load hooks: modules and libraries (their images are recorded
 * once the driver accepted them, with the shared object that asked for them:
 * the hook's return address), and the handles they hand out (CUmodule,
 * CUlibrary, CUfunction, CUkernel).
 */
#include "../settings/config.h"
#include "../state/facts.h"
#include "../driver/hooks.h"
#include "trace.h"

/* preserved - did cuLibraryLoadData's caller promise to keep the image bytes? */
static int preserved(const CUlibraryOption *opts, void **values, unsigned int n)
{
	unsigned int i;

	for (i = 0; opts && values && i < n; i++)
		if (opts[i] == CU_LIBRARY_BINARY_IS_PRESERVED)
			return values[i] != NULL;
	return 0;
}

/* Handles are recorded only when the shim does anything with them. */
static int recording(void)
{
	return shim_config()->mode != SHIM_MODE_OFF;
}

CUresult shim_hook_cuModuleLoad(CUmodule *module, const char *fname)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuModuleLoad);
	SHIM_TRACE(cuModuleLoad);
	rc = real(module, fname);
	if (rc == CUDA_SUCCESS && module) {
		shim_image_loaded(*module, SHIM_HOOK_cuModuleLoad, NULL, fname, 0);
		if (recording())
			shim_image_loader(*module, __builtin_return_address(0));
	}
	return rc;
}

CUresult shim_hook_cuModuleLoadData(CUmodule *module, const void *image)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuModuleLoadData);
	SHIM_TRACE(cuModuleLoadData);
	rc = real(module, image);
	if (rc == CUDA_SUCCESS && module) {
		shim_image_loaded(*module, SHIM_HOOK_cuModuleLoadData, image, NULL, 0);
		if (recording())
			shim_image_loader(*module, __builtin_return_address(0));
	}
	return rc;
}

CUresult shim_hook_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options, void **values)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuModuleLoadDataEx);
	SHIM_TRACE(cuModuleLoadDataEx);
	rc = real(module, image, n, options, values);
	if (rc == CUDA_SUCCESS && module) {
		shim_image_loaded(*module, SHIM_HOOK_cuModuleLoadDataEx, image, NULL, 0);
		if (recording())
			shim_image_loader(*module, __builtin_return_address(0));
	}
	return rc;
}

CUresult shim_hook_cuModuleLoadFatBinary(CUmodule *module, const void *fatbin)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuModuleLoadFatBinary);
	SHIM_TRACE(cuModuleLoadFatBinary);
	rc = real(module, fatbin);
	if (rc == CUDA_SUCCESS && module) {
		shim_image_loaded(*module, SHIM_HOOK_cuModuleLoadFatBinary, fatbin, NULL, 0);
		if (recording())
			shim_image_loader(*module, __builtin_return_address(0));
	}
	return rc;
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
	shim_image_unloaded(module);
	return real(module);
}

CUresult shim_hook_cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jit_options, void **jit_values, unsigned int n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned int n_lib)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuLibraryLoadData);
	SHIM_TRACE(cuLibraryLoadData);
	rc = real(lib, code, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
	if (rc == CUDA_SUCCESS && lib) {
		shim_image_loaded(*lib, SHIM_HOOK_cuLibraryLoadData, code, NULL,
				  preserved(lib_options, lib_values, n_lib));
		if (recording())
			shim_image_loader(*lib, __builtin_return_address(0));
	}
	return rc;
}

CUresult shim_hook_cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jit_options, void **jit_values, unsigned int n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned int n_lib)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuLibraryLoadFromFile);
	SHIM_TRACE(cuLibraryLoadFromFile);
	rc = real(lib, path, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
	if (rc == CUDA_SUCCESS && lib) {
		shim_image_loaded(*lib, SHIM_HOOK_cuLibraryLoadFromFile, NULL, path, 0);
		if (recording())
			shim_image_loader(*lib, __builtin_return_address(0));
	}
	return rc;
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
	shim_image_unloaded(lib);
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
