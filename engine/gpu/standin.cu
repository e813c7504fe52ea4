/*
 * standin.cu - kernels that stand in for the framework kernels the shim
 * reroutes: they carry the Triton kernel's name, its runtime parameter list
 * (as rules/ lists it, Triton's two trailing scratch pointers included) and
 * its Hopper configuration's launch (1-D or 3-D grid, 8 warps, the Hopper
 * tile's dynamic shared memory), so that under `sm120 run --mode reroute
 * --target sm120` the shim sees exactly what it sees from SGLang and
 * reroutes them.  Without the shim they compute the framework kernel's
 * result themselves, on the Hopper tile: the fused-MoE stand-ins with
 * moe_gemm's 128 x 256 body (kernels/moe/moe_gemm.cuh), extend attention
 * with attend.cuh.  They stand in for the launch, not for Triton's speed.
 *
 * What Triton compiles in (constexpr) is not a parameter here either: each
 * specialization is a loaded copy of the module whose __constant__
 * standin_spec the engine sets once after loading (top_k, MUL_ROUTED_WEIGHT,
 * the scale layout; gptq's N, K and group size), as Triton compiles one
 * kernel per value.
 *
 * One variant per compilation (the entry names are the frameworks', so each
 * is its own module): -DSTANDIN_MOE_BF16, -DSTANDIN_MOE_FP8,
 * -DSTANDIN_MOE_GPTQ (SGLang fused_moe_kernel 2026-03 signature without /
 * with scale pointers; fused_moe_kernel_gptq_awq, int4 without zero points)
 * or -DSTANDIN_EXTEND (SGLang _fwd_kernel 2025-08 signature, SGLang 0.5.8
 * and 0.5.9: no k/v scales, int32 qo_indptr; MLA absorbed Lq 576, Lv 512,
 * BLOCK_M 32, causal, page size 1: the launch that crashed on SM120 cards).
 */
#include <stdint.h>

#include "../../kernels/common.cuh"
#include "standin.h"

#if defined(STANDIN_MOE_BF16) || defined(STANDIN_MOE_FP8) || defined(STANDIN_MOE_GPTQ)
#include "../../kernels/moe/moe_gemm.cuh"
#endif
#ifdef STANDIN_EXTEND
#include "attend.cuh"
#endif

/* the specialization: set by the engine through cuModuleGetGlobal after loading */
extern "C" __constant__ struct standin_spec standin_spec = {};

#if defined(STANDIN_MOE_BF16) || defined(STANDIN_MOE_FP8) || defined(STANDIN_MOE_GPTQ)
/*
 * moe_tile - Triton's program id over cdiv(N, 256) column blocks, as
 * moe_gemm's 128-row block.  Its routed ids sit past the pipeline in the
 * dynamic shared memory: like Triton's kernels, the stand-ins have no
 * static shared memory, so the shim sees exactly the tile's bytes.
 */
template <int QUANT>
__device__ __forceinline__ void moe_tile(moe_gemm_args &a, unsigned char *smem)
{
	const int npid_n = (a.N + STANDIN_MOE_BN - 1) / STANDIN_MOE_BN;
	auto &rows = *reinterpret_cast<moe_gemm::rows<STANDIN_MOE_BM> *>(smem + moe_gemm_smem(QUANT, STANDIN_MOE_BM));
	static_assert(moe_gemm_smem(QUANT, STANDIN_MOE_BM) + sizeof(moe_gemm::rows<STANDIN_MOE_BM>) <=
			      STANDIN_MOE_SMEM_HOPPER, "the routed ids must fit the Hopper tile");

	a.top_k = standin_spec.top_k;
	a.mul_routed_weight = standin_spec.mul_routed_weight;
	a.block_m = STANDIN_MOE_BM;
	moe_gemm::gemm<QUANT, STANDIN_MOE_BM>(a, smem, rows, blockIdx.x % npid_n, blockIdx.x / npid_n);
}
#endif

#if defined(STANDIN_MOE_BF16) || defined(STANDIN_MOE_FP8)
SM120_DYNAMIC_SMEM(fused_moe_kernel, STANDIN_MOE_SMEM);
extern "C" __global__ void __launch_bounds__(256) fused_moe_kernel(
	const void *a_ptr, const void *b_ptr, void *c_ptr,
#ifdef STANDIN_MOE_FP8
	const float *a_scale_ptr, const float *b_scale_ptr,
#endif
	const float *topk_weights_ptr, const int32_t *sorted_token_ids_ptr, const int32_t *expert_ids_ptr,
	const int32_t *num_tokens_post_padded_ptr, int N, int K, int EM, int num_valid_tokens, int stride_am,
	int stride_be, int stride_bn, int stride_bias_e, int stride_bias_n, int stride_cm, int stride_asm,
	int stride_ask, int stride_bse, int stride_bsk, int stride_bsn, void *global_scratch,
	void *profile_scratch)
{
	extern __shared__ __align__(1024) unsigned char smem[];
	moe_gemm_args a = {};

	a.a = a_ptr, a.b = b_ptr, a.c = c_ptr;
	a.topk_weights = topk_weights_ptr;
	a.sorted_ids = sorted_token_ids_ptr, a.expert_ids = expert_ids_ptr;
	a.num_tokens_post_padded = num_tokens_post_padded_ptr;
	a.a_stride_m = stride_am, a.b_stride_e = stride_be, a.b_stride_n = stride_bn, a.c_stride_m = stride_cm;
	a.N = N, a.K = K, a.EM = EM, a.num_valid = num_valid_tokens;
#ifdef STANDIN_MOE_FP8
	a.a_scale = a_scale_ptr, a.b_scale = b_scale_ptr;
	a.scale = standin_spec.scale;
	a.group_n = a.group_k = 128;
	a.as_stride_m = stride_asm, a.as_stride_k = stride_ask;
	a.bs_stride_e = a.scale == MOE_SCALE_TENSOR ? 1 : stride_bse;
	a.bs_stride_n = stride_bsn, a.bs_stride_k = stride_bsk;
	moe_tile<MOE_FP8>(a, smem);
#else
	moe_tile<MOE_BF16>(a, smem);
#endif
}
#endif

#ifdef STANDIN_MOE_GPTQ
SM120_DYNAMIC_SMEM(fused_moe_kernel_gptq_awq, STANDIN_MOE_SMEM);
extern "C" __global__ void __launch_bounds__(256) fused_moe_kernel_gptq_awq(
	const void *a_ptr, const void *b_ptr, void *c_ptr, const void *b_scale_ptr, const float *topk_weights_ptr,
	const int32_t *sorted_token_ids_ptr, const int32_t *expert_ids_ptr, const int32_t *num_tokens_post_padded_ptr,
	int EM, int num_valid_tokens, int stride_am, int stride_be, int stride_bn, int stride_cm, int stride_bse,
	int stride_bsn, int stride_bze, int stride_bzk, int stride_bzn, void *global_scratch, void *profile_scratch)
{
	extern __shared__ __align__(1024) unsigned char smem[];
	moe_gemm_args a = {};

	a.a = a_ptr, a.b = b_ptr, a.c = c_ptr;
	a.b_scale = b_scale_ptr;
	a.topk_weights = topk_weights_ptr;
	a.sorted_ids = sorted_token_ids_ptr, a.expert_ids = expert_ids_ptr;
	a.num_tokens_post_padded = num_tokens_post_padded_ptr;
	a.a_stride_m = stride_am, a.b_stride_e = stride_be, a.b_stride_n = stride_bn, a.c_stride_m = stride_cm;
	a.bs_stride_e = stride_bse, a.bs_stride_n = stride_bsn, a.bs_stride_k = 1;
	a.N = standin_spec.n, a.K = standin_spec.k, a.EM = EM, a.num_valid = num_valid_tokens;
	a.group_size = standin_spec.group_size;
	moe_tile<MOE_W4A16>(a, smem);
}
#endif

#ifdef STANDIN_EXTEND
/*
 * Grid (batch, q heads, cdiv(max extend length, 32)), 8 warps: the block's
 * 32 rows of one sequence and head, 4 per warp.  Row m of sequence b (query
 * qo_indptr[b] + m) sees the prefix slots kv_indices[kv_indptr[b] ..
 * kv_indptr[b+1]) of the bf16 buffers and extend keys 0 .. m.
 */
SM120_DYNAMIC_SMEM(_fwd_kernel, STANDIN_EXTEND_SMEM);
extern "C" __global__ void __launch_bounds__(256, 1) _fwd_kernel(
	const __nv_bfloat16 *Q_Extend, const __nv_bfloat16 *K_Extend, const __nv_bfloat16 *V_Extend,
	__nv_bfloat16 *O_Extend, const __nv_bfloat16 *K_Buffer, const __nv_bfloat16 *V_Buffer,
	const int32_t *qo_indptr, const int32_t *kv_indptr, const int64_t *kv_indices, float sm_scale,
	int kv_group_num, int stride_qbs, int stride_qh, int stride_kbs,
	int stride_kh, int stride_vbs, int stride_vh, int stride_obs, int stride_oh, int stride_buf_kbs,
	int stride_buf_kh, int stride_buf_vbs, int stride_buf_vh, void *global_scratch, void *profile_scratch)
{
	const int b = blockIdx.x, h = blockIdx.y, kh = h / kv_group_num;
	const int q0 = qo_indptr[b], len = qo_indptr[b + 1] - q0;
	const int p0 = kv_indptr[b], plen = kv_indptr[b + 1] - p0;

	for (int i = 0; i < STANDIN_EXTEND_BM / 8; i++) {
		const int m = blockIdx.z * STANDIN_EXTEND_BM + (threadIdx.x >> 5) * (STANDIN_EXTEND_BM / 8) + i;
		if (m >= len)
			break;
		const int64_t row = q0 + m;

		attend(O_Extend + row * stride_obs + (int64_t)h * stride_oh,
		       Q_Extend + row * stride_qbs + (int64_t)h * stride_qh, sm_scale, STANDIN_EXTEND_LQ,
		       STANDIN_EXTEND_LV, plen + m + 1, [&](int s) {
			       if (s < plen) {
				       const int64_t slot = kv_indices[p0 + s];
				       return attend_key{ K_Buffer + slot * stride_buf_kbs + (int64_t)kh * stride_buf_kh,
							  V_Buffer + slot * stride_buf_vbs + (int64_t)kh * stride_buf_vh,
							  1.0f, 1.0f };
			       }
			       const int64_t e = q0 + s - plen;
			       return attend_key{ K_Extend + e * stride_kbs + (int64_t)kh * stride_kh,
						  V_Extend + e * stride_vbs + (int64_t)kh * stride_vh, 1.0f, 1.0f };
		       });
	}
}
#endif
