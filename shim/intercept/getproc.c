/*
 * getproc.c - the cuGetProcAddress hooks (legacy and _v2).
 *
 * cudart resolves ~440 entry points this way, after asking for
 * cuGetProcAddress itself, each at the version that introduced it and with
 * flags 0 and 2 (per-thread default stream).  We ask the driver the same
 * question and swap the answer for our hook of the very symbol the driver
 * chose (cuLaunchKernel_ptsz for flag 2, ...), so versions and flags are
 * honoured by the driver, not guessed here.  Empty names, NULL out-pointers
 * and failures pass through unchanged.
 */
#include "../driver/hooks.h"

CUresult shim_hook_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
				       cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuGetProcAddress_v2);

	rc = real(symbol, pfn, cuda_version, flags, status);
	if (rc == CUDA_SUCCESS && pfn && *pfn)
		*pfn = shim_hook_for(*pfn);
	return rc;
}

CUresult shim_hook_cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
				    cuuint64_t flags)
{
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuGetProcAddress);

	rc = real(symbol, pfn, cuda_version, flags);
	if (rc == CUDA_SUCCESS && pfn && *pfn)
		*pfn = shim_hook_for(*pfn);
	return rc;
}
