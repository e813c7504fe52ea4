/*
 * decode_merge.c - attn_decode_merge_bf16 on a real GPU against a CPU
 * reference, through the Driver API only, loading the fatbin embedded in the
 * shim (so this also proves the bundle loads on a real driver).
 *
 * Inputs are random with odd sizes: several sequences using 0, 1, some and
 * all splits, empty (-inf) splits among them, dv 128 (GQA) and 512 (MLA).
 * The output is poisoned with NaN before each launch.
 *
 * Tolerance: the GPU accumulates n <= 64 weighted terms in fp32 and rounds
 * once to bf16; the reference is computed in double.  The fp32 sum's error is
 * bounded by n * 2^-24 * sum|terms| (plus expf's few ulp per weight), which is
 * relative to the terms' magnitude, not to the result: with inputs of both
 * signs the result can cancel to far below them.  So each output must lie
 * within half a bf16 ulp of the exact value plus n * 2^-23 * sum|terms| /
 * sum(weights).  The merged lse is fp32: 1e-5 relative.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/attention/decode_merge.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

struct shape {
	int batch, heads, max_splits, dv;
};

/* run_case - one launch; returns the number of bad elements. */
static int run_case(CUfunction fn, struct shape sh, int bad_launch)
{
	size_t n_po = (size_t)sh.batch * sh.heads * sh.max_splits * sh.dv;
	size_t n_lse = (size_t)sh.batch * sh.heads * sh.max_splits;
	size_t n_out = (size_t)sh.batch * sh.heads * sh.dv;
	float *po = malloc(n_po * 4), *lse = malloc(n_lse * 4), *lse_out = malloc((size_t)sh.batch * sh.heads * 4);
	int32_t *ns = malloc((size_t)sh.batch * 4);
	uint16_t *out = malloc(n_out * 2);
	CUdeviceptr d_po, d_lse, d_ns, d_out, d_lse_out;
	struct attn_merge_args a;
	void *params[] = { &a };
	int bad = 0, exact = 0;
	size_t i;

	for (i = 0; i < n_po; i++)
		po[i] = (float)(urand() * 4 - 2);
	for (i = 0; i < n_lse; i++)
		lse[i] = urand() < 0.15 ? -INFINITY : (float)(urand() * 20 - 10);
	for (int b = 0; b < sh.batch; b++)
		ns[b] = b == 0 ? 0 : b == 1 ? 1 : b == 2 ? sh.max_splits : 1 + (int)(urand() * sh.max_splits);
	CHECK(cuMemAlloc(&d_po, n_po * 4));
	CHECK(cuMemAlloc(&d_lse, n_lse * 4));
	CHECK(cuMemAlloc(&d_ns, (size_t)sh.batch * 4));
	CHECK(cuMemAlloc(&d_out, n_out * 2));
	CHECK(cuMemAlloc(&d_lse_out, (size_t)sh.batch * sh.heads * 4));
	CHECK(cuMemcpyHtoD(d_po, po, n_po * 4));
	CHECK(cuMemcpyHtoD(d_lse, lse, n_lse * 4));
	CHECK(cuMemcpyHtoD(d_ns, ns, (size_t)sh.batch * 4));
	CHECK(cuMemsetD16(d_out, 0x7fc0, n_out));             /* bf16 NaN */
	CHECK(cuMemsetD32(d_lse_out, 0x7fc00000, (size_t)sh.batch * sh.heads));
	a = (struct attn_merge_args){ (const float *)d_po, (const float *)d_lse, (const int32_t *)d_ns,
				      (void *)d_out, (float *)d_lse_out, sh.batch, sh.heads,
				      bad_launch ? ATTN_MERGE_MAX_SPLITS + 1 : sh.max_splits, sh.dv };
	CHECK(cuLaunchKernel(fn, (unsigned)sh.batch, (unsigned)sh.heads, 1, ATTN_MERGE_THREADS, 1, 1, 0, NULL,
			     params, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(out, d_out, n_out * 2));
	CHECK(cuMemcpyDtoH(lse_out, d_lse_out, (size_t)sh.batch * sh.heads * 4));

	for (int b = 0; b < sh.batch; b++) {
		for (int h = 0; h < sh.heads; h++) {
			size_t row = (size_t)b * sh.heads + h;
			const float *l = lse + row * sh.max_splits;
			double m = -INFINITY, sum = 0, want_lse;

			for (int s = 0; s < ns[b]; s++)
				m = fmax(m, l[s]);
			for (int s = 0; s < ns[b] && m > -INFINITY; s++)
				sum += exp((double)l[s] - m);
			want_lse = sum > 0 ? m + log(sum) : -INFINITY;
			if (bad_launch) {
				bad += !isnan(lse_out[row]);
			} else if (isinf(want_lse) ? lse_out[row] != -INFINITY :
				   fabs(lse_out[row] - want_lse) > 1e-5 * fmax(1, fabs(want_lse))) {
				if (bad++ < 5)
					fprintf(stderr, "  lse[%d,%d] = %g, want %g\n", b, h, lse_out[row], want_lse);
			}
			for (int d = 0; d < sh.dv; d++) {
				double want = 0, mag = 0, got = bf16_to_float(out[row * sh.dv + d]);

				for (int s = 0; s < ns[b] && sum > 0; s++) {
					double t = exp((double)l[s] - m) * po[(row * sh.max_splits + s) * sh.dv + d];

					want += t;
					mag += fabs(t);
				}
				want = sum > 0 ? want / sum : 0;
				mag = sum > 0 ? ns[b] * ldexp(mag / sum, -23) : 0;
				if (bad_launch) {
					bad += !isnan(got);
					continue;
				}
				if (isnan(got) || fabs(got - want) > 0.5 * bf16_ulp(want) + mag) {
					if (bad++ < 5)
						fprintf(stderr, "  out[%d,%d,%d] = %.6g, want %.6g\n", b, h, d, got, want);
				} else if (fabs(got - want) <= 0.5 * bf16_ulp(want)) {
					exact++;
				}
			}
		}
	}
	if (bad_launch)
		printf("%s %d splits (over the %d supported): %d of %zu outputs and lses not NaN\n",
		       bad ? "not ok -" : "ok -", ATTN_MERGE_MAX_SPLITS + 1, ATTN_MERGE_MAX_SPLITS, bad,
		       n_out + (size_t)sh.batch * sh.heads);
	else
		printf("%s batch %d heads %d splits %d dv %d: %d bad of %zu, %d correctly rounded\n",
		       bad ? "not ok -" : "ok -", sh.batch, sh.heads, sh.max_splits, sh.dv, bad, n_out,
		       exact);
	cuMemFree(d_po);
	cuMemFree(d_lse);
	cuMemFree(d_ns);
	cuMemFree(d_out);
	cuMemFree(d_lse_out);
	free(po);
	free(lse);
	free(lse_out);
	free(ns);
	free(out);
	return bad;
}

int main(void)
{
	static const struct shape shapes[] = {
		{ 7, 5, 13, 512 },  /* MLA absorbed value width */
		{ 5, 3, 64, 128 },  /* GQA, the most splits */
		{ 3, 1, 1, 72 },    /* one split, dv not a multiple of the block */
		{ 9, 17, 8, 576 },
	};
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	size_t len;
	const void *fatbin = bundle_fatbin(&len);
	int fails = 0;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, fatbin));
	CHECK(cuModuleGetFunction(&fn, mod, ATTN_MERGE_KERNEL));
	printf("ok - bundled fatbin (%zu bytes) loaded, %s found\n", len, ATTN_MERGE_KERNEL);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		fails += run_case(fn, shapes[i], 0) != 0;
	/* More splits than the kernel supports: NaN everywhere, never a plausible number. */
	fails += run_case(fn, (struct shape){ 2, 2, 4, 128 }, 1) != 0;
	CHECK(cuModuleUnload(mod));
	return fails ? 1 : 0;
}
