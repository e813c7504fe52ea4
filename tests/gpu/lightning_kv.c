/*
 * lightning_kv.c - lightning_kv_d128_e128_fp32 on a real GPU against a
 * double-precision CPU reference of lightning_kv.h's math (the framework's
 * right-aligned windows), through the Driver API only, loading the fatbin
 * embedded in the shim.
 *
 * Inputs are random fp32 k, v in [-1, 1) and the decays as the framework's
 * host builds them, exp(-s_h * (block - 1 - i)) rounded to fp32, with a
 * distinct slope s_h per head; batch x heads > heads, so the decay row
 * bh % heads is exercised.  Token counts: odd, one block shorter than a
 * sub-block (37: 27 zero rows), one token, exact multiples of the block,
 * one more than a block (the last block holding a single token) and
 * MiniMax-like (1000: the last block 232 tokens, 24 zero rows).  kv is NaN
 * before every launch: a tile left unwritten shows.  Then the contracts:
 * a launch whose num_block is not cdiv(n, block) writes NaN to every tile
 * it indexes (kv poisoned with 12345 there, so a tile left alone shows); an
 * infinite decay on a zero row of a one-block window makes that head's tile
 * NaN (0 * inf, as the framework's masked lanes) and leaves the other
 * head's finite.
 *
 * Tolerance: each output is a sum of w <= 256 products (k * decay) * v, the
 * first rounded to fp32 and then one FFMA per term.  The worst-case error
 * of that fp32 sum is (w + 1) * 2^-24 * sum |terms| (each rounding at most
 * 2^-24 relative, times the number of roundings any term goes through);
 * every output must lie within it of the double reference.  The framework's
 * tl.dot rounds k * decay and v to TF32 (2^-11 relative): its own error is
 * of the order 2^-11 * sum |terms|, 2^13 times this bound.  Also printed:
 * the largest error as a fraction of the bound.
 * LIGHTNING_KV_CASE=n runs case n only (compute-sanitizer).
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/linear/lightning_kv.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

#define D 128
#define E 128
#define BLOCK 256
#define CBLOCK 64
#define POISON_12345 0x4640e400u /* 12345.0f */

/* What a case changes from a plain launch. */
enum twist { PLAIN, BAD_NUM_BLOCK, INF_DECAY };

struct lcase {
	int batch, heads;
	int64_t n;
	enum twist twist;
	const char *what;
};

/* reference - kv[bh][blk] in double, and sum |terms| per element, as lightning_kv.h says. */
static void reference(const struct lcase *c, const float *k, const float *v, const float *dec,
		      int num_block, double *ref, double *mag)
{
	const int bhs = c->batch * c->heads;

	for (int bh = 0; bh < bhs; bh++) {
		for (int blk = 0; blk < num_block; blk++) {
			const int64_t split = blk == num_block - 1 ? c->n - (int64_t)(num_block - 1) * BLOCK
								  : BLOCK;
			const int w = (int)((split + CBLOCK - 1) / CBLOCK) * CBLOCK, shift = w - (int)split;
			double *r = ref + ((size_t)bh * num_block + blk) * D * E;
			double *m = mag + ((size_t)bh * num_block + blk) * D * E;

			memset(r, 0, sizeof(double) * D * E);
			memset(m, 0, sizeof(double) * D * E);
			for (int row = shift; row < w; row++) {
				const int64_t t = (int64_t)blk * BLOCK - shift + row;
				const float *kr = k + ((size_t)bh * c->n + t) * D;
				const float *vr = v + ((size_t)bh * c->n + t) * E;
				const double dd = dec[(size_t)(bh % c->heads) * BLOCK + BLOCK - w + row];

				for (int i = 0; i < D; i++) {
					const double kd = (double)kr[i] * dd;

					for (int j = 0; j < E; j++) {
						r[i * E + j] += kd * vr[j];
						m[i * E + j] += fabs(kd * vr[j]);
					}
				}
			}
		}
	}
}

/* run_case - one launch of @c; returns the number of bad elements. */
static int run_case(CUfunction fn, const struct lcase *c)
{
	const int bhs = c->batch * c->heads;
	const int num_block = (int)((c->n + BLOCK - 1) / BLOCK);
	const size_t n_k = (size_t)bhs * c->n * D, n_v = (size_t)bhs * c->n * E;
	const size_t n_kv = (size_t)bhs * num_block * D * E, n_dec = (size_t)c->heads * BLOCK;
	float *k = malloc(n_k * 4), *v = malloc(n_v * 4), *dec = malloc(n_dec * 4);
	float *kv = malloc(n_kv * 4);
	double *ref = malloc(n_kv * 8), *mag = malloc(n_kv * 8);
	CUdeviceptr d_k, d_v, d_dec, d_kv;
	struct lightning_kv_args a;
	void *params[] = { &a };
	int bad = 0, inf_tile = -1;
	double worst = 0;
	size_t i;

	for (i = 0; i < n_k; i++)
		k[i] = (float)(urand() * 2 - 1);
	for (i = 0; i < n_v; i++)
		v[i] = (float)(urand() * 2 - 1);
	for (int h = 0; h < c->heads; h++) {
		/* MiniMax's slopes are 2^(-8 (h + 1) / heads) scaled per layer: distinct, in (0, 1) */
		const float s = (float)(exp2(-8.0 * (h + 1) / c->heads) * (0.37 + 0.05 * h));

		for (int j = 0; j < BLOCK; j++)
			dec[(size_t)h * BLOCK + j] = expf(-s * (float)(BLOCK - 1 - j));
	}
	if (c->twist == INF_DECAY) {
		/* one block: row 0 of its window is a zero row, its decay no key's */
		const int w = (int)((c->n + CBLOCK - 1) / CBLOCK) * CBLOCK;

		dec[(size_t)1 * BLOCK + BLOCK - w] = INFINITY;
		inf_tile = 1; /* bh 1 */
	}
	CHECK(cuMemAlloc(&d_k, n_k * 4));
	CHECK(cuMemAlloc(&d_v, n_v * 4));
	CHECK(cuMemAlloc(&d_dec, n_dec * 4));
	CHECK(cuMemAlloc(&d_kv, n_kv * 4));
	CHECK(cuMemcpyHtoD(d_k, k, n_k * 4));
	CHECK(cuMemcpyHtoD(d_v, v, n_v * 4));
	CHECK(cuMemcpyHtoD(d_dec, dec, n_dec * 4));
	CHECK(cuMemsetD32(d_kv, c->twist == BAD_NUM_BLOCK ? POISON_12345 : NAN_F32, n_kv));
	a = (struct lightning_kv_args){ (const float *)d_k, (const float *)d_v, (const float *)d_dec,
					(float *)d_kv, c->n, c->heads,
					c->twist == BAD_NUM_BLOCK ? num_block - 1 : num_block, BLOCK,
					CBLOCK, D, E };
	CHECK(cuLaunchKernel(fn, (unsigned)bhs, (unsigned)num_block, 1, LIGHTNING_KV_THREADS, 1, 1,
			     LIGHTNING_KV_SMEM_D128_E128, NULL, params, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(kv, d_kv, n_kv * 4));

	if (c->twist == BAD_NUM_BLOCK) {
		/* num_block - 1: block (bh, blk) writes NaN to tile bh * (num_block - 1) + blk */
		const size_t written = (size_t)(bhs - 1) * (num_block - 1) + num_block;

		for (i = 0; i < n_kv; i++)
			bad += i < written * D * E ? !isnan(kv[i]) : kv[i] != 12345.0f;
		printf("%s - %s: num_block %d for n %lld: the %zu tiles it indexes all NaN, the "
		       "others untouched\n", bad ? "not ok" : "ok", c->what, num_block - 1,
		       (long long)c->n, written);
		goto out;
	}
	reference(c, k, v, dec, num_block, ref, mag);
	for (i = 0; i < n_kv; i++) {
		const int tile = (int)(i / (D * E));
		double err, bound;

		if (tile == inf_tile) {
			bad += !isnan(kv[i]);
			continue;
		}
		err = fabs((double)kv[i] - ref[i]);
		bound = (BLOCK + 1) * ldexp(1.0, -24) * mag[i] + 1e-37;
		if (!(err <= bound)) {
			if (bad < 5)
				printf("#   tile %d element %zu: %.9g, reference %.9g (bound %.3g)\n",
				       tile, i % (D * E), kv[i], ref[i], bound);
			bad++;
		} else if (mag[i] > 0 && err / bound > worst) {
			worst = err / bound;
		}
	}
	printf("%s - %s: %d x %d heads, n %lld (%d blocks), %zu outputs within (w + 1) 2^-24 "
	       "sum|terms| of double%s; largest error %.3f of the bound\n", bad ? "not ok" : "ok",
	       c->what, c->batch, c->heads, (long long)c->n, num_block, n_kv - (size_t)bad,
	       inf_tile >= 0 ? ", the tile with an infinite decay on a zero row all NaN" : "", worst);
out:
	CHECK(cuMemFree(d_k));
	CHECK(cuMemFree(d_v));
	CHECK(cuMemFree(d_dec));
	CHECK(cuMemFree(d_kv));
	free(k);
	free(v);
	free(dec);
	free(kv);
	free(ref);
	free(mag);
	return bad;
}

int main(void)
{
	static const struct lcase cases[] = {
		{ 1, 3, 1000, PLAIN, "MiniMax-like: the last block 232 tokens" },
		{ 2, 3, 37, PLAIN, "one block shorter than a sub-block" },
		{ 1, 2, 1, PLAIN, "one token" },
		{ 1, 2, 512, PLAIN, "two whole blocks" },
		{ 3, 2, 257, PLAIN, "the last block one token" },
		{ 2, 5, 777, PLAIN, "odd n, batch 2" },
		{ 1, 2, 300, BAD_NUM_BLOCK, "contract" },
		{ 1, 2, 44, INF_DECAY, "an infinite decay on a masked row" },
	};
	const char *only = getenv("LIGHTNING_KV_CASE");
	CUmodule mod;
	CUfunction fn;
	int fails = 0;

	mod = gpu_test_module(NULL);
	CHECK(cuModuleGetFunction(&fn, mod, LIGHTNING_KV_D128_E128_FP32));
	CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				 LIGHTNING_KV_SMEM_D128_E128));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!only || atoi(only) == (int)i)
			fails += run_case(fn, &cases[i]) != 0;
	CHECK(cuModuleUnload(mod));
	return fails ? 1 : 0;
}
