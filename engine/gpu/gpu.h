/*
 * gpu.h - the GPU backend: the forward pass of cpu.h on an NVIDIA GPU,
 * through the Driver API alone (libcuda.so.1 opened at run time, so the
 * tool still runs where there is no GPU).
 *
 * It runs as a serving framework does, so that the shim sees what it sees
 * from SGLang:
 *   - routed experts (bf16, FP8 block / channel, INT4) go through stand-ins
 *     of SGLang's fused_moe_kernel / fused_moe_kernel_gptq_awq at the
 *     Hopper configuration 128 x 256, 8 warps, 4 stages (196608 / 197632 B
 *     of dynamic shared memory), after the align step;
 *   - MLA absorbed prefill with Lq 576 / Lv 512 (Kimi K2, DeepSeek V3) goes
 *     through a stand-in of SGLang's extend attention _fwd_kernel at its
 *     Hopper tile (106496 B);
 *   - GQA prefill with head size 128 (GLM-4.7) runs the bundled extend
 *     attention attn_extend_128_bf16 directly: it fits SM120 as it is, as
 *     SGLang's own launch at that size does; decode at these head sizes
 *     (GQA 128, MLA 576 / 512) runs the bundled split-KV decode attention
 *     and its merge;
 *   - dense GEMMs (attention projections, dense and shared MLPs, lm_head)
 *     are the bundled moe_gemm kernels run as a one-expert grouped GEMM:
 *     they already read every weight format of the engine, and no cuBLAS
 *     (a second library, Hopper kernels under emulation) is needed;
 *   - NVFP4 experts, which no Triton kernel of the frameworks serves, go to
 *     moe_gemm_nvfp4 directly; everything else is ops.cu.
 * Under `sm120 run --mode reroute --target sm120` the stand-ins' launches
 * exceed SM120's 101376 B and the shim reroutes them; without the shim, on
 * a Hopper GPU, they run themselves (standin.cu).
 *
 * Numerics as the frameworks': bf16 GEMM inputs and outputs, FP8 weights
 * with dynamic FP8 activations (per token and 128-group for block scales,
 * per token for channel scales), fp32 residual stream, norms, softmax and
 * router.  MLA is absorbed only (--mla naive is refused).
 */
#ifndef SM120_ENGINE_GPU_H
#define SM120_ENGINE_GPU_H

#include "../model/model.h"

struct ref_gpu;

/* The prompt tokens a prefill step takes by default: a forward of more runs in steps of this many. */
#define REF_GPU_CHUNK 512

/*
 * ref_gpu_new - load the kernels and @m's weights onto GPU 0 with a KV
 * cache of @max_seq positions, prefill running @chunk tokens a step (0:
 * REF_GPU_CHUNK; at most @max_seq: a server's chunked prefill takes 2048 to
 * 16384, whose MoE launches give each expert several times the rows of
 * 512's and so run other kernels).  NULL with @err when there is no driver or
 * GPU, the kernels were not built in, a weight layout cannot be served, or
 * a stand-in's shared memory exceeds what the device offers (the message
 * says Triton would fail the same way and names the shim's reroute mode).
 * @routes (may be NULL) sees every routing decision (each costs a copy to
 * the host and a wait).  @verbose: a progress line on stderr while the
 * layers' weights go to the device (a real checkpoint is hundreds of GB).
 */
struct ref_gpu *ref_gpu_new(const struct ref_model *m, int max_seq, int chunk, int absorbed, int verbose,
			    const struct ref_route_sink *routes, struct sm_err *err);

/* ref_gpu_forward - as ref_cpu_forward (cpu.h): @n tokens at the next positions, logits [n][vocab]
 * (@all) or the last position's [vocab] (formed alone: its bits may differ from its row of the
 * whole, as a one-token step's). */
int ref_gpu_forward(struct ref_gpu *g, const int *tokens, int n, int all, float *logits, struct sm_err *err);

/* ref_gpu_attention - the name of the kernels that attend a prefill step (more than one new
 * token; @decode 0) or a decode step (@decode 1) of config @c on this backend; static. */
const char *ref_gpu_attention(const struct ref_config *c, int decode);

/*
 * ref_gpu_decode_splits - the splits of @seq keys (>= 1) for the split-KV
 * decode attention with about @want of them (1 .. 64, ATTN_MERGE_MAX_SPLITS):
 * SGLang's split length cdiv(cdiv(seq, splits), 32) * 32 (decode.h) from
 * that many splits, then only as many splits as that length needs, so that
 * every split holds keys under the kernel's own length for the returned
 * count (stage 1 does not write an empty split, and the merge reads every
 * split it is given).  Pure.
 */
int ref_gpu_decode_splits(int seq, int want);

/* ref_gpu_free - NULL is allowed. */
void ref_gpu_free(struct ref_gpu *g);

#endif
