/*
 * reroute_contexts.c - rerouting in several CUDA contexts (and every visible
 * device) of one process.  Run under the shim: `sm120 run --mode reroute
 * --target sm120 --set page_size=64 -- reroute_contexts framework_stage1.cubin`.
 *
 * In each of two contexts per device the program loads a kernel with vLLM's
 * TRITON_MLA decode interface (framework_stage1.cu, which writes NaN) and
 * launches it as vLLM does with an FP8 cache (102400 B of dynamic shared
 * memory), so the shim must reroute it to the bundled attn_decode_mla_fp8 of
 * that context.  The result must equal, bit for bit, a direct launch of the
 * bundled kernel with the arguments vLLM's launch means (decode.h; the kernel
 * itself is checked against a double reference by decode_attn.c).  Contexts
 * are used interleaved, so a bundle loaded in the wrong context would show.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/attention/decode.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

enum { BATCH = 3, HEADS = 8, SPLITS = 4, PAGE = 64, PAGES_PER = 5, DK = 576, DV = 512 };

/* One context's buffers and kernels. */
struct ctx {
	CUcontext ctx;
	CUfunction framework, bundled;
	CUdeviceptr q, cache, table, lens, scale, out_rerouted, out_direct;
	size_t out_elems;
};

static void setup(struct ctx *c, CUdevice dev, const char *cubin, int seed)
{
	size_t pages = BATCH * PAGES_PER + 1, i;
	uint16_t *q = malloc(BATCH * HEADS * DK * 2);
	uint8_t *cache = malloc(pages * PAGE * DK);
	int32_t table[BATCH * PAGES_PER], lens[BATCH] = { 17 + seed, 64 * 4 + 3, 300 - seed };
	float scale = 0.05f;
	CUmodule fw, bundle;
	size_t len;

	CHECK(cuCtxCreate(&c->ctx, NULL, 0, dev));
	CHECK(cuModuleLoad(&fw, cubin));
	CHECK(cuModuleGetFunction(&c->framework, fw, "_fwd_grouped_kernel_stage1"));
	/* as Triton does for a kernel over 48 KiB: opt in to the (advertised) limit */
	CHECK(cuFuncSetAttribute(c->framework, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				 102400));
	CHECK(cuModuleLoadData(&bundle, bundle_fatbin(&len)));
	CHECK(cuModuleGetFunction(&c->bundled, bundle, ATTN_DECODE_MLA_FP8));
	CHECK(cuFuncSetAttribute(c->bundled, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				 ATTN_DECODE_MLA_FP8_SMEM));
	for (i = 0; i < (size_t)BATCH * HEADS * DK; i++)
		q[i] = (uint16_t)(0x3c00 + ((uint32_t)(rand64() >> 32) & 0x3ff)) ^ (uint16_t)(((uint32_t)(rand64() >> 32) & 1) << 15);
	for (i = 0; i < pages * PAGE * DK; i++)
		cache[i] = (uint8_t)((uint32_t)(rand64() >> 32) & 0x77) | (uint8_t)(((uint32_t)(rand64() >> 32) & 1) << 7); /* no NaN */
	for (i = 0; i < BATCH * PAGES_PER; i++)
		table[i] = (int32_t)((i * 7 + (size_t)seed) % (pages - 1) + 1);
	c->out_elems = (size_t)BATCH * HEADS * SPLITS * (DV + 1);
	CHECK(cuMemAlloc(&c->q, BATCH * HEADS * DK * 2));
	CHECK(cuMemAlloc(&c->cache, pages * PAGE * DK));
	CHECK(cuMemAlloc(&c->table, sizeof(table)));
	CHECK(cuMemAlloc(&c->lens, sizeof(lens)));
	CHECK(cuMemAlloc(&c->scale, sizeof(scale)));
	CHECK(cuMemAlloc(&c->out_rerouted, c->out_elems * 4));
	CHECK(cuMemAlloc(&c->out_direct, c->out_elems * 4));
	CHECK(cuMemcpyHtoD(c->q, q, BATCH * HEADS * DK * 2));
	CHECK(cuMemcpyHtoD(c->cache, cache, pages * PAGE * DK));
	CHECK(cuMemcpyHtoD(c->table, table, sizeof(table)));
	CHECK(cuMemcpyHtoD(c->lens, lens, sizeof(lens)));
	CHECK(cuMemcpyHtoD(c->scale, &scale, sizeof(scale)));
	CHECK(cuMemsetD32(c->out_rerouted, 0x7fc00000, c->out_elems));
	CHECK(cuMemsetD32(c->out_direct, 0x7fc00000, c->out_elems));
	free(q);
	free(cache);
}

/* vLLM's launch: grid (B, cdiv(H, 16), splits), 4 warps, 102400 B. */
static void launch_framework(struct ctx *c)
{
	float sm_scale = 0.0416666f;
	int s[12] = { PAGES_PER, HEADS * DK, DK, PAGE * DK, DK, DK, PAGE * DK, DK, DK,
		      HEADS * SPLITS * (DV + 1), SPLITS * (DV + 1), DV + 1 };
	CUdeviceptr none = 0;
	void *params[23] = { &c->q, &c->cache, &c->cache, &sm_scale, &c->table, &c->lens,
			     &c->out_rerouted };
	int i;

	for (i = 0; i < 12; i++)
		params[7 + i] = &s[i];
	params[19] = &c->scale;
	params[20] = &c->scale;
	params[21] = &none;
	params[22] = &none;
	CHECK(cuLaunchKernel(c->framework, BATCH, 1, SPLITS, 128, 1, 1, 102400, NULL, params, NULL));
}

/* What that launch means, launched on the bundled kernel directly. */
static void launch_direct(struct ctx *c)
{
	struct attn_decode_args a = { 0 };
	void *params[1] = { &a };

	a.q = (const void *)c->q, a.k = (const void *)c->cache, a.v = (const void *)c->cache;
	a.out = (float *)c->out_direct;
	a.block_table = (const int32_t *)c->table, a.seq_lens = (const int32_t *)c->lens;
	a.k_scale = a.v_scale = (const float *)c->scale;
	a.q_stride_b = HEADS * DK, a.q_stride_h = DK;
	a.k_stride_page = a.v_stride_page = PAGE * DK;
	a.k_stride_tok = a.v_stride_tok = DK, a.k_stride_head = a.v_stride_head = DK;
	a.out_stride_b = HEADS * SPLITS * (DV + 1), a.out_stride_h = SPLITS * (DV + 1);
	a.out_stride_s = DV + 1;
	a.block_table_stride = PAGES_PER;
	a.sm_scale = 0.0416666f;
	a.scheme = ATTN_DECODE_VLLM, a.batch = BATCH, a.q_heads = HEADS, a.kv_group = HEADS;
	a.page_size = PAGE;
	CHECK(cuLaunchKernel(c->bundled, 1, SPLITS, BATCH, ATTN_DECODE_THREADS, 1, 1,
			     ATTN_DECODE_MLA_FP8_SMEM, NULL, params, NULL));
}

/* compare - 0 if both outputs are bit-identical and hold a result (not all NaN). */
static int compare(struct ctx *c, const char *what)
{
	uint32_t *x = malloc(c->out_elems * 4), *y = malloc(c->out_elems * 4);
	size_t i, diff = 0, numbers = 0;

	CHECK(cuCtxSetCurrent(c->ctx));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(x, c->out_rerouted, c->out_elems * 4));
	CHECK(cuMemcpyDtoH(y, c->out_direct, c->out_elems * 4));
	for (i = 0; i < c->out_elems; i++) {
		diff += x[i] != y[i];
		numbers += x[i] != 0x7fc00000u;
	}
	printf("%s - %s: %zu of %zu partial outputs differ from the bundled kernel launched "
	       "directly; %zu written\n", diff || !numbers ? "not ok" : "ok", what, diff,
	       c->out_elems, numbers);
	free(x);
	free(y);
	return diff || !numbers;
}

int main(int argc, char **argv)
{
	struct ctx c[16];
	int devices, d, k, n = 0, fails = 0;
	char what[64];

	if (argc < 2) {
		fprintf(stderr, "usage: %s framework_stage1.cubin (under sm120 run --mode reroute)\n",
			argv[0]);
		return 2;
	}
	CHECK(cuInit(0));
	CHECK(cuDeviceGetCount(&devices));
	for (d = 0; d < devices && n + 2 <= 16; d++)
		for (k = 0; k < 2; k++) {
			CUdevice dev;

			CHECK(cuDeviceGet(&dev, d));
			setup(&c[n], dev, argv[1], n);
			n++;
		}
	for (k = 0; k < n; k++) { /* interleaved: each launch in its own context */
		CHECK(cuCtxSetCurrent(c[k].ctx));
		launch_framework(&c[k]);
		launch_direct(&c[k]);
	}
	for (k = 0; k < n; k++) {
		snprintf(what, sizeof(what), "device %d, context %d", k / 2, k % 2);
		fails += compare(&c[k], what);
	}
	return fails ? 1 : 0;
}
