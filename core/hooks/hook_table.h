/*
 * hook_table.h - the one table of hooked driver entry points, alone, so that
 * `sm120 doctor` can list the same rows the shim is generated from
 * (shim/driver/hooks.h
 * generates the shim's declarations, slots and name table from it).
 *
 * Each row is X(symbol, api, since): the exact exported libcuda symbol, the
 * cuda.h function (or typedef) whose type it has, and the CUDA version that
 * introduced it.  The symbol column is only ever used with # or ##, so it is
 * never macro-expanded.
 */
#ifndef SM120_CORE_HOOKS_HOOK_TABLE_H
#define SM120_CORE_HOOKS_HOOK_TABLE_H

#include <cuda.h>

/* cuGetProcAddress as exported since CUDA 11.3 (cuda.h maps the name to _v2). */
typedef CUresult shim_gpa_v1_fn(const char *symbol, void **pfn, int cuda_version,
				cuuint64_t flags);

#define SHIM_HOOKS(X)                                                                     \
	X(cuGetProcAddress, shim_gpa_v1_fn, 11030)                                        \
	X(cuGetProcAddress_v2, cuGetProcAddress_v2, 12000)                                \
	X(cuLaunchKernel, cuLaunchKernel, 4000)                                           \
	X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000)                                      \
	X(cuLaunchKernelEx, cuLaunchKernelEx, 11060)                                      \
	X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060)                                 \
	X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000)                     \
	X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000)                \
	X(cuModuleLoad, cuModuleLoad, 2000)                                               \
	X(cuModuleLoadData, cuModuleLoadData, 2000)                                       \
	X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010)                                   \
	X(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 2000)                             \
	X(cuModuleGetFunction, cuModuleGetFunction, 2000)                                 \
	X(cuModuleUnload, cuModuleUnload, 2000)                                           \
	X(cuLibraryLoadData, cuLibraryLoadData, 12000)                                    \
	X(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000)                            \
	X(cuLibraryGetKernel, cuLibraryGetKernel, 12000)                                  \
	X(cuLibraryUnload, cuLibraryUnload, 12000)                                        \
	X(cuKernelGetFunction, cuKernelGetFunction, 12000)                                \
	X(cuFuncSetAttribute, cuFuncSetAttribute, 9000)                                   \
	X(cuFuncGetAttribute, cuFuncGetAttribute, 2020)                                   \
	X(cuKernelSetAttribute, cuKernelSetAttribute, 12000)                              \
	X(cuKernelGetAttribute, cuKernelGetAttribute, 12000)                              \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000)                               \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                                    \
	  cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)                              \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,                           \
	  cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000)                     \
	X(cuOccupancyAvailableDynamicSMemPerBlock, cuOccupancyAvailableDynamicSMemPerBlock, \
	  11000)                                                                          \
	X(cuOccupancyMaxPotentialBlockSize, cuOccupancyMaxPotentialBlockSize, 6050)       \
	X(cuOccupancyMaxPotentialBlockSizeWithFlags, cuOccupancyMaxPotentialBlockSizeWithFlags, \
	  7000)

#endif
