/*
 * decode_attn.c - attn_decode_{gqa128,mla}_{bf16,fp8} (split-KV decode,
 * stage 1) on a real GPU against a double-precision CPU reference, through
 * the Driver API only.  The kernels come from the fatbin embedded in the shim
 * or, with an argument, from that cubin or fatbin file:
 *     decode_attn [kernels.cubin]
 *
 * Cases: both addressing schemes (SGLang slots with per-sequence split
 * counts, vLLM block tables with a fixed split count), bf16 and e4m3 caches,
 * GQA 128 (8, 12 and 20 q heads per kv head) and MLA 576/512 (8, 16, 20
 * heads, each cache type: blocks of <= 8 heads, where the kernel's two warp
 * groups share the tiles and merge, and of 9..16, where each takes 8 heads),
 * batches mixing contexts 0, 1, 17, 33, 1000 and 4099, token slots
 * and pages shuffled over a pool whose unused rows hold NaN (reading a wrong
 * row shows; slot 0 and page 0, which the frameworks reserve for padding, are
 * among them), pages of 1, 16, 32 and 64 tokens with and without a gap
 * between pages, padded strides (odd q strides too), splits that come out
 * empty, empty sequences with 0 splits (SGLang's heuristic gives them 0),
 * logit_cap 0 and 30, SGLang's xai temperature, every finite e4m3 encoding
 * class (zero, subnormal, 256..448, which an IEEE-style decoder would turn
 * into inf), e4m3 NaN codes in K and in V, and three impossible launches
 * that must give NaN.  vLLM bf16 cases pass scale pointers != 1, which the
 * bf16 kernels ignore as vLLM does.  Output and lse buffers are filled with a
 * NaN poison pattern before each launch; afterwards every slot the
 * framework's stage 2 reads must hold the right value and every other word
 * must still be poison.
 *
 * With DECODE_ATTN_BENCH=1 in the environment, a benchmark of the MLA kernels
 * in vLLM's configurations follows the checks (see bench()).
 *
 * Tolerance, per (sequence, head, split) of n tokens, with exact scores s_j,
 * w_j = exp(s_j - max s), W = sum w_j and A_d = sum w_j |v_jd| / W:
 * the kernel rounds each p_j to bf16 for P V (8 significant bits: relative
 * error <= 2^-8, the unit roundoff) and divides by the fp32 sum of the
 * unrounded p_j; its scores carry the fp32 error of a length-dk dot product
 * (we allow 4 u = 2^-22 per addition, as tensor-core accumulation is not IEEE
 * round-to-nearest) plus a few roundings (scale, cap, log2 e: 8 u |s|),
 * exp2f adds 2 ulp, P V adds n accumulations of 4 u.  First-order bound for
 * each output:
 *   |o - o_exact| <= A_d (2^-8 + 2 e_s + 2^-21 + (n + 8) 2^-22) + 2^-22 |o|
 * with e_s = max_j (scale * dk 2^-22 sum_i |q_i k_ji| + 8 u |s_j|).  This
 * worst case would hide one wrong token out of thousands, so each case must
 * also be statistically as good as a reference of the same precision: the
 * double reference that rounds w_j to bf16 exactly where the kernel does.
 * Its RMS error against the exact result measures the unavoidable error;
 * the kernel's RMS error must be at most twice that plus the typical fp32
 * accumulation error (2^-22 sqrt(n) A_d, RMS over the case).  The lse must be
 * within 2 e_s + (n + 8) 2^-22 + 2^-22 (|lse| + |max s| + 1) of ln W + max s.
 * e4m3 values are decoded here from the format definition, independently of
 * the kernel.
 */
#include "../../kernels/attention/decode.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

#define POISON 0xffc0deadu /* a NaN the kernel never writes (it writes 0x7fffffff) */
#define U22 (1.0 / 4194304.0)

static int irand(int n) /* [0, n) */
{
	return (int)(urand() * n);
}

/* x rounded to the nearest bf16 (8 significant bits, ties to even). */
static double bf16_round(double x)
{
	int e;
	double m;

	if (x == 0 || !isfinite(x))
		return x;
	m = frexp(x, &e);
	return ldexp(rint(ldexp(m, 8)), e - 8);
}

static float as_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

enum { GQA_BF16, GQA_FP8, MLA_BF16, MLA_FP8, NVARIANTS };

static const struct variant {
	const char *name;
	int dk, dv, fp8, mla, smem;
} variants[NVARIANTS] = {
	{ ATTN_DECODE_GQA128_BF16, 128, 128, 0, 0, ATTN_DECODE_GQA128_BF16_SMEM },
	{ ATTN_DECODE_GQA128_FP8, 128, 128, 1, 0, ATTN_DECODE_GQA128_FP8_SMEM },
	{ ATTN_DECODE_MLA_BF16, 576, 512, 0, 1, ATTN_DECODE_MLA_BF16_SMEM },
	{ ATTN_DECODE_MLA_FP8, 576, 512, 1, 1, ATTN_DECODE_MLA_FP8_SMEM },
};

enum bad_kind {
	BAD_NONE,
	BAD_SPLITS,  /* SGLang num_splits[1] > gridDim.y: sequence 1 all NaN */
	BAD_V_NOT_K, /* MLA with v != k: everything NaN */
	BAD_GRID,    /* gridDim.x one too many: everything NaN */
};

struct tcase {
	const char *what;
	int variant, scheme;
	int nseq;
	int lens[8];
	int q_heads, kv_heads, splits, page_size;
	int page_gap; /* elements between pages beyond page_size rows (16-byte multiple) */
	int head_pad; /* elements after each kv head's dk (16-byte multiple) */
	int out_pad;  /* floats after each split row (SGLang: 0 or dv, keeps off/dv distinct) */
	float cap;
	int xai_len;
	double score_std;  /* target spread of the scaled scores */
	int e_lo, e_hi;    /* e4m3 exponent field range of K/V data */
	double k_scale, v_scale;
	int nan_codes;     /* put e4m3 NaN codes in K of seq 0 and in V of seq 1 */
	int bad;
	int q_pad;         /* elements after each q head (odd: Q pairs not 4-byte aligned) */
};

static const struct tcase cases[] = {
	{ "sglang gqa128 bf16, 16 q / 2 kv heads, 8 splits", GQA_BF16, ATTN_DECODE_SGLANG, 7,
	  { 0, 1, 17, 1000, 4099, 33, 64 }, 16, 2, 8, 1, 0, 0, 0, 0.f, 0, 2.5, 0, 0, 1, 1, 0, BAD_NONE, 0 },
	{ "sglang gqa128 fp8, 24 q / 2 kv heads, 16 splits, logit_cap 30, k_scale folded", GQA_FP8,
	  ATTN_DECODE_SGLANG, 5, { 4099, 1, 0, 17, 1000 }, 24, 2, 16, 1, 0, 16, 128, 30.f, 0, 25.0, 4, 9,
	  0.5, 1, 0, BAD_NONE, 0 },
	{ "sglang gqa128 bf16, 40 q / 2 kv heads (2 head blocks), page 16 + gap, xai 64, odd q stride", GQA_BF16,
	  ATTN_DECODE_SGLANG, 4, { 1000, 17, 300, 1 }, 40, 2, 8, 16, 64, 8, 0, 0.f, 64, 2.5, 0, 0, 1, 1, 0,
	  BAD_NONE, 1 },
	{ "sglang mla bf16, 16 heads, 8 splits", MLA_BF16, ATTN_DECODE_SGLANG, 6, { 1000, 17, 0, 4099, 1, 33 },
	  16, 1, 8, 1, 0, 0, 0, 0.f, 0, 2.5, 0, 0, 1, 1, 0, BAD_NONE, 0 },
	{ "sglang mla fp8, 8 heads, 32 splits, logit_cap 30", MLA_FP8, ATTN_DECODE_SGLANG, 5,
	  { 4099, 33, 1000, 1, 17 }, 8, 1, 32, 1, 0, 0, 512, 30.f, 0, 25.0, 4, 9, 0.25, 1, 0, BAD_NONE, 0 },
	{ "vllm mla bf16, 20 heads (2 head blocks), page 64 contiguous, 8 splits, odd q stride", MLA_BF16,
	  ATTN_DECODE_VLLM, 5, { 1000, 1, 4099, 0, 17 }, 20, 1, 8, 64, 0, 0, 0, 0.f, 0, 2.5, 0, 0, 0.5, 2.0,
	  0, BAD_NONE, 3 },
	{ "vllm mla fp8, 8 heads, page 16 + gap, 16 splits, logit_cap 30, k_scale ptr", MLA_FP8,
	  ATTN_DECODE_VLLM, 6, { 17, 4099, 1000, 1, 0, 33 }, 8, 1, 16, 16, 32, 0, 3, 30.f, 0, 25.0, 4, 9,
	  0.125, 0.125, 0, BAD_NONE, 0 },
	{ "vllm gqa128 fp8, 16 q / 2 kv heads, page 16, k_scale and v_scale ptrs", GQA_FP8,
	  ATTN_DECODE_VLLM, 5, { 1000, 17, 4099, 1, 0 }, 16, 2, 8, 16, 0, 0, 0, 0.f, 0, 2.5, 4, 9, 0.5, 0.75,
	  0, BAD_NONE, 0 },
	{ "vllm gqa128 bf16, 24 q / 2 kv heads, page 32 + gap, 4 splits, padded out", GQA_BF16,
	  ATTN_DECODE_VLLM, 4, { 4099, 33, 1000, 1 }, 24, 2, 4, 32, 16, 8, 5, 0.f, 0, 2.5, 0, 0, 3.0, 5.0, 0,
	  BAD_NONE, 0 },
	{ "vllm gqa128 fp8, every e4m3 exponent incl. subnormal and 256..448", GQA_FP8, ATTN_DECODE_VLLM, 3,
	  { 300, 1000, 17 }, 8, 1, 8, 16, 0, 0, 0, 0.f, 0, 2.5, 0, 15, 1.0 / 64, 1.0 / 32, 0, BAD_NONE, 0 },
	{ "sglang gqa128 fp8, e4m3 NaN codes in K and V", GQA_FP8, ATTN_DECODE_SGLANG, 3, { 100, 300, 50 }, 8,
	  1, 4, 1, 0, 0, 0, 0.f, 0, 2.5, 4, 9, 1, 1, 1, BAD_NONE, 0 },
	{ "vllm mla fp8, 16 heads (one group of warps per 8), page 64 contiguous, 8 splits, e4m3 NaN codes",
	  MLA_FP8, ATTN_DECODE_VLLM, 5, { 4099, 1000, 17, 1, 33 }, 16, 1, 8, 64, 0, 0, 0, 0.f, 0, 2.5, 4, 9, 0.5,
	  0.5, 1, BAD_NONE, 0 },
	{ "sglang mla fp8, 20 heads (2 head blocks), 8 splits, every e4m3 exponent, odd q stride", MLA_FP8,
	  ATTN_DECODE_SGLANG, 4, { 1000, 4099, 1, 300 }, 20, 1, 8, 1, 0, 0, 512, 0.f, 0, 2.5, 0, 15, 1.0 / 32, 1,
	  0, BAD_NONE, 1 },
	{ "vllm mla bf16, 8 heads, page 16 + gap, 16 splits, logit_cap 30", MLA_BF16, ATTN_DECODE_VLLM, 4,
	  { 33, 4099, 1000, 17 }, 8, 1, 16, 16, 32, 0, 0, 30.f, 0, 25.0, 0, 0, 1, 1, 0, BAD_NONE, 0 },
	{ "bad launch: sglang num_splits > gridDim.y gives NaN", MLA_BF16, ATTN_DECODE_SGLANG, 3,
	  { 100, 300, 50 }, 16, 1, 4, 1, 0, 0, 0, 0.f, 0, 2.5, 0, 0, 1, 1, 0, BAD_SPLITS, 0 },
	{ "bad launch: mla with v != k gives NaN", MLA_FP8, ATTN_DECODE_VLLM, 2, { 100, 40 }, 8, 1, 4, 16, 0,
	  0, 0, 0.f, 0, 2.5, 4, 9, 1, 1, 0, BAD_V_NOT_K, 0 },
	{ "bad launch: wrong gridDim.x gives NaN", GQA_BF16, ATTN_DECODE_VLLM, 2, { 100, 40 }, 16, 2, 4, 16,
	  0, 0, 0, 0.f, 0, 2.5, 0, 0, 1, 1, 0, BAD_GRID, 0 },
};

static uint8_t random_e4m3(int e_lo, int e_hi)
{
	int e = e_lo + irand(e_hi - e_lo + 1), m = irand(8);

	if (urand() < 1.0 / 16)
		e = 0; /* subnormals and zero in every case */
	if (e == 15 && m == 7)
		m = 6; /* 0x7f is NaN, not data */
	return (uint8_t)((urand() < 0.5 ? 0x80 : 0) | e << 3 | m);
}

/* Split s of a sequence of len tokens: [*beg, *end). */
static void split_range(const struct tcase *c, int len, int nsplit, int s, long *beg, long *end)
{
	long per;

	if (len == 0)
		per = 0;
	else if (c->scheme == ATTN_DECODE_SGLANG)
		per = ((len + nsplit - 1) / nsplit + 31) / 32 * 32;
	else
		per = (len + c->splits - 1) / c->splits;
	*beg = per * s;
	*end = *beg + per < len ? *beg + per : len;
}

struct stats {
	int bad, checked, nan_slots;
	double worst;             /* max |err| / bound */
	double se_gpu, se_ref, se_floor; /* sums of squares */
};

/* run_case - build, launch, check one case; returns nonzero on failure. */
static int run_case(CUfunction fns[NVARIANTS], const struct tcase *c)
{
	const struct variant *vt = &variants[c->variant];
	const int dk = vt->dk, dv = vt->dv, esz = vt->fp8 ? 1 : 2, P = c->page_size;
	const int kv_heads = vt->mla ? 1 : c->kv_heads, G = c->q_heads / kv_heads;
	const int vllm = c->scheme == ATTN_DECODE_VLLM;
	const double sm = 1.0 / sqrt(vt->mla ? 192.0 : 128.0);
	const double kscale = vt->fp8 ? c->k_scale : 1.0;
	/* vLLM scales V in stage 1 (MLA: with k_scale, V being K); SGLang in its stage 2. */
	const double vscale = vt->fp8 && vllm ? (vt->mla ? c->k_scale : c->v_scale) : 1.0;
	const double scale = sm * kscale; /* SGLang folds k_scale into sm_scale, vLLM passes a pointer */
	int off[9], total = 0, fails = 0;
	struct stats st = { 0 };

	for (int b = 0; b < c->nseq; b++)
		off[b] = total, total += c->lens[b];
	off[c->nseq] = total;

	/* Cache layout: token row = kv_heads x (dk + head_pad); page = P rows + gap. */
	const long hs = dk + c->head_pad, ts = kv_heads * hs, ps = P * ts + c->page_gap;
	int npages, bt_stride = 0;
	long *slot = malloc(sizeof(long) * (total + 1));
	int32_t *bt = NULL, *seq_lens = malloc(sizeof(int32_t) * c->nseq);
	int32_t *indptr = malloc(sizeof(int32_t) * (c->nseq + 1)), *nsplit = malloc(sizeof(int32_t) * c->nseq);
	int64_t *indices = malloc(sizeof(int64_t) * (total + 1));

	if (!vllm) {
		int nslots;

		npages = (total + P - 1) / P + 3;
		nslots = (npages - 1) * P; /* page 0 stays unused, as SGLang reserves slot 0 */
		int *perm = malloc(sizeof(int) * nslots);
		for (int i = 0; i < nslots; i++)
			perm[i] = P + i;
		for (int i = nslots - 1; i > 0; i--) {
			int j = irand(i + 1), x = perm[i];

			perm[i] = perm[j], perm[j] = x;
		}
		for (int i = 0; i < total; i++)
			slot[i] = perm[i], indices[i] = perm[i];
		free(perm);
		for (int b = 0; b <= c->nseq; b++)
			indptr[b] = off[b];
		for (int b = 0; b < c->nseq; b++) /* SGLang's heuristic gives empty sequences 0 */
			nsplit[b] = c->lens[b] ? 1 + irand(c->splits) : 0;
		if (c->bad == BAD_SPLITS)
			nsplit[1] = c->splits + 1;
	} else {
		int need = 0, maxp = 0, *perm, k = 0;

		for (int b = 0; b < c->nseq; b++) {
			int np = (c->lens[b] + P - 1) / P;

			need += np;
			maxp = np > maxp ? np : maxp;
			seq_lens[b] = c->lens[b];
		}
		npages = need + 3;
		bt_stride = maxp + 2;
		bt = calloc((size_t)c->nseq * bt_stride, sizeof(int32_t)); /* padding: page 0 */
		perm = malloc(sizeof(int) * npages);
		for (int i = 0; i < npages - 1; i++)
			perm[i] = i + 1; /* page 0 stays unused, as vLLM's null block */
		for (int i = npages - 2; i > 0; i--) {
			int j = irand(i + 1), x = perm[i];

			perm[i] = perm[j], perm[j] = x;
		}
		for (int b = 0; b < c->nseq; b++)
			for (int p = 0; p < (c->lens[b] + P - 1) / P; p++)
				bt[b * bt_stride + p] = perm[k++];
		for (int b = 0; b < c->nseq; b++)
			for (int pos = 0; pos < c->lens[b]; pos++)
				slot[off[b] + pos] = (long)bt[b * bt_stride + pos / P] * P + pos % P;
		free(perm);
	}

	/* Element offset of (token i, kv head) in the cache: the frameworks' addressing. */
#define ROW_OFF(i, kvh) ((slot[i] / P) * ps + (slot[i] % P) * ts + (long)(kvh) * hs)
	const long pool_elems = (long)npages * ps;
	uint8_t *kpool = malloc((size_t)pool_elems * esz), *vpool = malloc((size_t)pool_elems * esz);
	float *kl = malloc(sizeof(float) * (size_t)(total + 1) * kv_heads * dk);
	float *vl = vt->mla ? kl : malloc(sizeof(float) * (size_t)(total + 1) * kv_heads * dv);
	const long vls = vt->mla ? dk : dv; /* logical V row length */

	/* Unused rows, pads and gaps hold NaN: a wrong read shows. */
	for (long i = 0; i < pool_elems; i++) {
		if (esz == 1) {
			kpool[i] = vpool[i] = 0x7f;
		} else {
			((uint16_t *)kpool)[i] = 0x7fc0;
			((uint16_t *)vpool)[i] = 0x7fc0;
		}
	}
	double ksum2 = 0;
	for (int i = 0; i < total; i++) {
		for (int kvh = 0; kvh < kv_heads; kvh++) {
			long ro = ROW_OFF(i, kvh);

			for (int d = 0; d < dk; d++) {
				float x;

				if (esz == 1) {
					uint8_t code = random_e4m3(c->e_lo, c->e_hi);

					kpool[ro + d] = code;
					x = (float)e4m3_to_double(code);
				} else {
					uint16_t h = bf16_from_double((float)(urand() * 2 - 1));

					((uint16_t *)kpool)[ro + d] = h;
					x = bf16_to_float(h);
				}
				kl[((size_t)i * kv_heads + kvh) * dk + d] = x;
				ksum2 += (double)x * x;
			}
			for (int d = 0; !vt->mla && d < dv; d++) {
				float x;

				if (esz == 1) {
					uint8_t code = random_e4m3(c->e_lo, c->e_hi);

					vpool[ro + d] = code;
					x = (float)e4m3_to_double(code);
				} else {
					uint16_t h = bf16_from_double((float)(urand() * 2 - 1));

					((uint16_t *)vpool)[ro + d] = h;
					x = bf16_to_float(h);
				}
				vl[((size_t)i * kv_heads + kvh) * dv + d] = x;
			}
		}
	}
	if (c->nan_codes) { /* K NaN: seq 0 token 10; V NaN: seq 1 token 5, channel 7 (MLA: K's) */
		kpool[ROW_OFF(off[0] + 10, 0) + 3] = 0x7f;
		kl[((size_t)(off[0] + 10) * kv_heads) * dk + 3] = NAN;
		if (vt->mla) {
			kpool[ROW_OFF(off[1] + 5, 0) + 7] = 0xff;
			kl[((size_t)(off[1] + 5) * kv_heads) * dk + 7] = NAN;
		} else {
			vpool[ROW_OFF(off[1] + 5, 0) + 7] = 0xff;
			vl[((size_t)(off[1] + 5) * kv_heads) * dv + 7] = NAN;
		}
	}

	/* Q: spread chosen so that the scaled scores have about score_std. */
	const double krms = sqrt(ksum2 / ((double)(total > 0 ? total : 1) * kv_heads * dk));
	const double qa = sqrt(3.0) * c->score_std / (scale * sqrt((double)dk) * (krms > 0 ? krms : 1));
	const long qsh = dk + c->q_pad, qsb = (long)c->q_heads * qsh + 64;
	uint16_t *q = malloc(sizeof(uint16_t) * (size_t)c->nseq * qsb);
	double *qd = malloc(sizeof(double) * (size_t)c->nseq * qsb);
	for (long i = 0; i < (long)c->nseq * qsb; i++) {
		q[i] = bf16_from_double((float)((urand() * 2 - 1) * qa));
		qd[i] = bf16_to_float(q[i]);
	}

	/* Partial outputs. */
	const long oss = dv + vllm + c->out_pad, osh = c->splits * oss + (vllm ? 3 : 0), osb = c->q_heads * osh;
	const long out_words = c->nseq * osb + 7;
	long lse_words = 1;
	for (int b = 0; b < c->nseq; b++)
		for (int h = 0; h < c->q_heads; h++)
			for (int s = 0; s < c->splits; s++) {
				long i = (b * osb + h * osh + s * oss) / dv;

				lse_words = i + 1 > lse_words ? i + 1 : lse_words;
			}
	lse_words += 5;
	uint32_t *out = malloc(4 * out_words), *lse = malloc(4 * lse_words);
	char *wrote_o = calloc(out_words, 1), *wrote_l = calloc(lse_words, 1);

	/* Device buffers. */
	CUdeviceptr d_q, d_k, d_v, d_out, d_lse = 0, d_indptr = 0, d_indices = 0, d_nsplit = 0, d_bt = 0,
							 d_seq = 0, d_scales;
	const float scales[2] = { (float)c->k_scale, (float)c->v_scale };
	CHECK(cuMemAlloc(&d_q, sizeof(uint16_t) * c->nseq * qsb));
	CHECK(cuMemAlloc(&d_k, pool_elems * esz + 64));
	CHECK(cuMemAlloc(&d_v, pool_elems * esz + 64));
	CHECK(cuMemAlloc(&d_out, 4 * out_words));
	CHECK(cuMemAlloc(&d_scales, sizeof(scales)));
	CHECK(cuMemcpyHtoD(d_q, q, sizeof(uint16_t) * c->nseq * qsb));
	CHECK(cuMemcpyHtoD(d_k, kpool, pool_elems * esz));
	CHECK(cuMemcpyHtoD(d_v, vpool, pool_elems * esz));
	CHECK(cuMemcpyHtoD(d_scales, scales, sizeof(scales)));
	CHECK(cuMemsetD32(d_out, POISON, out_words));
	if (!vllm) {
		CHECK(cuMemAlloc(&d_lse, 4 * lse_words));
		CHECK(cuMemAlloc(&d_indptr, sizeof(int32_t) * (c->nseq + 1)));
		CHECK(cuMemAlloc(&d_indices, sizeof(int64_t) * (total + 1)));
		CHECK(cuMemAlloc(&d_nsplit, sizeof(int32_t) * c->nseq));
		CHECK(cuMemcpyHtoD(d_indptr, indptr, sizeof(int32_t) * (c->nseq + 1)));
		CHECK(cuMemcpyHtoD(d_indices, indices, sizeof(int64_t) * (total + 1)));
		CHECK(cuMemcpyHtoD(d_nsplit, nsplit, sizeof(int32_t) * c->nseq));
		CHECK(cuMemsetD32(d_lse, POISON, lse_words));
	} else {
		CHECK(cuMemAlloc(&d_bt, sizeof(int32_t) * c->nseq * bt_stride));
		CHECK(cuMemAlloc(&d_seq, sizeof(int32_t) * c->nseq));
		CHECK(cuMemcpyHtoD(d_bt, bt, sizeof(int32_t) * c->nseq * bt_stride));
		CHECK(cuMemcpyHtoD(d_seq, seq_lens, sizeof(int32_t) * c->nseq));
	}

	struct attn_decode_args a;
	memset(&a, 0, sizeof(a));
	a.q = (const void *)d_q;
	a.k = (const void *)d_k;
	a.v = (const void *)(vt->mla ? d_k : d_v);
	if (c->bad == BAD_V_NOT_K)
		a.v = (const void *)(d_k + 16);
	a.out = (float *)d_out;
	a.lse = (float *)d_lse;
	a.kv_indptr = (const int32_t *)d_indptr;
	a.kv_indices = (const int64_t *)d_indices;
	a.num_splits = (const int32_t *)d_nsplit;
	a.block_table = (const int32_t *)d_bt;
	a.seq_lens = (const int32_t *)d_seq;
	if (vllm) { /* vLLM always passes its layer scales; MLA passes k_scale for both */
		a.k_scale = (const float *)d_scales;
		a.v_scale = (const float *)(vt->mla ? d_scales : d_scales + 4);
	}
	a.q_stride_b = qsb, a.q_stride_h = qsh;
	a.k_stride_page = ps, a.k_stride_tok = ts, a.k_stride_head = hs;
	a.v_stride_page = ps, a.v_stride_tok = ts, a.v_stride_head = hs;
	a.out_stride_b = osb, a.out_stride_h = osh, a.out_stride_s = oss;
	a.block_table_stride = bt_stride;
	a.sm_scale = (float)(vllm ? sm : scale);
	a.logit_cap = c->cap;
	a.xai_temperature_len = c->xai_len;
	a.scheme = c->scheme;
	a.batch = c->nseq;
	a.q_heads = c->q_heads;
	a.kv_group = G;
	a.page_size = P;

	void *params[] = { &a };
	const unsigned gx = (unsigned)(kv_heads * ((G + 15) / 16)) + (c->bad == BAD_GRID);
	CHECK(cuFuncSetAttribute(fns[c->variant], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, vt->smem));
	CHECK(cuLaunchKernel(fns[c->variant], gx, (unsigned)c->splits, (unsigned)c->nseq, ATTN_DECODE_THREADS, 1,
			     1, (unsigned)vt->smem, NULL, params, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(out, d_out, 4 * out_words));
	if (!vllm)
		CHECK(cuMemcpyDtoH(lse, d_lse, 4 * lse_words));

	/* Reference and checks. */
	double *sc = malloc(sizeof(double) * (total + 1)), *sabs = malloc(sizeof(double) * (total + 1));
	for (int b = 0; b < c->nseq; b++) {
		const int len = c->lens[b];
		const double temp = c->xai_len > 0 && len - 1 > c->xai_len ? log2(len - 1.0) / log2(c->xai_len) : 1;
		const int seq_bad = c->bad == BAD_V_NOT_K || c->bad == BAD_GRID || (c->bad == BAD_SPLITS && b == 1);

		for (int h = 0; h < c->q_heads; h++) {
			const int kvh = h / G;
			const double *qh = qd + b * qsb + h * qsh;

			for (int j = 0; j < len; j++) {
				const float *kr = kl + ((size_t)(off[b] + j) * kv_heads + kvh) * dk;
				double dot = 0, ab = 0, x;

				for (int d = 0; d < dk; d++)
					dot += qh[d] * kr[d], ab += fabs(qh[d] * kr[d]);
				x = dot * scale;
				if (c->cap > 0)
					x = c->cap * tanh(x / c->cap);
				sc[j] = x * temp;
				sabs[j] = ab * scale * temp;
			}
			for (int s = 0; s < c->splits; s++) {
				const long o_at = b * osb + h * osh + s * oss;
				const long l_at = vllm ? o_at + dv : o_at / dv;
				uint32_t *ol = vllm ? out : lse;
				char *wl = vllm ? wrote_o : wrote_l;
				long beg, end;

				if (seq_bad) { /* every slot NaN (not poison) */
					st.nan_slots++;
					for (int d = 0; d < dv; d++) {
						wrote_o[o_at + d] = 1;
						if (out[o_at + d] == POISON || !isnan(as_float(out[o_at + d])))
							st.bad++;
					}
					wl[l_at] = 1;
					if (ol[l_at] == POISON || !isnan(as_float(ol[l_at])))
						st.bad++;
					continue;
				}
				split_range(c, len, vllm ? c->splits : nsplit[b], s, &beg, &end);
				if (beg >= end)
					continue; /* must stay poison: checked below */

				const int n = (int)(end - beg);
				double mx = -INFINITY, W = 0, es = 0;
				int row_nan = 0;
				for (long j = beg; j < end; j++) {
					if (isnan(sc[j]))
						row_nan = 1;
					else
						mx = fmax(mx, sc[j]);
				}
				for (long j = beg; j < end; j++) {
					W += exp(sc[j] - mx);
					es = fmax(es, sabs[j] * dk * U22 + 8 * U22 / 4 * fabs(sc[j]));
				}
				for (int d = 0; d < dv; d++) {
					double num = 0, num_r = 0, mag = 0, got = as_float(out[o_at + d]);

					for (long j = beg; j < end; j++) {
						const double w = exp(sc[j] - mx);
						const double v = vl[((size_t)(off[b] + j) * kv_heads + kvh) * vls + d];

						num += w * v, num_r += bf16_round(w) * v, mag += w * fabs(v);
					}
					const double want = vscale * num / W, ref = vscale * num_r / W, A = vscale * mag / W;
					const double bound = A * (1.0 / 256 + 2 * es + 2 * U22 + (n + 8) * U22) +
							     U22 * fabs(want);

					wrote_o[o_at + d] = 1;
					if (row_nan || isnan(want)) {
						st.nan_slots += d == 0;
						if (!isnan(got) || out[o_at + d] == POISON) {
							if (st.bad++ < 5)
								fprintf(stderr, "  out[%d,%d,%d,%d] = %g, want NaN\n", b,
									h, s, d, got);
						}
						continue;
					}
					st.checked++;
					if (!(fabs(got - want) <= bound)) {
						if (st.bad++ < 5)
							fprintf(stderr, "  out[%d,%d,%d,%d] = %.8g, want %.8g (bound %.3g)\n",
								b, h, s, d, got, want, bound);
						continue;
					}
					st.worst = fmax(st.worst, bound > 0 ? fabs(got - want) / bound : 0);
					st.se_gpu += (got - want) * (got - want);
					st.se_ref += (ref - want) * (ref - want);
					st.se_floor += U22 * U22 * n * A * A;
				}
				{
					const double want = mx + log(W), got = as_float(ol[l_at]);
					const double bound = 2 * es + (n + 8) * U22 + U22 * (fabs(want) + fabs(mx) + 1);

					wl[l_at] = 1;
					if (row_nan) {
						if (!isnan(got) || ol[l_at] == POISON)
							st.bad++;
					} else if (!(fabs(got - want) <= bound)) {
						if (st.bad++ < 5)
							fprintf(stderr, "  lse[%d,%d,%d] = %.8g, want %.8g (bound %.3g)\n", b,
								h, s, got, want, bound);
					}
				}
			}
		}
	}
	/* Nothing else touched. */
	int stray = 0;
	for (long i = 0; i < out_words; i++)
		stray += !wrote_o[i] && out[i] != POISON;
	for (long i = 0; !vllm && i < lse_words; i++)
		stray += !wrote_l[i] && lse[i] != POISON;
	if (stray)
		fprintf(stderr, "  %d words outside the written slots changed\n", stray);

	const double rms_gpu = sqrt(st.se_gpu / (st.checked ? st.checked : 1));
	const double rms_ref = sqrt(st.se_ref / (st.checked ? st.checked : 1));
	const double rms_floor = sqrt(st.se_floor / (st.checked ? st.checked : 1));
	const int stat_fail = rms_gpu > 2 * rms_ref + rms_floor;
	if (stat_fail)
		fprintf(stderr, "  rms error %.3g > 2 x same-precision reference %.3g + fp32 floor %.3g\n", rms_gpu,
			rms_ref, rms_floor);
	fails = st.bad || stray || stat_fail;
	printf("%s %s: %d values, %d NaN slots, %d bad, %d stray; worst err/bound %.3f, rms err %.3g "
	       "(bf16-P reference %.3g)\n",
	       fails ? "not ok -" : "ok -", c->what, st.checked, st.nan_slots, st.bad, stray, st.worst, rms_gpu,
	       rms_ref);

	cuMemFree(d_q), cuMemFree(d_k), cuMemFree(d_v), cuMemFree(d_out), cuMemFree(d_scales);
	if (!vllm)
		cuMemFree(d_lse), cuMemFree(d_indptr), cuMemFree(d_indices), cuMemFree(d_nsplit);
	else
		cuMemFree(d_bt), cuMemFree(d_seq);
	free(sc), free(sabs), free(out), free(lse), free(wrote_o), free(wrote_l), free(q), free(qd);
	free(kpool), free(vpool), free(kl);
	if (!vt->mla)
		free(vl);
	free(slot), free(bt), free(seq_lens), free(indptr), free(nsplit), free(indices);
#undef ROW_OFF
	return fails;
}

/*
 * DECODE_ATTN_BENCH=1: the MLA kernels alone, as vLLM launches them (8 q
 * heads, pages of 64 tokens shuffled over the pool, NUM_KV_SPLITS splits),
 * FP8 and bf16 cache, timed with events.  "warm": the average of 20
 * back-to-back launches (KV that fits in L2 stays there); "cold": the median
 * of 9 single launches, each after writing a 256 MiB buffer, which evicts L2.
 * GB/s counts the KV bytes read once: batch * ctx * 576 * element size.
 */
static void bench(CUfunction fns[NVARIANTS])
{
	static const struct {
		int batch, ctx, splits;
	} cfgs[] = { { 1, 32768, 64 }, { 1, 4096, 8 }, { 32, 8192, 16 }, { 256, 4096, 8 } };
	static const int vars[] = { MLA_FP8, MLA_BF16 };
	const int heads = 8, P = 64, dk = 576, dv = 512;
	CUdeviceptr d_flush;
	CUevent e0, e1;

	CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
	CHECK(cuMemAlloc(&d_flush, 256u << 20));
	printf("# bench: vLLM MLA decode stage 1, %d q heads, page %d; block %d threads, grid (1, splits, batch)\n",
	       heads, P, ATTN_DECODE_THREADS);
	for (size_t vi = 0; vi < sizeof(vars) / sizeof(vars[0]); vi++) {
		const struct variant *vt = &variants[vars[vi]];
		const int esz = vt->fp8 ? 1 : 2;

		CHECK(cuFuncSetAttribute(fns[vars[vi]], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, vt->smem));
		for (size_t ci = 0; ci < sizeof(cfgs) / sizeof(cfgs[0]); ci++) {
			const int B = cfgs[ci].batch, ctx = cfgs[ci].ctx, S = cfgs[ci].splits;
			const int ppseq = (ctx + P - 1) / P, npages = B * ppseq + 1;
			const size_t kv_bytes = (size_t)npages * P * dk * esz;
			const size_t q_elems = (size_t)B * heads * dk, out_floats = (size_t)B * heads * S * (dv + 1);
			int32_t *bt = malloc(sizeof(int32_t) * B * ppseq), *lens = malloc(sizeof(int32_t) * B);
			int *perm = malloc(sizeof(int) * (npages - 1));
			uint16_t *q = malloc(sizeof(uint16_t) * q_elems);
			CUdeviceptr d_kv, d_q, d_out, d_bt, d_lens, d_scale;
			const float one = 1.f;
			float ms, t[9];

			for (int i = 0; i < npages - 1; i++)
				perm[i] = i + 1; /* page 0: vLLM's null block */
			for (int i = npages - 2; i > 0; i--) {
				int j = irand(i + 1), x = perm[i];

				perm[i] = perm[j], perm[j] = x;
			}
			for (int i = 0; i < B * ppseq; i++)
				bt[i] = perm[i];
			for (int b = 0; b < B; b++)
				lens[b] = ctx;
			for (size_t i = 0; i < q_elems; i++)
				q[i] = bf16_from_double((float)(urand() * 2 - 1));
			CHECK(cuMemAlloc(&d_kv, kv_bytes));
			CHECK(cuMemAlloc(&d_q, sizeof(uint16_t) * q_elems));
			CHECK(cuMemAlloc(&d_out, sizeof(float) * out_floats));
			CHECK(cuMemAlloc(&d_bt, sizeof(int32_t) * B * ppseq));
			CHECK(cuMemAlloc(&d_lens, sizeof(int32_t) * B));
			CHECK(cuMemAlloc(&d_scale, sizeof(float)));
			/* finite data: e4m3 bytes 0x30..0x3b / bf16 around +-0.1 */
			CHECK(cuMemsetD32(d_kv, vt->fp8 ? 0x3b3430b8u : 0x3dcdbdcdu, kv_bytes / 4));
			CHECK(cuMemcpyHtoD(d_q, q, sizeof(uint16_t) * q_elems));
			CHECK(cuMemcpyHtoD(d_bt, bt, sizeof(int32_t) * B * ppseq));
			CHECK(cuMemcpyHtoD(d_lens, lens, sizeof(int32_t) * B));
			CHECK(cuMemcpyHtoD(d_scale, &one, sizeof(float)));

			struct attn_decode_args a;
			memset(&a, 0, sizeof(a));
			a.q = (const void *)d_q;
			a.k = a.v = (const void *)d_kv;
			a.out = (float *)d_out;
			a.block_table = (const int32_t *)d_bt;
			a.seq_lens = (const int32_t *)d_lens;
			a.k_scale = a.v_scale = (const float *)d_scale;
			a.q_stride_b = (int64_t)heads * dk, a.q_stride_h = dk;
			a.k_stride_page = a.v_stride_page = (int64_t)P * dk;
			a.k_stride_tok = a.v_stride_tok = dk;
			a.k_stride_head = a.v_stride_head = dk;
			a.out_stride_b = (int64_t)heads * S * (dv + 1), a.out_stride_h = (int64_t)S * (dv + 1);
			a.out_stride_s = dv + 1;
			a.block_table_stride = ppseq;
			a.sm_scale = (float)(1.0 / sqrt(192.0));
			a.scheme = ATTN_DECODE_VLLM;
			a.batch = B, a.q_heads = heads, a.kv_group = heads, a.page_size = P;
			void *params[] = { &a };
			const unsigned gx = (heads + ATTN_DECODE_HEADS_PER_BLOCK - 1) / ATTN_DECODE_HEADS_PER_BLOCK;
#define LAUNCH()                                                                                       \
	CHECK(cuLaunchKernel(fns[vars[vi]], gx, (unsigned)S, (unsigned)B, ATTN_DECODE_THREADS, 1, 1,   \
			     (unsigned)vt->smem, NULL, params, NULL))

			for (int i = 0; i < 3; i++)
				LAUNCH();
			CHECK(cuEventRecord(e0, NULL));
			for (int i = 0; i < 20; i++)
				LAUNCH();
			CHECK(cuEventRecord(e1, NULL));
			CHECK(cuEventSynchronize(e1));
			CHECK(cuEventElapsedTime(&ms, e0, e1));
			ms /= 20;
			for (int i = 0; i < 9; i++) {
				CHECK(cuMemsetD32(d_flush, (unsigned)i, (256u << 20) / 4));
				CHECK(cuEventRecord(e0, NULL));
				LAUNCH();
				CHECK(cuEventRecord(e1, NULL));
				CHECK(cuEventSynchronize(e1));
				CHECK(cuEventElapsedTime(&t[i], e0, e1));
			}
#undef LAUNCH
			for (int i = 1; i < 9; i++) /* insertion sort: median */
				for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
					float x = t[j];

					t[j] = t[j - 1], t[j - 1] = x;
				}
			{
				const double bytes = (double)B * ctx * dk * esz;

				printf("bench %-20s batch %3d ctx %5d splits %2d (%4d blocks): warm %.4f ms %6.0f GB/s, "
				       "cold %.4f ms %6.0f GB/s\n",
				       vt->name, B, ctx, S, (int)gx * S * B, ms, bytes / (ms * 1e6), t[4],
				       bytes / (t[4] * 1e6));
			}
			cuMemFree(d_kv), cuMemFree(d_q), cuMemFree(d_out), cuMemFree(d_bt), cuMemFree(d_lens);
			cuMemFree(d_scale);
			free(bt), free(lens), free(perm), free(q);
		}
	}
	cuMemFree(d_flush);
	cuEventDestroy(e0), cuEventDestroy(e1);
}

int main(int argc, char **argv)
{
	CUmodule mod;
	CUfunction fns[NVARIANTS];
	int fails = 0;

	mod = gpu_test_module(argc > 1 ? argv[1] : NULL);
	for (int i = 0; i < NVARIANTS; i++)
		CHECK(cuModuleGetFunction(&fns[i], mod, variants[i].name));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fails += run_case(fns, &cases[i]) != 0;
	if (getenv("DECODE_ATTN_BENCH") && atoi(getenv("DECODE_ATTN_BENCH")) > 0)
		bench(fns);
	CHECK(cuModuleUnload(mod));
	return fails ? 1 : 0;
}
