/*
 * launch.c - the launch hooks: cuLaunchKernel, cuLaunchKernelEx and
 * cuLaunchCooperativeKernel, each with its per-thread-default-stream (_ptsz)
 * twin.  Each twin calls its own driver symbol, so the stream semantics the
 * caller chose are kept; all of them ask shim_launch_gate first, which may
 * refuse the launch or run it on a bundled kernel itself, then
 * shim_occupancy_launch, which may pad its dynamic shared memory
 * (SM120SHIM_EMULATE_OCCUPANCY).  A padded launch the driver refuses is made
 * again as the caller asked for it.
 */
#include "../gate/gate.h"
#include "../gate/occupancy.h"
#include "trace.h"

/* GATE_OR_RETURN - the gate's and the padding's verdict: return it, or go on with `pad`. */
#define GATE_OR_RETURN(l, pad)                                                               \
	do {                                                                                 \
		int g_ = shim_launch_gate(&(l));                                             \
		if (!g_)                                                                     \
			g_ = shim_occupancy_launch(&(l), &(pad));                            \
		if (g_)                                                                      \
			return g_ == SHIM_GATE_DONE ? CUDA_SUCCESS : (CUresult)g_;           \
	} while (0)

#define LAUNCH_HOOK(sym)                                                                     \
	CUresult shim_hook_##sym(CUfunction f, unsigned int gx, unsigned int gy,             \
				 unsigned int gz, unsigned int bx, unsigned int by,          \
				 unsigned int bz, unsigned int smem, CUstream stream,        \
				 void **params, void **extra)                                \
	{                                                                                    \
		const struct shim_launch l = { SHIM_HOOK_##sym, f, { gx, gy, gz }, { bx, by, bz }, \
					       smem, stream, params };                       \
		unsigned int pad;                                                            \
		CUresult rc, plain;                                                          \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		GATE_OR_RETURN(l, pad);                                                      \
		if (pad == smem)                                                             \
			return real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra); \
		rc = real(f, gx, gy, gz, bx, by, bz, pad, stream, params, extra);            \
		if (rc == CUDA_SUCCESS)                                                      \
			return rc;                                                           \
		plain = real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);        \
		shim_occupancy_failed(&l, pad, rc, plain);                                   \
		return plain;                                                                \
	}
LAUNCH_HOOK(cuLaunchKernel)
LAUNCH_HOOK(cuLaunchKernel_ptsz)

#define LAUNCH_EX_HOOK(sym)                                                                  \
	CUresult shim_hook_##sym(const CUlaunchConfig *config, CUfunction f, void **params,   \
				 void **extra)                                               \
	{                                                                                    \
		CUlaunchConfig padded;                                                       \
		unsigned int pad;                                                            \
		CUresult rc, plain;                                                          \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		if (!config)                                                                 \
			return real(config, f, params, extra);                               \
		{                                                                            \
			const struct shim_launch l = {                                       \
				SHIM_HOOK_##sym, f,                                          \
				{ config->gridDimX, config->gridDimY, config->gridDimZ },    \
				{ config->blockDimX, config->blockDimY, config->blockDimZ }, \
				config->sharedMemBytes, config->hStream, params };           \
			GATE_OR_RETURN(l, pad);                                              \
			if (pad == config->sharedMemBytes)                                   \
				return real(config, f, params, extra);                       \
			padded = *config;                                                    \
			padded.sharedMemBytes = pad;                                         \
			rc = real(&padded, f, params, extra);                                \
			if (rc == CUDA_SUCCESS)                                              \
				return rc;                                                   \
			plain = real(config, f, params, extra);                              \
			shim_occupancy_failed(&l, pad, rc, plain);                           \
			return plain;                                                        \
		}                                                                            \
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
		unsigned int pad;                                                            \
		CUresult rc, plain;                                                          \
		SHIM_REAL_OR_RETURN(sym);                                                    \
		SHIM_TRACE(sym);                                                             \
		GATE_OR_RETURN(l, pad);                                                      \
		if (pad == smem)                                                             \
			return real(f, gx, gy, gz, bx, by, bz, smem, stream, params);        \
		rc = real(f, gx, gy, gz, bx, by, bz, pad, stream, params);                   \
		if (rc == CUDA_SUCCESS)                                                      \
			return rc;                                                           \
		plain = real(f, gx, gy, gz, bx, by, bz, smem, stream, params);               \
		shim_occupancy_failed(&l, pad, rc, plain);                                   \
		return plain;                                                                \
	}
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel)
LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel_ptsz)
