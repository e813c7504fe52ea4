/*
 * launch.c - the launch hooks: cuLaunchKernel, cuLaunchKernelEx and
 * cuLaunchCooperativeKernel, each with its per-thread-default-stream (_ptsz)
 * twin.  Both twins share one body and keep calling their own driver symbol,
 * so the stream semantics the caller chose are preserved.
 */
#include "hooks.h"
#include "trace.h"

CUresult shim_hook_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, CUstream stream, void **params, void **extra)
{
	SHIM_REAL_OR_RETURN(cuLaunchKernel);
	SHIM_TRACE(cuLaunchKernel);
	return real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

CUresult shim_hook_cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, CUstream stream, void **params, void **extra)
{
	SHIM_REAL_OR_RETURN(cuLaunchKernel_ptsz);
	SHIM_TRACE(cuLaunchKernel_ptsz);
	return real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

CUresult shim_hook_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	SHIM_REAL_OR_RETURN(cuLaunchKernelEx);
	SHIM_TRACE(cuLaunchKernelEx);
	return real(config, f, params, extra);
}

CUresult shim_hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	SHIM_REAL_OR_RETURN(cuLaunchKernelEx_ptsz);
	SHIM_TRACE(cuLaunchKernelEx_ptsz);
	return real(config, f, params, extra);
}

CUresult shim_hook_cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, CUstream stream, void **params)
{
	SHIM_REAL_OR_RETURN(cuLaunchCooperativeKernel);
	SHIM_TRACE(cuLaunchCooperativeKernel);
	return real(f, gx, gy, gz, bx, by, bz, smem, stream, params);
}

CUresult shim_hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, CUstream stream, void **params)
{
	SHIM_REAL_OR_RETURN(cuLaunchCooperativeKernel_ptsz);
	SHIM_TRACE(cuLaunchCooperativeKernel_ptsz);
	return real(f, gx, gy, gz, bx, by, bz, smem, stream, params);
}
