/*
 * standin.h - the compiled-in values and Hopper launch shapes of the
 * stand-in framework kernels (standin.cu), shared by the kernels and the
 * engine that launches them (gpu.c).
 */
#ifndef SM120_ENGINE_GPU_STANDIN_H
#define SM120_ENGINE_GPU_STANDIN_H

#include <stdint.h>

/*
 * What Triton compiles into a specialization and the stand-ins read from
 * their module's __constant__ standin_spec (set once per loaded copy).
 */
struct standin_spec {
	int32_t top_k;              /* routed rows per activation row */
	int32_t mul_routed_weight;  /* 1: times topk_weights */
	int32_t scale;              /* FP8: enum moe_scale (per tensor, channel, 128 x 128 blocks) */
	int32_t n, k;               /* gptq/awq: N and K are constexpr there */
	int32_t group_size;         /* gptq/awq */
};

/* SGLang's default FP8 fused-MoE configuration, and bf16 / int4 at the same
 * tile: BLOCK_SIZE_M 128, BLOCK_SIZE_N 256, 8 warps, 4 stages; dynamic
 * shared memory as Triton 3.6 allocates it for sm_90 (4 stages). */
#define STANDIN_MOE_BM 128
#define STANDIN_MOE_BN 256
#define STANDIN_MOE_WARPS 8
#define STANDIN_MOE_SMEM_HOPPER 196608        /* bf16 (BK 64), FP8 per tensor / channel, gptq int4 */
#define STANDIN_MOE_SMEM_HOPPER_BLOCK 197632  /* FP8 with 128 x 128 block scales */
#ifdef STANDIN_MOE_FP8
#define STANDIN_MOE_SMEM STANDIN_MOE_SMEM_HOPPER_BLOCK
#else
#define STANDIN_MOE_SMEM STANDIN_MOE_SMEM_HOPPER
#endif

/* SGLang extend attention for MLA absorbed on Hopper: BLOCK_M 32, BLOCK_N 64, 8 warps. */
#define STANDIN_EXTEND_BM 32
#define STANDIN_EXTEND_WARPS 8
#define STANDIN_EXTEND_LQ 576
#define STANDIN_EXTEND_LV 512
#define STANDIN_EXTEND_SMEM 106496

#endif
