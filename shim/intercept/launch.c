/*
 * launch.c - the launch hooks: cuLaunchKernel, cuLaunchKernelEx and
 * cuLaunchCooperativeKernel, each with its per-thread-default-stream (_ptsz)
 * twin.  Each twin calls its own driver symbol, so the stream semantics the
 * caller chose are kept; all of them ask shim_launch_gate first.
 */
#include "gate.h"
#include "trace.h"

#define LAUNCH_HOOK(sym)                                                                     \
	CUresult shim_hook_##sym(CUfunction f, unsigned int gx, unsigned int gy,             \
				 unsigned int gz, unsigned int bx, unsigned int by,          \
				 unsigned int bz, unsigned int smem, CUstream stream,        \
				 void **params, void **extra)                                \
	{                                                                                    \
		CUresult rc;                                                                 \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		rc = shim_launch_gate(SHIM_HOOK_##sym, f, smem, gx, gy, gz, bx, by, bz);     \
		return rc ? rc : real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra); \
	}
LAUNCH_HOOK(cuLaunchKernel)
LAUNCH_HOOK(cuLaunchKernel_ptsz)

#define LAUNCH_EX_HOOK(sym)                                                                  \
	CUresult shim_hook_##sym(const CUlaunchConfig *config, CUfunction f, void **params,   \
				 void **extra)                                               \
	{                                                                                    \
		CUresult rc = CUDA_SUCCESS;                                                  \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		if (config)                                                                  \
			rc = shim_launch_gate(SHIM_HOOK_##sym, f, config->sharedMemBytes,    \
					      config->gridDimX, config->gridDimY,            \
					      config->gridDimZ, config->blockDimX,           \
					      config->blockDimY, config->blockDimZ);         \
		return rc ? rc : real(config, f, params, extra);                             \
	}
LAUNCH_EX_HOOK(cuLaunchKernelEx)
LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)

#define LAUNCH_COOP_HOOK(sym)                                                                \
	CUresult shim_hook_##sym(CUfunction f, unsigned int gx, unsigned int gy,             \
				 unsigned int gz, unsigned int bx, unsigned int by,          \
				 unsigned int bz, unsigned int smem, CUstream stream,        \
				 void **params)                                              \
	{                                                                                    \
		CUresult rc;                                                                 \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		rc = shim_launch_gate(SHIM_HOOK_##sym, f, smem, gx, gy, gz, bx, by, bz);     \
		return rc ? rc : real(f, gx, gy, gz, bx, by, bz, smem, stream, params);      \
	}
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel)
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel_ptsz)
