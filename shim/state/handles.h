/*
 * handles.h - what the shim knows about each kernel handle a process holds.
 *
 * CUfunction handles (cuModuleGetFunction, cuKernelGetFunction) and CUkernel
 * handles (cuLibraryGetKernel; cudart launches them cast to CUfunction) map
 * to a record: name, declared static shared memory, the module or library it
 * came from.  Lookups are lock-free (open addressing over atomic slots);
 * inserts take a mutex that is reset in a forked child.  Records are never
 * freed: unloading a module marks its handles dead, so a handle value the
 * driver recycles never inherits another kernel's facts.
 */
#ifndef SM120_SHIM_STATE_HANDLES_H
#define SM120_SHIM_STATE_HANDLES_H

#include <stdatomic.h>
#include <stdint.h>

#include "loaded.h"

struct kernel_rec {
	_Atomic(void *) handle;  /* the handle, or HANDLES_DEAD once its owner is unloaded */
	void *owner;             /* CUmodule / CUlibrary, NULL if unknown */
	int is_kernel;           /* a CUkernel handle */
	uint32_t static_smem;    /* declared __shared__ bytes */
	struct kernel_rec *retired; /* next replaced record (kept: readers may hold it) */
	char name[256];
	/* Filled on first need, off the launch fast path (facts.c): */
	atomic_int facts_ready;  /* facts and origin below are valid */
	struct loaded_facts facts; /* from the loaded image, else from the driver */
	char origin[192];        /* the image it came from, or "driver" */
	_Atomic uint64_t regs_on; /* registers a thread on one device (gate/occupancy.c): device
				     + 1 in the high half, registers + 1 in the low; 0: not asked */
	/* Set once, by the thread that loaded it, before its first launch: */
	_Atomic(char *) compiled; /* what Triton compiled into it (compiled.h), or NULL */
};

#define HANDLES_DEAD ((void *)1)

/* handles_get - the live record for @handle, or NULL.  Lock-free. */
struct kernel_rec *handles_get(const void *handle);

/*
 * handles_put - record @handle (replacing a previous record of the same
 * handle).  Returns the record, or NULL if the table is full (callers then
 * ask the driver each time).
 */
struct kernel_rec *handles_put(void *handle, void *owner, int is_kernel, const char *name,
			       uint32_t static_smem);

/* handles_drop_owner - mark every handle of module/library @owner dead. */
void handles_drop_owner(const void *owner);

#endif
