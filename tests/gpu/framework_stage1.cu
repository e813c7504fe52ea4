/*
 * framework_stage1.cu - a kernel with exactly the launch interface of vLLM's
 * TRITON_MLA `_fwd_grouped_kernel_stage1` (2026-06 signature: 21 runtime
 * parameters and Triton's two scratch pointers), for reroute_contexts.c.
 * Its body writes NaN over the partial output: a launch that is not
 * rerouted is visible as NaN, never as a plausible number.
 */
#include <stdint.h>

extern "C" __global__ void _fwd_grouped_kernel_stage1(
	const void *Q, const void *K_Buffer, const void *V_Buffer, float sm_scale,
	const int32_t *Req_to_tokens, const int32_t *B_Seqlen, float *Att_Out,
	int stride_req_to_tokens_b, int stride_qbs, int stride_qh, int stride_buf_kpbs,
	int stride_buf_kbs, int stride_buf_kh, int stride_buf_vpbs, int stride_buf_vbs,
	int stride_buf_vh, int stride_mid_ob, int stride_mid_oh, int stride_mid_os,
	const float *k_scale, const float *v_scale, void *global_scratch, void *profile_scratch)
{
	int64_t n = (int64_t)gridDim.x * stride_mid_ob;

	for (int64_t i = threadIdx.x + (int64_t)blockIdx.y * blockDim.x; i < n;
	     i += (int64_t)blockDim.x * gridDim.y)
		Att_Out[i] = __int_as_float(0x7fc00000);
}
