/*
 * triton_smem.h - the shared memory Triton 3.6 gives the frameworks' fused-MoE
 * kernels, computed from a tuned configuration without compiling anything.
 *
 * SGLang's and vLLM's fused-MoE config files give, per batch bucket,
 * BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps and num_stages.  Whether a bucket
 * fits a GPU depends on the dynamic shared memory Triton then compiles
 * (metadata.shared), which depends on the architecture it compiles for.
 * This is that number as one pure function, checked against real Triton
 * compiles of the frameworks' own kernels (tests/oracle/moe_smem.py, the
 * measured rows in tests/fixtures/configs/triton_smem_measured.tsv, and
 * tests/unit/test_triton_smem.c).
 *
 * What Triton 3.6 allocates for fused_moe_kernel (the pointer path):
 *   - A [BM x BK] and B [BK x BN] tiles in a ring of buffers.  A load is
 *     pipelined (cp.async) when each thread moves at least 4 contiguous
 *     bytes; then the ring has num_stages - 1 buffers, or num_stages where
 *     the dot runs as a Hopper wgmma and reads the buffer in place (sm_90,
 *     warps in warpgroups, the dot's rows a multiple of 64 and at least 16
 *     columns).  A load that is not pipelined, or num_stages 1, has one
 *     buffer (the dot operand passes through shared memory).
 *   - A B tile converted before the dot (int8 w8a16 to bf16) keeps
 *     num_stages - 1 buffers, and under wgmma adds one converted [BK x BN]
 *     buffer (on mma.sync the conversion happens after the load from shared
 *     memory and adds nothing).
 *   - With block scales (128x128 and the like), the fp32 scale vectors
 *     multiplied into the dot inside the loop (A's per row [BM], B's per
 *     column [BN] where the kernel loads it as a vector) change layout; a
 *     vector with at least one element per thread crosses warps and needs
 *     4 bytes an element of shared memory, the larger of the two (their
 *     scratch is reused).
 *   - A tile loaded through a tensor descriptor (TMA) is always in the ring,
 *     and each buffer of the ring has an 8-byte mbarrier; on sm_121 and on
 *     sm_90 where the dot is mma.sync, block-scaled TMA loads add 16 bytes
 *     per two buffers (measured only).
 * fused_moe_kernel_gptq_awq (INT4 W4A16) keeps the A ring; its packed B is
 * read to registers (never cp.async: each byte is read for two rows),
 * unpacked, and goes through one [BK x BN] bf16 buffer.
 * The epilogue stores from the dot's own layout: it adds nothing.
 * A process run with DISABLE_MMA_V3 on (benchmarks on Hopper that keep to
 * SM120's instructions) has no wgmma: sm_90 then allocates as mma.sync does
 * (checked against Triton's compiles, tests/oracle/moe_smem.py's nov3 rows).
 * The terms follow Triton's passes where we could read them off and were
 * fitted to its compiles where not (the scale-scratch threshold, the
 * 16-column wgmma bound, the block-scaled TMA term); the formula equals
 * Triton on all 2974 measured compiles (sm_120, sm_121, sm_90 with and
 * without DISABLE_MMA_V3; both frameworks' kernels).  Not modelled:
 * num_stages 1 with tensor descriptors on mma.sync, INT8 block-scaled
 * tensor-descriptor loads of A on mma.sync outside sm_120 (the table says
 * what Triton gives).
 * It assumes what serving processes pass: K-contiguous A and B (stride 1)
 * with rows aligned to 16 bytes (hidden and intermediate sizes multiples of
 * 16); an odd K could make a thread's vector shorter than 4 bytes.
 */
#ifndef SM120_CORE_LIMITS_TRITON_SMEM_H
#define SM120_CORE_LIMITS_TRITON_SMEM_H

#include <stdint.h>

/* The two Triton kernels the frameworks launch from a fused-MoE config file. */
enum triton_moe_kernel {
	TRITON_MOE_FUSED = 0,     /* fused_moe_kernel */
	TRITON_MOE_GPTQ_AWQ,      /* fused_moe_kernel_gptq_awq (INT4 weight-only) */
};

/* A config file's dtype, as the frameworks name it in the file name. */
struct triton_moe_dtype {
	const char *name;         /* "fp8_w8a8"; "" for none (bf16 / fp16 models) */
	uint32_t a_bytes;         /* an A (activation) element as loaded */
	uint32_t b_bits;          /* a B (weight) element as stored */
	enum triton_moe_kernel kernel;
	int scaled;               /* w8a8: per-tensor, per-channel or block scales */
};

/*
 * triton_moe_dtype_find - the dtype named @name ("" or NULL: no dtype part,
 * bf16 weights and activations), or NULL when neither framework looks up a
 * file with that dtype.
 */
const struct triton_moe_dtype *triton_moe_dtype_find(const char *name);

/* triton_moe_dtype_names - the accepted dtype names, comma-separated, for messages. */
const char *triton_moe_dtype_names(void);

/* triton_moe_kernel_name - "fused_moe_kernel" or "fused_moe_kernel_gptq_awq". */
const char *triton_moe_kernel_name(enum triton_moe_kernel k);

/* One compiled configuration of a fused-MoE kernel. */
struct triton_moe_tile {
	int sm;                       /* the architecture Triton compiles for: 120, 90, ... */
	enum triton_moe_kernel kernel;
	uint32_t a_bytes, b_bits;     /* element sizes (struct triton_moe_dtype) */
	uint32_t block_m, block_n, block_k;
	uint32_t num_warps, num_stages;
	uint32_t group_n, group_k;    /* block-scale shape; 0 0: none */
	int tma_a, tma_b;             /* A, B through tensor descriptors (SGLang USE_TMA:
					 both in a _down config, B alone in an up one) */
	int swap_ab;                  /* the frameworks' swapped dot (sm_90, see below) */
	int b_scale_vector;           /* block scales: B's scale loaded per column, a
					 [BN] vector (vLLM always; SGLang when BN > group_n) */
	int no_mma_v3;                /* compiled with DISABLE_MMA_V3 on: the dot stays on
					 mma.sync on sm_90 too (0: Triton's own choice) */
	uint32_t k_steps;             /* the K loop's trip count, ceil(K / BLOCK_SIZE_K),
					 where K is compiled in (fused_moe_kernel_gptq_awq
					 declares N and K constexpr); 0: a runtime K */
};

/*
 * triton_moe_sm_supported - is @sm an architecture the formula models?
 * SM120 (120, 121: mma.sync, cp.async, TMA) and Hopper (90: wgmma), the
 * ones measured.  Not sm_80/86 (Triton compiles no FP8 E4M3 there), sm_89
 * (measured: its epilogue converts layouts through shared memory and it
 * has no TMA, neither modelled) nor Blackwell datacenter (100: tcgen05).
 */
int triton_moe_sm_supported(int sm);

/*
 * triton_moe_smem - the dynamic shared memory (Triton's metadata.shared, in
 * bytes) of @t as Triton 3.6 compiles it for sm_@t->sm; 0 when @t->sm is not
 * supported or a block size, num_warps or the element size is 0.  Pure.
 */
uint64_t triton_moe_smem(const struct triton_moe_tile *t);

/*
 * triton_moe_swap_ab - do SGLang and vLLM swap the dot's operands for this
 * configuration?  Both do on sm_90 only, for FP8 w8a8 with BLOCK_SIZE_M < 64
 * and BLOCK_SIZE_N >= 64 (SGLang should_enable_swap_ab, vLLM enable_swap_ab).
 */
int triton_moe_swap_ab(int sm, const struct triton_moe_dtype *d, uint32_t block_m,
		       uint32_t block_n);

#endif
