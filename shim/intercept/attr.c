/*
 * attr.c - the attribute and occupancy hooks: everything through which a
 * process learns or sets shared-memory limits.
 */
#include "hooks.h"
#include "trace.h"

CUresult shim_hook_cuFuncSetAttribute(CUfunction fn, CUfunction_attribute attr, int value)
{
	SHIM_REAL_OR_RETURN(cuFuncSetAttribute);
	SHIM_TRACE(cuFuncSetAttribute);
	return real(fn, attr, value);
}

CUresult shim_hook_cuFuncGetAttribute(int *value, CUfunction_attribute attr, CUfunction fn)
{
	SHIM_REAL_OR_RETURN(cuFuncGetAttribute);
	SHIM_TRACE(cuFuncGetAttribute);
	return real(value, attr, fn);
}

CUresult shim_hook_cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel kernel, CUdevice dev)
{
	SHIM_REAL_OR_RETURN(cuKernelSetAttribute);
	SHIM_TRACE(cuKernelSetAttribute);
	return real(attr, value, kernel, dev);
}

CUresult shim_hook_cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev)
{
	SHIM_REAL_OR_RETURN(cuKernelGetAttribute);
	SHIM_TRACE(cuKernelGetAttribute);
	return real(value, attr, kernel, dev);
}

CUresult shim_hook_cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
	SHIM_REAL_OR_RETURN(cuDeviceGetAttribute);
	SHIM_TRACE(cuDeviceGetAttribute);
	return real(value, attr, dev);
}

CUresult shim_hook_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction fn, int block_size, size_t dynamic_smem)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	SHIM_TRACE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	return real(blocks, fn, block_size, dynamic_smem);
}

CUresult shim_hook_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction fn, int block_size, size_t dynamic_smem, unsigned int flags)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
	SHIM_TRACE(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
	return real(blocks, fn, block_size, dynamic_smem, flags);
}

CUresult shim_hook_cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamic_smem, CUfunction fn, int blocks, int block_size)
{
	SHIM_REAL_OR_RETURN(cuOccupancyAvailableDynamicSMemPerBlock);
	SHIM_TRACE(cuOccupancyAvailableDynamicSMemPerBlock);
	return real(dynamic_smem, fn, blocks, block_size);
}

CUresult shim_hook_cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block_size, CUfunction fn, CUoccupancyB2DSize smem_of_block, size_t dynamic_smem, int block_limit)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxPotentialBlockSize);
	SHIM_TRACE(cuOccupancyMaxPotentialBlockSize);
	return real(min_grid, block_size, fn, smem_of_block, dynamic_smem, block_limit);
}

CUresult shim_hook_cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_size, CUfunction fn, CUoccupancyB2DSize smem_of_block, size_t dynamic_smem, int block_limit, unsigned int flags)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxPotentialBlockSizeWithFlags);
	SHIM_TRACE(cuOccupancyMaxPotentialBlockSizeWithFlags);
	return real(min_grid, block_size, fn, smem_of_block, dynamic_smem, block_limit, flags);
}
