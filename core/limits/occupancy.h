/*
 * occupancy.h - how many blocks of one launch an SM keeps resident, on the
 * target and on the device, and the dynamic shared memory that brings the
 * device down to the target's count (SM120SHIM_EMULATE_OCCUPANCY).
 *
 * An H200 keeps two 96 KiB blocks per SM where an SM120 card (100 KiB per SM)
 * keeps one, so a kernel timed on the H200 under an emulated sm120 target
 * runs at twice SM120's occupancy.  Padding the launch's dynamic shared
 * memory makes the device run the target's count.  The model is the CUDA
 * toolkit's own (cuda_occupancy.h): a block takes static + dynamic + the
 * reserved KiB rounded up to the allocation unit (128 B from cc 8.0) of the
 * SM's shared memory, ceil(threads / warp) of its warp slots, one of its
 * block slots, and registers: each warp regs x warp rounded up to 256, from
 * one of the SM's four register partitions (regs per SM / 4 each).  Every
 * profile here and the Hopper devices have 64 Ki registers per SM and per
 * block, so a kernel the registers hold to fewer blocks than the other
 * limits keeps that count on both, and is left unpadded: padding it would
 * change nothing but the L1 cache it leaves.  The registers counted are
 * those of the code that runs here; the target's own build of the kernel
 * may take a few more or fewer (the bundled kernels' sm_120 and sm_90
 * counts differ by a few).
 * Pure: no driver, no environment, no global state.
 */
#ifndef SM120_CORE_LIMITS_OCCUPANCY_H
#define SM120_CORE_LIMITS_OCCUPANCY_H

#include <stdint.h>

#include "target.h"

/* What decides resident blocks per SM, for one GPU (0: unknown). */
struct occ_sm {
	uint32_t smem_per_sm;        /* shared memory per SM (attribute 81) */
	uint32_t smem_per_block;     /* opt-in per block (attribute 97) */
	uint32_t reserved_per_block; /* reserved per block (attribute 111) */
	uint32_t threads_per_sm;     /* attribute 39 */
	uint32_t blocks_per_sm;      /* attribute 106 */
	uint32_t warp;               /* attribute 10 */
	uint32_t granularity;        /* shared-memory allocation unit in bytes */
	uint32_t regs_per_sm;        /* attribute 82; 0: registers not counted */
	uint32_t regs_per_block;     /* attribute 12; 0: registers not counted */
};

/* The CUDA device attributes (cuda.h's numbers) an occ_sm is read from, in
 * the order occupancy_from_attrs takes their values: shared memory per SM,
 * opt-in per block, reserved per block, threads per SM, blocks per SM, warp
 * size, registers per SM, registers per block, compute capability major and
 * minor. */
#define OCC_DEVICE_ATTRS 10
extern const int occupancy_device_attrs[OCC_DEVICE_ATTRS];

/* occupancy_from_attrs - a real device's occ_sm into @out from @v, the values of
 * occupancy_device_attrs in order (the allocation unit from the capability). */
void occupancy_from_attrs(const int v[OCC_DEVICE_ATTRS], struct occ_sm *out);

/*
 * occupancy_arch - the per-SM thread, block and register limits and the
 * shared-memory allocation unit of compute capability @sm (cc * 10), from
 * the CUDA toolkit's cuda_occupancy.h, CCCL's arch_traits.h and the CUDA
 * programming guide's table of capabilities: sm_120/121 keep 1536 threads
 * and 24 blocks per SM, sm_90/100 2048 and 32, all 64 Ki registers per SM
 * and per block.  Fills @out's threads_per_sm, blocks_per_sm, warp,
 * granularity, regs_per_sm and regs_per_block (the shared-memory fields are
 * left as they are).  Returns 0, or -1 for a capability it does
 * not know (then @out is unchanged).
 */
int occupancy_arch(int sm, struct occ_sm *out);

/* occupancy_granularity - the shared-memory allocation unit of cc @sm: 128 B from
 * 8.0, 256 B before; 0 for an unknown (zero) capability. */
uint32_t occupancy_granularity(int sm);

/*
 * occupancy_target - the target's occ_sm: shared memory from @t; threads,
 * blocks, warp, allocation unit and registers from occupancy_arch(@t->sm), or, for a
 * target without a known capability (a byte count), the @device's own, so
 * that only shared memory is emulated then.
 */
void occupancy_target(const struct target_limits *t, const struct occ_sm *device,
		      struct occ_sm *out);

/*
 * occupancy_blocks - resident blocks per SM of a launch of @threads threads
 * per block of @regs registers each (0: unknown, not counted) whose blocks
 * use @smem bytes (static + dynamic, without the reserved bytes, which are
 * added here), on @sm: the least of the warp, block, register and
 * shared-memory limits.  0 when one block does not fit (@smem over the
 * opt-in per block, no threads, more threads than the SM holds, more
 * registers than a thread (255) or a block may have) or when @sm is
 * incomplete (a zero field other than the registers').
 */
uint32_t occupancy_blocks(const struct occ_sm *sm, uint64_t threads, uint32_t regs, uint64_t smem);

enum occ_verdict {
	OCC_SAME = 0,        /* the device runs no more blocks than the target: unchanged */
	OCC_PAD,             /* pad the dynamic bytes to out->dynamic */
	OCC_TARGET_NONE,     /* the target cannot run the launch at all: nothing to match */
	OCC_DEVICE_NONE,     /* the device cannot run it as it is: the driver says why */
	OCC_IMPOSSIBLE,      /* the padding the device needs is over its opt-in per block */
};

/* A padding decision. */
struct occ_pad {
	enum occ_verdict verdict;
	uint32_t target_blocks;   /* resident blocks per SM on the target (registers counted) */
	uint32_t device_blocks;   /* ... on the device, unpadded */
	uint32_t padded_blocks;   /* ... on the device with out->dynamic (= device_blocks
				     unless OCC_PAD) */
	uint32_t dynamic;         /* the dynamic bytes to launch with (the launch's own unless
				     OCC_PAD) */
	uint64_t needed;          /* OCC_PAD and OCC_IMPOSSIBLE: static + the padded dynamic
				     bytes the device needs for the target's count */
};

/*
 * occupancy_pad - the dynamic shared memory that makes @device keep no more
 * blocks per SM than @target for a launch of @threads threads per block of
 * @regs registers (0: unknown), @static_smem declared and @dynamic_smem
 * dynamic bytes:
 *   the target keeps none (over its limits)        OCC_TARGET_NONE
 *   the device keeps none                          OCC_DEVICE_NONE
 *   the device keeps at most the target's count    OCC_SAME
 *   else the smallest dynamic size D > @dynamic_smem whose rounded block
 *   leaves room for no more than the target's count in the device's shared
 *   memory per SM: OCC_PAD with out->dynamic = D, or OCC_IMPOSSIBLE when
 *   @static_smem + D is over the device's opt-in per block (out->dynamic
 *   then stays @dynamic_smem).
 * The padded count may fall below the target's when the allocation unit
 * allows no size in between (padded_blocks says so).  @out is always filled.
 */
void occupancy_pad(const struct occ_sm *target, const struct occ_sm *device, uint64_t threads,
		   uint32_t regs, uint32_t static_smem, uint32_t dynamic_smem, struct occ_pad *out);

/* occupancy_verdict_name - "same", "pad", "target_none", "device_none", "impossible". */
const char *occupancy_verdict_name(enum occ_verdict v);

/*
 * A kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES once the padding raised it: what
 * the process's own calls left (@base, what it must see) and what the driver
 * holds (@raised, never below base).
 */
struct occ_attr {
	int base;
	int raised;
};

enum occ_attr_verdict {
	OCC_ATTR_PAD = 0,     /* within base: may be padded */
	OCC_ATTR_REFUSE,      /* over base while the driver holds more: refuse it
				 (CUDA_ERROR_INVALID_VALUE), as the driver would at base */
	OCC_ATTR_PLAIN,       /* over base, nothing raised: unpadded, the driver refuses it */
};

/* occupancy_attr_launch - a launch of @dynamic bytes of a kernel whose attribute is @a. */
enum occ_attr_verdict occupancy_attr_launch(const struct occ_attr *a, uint32_t dynamic);

/*
 * occupancy_attr_set - the process sets the attribute to @value: returns the
 * value to give the driver (@a->raised when 0 <= @value < @a->raised, so that
 * padded launches keep what they need; @value otherwise, for the driver to
 * judge) and stores in @after what @a becomes if the driver accepts it (base
 * @value; raised the larger of the two).
 */
int occupancy_attr_set(const struct occ_attr *a, int value, struct occ_attr *after);

#endif
