/*
 * launch.c - the launch hooks: cuLaunchKernel, cuLaunchKernelEx and
 * cuLaunchCooperativeKernel, each with its per-thread-default-stream (_ptsz)
 * twin.  Each twin calls its own driver symbol, so the stream semantics the
 * caller chose are kept; all of them ask shim_launch_gate first, which may
 * refuse the launch or run it on a bundled kernel itself.
 */
#include "../gate/gate.h"
#include "trace.h"

#define LAUNCH_HOOK(sym)                                                                     \
	CUresult shim_hook_##sym(CUfunction f, unsigned int gx, unsigned int gy,             \
				 unsigned int gz, unsigned int bx, unsigned int by,          \
				 unsigned int bz, unsigned int smem, CUstream stream,        \
				 void **params, void **extra)                                \
	{                                                                                    \
		const struct shim_launch l = { SHIM_HOOK_##sym, f, { gx, gy, gz }, { bx, by, bz }, \
					       smem, stream, params };                       \
		int rc;                                                                      \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		rc = shim_launch_gate(&l);                                                   \
		if (rc)                                                                      \
			return rc == SHIM_GATE_DONE ? CUDA_SUCCESS : (CUresult)rc;           \
		return real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);         \
	}
LAUNCH_HOOK(cuLaunchKernel)
LAUNCH_HOOK(cuLaunchKernel_ptsz)

#define LAUNCH_EX_HOOK(sym)                                                                  \
	CUresult shim_hook_##sym(const CUlaunchConfig *config, CUfunction f, void **params,   \
				 void **extra)                                               \
	{                                                                                    \
		int rc = 0;                                                                  \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		if (config) {                                                                \
			const struct shim_launch l = {                                       \
				SHIM_HOOK_##sym, f,                                          \
				{ config->gridDimX, config->gridDimY, config->gridDimZ },    \
				{ config->blockDimX, config->blockDimY, config->blockDimZ }, \
				config->sharedMemBytes, config->hStream, params };           \
			rc = shim_launch_gate(&l);                                           \
		}                                                                            \
		if (rc)                                                                      \
			return rc == SHIM_GATE_DONE ? CUDA_SUCCESS : (CUresult)rc;           \
		return real(config, f, params, extra);                                       \
	}
LAUNCH_EX_HOOK(cuLaunchKernelEx)
LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)

#define LAUNCH_COOP_HOOK(sym)                                                                \
	CUresult shim_hook_##sym(CUfunction f, unsigned int gx, unsigned int gy,             \
				 unsigned int gz, unsigned int bx, unsigned int by,          \
				 unsigned int bz, unsigned int smem, CUstream stream,        \
				 void **params)                                              \
	{                                                                                    \
		const struct shim_launch l = { SHIM_HOOK_##sym, f, { gx, gy, gz }, { bx, by, bz }, \
					       smem, stream, params };                       \
		int rc;                                                                      \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		rc = shim_launch_gate(&l);                                                   \
		if (rc)                                                                      \
			return rc == SHIM_GATE_DONE ? CUDA_SUCCESS : (CUresult)rc;           \
		return real(f, gx, gy, gz, bx, by, bz, smem, stream, params);                \
	}
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel)
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel_ptsz)
