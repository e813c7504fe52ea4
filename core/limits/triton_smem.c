/*
 * triton_smem.c - see triton_smem.h; pure functions and one table.
 *
 * The terms follow what Triton 3.6's NVIDIA backend does (TritonGPU
 * pipeliner, AccelerateMatmul, shared-memory allocation) and were fitted to
 * and checked against its compiles of SGLang's and vLLM's kernels
 * (tests/oracle/moe_smem.py).
 */
#include "triton_smem.h"

#include <stddef.h>
#include <string.h>

/* The dtypes of the frameworks' config-file names (get_config_dtype_str). */
static const struct triton_moe_dtype dtypes[] = {
	/* name           A bytes  B bits  kernel               scaled */
	{ "",             2,       16,     TRITON_MOE_FUSED,     0 }, /* bf16 / fp16 */
	{ "float32",      4,       32,     TRITON_MOE_FUSED,     0 },
	{ "fp8_w8a8",     1,       8,      TRITON_MOE_FUSED,     1 },
	{ "int8_w8a8",    1,       8,      TRITON_MOE_FUSED,     1 },
	{ "int8_w8a16",   2,       8,      TRITON_MOE_FUSED,     0 },
	{ "int4_w4a16",   2,       4,      TRITON_MOE_GPTQ_AWQ,  0 },
};

#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* cp.async moves 4, 8 or 16 bytes: Triton pipelines a load only from 4 bytes a thread. */
#define ASYNC_MIN_BYTES 4u
#define ASYNC_MAX_BYTES 16u
/* An mbarrier, one per buffer of a tensor-descriptor (TMA) ring. */
#define MBARRIER_BYTES 8u
/* Block scales are fp32. */
#define SCALE_BYTES 4u

const struct triton_moe_dtype *triton_moe_dtype_find(const char *name)
{
	size_t i;

	for (i = 0; i < NDTYPES; i++)
		if (strcmp(dtypes[i].name, name ? name : "") == 0)
			return &dtypes[i];
	return NULL;
}

const char *triton_moe_dtype_names(void)
{
	return "fp8_w8a8, int8_w8a8, int8_w8a16, int4_w4a16, float32, or none (bf16)";
}

const char *triton_moe_kernel_name(enum triton_moe_kernel k)
{
	return k == TRITON_MOE_GPTQ_AWQ ? "fused_moe_kernel_gptq_awq" : "fused_moe_kernel";
}

int triton_moe_sm_supported(int sm)
{
	return sm == 90 || sm == 120 || sm == 121;
}

int triton_moe_swap_ab(int sm, const struct triton_moe_dtype *d, uint32_t block_m,
		       uint32_t block_n)
{
	return sm == 90 && d && strcmp(d->name, "fp8_w8a8") == 0 && block_m < 64 && block_n >= 64;
}

/*
 * wgmma - does the dot run as a Hopper wgmma (MMAv3)?  AccelerateMatmul's
 * conditions: sm_90, MMA v3 not disabled (DISABLE_MMA_V3), warps in whole
 * warpgroups, the result's rows a multiple of 64, at least 16 columns in
 * multiples of 8 (an 8-column dot stays on mma.sync: measured), K at least
 * one 32-byte wgmma step of the operands.
 */
static int wgmma(const struct triton_moe_tile *t, uint32_t dot_bytes)
{
	uint32_t rows = t->swap_ab ? t->block_n : t->block_m;
	uint32_t cols = t->swap_ab ? t->block_m : t->block_n;

	return t->sm == 90 && !t->no_mma_v3 && t->num_warps % 4 == 0 && rows % 64 == 0 && cols % 8 == 0 &&
	       cols >= 16 && t->block_k * dot_bytes >= 32;
}

/* ring - buffers of a pipelined load of @t: num_stages, one fewer unless
 * wgmma reads them in place, never fewer than one; one where the K loop is
 * one step (not pipelined, wgmma too: measured on fused_moe_kernel_gptq_awq,
 * sm_90 and sm_120, K from 64 to 2 BLOCK_SIZE_K: a K of 256 at BLOCK_SIZE_K
 * 256, BLOCK_SIZE_M 32 and 4 stages has 147456 B, at 512 180224). */
static uint32_t ring(const struct triton_moe_tile *t, int in_place)
{
	uint32_t n = in_place ? t->num_stages : t->num_stages - (t->num_stages > 0);

	return n && t->k_steps != 1 ? n : 1;
}

/*
 * async_load - does the pipeliner turn a [K-contiguous] tile load of @elems
 * elements of @bytes each into cp.async?  Each thread's vector is at most 16
 * bytes, at most its share of the tile and at most @contig elements; it must
 * be at least 4 bytes.
 */
static int async_load(uint64_t elems, uint32_t bytes, uint32_t threads, uint32_t contig)
{
	uint64_t vec = ASYNC_MAX_BYTES / bytes, share = elems / threads;

	if (share < vec)
		vec = share ? share : 1;
	if (contig < vec)
		vec = contig;
	return vec * bytes >= ASYNC_MIN_BYTES;
}

/*
 * scale_scratch - the layout-conversion scratch of one fp32 block-scale
 * vector of @len elements inside the loop: the load spreads it over all
 * @threads, the dot's layout over the warps of one dimension; when every
 * thread holds an element (len >= threads) the exchange crosses warps and
 * goes through shared memory, otherwise it stays in registers.
 */
static uint64_t scale_scratch(uint32_t len, uint32_t threads)
{
	return len >= threads ? (uint64_t)SCALE_BYTES * len : 0;
}

uint64_t triton_moe_smem(const struct triton_moe_tile *t)
{
	uint32_t threads = t->num_warps * 32, a_ring, b_ring;
	uint64_t a_tile, b_tile, bytes;
	int gptq = t->kernel == TRITON_MOE_GPTQ_AWQ, v3;
	/* B is converted to A's type in registers before the dot (w8a16, w4a16). */
	int converted = gptq || t->b_bits != t->a_bytes * 8;

	if (!triton_moe_sm_supported(t->sm) || !t->block_m || !t->block_n || !t->block_k ||
	    !t->num_warps || !t->a_bytes || (gptq ? !t->b_bits : t->b_bits < 8))
		return 0;
	v3 = wgmma(t, t->a_bytes);
	a_ring = ring(t, v3);
	b_ring = ring(t, v3 && !converted);
	a_tile = (uint64_t)t->block_m * t->block_k * t->a_bytes;
	b_tile = (uint64_t)t->block_k * t->block_n * t->b_bits / 8;
	bytes = a_tile * (t->tma_a || async_load((uint64_t)t->block_m * t->block_k, t->a_bytes,
						 threads, t->block_k) ? a_ring : 1);
	/* Packed INT4 rows are read twice (k / 2): never cp.async, never in shared memory. */
	if (!gptq)
		bytes += b_tile * (t->tma_b || async_load((uint64_t)t->block_k * t->block_n,
							  t->b_bits / 8, threads, t->block_k) ?
				   b_ring : 1);
	/* The converted B tile goes through shared memory where the dot reads it from
	 * there: wgmma always, mma.sync unless the conversion moved after the load
	 * from shared memory (w8a16 does; w4a16's unpacking cannot). */
	if (gptq || (converted && v3))
		bytes += (uint64_t)t->block_k * t->block_n * t->a_bytes;
	if (t->tma_a || t->tma_b)
		bytes += (uint64_t)MBARRIER_BYTES * a_ring;
	/* Block-scaled TMA loads of A add 16 bytes per two buffers where the dot is
	 * mma.sync, except on sm_120: measured on sm_121 (1 to 5 buffers) and on
	 * sm_90 (1 to 5 buffers; DISABLE_MMA_V3, 2 warps, 16-row tiles), not
	 * derived from Triton's passes. */
	if (t->sm != 120 && !v3 && t->tma_a && t->group_n && t->group_k)
		bytes += 16 * (uint64_t)((a_ring + 1) / 2);
	if (t->group_n && t->group_k) {
		uint64_t a_scale = scale_scratch(t->block_m, threads);
		uint64_t b_scale = t->b_scale_vector ? scale_scratch(t->block_n, threads) : 0;

		bytes += a_scale > b_scale ? a_scale : b_scale;
	}
	return bytes;
}
