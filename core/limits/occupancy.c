/*
 * occupancy.c - resident blocks per SM and the occupancy padding; see
 * occupancy.h.
 */
#include "occupancy.h"

#include <stddef.h>

/* Threads per block: 1024 on every capability since 2.0. */
#define OCC_MAX_BLOCK_THREADS 1024u

/*
 * Registers, cuda_occupancy.h's model (cudaOccMaxBlocksPerSMRegsLimit) for
 * every capability in the table below: 64 Ki per SM and per block, allocated
 * per warp in units of 256, each warp from one of four partitions of the
 * SM's file, 255 a thread at most.
 */
#define OCC_ARCH_REGS 65536u
#define OCC_REG_UNIT 256u
#define OCC_REG_PARTITIONS 4u
#define OCC_MAX_THREAD_REGS 255u

/*
 * Per-SM limits by compute capability: cuda_occupancy.h
 * (cudaOccMaxBlocksPerMultiprocessor, cudaOccSMemAllocationGranularity) and
 * CCCL's arch_traits.h (max_threads_per_multiprocessor).
 */
static const struct {
	int sm;
	uint32_t threads_per_sm;
	uint32_t blocks_per_sm;
} arch[] = {
	{ 80, 2048, 32 },  /* A100 */
	{ 86, 1536, 16 },  /* RTX 30xx, A10 */
	{ 87, 1536, 16 },  /* Orin */
	{ 89, 1536, 24 },  /* RTX 40xx, L40S */
	{ 90, 2048, 32 },  /* H100, H200 */
	{ 100, 2048, 32 }, /* B200 */
	{ 103, 2048, 32 }, /* B300 */
	{ 110, 1536, 24 }, /* Thor */
	{ 120, 1536, 24 }, /* RTX 50xx, RTX PRO 6000 */
	{ 121, 1536, 24 }, /* DGX Spark */
};

uint32_t occupancy_granularity(int sm)
{
	return sm >= 80 ? 128 : sm > 0 ? 256 : 0;
}

const int occupancy_device_attrs[OCC_DEVICE_ATTRS] = { 81, 97, 111, 39, 106, 10, 82, 12, 75, 76 };

void occupancy_from_attrs(const int v[OCC_DEVICE_ATTRS], struct occ_sm *out)
{
	*out = (struct occ_sm){ (uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3],
				(uint32_t)v[4], (uint32_t)v[5], occupancy_granularity(v[8] * 10 + v[9]),
				(uint32_t)v[6], (uint32_t)v[7] };
}

int occupancy_arch(int sm, struct occ_sm *out)
{
	size_t i;

	for (i = 0; i < sizeof(arch) / sizeof(arch[0]); i++) {
		if (arch[i].sm != sm)
			continue;
		out->threads_per_sm = arch[i].threads_per_sm;
		out->blocks_per_sm = arch[i].blocks_per_sm;
		out->warp = 32;
		out->granularity = occupancy_granularity(sm);
		out->regs_per_sm = OCC_ARCH_REGS;
		out->regs_per_block = OCC_ARCH_REGS;
		return 0;
	}
	return -1;
}

void occupancy_target(const struct target_limits *t, const struct occ_sm *device,
		      struct occ_sm *out)
{
	*out = *device;
	out->smem_per_sm = t->per_sm;
	out->smem_per_block = t->optin_per_block;
	out->reserved_per_block = t->reserved_per_block;
	if (t->sm)
		occupancy_arch(t->sm, out);
}

/* round_up - @x up to a multiple of @unit (> 0). */
static uint64_t round_up(uint64_t x, uint64_t unit)
{
	return (x + unit - 1) / unit * unit;
}

static uint64_t min2(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * reg_blocks - blocks of @warps warps of @regs registers a thread that @sm's
 * registers hold: UINT64_MAX when they are not counted (@regs or either of
 * the SM's register counts unknown: the other limits decide, as before
 * registers were counted), 0 when one block is over a thread's or a block's limit
 * (the block check rounds its warps up to the partitions, as the hardware's
 * does).
 */
static uint64_t reg_blocks(const struct occ_sm *sm, uint64_t warps, uint32_t regs)
{
	uint64_t per_warp;

	if (!regs || !sm->regs_per_sm || !sm->regs_per_block)
		return UINT64_MAX;
	per_warp = round_up((uint64_t)regs * sm->warp, OCC_REG_UNIT);
	if (regs > OCC_MAX_THREAD_REGS || per_warp * warps > sm->regs_per_block ||
	    per_warp * round_up(warps, OCC_REG_PARTITIONS) > sm->regs_per_block)
		return 0;
	return sm->regs_per_sm / OCC_REG_PARTITIONS / per_warp * OCC_REG_PARTITIONS / warps;
}

uint32_t occupancy_blocks(const struct occ_sm *sm, uint64_t threads, uint32_t regs, uint64_t smem)
{
	uint64_t warps, max_warps, alloc, n;

	if (!sm->smem_per_sm || !sm->smem_per_block || !sm->threads_per_sm || !sm->blocks_per_sm ||
	    !sm->warp || !sm->granularity)
		return 0;
	if (threads == 0 || threads > OCC_MAX_BLOCK_THREADS || smem > sm->smem_per_block)
		return 0;
	warps = (threads + sm->warp - 1) / sm->warp;
	max_warps = sm->threads_per_sm / sm->warp;
	if (warps > max_warps)
		return 0;
	alloc = round_up(smem + sm->reserved_per_block, sm->granularity);
	n = min2(min2(max_warps / warps, sm->blocks_per_sm), reg_blocks(sm, warps, regs));
	return (uint32_t)min2(n, alloc ? sm->smem_per_sm / alloc : UINT64_MAX);
}

void occupancy_pad(const struct occ_sm *target, const struct occ_sm *device, uint64_t threads,
		   uint32_t regs, uint32_t static_smem, uint32_t dynamic_smem, struct occ_pad *out)
{
	uint64_t smem = (uint64_t)static_smem + dynamic_smem;
	uint64_t g = device->granularity, fit, block;

	*out = (struct occ_pad){ .dynamic = dynamic_smem };
	out->target_blocks = occupancy_blocks(target, threads, regs, smem);
	out->device_blocks = occupancy_blocks(device, threads, regs, smem);
	out->padded_blocks = out->device_blocks;
	if (!out->target_blocks) {
		out->verdict = OCC_TARGET_NONE;
		return;
	}
	if (!out->device_blocks) {
		out->verdict = OCC_DEVICE_NONE;
		return;
	}
	if (out->device_blocks <= out->target_blocks) {
		out->verdict = OCC_SAME;
		return;
	}
	/*
	 * The device's warp, block and register limits are above the target's
	 * count (the device's count is their minimum), so only its shared memory
	 * can bring it down.  N blocks fit at most when the rounded block is over
	 * per_sm / (N + 1): the smallest such allocation is @fit, and the
	 * smallest block (reserved bytes included) rounding up to it is
	 * fit - g + 1.  It is over the unpadded block, whose allocation left room
	 * for more than N.
	 */
	fit = round_up(device->smem_per_sm / ((uint64_t)out->target_blocks + 1) + 1, g);
	block = fit - g + 1;
	out->needed = block - device->reserved_per_block;
	if (out->needed > device->smem_per_block) {
		out->verdict = OCC_IMPOSSIBLE;
		return;
	}
	out->verdict = OCC_PAD;
	out->dynamic = (uint32_t)(out->needed - static_smem);
	out->padded_blocks = occupancy_blocks(device, threads, regs, out->needed);
}

const char *occupancy_verdict_name(enum occ_verdict v)
{
	switch (v) {
	case OCC_SAME:
		return "same";
	case OCC_PAD:
		return "pad";
	case OCC_TARGET_NONE:
		return "target_none";
	case OCC_DEVICE_NONE:
		return "device_none";
	case OCC_IMPOSSIBLE:
		return "impossible";
	}
	return "?";
}

enum occ_attr_verdict occupancy_attr_launch(const struct occ_attr *a, uint32_t dynamic)
{
	if (a->base < 0 || dynamic <= (uint32_t)a->base)
		return OCC_ATTR_PAD;
	return a->raised > a->base ? OCC_ATTR_REFUSE : OCC_ATTR_PLAIN;
}

int occupancy_attr_set(const struct occ_attr *a, int value, struct occ_attr *after)
{
	int keep = value >= 0 && value < a->raised;

	after->base = value;
	after->raised = keep ? a->raised : value;
	return keep ? a->raised : value;
}
