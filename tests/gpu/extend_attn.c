/*
 * extend_attn.c - the extend attention kernels (kernels/attention/extend.cu)
 * on a real GPU against a double-precision CPU reference, through the Driver
 * API only.  Kernels come from the fatbin embedded in the shim, or from the
 * cubin named by argv[1] (standalone use: nvcc -cubin extend.cu).
 *
 * Inputs are random, with odd sizes: prefixes of 0, 1 and 2211 keys, extends
 * of 1, 17 and 1000 tokens, several sequences of different lengths per
 * launch starting at a non-zero qo_indptr, kv_indices shuffled over the slot
 * pool, all four head-size pairs, bf16 and FP8 E4M3 prefixes with non-unit
 * k_scale / v_scale, causal and non-causal, logit cap, the LSE output,
 * padded (non-contiguous) strides and v aliasing the first lv channels of k.
 * Everything the kernel must not read is NaN: stride padding, slots that no
 * kv_indices entry names, rows outside the batch, unused kv_indices entries
 * (they name the NaN slot 0).  The output is NaN before each launch; rows
 * outside the batch and stride padding must still hold that exact pattern.
 * Impossible arguments and a grid too small must give NaN, not numbers.
 *
 * Tolerance, derived per output element from the same inputs (u = 2^-24;
 * u' = 2^-23 for tensor-core sums, whose rounding is not guaranteed
 * round-to-nearest).  The kernel rounds each probability p_j (times v_scale)
 * to bf16 before P.V, as SGLang's kernel does (p.to(v.dtype)): relative
 * error <= 2^-8 per term (the unit roundoff of an 8-bit significand), so
 * the numerator of o = sum p w / sum p moves by at most 2^-8 * A, with
 * A = sum p_j |w_j| / sum p_j; the denominator uses the fp32 p.  A reference
 * that rounds p the same way (checked by hand on the emulator) agrees to
 * within the final rounding.  The rest is fp32: the score sums over D
 * channels (|err| <= D u' ||q|| ||k|| * scale, Cauchy-Schwarz), scaling,
 * exp2 (ex2.approx, taken as relative 2^-21) and the subtraction of the
 * running max give each p_j a relative error eta, which moves o by <= 2 eta A;
 * the fp32 sums of P.V and of l over n keys, with one rescale per tile,
 * add (2n + 2 tiles + 16) u' A.  With E = (2^-8 + 2 eta + (2n + 2 tiles +
 * 16) u') A (1 + 2^-8), each output must be within E + half a bf16 ulp of
 * |o| + E of the exact value; the count of correctly rounded outputs is
 * printed as a sanity figure.  The bound is relative to A, not to |o|:
 * values of both signs cancel.  LSE: eta + (n + 2 tiles + 16) u' + 8 u |lse|.
 * Large cases check sampled rows against the reference (first and last 40
 * tokens of each sequence, every 37th) and all rows for finiteness, to keep
 * the CPU reference at a few seconds.  EXTEND_ATTN_CASE=n runs case n only;
 * EXTEND_ATTN_BENCH=1 adds timed Kimi K2 / GLM-4.x sized launches (bench()).
 */
#include "../../kernels/attention/extend.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

#define NAN_E4M3 0x7f
#define FRONT 3 /* rows before the batch */
#define BACK 5  /* rows after it */

static double srand1(void) /* [-1, 1) */
{
	return urand() * 2 - 1;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* A random finite E4M3 code, |value| < 16, zeros and subnormals included. */
static uint8_t e4m3_rand(void)
{
	const int e = (int)(urand() * 11), m = (int)(urand() * 8);

	return (uint8_t)((urand() < 0.5 ? 0x80 : 0) | e << 3 | m);
}

/* ------------------------------------------------------------ cases */

struct kind {
	const char *name;
	int lq, lv, rows, smem, fp8;
};

static const struct kind kinds[] = {
	{ ATTN_EXTEND_MLA576_BF16, 576, 512, ATTN_EXTEND_ROWS_MLA576, ATTN_EXTEND_SMEM_MLA576, 0 },
	{ ATTN_EXTEND_MLA576_FP8, 576, 512, ATTN_EXTEND_ROWS_MLA576, ATTN_EXTEND_SMEM_MLA576, 1 },
	{ ATTN_EXTEND_192_BF16, 192, 128, ATTN_EXTEND_ROWS_192, ATTN_EXTEND_SMEM_192, 0 },
	{ ATTN_EXTEND_192_FP8, 192, 128, ATTN_EXTEND_ROWS_192, ATTN_EXTEND_SMEM_192, 1 },
	{ ATTN_EXTEND_128_BF16, 128, 128, ATTN_EXTEND_ROWS_128, ATTN_EXTEND_SMEM_128, 0 },
	{ ATTN_EXTEND_128_FP8, 128, 128, ATTN_EXTEND_ROWS_128, ATTN_EXTEND_SMEM_128, 1 },
	{ ATTN_EXTEND_256_BF16, 256, 256, ATTN_EXTEND_ROWS_256, ATTN_EXTEND_SMEM_256, 0 },
};
enum { MLA_BF16, MLA_FP8, D192_BF16, D192_FP8, D128_BF16, D128_FP8, D256_BF16, NKINDS };

enum bad { GOOD, BAD_LQ, BAD_STRIDE, SMALL_GRID };

struct tcase {
	const char *what;
	int kind, kv_heads, group;
	unsigned flags;
	double logit_cap, k_scale, v_scale, q_amp;
	int lse, alias_v, padded, sample;
	enum bad bad;
	int nseq;
	int prefix[4], extend[4];
};

#define C ATTN_EXTEND_CAUSAL
static const struct tcase cases[] = {
	{ "mla576 bf16 causal, 8 heads (Kimi K2 TP8), v = k[:512]", MLA_BF16, 1, 8, C, 0, 1, 1, 3, 1, 1, 0, 0,
	  GOOD, 3, { 0, 1, 130 }, { 17, 1, 77 } },
	{ "mla576 bf16 causal, 2 heads, prefix 2211 extend 1000", MLA_BF16, 1, 2, C, 0, 1, 1, 3, 0, 1, 0, 1,
	  GOOD, 2, { 2211, 37 }, { 1000, 64 } },
	{ "mla576 fp8 causal, 16 heads (DeepSeek-V3 TP8), scales, padded strides", MLA_FP8, 1, 16, C, 0, 0.37,
	  0.61, 3, 1, 0, 1, 0, GOOD, 3, { 300, 0, 2211 }, { 45, 1, 17 } },
	{ "mla576 fp8 causal, 13 heads, scales, int64 qo_indptr (SGLang's Triton backend from 0.5.10)",
	  MLA_FP8, 1, 13, C | ATTN_EXTEND_QO_I64, 0, 0.73, 1.37, 3, 1, 1, 0, 0, GOOD, 3, { 77, 0, 300 },
	  { 130, 45, 1 } },
	{ "mla576 fp8 non-causal, 3 heads, logit cap 5", MLA_FP8, 1, 3, 0, 5, 0.25, 0.5, 8, 1, 1, 0, 0, GOOD, 3,
	  { 64, 1, 0 }, { 100, 17, 5 } },
	{ "mla576 bf16 causal, skip prefix", MLA_BF16, 1, 4, C | ATTN_EXTEND_SKIP_PREFIX, 0, 1, 1, 3, 1, 1, 0, 0,
	  GOOD, 2, { 100, 7 }, { 33, 2 } },
	{ "128 bf16 causal GQA 2x4 heads, k/v scales, prefix 2211 extend 1000", D128_BF16, 2, 4, C, 0, 0.75, 1.25,
	  3, 1, 0, 1, 1, GOOD, 3, { 2211, 0, 1 }, { 1000, 17, 1 } },
	{ "128 fp8 non-causal, 12 heads per kv head (GLM-4.x TP8)", D128_FP8, 1, 12, 0, 0, 0.3, 0.45, 3, 1, 0, 0,
	  0, GOOD, 3, { 517, 0, 5 }, { 130, 17, 1 } },
	{ "128 bf16 causal MHA 3 heads, logit cap 30", D128_BF16, 3, 1, C, 30, 1, 1, 12, 0, 0, 1, 0, GOOD, 2,
	  { 70, 0 }, { 200, 65 } },
	{ "128 fp8 skip extend (empty rows give NaN as in SGLang)", D128_FP8, 1, 2, ATTN_EXTEND_SKIP_EXTEND, 0,
	  0.5, 0.5, 3, 1, 0, 0, 0, GOOD, 2, { 100, 0 }, { 20, 3 } },
	{ "192 bf16 causal MLA prefill without prefix, extend 1000", D192_BF16, 3, 1, C, 0, 1, 1, 3, 1, 0, 0, 1,
	  GOOD, 3, { 0, 0, 0 }, { 1000, 17, 1 } },
	{ "192 fp8 causal with prefix, padded strides", D192_FP8, 2, 1, C, 0, 0.4, 0.7, 3, 0, 0, 1, 0, GOOD, 2,
	  { 2211, 1 }, { 17, 130 } },
	{ "192 bf16 non-causal, 2 heads per kv head", D192_BF16, 1, 2, 0, 0, 1, 1, 3, 1, 0, 0, 0, GOOD, 2,
	  { 63, 64 }, { 65, 64 } },
	{ "mla576 lq mismatch gives NaN", MLA_BF16, 1, 8, C, 0, 1, 1, 3, 1, 1, 0, 0, BAD_LQ, 2, { 5, 0 },
	  { 9, 3 } },
	{ "128 misaligned q stride gives NaN", D128_BF16, 1, 2, C, 0, 1, 1, 3, 1, 0, 0, 0, BAD_STRIDE, 1, { 5 },
	  { 9 } },
	{ "128 grid too small: uncovered rows NaN, covered rows right", D128_BF16, 1, 4, C, 0, 1, 1, 3, 1, 0, 0,
	  0, SMALL_GRID, 2, { 40, 3 }, { 70, 20 } },
	{ "256 bf16 causal GQA 2x6 heads, prefix, k/v scales, padded strides", D256_BF16, 2, 6, C, 0, 0.8, 1.3,
	  3, 1, 0, 1, 0, GOOD, 3, { 130, 0, 1 }, { 333, 17, 64 } },
	{ "256 bf16 non-causal MHA 4 heads, skip prefix (SGLang context_attention_fwd)", D256_BF16, 4, 1,
	  ATTN_EXTEND_SKIP_PREFIX, 0, 1, 1, 3, 0, 0, 0, 1, GOOD, 3, { 5, 0, 9 }, { 1025, 1, 64 } },
};
#undef C

/* ------------------------------------------------------------ one case */

struct host {
	int T, Hq, Hkv, lq, lv, S, nidx;
	int64_t q_tok, q_head, kx_tok, kx_head, vx_tok, vx_head, o_tok, o_head;
	int64_t kb_slot, kb_head, vb_slot, vb_head, lse_tok;
	uint16_t *q, *kx, *vx, *o;
	uint8_t *kb, *vb; /* bf16 (2 bytes per element) or e4m3 */
	float *lse;
	int32_t qo[5], kvp[5];
	int64_t *idx;
	size_t n_q, n_kx, n_vx, n_o, n_kb, n_vb, n_lse;
	/* for the reference: the inputs as doubles, same layouts, and key norms */
	double *kbd, *vbd, *kxd, *vxd, *kbn, *kxn;
};

/* decode - the reference's copy of the inputs (NaN where the kernel must not look). */
static void decode(struct host *hs, int fp8)
{
	const uint16_t *kb = (const uint16_t *)hs->kb, *vb = (const uint16_t *)hs->vb;

	hs->kbd = malloc(hs->n_kb * sizeof(double));
	hs->vbd = malloc(hs->n_vb * sizeof(double));
	hs->kxd = malloc(hs->n_kx * sizeof(double));
	hs->vxd = malloc(hs->n_vx * sizeof(double));
	hs->kbn = malloc((size_t)hs->S * hs->Hkv * sizeof(double));
	hs->kxn = malloc((size_t)hs->T * hs->Hkv * sizeof(double));
	for (size_t i = 0; i < hs->n_kb; i++)
		hs->kbd[i] = fp8 ? e4m3_to_double(hs->kb[i]) : (double)bf16_to_float(kb[i]);
	for (size_t i = 0; i < hs->n_vb; i++)
		hs->vbd[i] = fp8 ? e4m3_to_double(hs->vb[i]) : (double)bf16_to_float(vb[i]);
	for (size_t i = 0; i < hs->n_kx; i++)
		hs->kxd[i] = (double)bf16_to_float(hs->kx[i]);
	for (size_t i = 0; i < hs->n_vx; i++)
		hs->vxd[i] = (double)bf16_to_float(hs->vx[i]);
	for (int s = 0; s < hs->S; s++)
		for (int kv = 0; kv < hs->Hkv; kv++) {
			double n = 0;

			for (int d = 0; d < hs->lq; d++)
				n += hs->kbd[s * hs->kb_slot + kv * hs->kb_head + d] *
				     hs->kbd[s * hs->kb_slot + kv * hs->kb_head + d];
			hs->kbn[s * hs->Hkv + kv] = sqrt(n);
		}
	for (int r = 0; r < hs->T; r++)
		for (int kv = 0; kv < hs->Hkv; kv++) {
			double n = 0;

			for (int d = 0; d < hs->lq; d++)
				n += hs->kxd[r * hs->kx_tok + kv * hs->kx_head + d] *
				     hs->kxd[r * hs->kx_tok + kv * hs->kx_head + d];
			hs->kxn[r * hs->Hkv + kv] = sqrt(n);
		}
}

/* Fill a buffer with NaN (bf16 or e4m3), then the used elements at random. */
static void fill_bf16(uint16_t *p, size_t n, int64_t rows_from, int64_t rows_to, int64_t tok, int64_t heads,
		      int64_t head, int dim, double amp)
{
	for (size_t i = 0; i < n; i++)
		p[i] = NAN_BF16;
	for (int64_t r = rows_from; r < rows_to; r++)
		for (int64_t h = 0; h < heads; h++)
			for (int d = 0; d < dim; d++)
				p[r * tok + h * head + d] = bf16_from_double(amp * srand1());
}

struct stats {
	long bad, checked, exact, finite_only;
	double worst; /* max |err| / bound */
};

static void note(struct stats *st, int ok, const char *what, int b, int i, int h, int c, double got, double want,
		 double bound)
{
	if (!ok && st->bad++ < 6)
		fprintf(stderr, "  %s seq %d token %d head %d ch %d: got %.7g want %.7g (bound %.3g)\n", what, b, i,
			h, c, got, want, bound);
}

/*
 * check_row - reference for extend token i of sequence b, q head h; compares
 * o (and lse).  Keys: prefix slots, then extend keys 0..i (causal) or all.
 */
static void check_row(const struct tcase *tc, const struct host *hs, int b, int i, int h, int expect_nan,
		      double *lg, double *nk, struct stats *st)
{
	const int lq = hs->lq, lv = hs->lv, kvh = h / tc->group;
	const int P = (tc->flags & ATTN_EXTEND_SKIP_PREFIX) ? 0 : hs->kvp[b + 1] - hs->kvp[b];
	const int E = hs->qo[b + 1] - hs->qo[b];
	const int ne = (tc->flags & ATTN_EXTEND_SKIP_EXTEND) ? 0 : (tc->flags & ATTN_EXTEND_CAUSAL) ? i + 1 : E;
	const int n = P + ne, tiles = (P + 63) / 64 + (ne + 63) / 64;
	const int64_t row = hs->qo[b] + i;
	const uint16_t *q = hs->q + row * hs->q_tok + h * hs->q_head;
	const double sm = (float)(1.0 / sqrt((double)lq)), u = ldexp(1, -24), u2 = ldexp(1, -23);
	double qn = 0, m = -INFINITY, l = 0, eta = 0, qd[576], acc[512], mag[512];

	for (int d = 0; d < lq; d++) {
		qd[d] = (double)bf16_to_float(q[d]);
		qn += qd[d] * qd[d];
	}
	qn = sqrt(qn);
	for (int j = 0; j < n; j++) {
		const int64_t slot = j < P ? hs->idx[hs->kvp[b] + j] : 0, xrow = hs->qo[b] + j - P;
		const double *k = j < P ? hs->kbd + slot * hs->kb_slot + kvh * hs->kb_head
					: hs->kxd + xrow * hs->kx_tok + kvh * hs->kx_head;
		const double kn = j < P ? hs->kbn[slot * hs->Hkv + kvh] : hs->kxn[xrow * hs->Hkv + kvh];
		const double scale = j < P ? sm * tc->k_scale : sm;
		double s = 0;

		for (int d = 0; d < lq; d++)
			s += qd[d] * k[d];
		s *= scale;
		if (tc->logit_cap > 0)
			s = tc->logit_cap * tanh(s / tc->logit_cap);
		lg[j] = s;
		/* log2-domain error of this score (see the top comment) */
		nk[j] = M_LOG2E * fabs(scale) * lq * u2 * qn * kn + 6 * u * M_LOG2E * fabs(s) +
			(tc->logit_cap > 0 ? 8 * u * tc->logit_cap * M_LOG2E : 0);
		m = fmax(m, s);
	}
	for (int c = 0; c < lv; c++)
		acc[c] = mag[c] = 0;
	for (int j = 0; j < n; j++) {
		const double *w = j < P ? hs->vbd + hs->idx[hs->kvp[b] + j] * hs->vb_slot + kvh * hs->vb_head
					: hs->vxd + (hs->qo[b] + j - P) * hs->vx_tok + kvh * hs->vx_head;
		const double p = exp(lg[j] - m), pw = j < P ? p * tc->v_scale : p;

		l += p;
		eta = fmax(eta, nk[j]);
		for (int c = 0; c < lv; c++) {
			acc[c] += pw * w[c];
			mag[c] += fabs(pw * w[c]);
		}
	}
	eta = M_LN2 * (eta + 4 * u * M_LOG2E * fabs(m)) + ldexp(1, -21) + 2 * u;

	const double rel = (ldexp(1, -8) + 2 * eta + (2 * n + 2 * tiles + 16) * u2) * (1 + ldexp(1, -8));
	const int nan_row = expect_nan || n == 0;

	for (int c = 0; c < lv; c++) {
		const double want = acc[c] / l, got = (double)bf16_to_float(hs->o[row * hs->o_tok + h * hs->o_head + c]);
		double bound = rel * mag[c] / l + ldexp(1, -100);

		bound += 0.5 * bf16_ulp(fabs(want) + bound);
		st->checked++;
		if (nan_row) {
			note(st, isnan(got), "o (NaN expected)", b, i, h, c, got, NAN, 0);
			continue;
		}
		note(st, fabs(got - want) <= bound, "o", b, i, h, c, got, want, bound);
		st->worst = fmax(st->worst, fabs(got - want) / bound);
		st->exact += fabs(got - want) <= 0.5 * bf16_ulp(want);
	}
	if (tc->lse) {
		const double got = hs->lse[row * hs->lse_tok + h];
		const double want = m + log(l);
		const double bound = eta + (n + 2 * tiles + 16) * u2 + 8 * u * fabs(want);

		if (nan_row && tc->bad != GOOD)
			note(st, isnan(got), "lse (NaN expected)", b, i, h, -1, got, NAN, 0);
		else if (n == 0)
			note(st, got == -INFINITY, "lse (-inf expected)", b, i, h, -1, got, -INFINITY, 0);
		else
			note(st, fabs(got - want) <= bound, "lse", b, i, h, -1, got, want, bound);
	}
}

static int sampled(int i, int E)
{
	return i < 40 || i >= E - 40 || i % 37 == 0;
}

static int run_case(CUmodule mod, const struct tcase *tc)
{
	const struct kind *kd = &kinds[tc->kind];
	struct host hs;
	struct attn_extend_args a;
	CUfunction fn;
	CUdeviceptr d_q, d_kx, d_vx, d_o, d_kb, d_vb, d_lse, d_qo, d_kvp, d_idx;
	int64_t qo64[5];
	void *params[] = { &a };
	struct stats st = { 0, 0, 0, 0, 0 };
	const int esz = kd->fp8 ? 1 : 2, pad = tc->padded;
	int maxE = 0, npre = 0, *slots;
	double *lg, *nk;

	gpu_test_rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(tc - cases + 1) * 0xd1b54a32d192ed03ull; /* per case */
	memset(&hs, 0, sizeof(hs));
	hs.Hkv = tc->kv_heads;
	hs.Hq = tc->kv_heads * tc->group;
	hs.lq = kd->lq;
	hs.lv = kd->lv;
	hs.qo[0] = FRONT;
	hs.kvp[0] = 2; /* two unused kv_indices entries first */
	for (int b = 0; b < tc->nseq; b++) {
		hs.qo[b + 1] = hs.qo[b] + tc->extend[b];
		hs.kvp[b + 1] = hs.kvp[b] + tc->prefix[b];
		npre += tc->prefix[b];
		if (tc->extend[b] > maxE)
			maxE = tc->extend[b];
	}
	hs.T = hs.qo[tc->nseq] + BACK;
	hs.S = npre + 1 + 37; /* slot 0 and 37 more are never named */
	hs.nidx = hs.kvp[tc->nseq] + 3;

	/* layouts: contiguous, or padded with NaN between heads and tokens */
	hs.q_head = hs.lq + (pad ? 8 : 0) + (tc->bad == BAD_STRIDE ? 4 : 0);
	hs.q_tok = hs.Hq * hs.q_head + (pad ? 16 : 0);
	hs.kx_head = hs.lq + (pad ? 8 : 0);
	hs.kx_tok = hs.Hkv * hs.kx_head + (pad ? 8 : 0);
	if (tc->alias_v) {
		hs.vx_head = hs.kx_head;
		hs.vx_tok = hs.kx_tok;
	} else {
		hs.vx_head = hs.lv + (pad ? 8 : 0);
		hs.vx_tok = hs.Hkv * hs.vx_head + (pad ? 24 : 0);
	}
	hs.o_head = hs.lv + (pad ? 8 : 0);
	hs.o_tok = hs.Hq * hs.o_head + (pad ? 8 : 0);
	hs.kb_head = hs.lq + (pad ? 16 : 0);
	hs.kb_slot = hs.Hkv * hs.kb_head + (pad ? 16 : 0);
	if (tc->alias_v) {
		hs.vb_head = hs.kb_head;
		hs.vb_slot = hs.kb_slot;
	} else {
		hs.vb_head = hs.lv + (pad ? 16 : 0);
		hs.vb_slot = hs.Hkv * hs.vb_head + (pad ? 32 : 0);
	}
	hs.lse_tok = hs.Hq + (pad ? 3 : 0);

	hs.n_q = (size_t)hs.T * hs.q_tok;
	hs.n_kx = (size_t)hs.T * hs.kx_tok;
	hs.n_vx = (size_t)hs.T * hs.vx_tok;
	hs.n_o = (size_t)hs.T * hs.o_tok;
	hs.n_kb = (size_t)hs.S * hs.kb_slot;
	hs.n_vb = (size_t)hs.S * hs.vb_slot;
	hs.n_lse = (size_t)hs.T * hs.lse_tok;
	hs.q = malloc(hs.n_q * 2);
	hs.kx = malloc(hs.n_kx * 2);
	hs.vx = tc->alias_v ? hs.kx : malloc(hs.n_vx * 2);
	hs.o = malloc(hs.n_o * 2);
	hs.kb = malloc(hs.n_kb * esz);
	hs.vb = tc->alias_v ? hs.kb : malloc(hs.n_vb * esz);
	hs.lse = malloc(hs.n_lse * 4);
	hs.idx = malloc((size_t)hs.nidx * 8);
	slots = malloc((size_t)hs.S * sizeof(int));
	lg = malloc((size_t)(npre + maxE + 1) * sizeof(double));
	nk = malloc((size_t)(npre + maxE + 1) * sizeof(double));

	/* batch rows random, all else NaN */
	fill_bf16(hs.q, hs.n_q, FRONT, hs.qo[tc->nseq], hs.q_tok, hs.Hq, hs.q_head, hs.lq, tc->q_amp);
	fill_bf16(hs.kx, hs.n_kx, FRONT, hs.qo[tc->nseq], hs.kx_tok, hs.Hkv, hs.kx_head, hs.lq, 1);
	if (!tc->alias_v)
		fill_bf16(hs.vx, hs.n_vx, FRONT, hs.qo[tc->nseq], hs.vx_tok, hs.Hkv, hs.vx_head, hs.lv, 1);
	/* slot pool: slot 0 stays NaN and is what unused kv_indices entries name */
	for (int s = 0; s < hs.S; s++)
		slots[s] = s;
	for (int s = hs.S - 1; s > 1; s--) {
		int t = 1 + (int)(urand() * s), x = slots[s];

		slots[s] = slots[t];
		slots[t] = x;
	}
	for (int j = 0; j < hs.nidx; j++)
		hs.idx[j] = 0;
	for (int j = 0; j < npre; j++)
		hs.idx[hs.kvp[0] + j] = slots[1 + j];
	if (kd->fp8) {
		memset(hs.kb, NAN_E4M3, hs.n_kb);
		if (!tc->alias_v)
			memset(hs.vb, NAN_E4M3, hs.n_vb);
		for (int j = 0; j < npre; j++)
			for (int kv = 0; kv < hs.Hkv; kv++) {
				for (int d = 0; d < hs.lq; d++)
					hs.kb[hs.idx[hs.kvp[0] + j] * hs.kb_slot + kv * hs.kb_head + d] =
						e4m3_rand();
				for (int d = 0; d < hs.lv && !tc->alias_v; d++)
					hs.vb[hs.idx[hs.kvp[0] + j] * hs.vb_slot + kv * hs.vb_head + d] =
						e4m3_rand();
			}
	} else {
		uint16_t *kb = (uint16_t *)hs.kb, *vb = (uint16_t *)hs.vb;

		for (size_t i = 0; i < hs.n_kb; i++)
			kb[i] = NAN_BF16;
		for (size_t i = 0; i < hs.n_vb && !tc->alias_v; i++)
			vb[i] = NAN_BF16;
		for (int j = 0; j < npre; j++)
			for (int kv = 0; kv < hs.Hkv; kv++) {
				for (int d = 0; d < hs.lq; d++)
					kb[hs.idx[hs.kvp[0] + j] * hs.kb_slot + kv * hs.kb_head + d] =
						bf16_from_double(srand1());
				for (int d = 0; d < hs.lv && !tc->alias_v; d++)
					vb[hs.idx[hs.kvp[0] + j] * hs.vb_slot + kv * hs.vb_head + d] =
						bf16_from_double(srand1());
			}
	}

	decode(&hs, kd->fp8);
	CHECK(cuModuleGetFunction(&fn, mod, kd->name));
	CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kd->smem));
	CHECK(cuMemAlloc(&d_q, hs.n_q * 2));
	CHECK(cuMemAlloc(&d_kx, hs.n_kx * 2));
	CHECK(cuMemAlloc(&d_vx, hs.n_vx * 2));
	CHECK(cuMemAlloc(&d_o, hs.n_o * 2));
	CHECK(cuMemAlloc(&d_kb, hs.n_kb * esz));
	CHECK(cuMemAlloc(&d_vb, hs.n_vb * esz));
	CHECK(cuMemAlloc(&d_lse, hs.n_lse * 4));
	CHECK(cuMemAlloc(&d_qo, sizeof(qo64)));
	CHECK(cuMemAlloc(&d_kvp, sizeof(hs.kvp)));
	CHECK(cuMemAlloc(&d_idx, (size_t)hs.nidx * 8));
	CHECK(cuMemcpyHtoD(d_q, hs.q, hs.n_q * 2));
	CHECK(cuMemcpyHtoD(d_kx, hs.kx, hs.n_kx * 2));
	if (!tc->alias_v)
		CHECK(cuMemcpyHtoD(d_vx, hs.vx, hs.n_vx * 2));
	CHECK(cuMemcpyHtoD(d_kb, hs.kb, hs.n_kb * esz));
	if (!tc->alias_v)
		CHECK(cuMemcpyHtoD(d_vb, hs.vb, hs.n_vb * esz));
	for (int b = 0; b < 5; b++)
		qo64[b] = hs.qo[b];
	if (tc->flags & ATTN_EXTEND_QO_I64)
		CHECK(cuMemcpyHtoD(d_qo, qo64, sizeof(qo64)));
	else
		CHECK(cuMemcpyHtoD(d_qo, hs.qo, sizeof(hs.qo)));
	CHECK(cuMemcpyHtoD(d_kvp, hs.kvp, sizeof(hs.kvp)));
	CHECK(cuMemcpyHtoD(d_idx, hs.idx, (size_t)hs.nidx * 8));
	CHECK(cuMemsetD16(d_o, NAN_BF16, hs.n_o));
	CHECK(cuMemsetD32(d_lse, NAN_F32, hs.n_lse));

	a = (struct attn_extend_args){
		.q = (const void *)d_q,
		.k_ext = (const void *)d_kx,
		.v_ext = (const void *)(tc->alias_v ? d_kx : d_vx),
		.o = (void *)d_o,
		.lse = tc->lse ? (float *)d_lse : NULL,
		.k_buf = (const void *)d_kb,
		.v_buf = (const void *)(tc->alias_v ? d_kb : d_vb),
		.qo_indptr = (const void *)d_qo,
		.kv_indptr = (const int32_t *)d_kvp,
		.kv_indices = (const int64_t *)d_idx,
		.q_tok = hs.q_tok, .q_head = hs.q_head,
		.kx_tok = hs.kx_tok, .kx_head = hs.kx_head,
		.vx_tok = hs.vx_tok, .vx_head = hs.vx_head,
		.o_tok = hs.o_tok, .o_head = hs.o_head,
		.kb_slot = hs.kb_slot, .kb_head = hs.kb_head,
		.vb_slot = hs.vb_slot, .vb_head = hs.vb_head,
		.lse_tok = hs.lse_tok, .lse_head = 1,
		.sm_scale = (float)(1.0 / sqrt((double)kd->lq)),
		.k_scale = (float)tc->k_scale,
		.v_scale = (float)tc->v_scale,
		.logit_cap = (float)tc->logit_cap,
		.batch = tc->nseq,
		.kv_group_num = tc->group,
		.lq = tc->bad == BAD_LQ ? 512 : kd->lq,
		.lv = kd->lv,
		.flags = tc->flags,
		.reserved = 0,
	};
	{
		unsigned gx = (unsigned)((maxE * tc->group + kd->rows - 1) / kd->rows);

		if (tc->bad == SMALL_GRID)
			gx = 1;
		CHECK(cuLaunchKernel(fn, gx, (unsigned)hs.Hkv, (unsigned)tc->nseq, ATTN_EXTEND_THREADS, 1, 1,
				     (unsigned)kd->smem, NULL, params, NULL));
	}
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(hs.o, d_o, hs.n_o * 2));
	CHECK(cuMemcpyDtoH(hs.lse, d_lse, hs.n_lse * 4));

	/* rows of the batch; the reference uses the scales as the floats the kernel got */
	{
		struct tcase ref = *tc;

		ref.k_scale = (float)tc->k_scale;
		ref.v_scale = (float)tc->v_scale;
		ref.logit_cap = (float)tc->logit_cap;
		for (int b = 0; b < tc->nseq; b++) {
			const int E = tc->extend[b];

			for (int i = 0; i < E; i++)
				for (int h = 0; h < hs.Hq; h++) {
					const int row_packed = i * tc->group + h % tc->group;
					int expect_nan = tc->bad == BAD_LQ || tc->bad == BAD_STRIDE ||
							 (tc->bad == SMALL_GRID && row_packed >= kd->rows);

					if (!tc->sample || sampled(i, E) || expect_nan) {
						check_row(&ref, &hs, b, i, h, expect_nan, lg, nk, &st);
						continue;
					}
					for (int c = 0; c < hs.lv; c++) {
						double got = (double)bf16_to_float(hs.o[(hs.qo[b] + i) * hs.o_tok +
									   h * hs.o_head + c]);

						st.finite_only++;
						note(&st, isfinite(got), "o (finite expected)", b, i, h, c, got, 0, 0);
					}
				}
		}
	}
	/* everything else untouched: rows outside the batch, head and token padding */
	for (int64_t r = 0; r < hs.T; r++) {
		const int in_batch = r >= FRONT && r < hs.qo[tc->nseq];

		for (int64_t e = 0; e < hs.o_tok; e++) {
			const int used = in_batch && e % hs.o_head < hs.lv && e / hs.o_head < hs.Hq;

			if (!used && hs.o[r * hs.o_tok + e] != NAN_BF16 && st.bad++ < 6)
				fprintf(stderr, "  o row %ld element %ld written outside the batch\n", (long)r,
					(long)e);
		}
		for (int64_t e = 0; e < hs.lse_tok; e++) {
			const int used = tc->lse && in_batch && e < hs.Hq;

			if (!used && f32_bits(hs.lse[r * hs.lse_tok + e]) != NAN_F32 && st.bad++ < 6)
				fprintf(stderr, "  lse row %ld element %ld written outside the batch\n", (long)r,
					(long)e);
		}
	}
	printf("%s %s: %ld bad of %ld checked (%ld more only for finiteness), %ld correctly rounded, "
	       "worst error %.2f of the bound\n",
	       st.bad ? "not ok -" : "ok -", tc->what, st.bad, st.checked, st.finite_only, st.exact, st.worst);

	cuMemFree(d_q);
	cuMemFree(d_kx);
	cuMemFree(d_vx);
	cuMemFree(d_o);
	cuMemFree(d_kb);
	cuMemFree(d_vb);
	cuMemFree(d_lse);
	cuMemFree(d_qo);
	cuMemFree(d_kvp);
	cuMemFree(d_idx);
	free(hs.q);
	free(hs.kx);
	if (!tc->alias_v) {
		free(hs.vx);
		free(hs.vb);
	}
	free(hs.o);
	free(hs.kb);
	free(hs.lse);
	free(hs.idx);
	free(hs.kbd);
	free(hs.vbd);
	free(hs.kxd);
	free(hs.vxd);
	free(hs.kbn);
	free(hs.kxn);
	free(slots);
	free(lg);
	free(nk);
	return st.bad != 0;
}

/*
 * bench - EXTEND_ATTN_BENCH=1: one realistic launch per kernel, timed (no
 * checks; constant inputs, shuffled slots).  Prints GPU TFLOP/s counting
 * 2 * (lq + lv) flops per (query, head, visible key).
 */
static void bench(CUmodule mod)
{
	static const struct {
		int kind, kv_heads, group, batch, prefix, extend;
		const char *what;
	} runs[] = {
		{ MLA_BF16, 1, 8, 4, 8192, 2048, "Kimi K2 TP8 absorbed" },
		{ MLA_FP8, 1, 8, 4, 8192, 2048, "Kimi K2 TP8 absorbed, FP8 cache" },
		{ D192_BF16, 8, 1, 4, 0, 4096, "Kimi K2 TP8 prefill without prefix" },
		{ D128_BF16, 1, 12, 4, 8192, 2048, "GLM-4.x TP8" },
		{ D128_FP8, 1, 12, 4, 8192, 2048, "GLM-4.x TP8, FP8 cache" },
	};

	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		const struct kind *kd = &kinds[runs[r].kind];
		const int B = runs[r].batch, Hkv = runs[r].kv_heads, Hq = Hkv * runs[r].group;
		const int T = B * runs[r].extend, S = B * runs[r].prefix + 1, esz = kd->fp8 ? 1 : 2;
		int32_t qo[65], kvp[65];
		int64_t *idx = malloc(((size_t)S + 1) * 8);
		CUdeviceptr d_q, d_kx, d_vx, d_o, d_kb, d_vb, d_qo, d_kvp, d_idx;
		CUfunction fn;
		CUevent e0, e1;
		struct attn_extend_args a;
		void *params[] = { &a };
		float ms = 0;
		double flops = 0;

		for (int b = 0; b <= B; b++) {
			qo[b] = b * runs[r].extend;
			kvp[b] = b * runs[r].prefix;
		}
		for (int j = 0; j < S; j++)
			idx[j] = j;
		for (int j = S - 1; j > 0; j--) {
			int t = (int)(urand() * (j + 1));
			int64_t x = idx[j];

			idx[j] = idx[t];
			idx[t] = x;
		}
		CHECK(cuModuleGetFunction(&fn, mod, kd->name));
		CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kd->smem));
		CHECK(cuMemAlloc(&d_q, (size_t)T * Hq * kd->lq * 2));
		CHECK(cuMemAlloc(&d_kx, (size_t)T * Hkv * kd->lq * 2));
		CHECK(cuMemAlloc(&d_vx, (size_t)T * Hkv * kd->lv * 2));
		CHECK(cuMemAlloc(&d_o, (size_t)T * Hq * kd->lv * 2));
		CHECK(cuMemAlloc(&d_kb, (size_t)S * Hkv * kd->lq * esz));
		CHECK(cuMemAlloc(&d_vb, (size_t)S * Hkv * kd->lv * esz));
		CHECK(cuMemAlloc(&d_qo, sizeof(qo)));
		CHECK(cuMemAlloc(&d_kvp, sizeof(kvp)));
		CHECK(cuMemAlloc(&d_idx, (size_t)S * 8));
		CHECK(cuMemsetD16(d_q, 0x3e00, (size_t)T * Hq * kd->lq)); /* bf16 0.125 */
		CHECK(cuMemsetD16(d_kx, 0x3e00, (size_t)T * Hkv * kd->lq));
		CHECK(cuMemsetD16(d_vx, 0x3e00, (size_t)T * Hkv * kd->lv));
		CHECK(cuMemsetD8(d_kb, 0x30, (size_t)S * Hkv * kd->lq * esz)); /* e4m3 0.5, bf16 tiny */
		CHECK(cuMemsetD8(d_vb, 0x30, (size_t)S * Hkv * kd->lv * esz));
		CHECK(cuMemcpyHtoD(d_qo, qo, sizeof(qo)));
		CHECK(cuMemcpyHtoD(d_kvp, kvp, sizeof(kvp)));
		CHECK(cuMemcpyHtoD(d_idx, idx, (size_t)S * 8));
		a = (struct attn_extend_args){
			.q = (const void *)d_q, .k_ext = (const void *)d_kx, .v_ext = (const void *)d_vx,
			.o = (void *)d_o, .lse = NULL, .k_buf = (const void *)d_kb, .v_buf = (const void *)d_vb,
			.qo_indptr = (const void *)d_qo, .kv_indptr = (const int32_t *)d_kvp,
			.kv_indices = (const int64_t *)d_idx,
			.q_tok = (int64_t)Hq * kd->lq, .q_head = kd->lq,
			.kx_tok = (int64_t)Hkv * kd->lq, .kx_head = kd->lq,
			.vx_tok = (int64_t)Hkv * kd->lv, .vx_head = kd->lv,
			.o_tok = (int64_t)Hq * kd->lv, .o_head = kd->lv,
			.kb_slot = (int64_t)Hkv * kd->lq, .kb_head = kd->lq,
			.vb_slot = (int64_t)Hkv * kd->lv, .vb_head = kd->lv,
			.sm_scale = 0.1f, .k_scale = 1, .v_scale = 1, .logit_cap = 0,
			.batch = B, .kv_group_num = runs[r].group, .lq = kd->lq, .lv = kd->lv,
			.flags = ATTN_EXTEND_CAUSAL,
		};
		CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
		CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
		for (int it = 0; it < 13; it++) {
			if (it == 3)
				CHECK(cuEventRecord(e0, NULL));
			CHECK(cuLaunchKernel(fn, (unsigned)((runs[r].extend * runs[r].group + kd->rows - 1) / kd->rows),
					     (unsigned)Hkv, (unsigned)B, ATTN_EXTEND_THREADS, 1, 1, (unsigned)kd->smem,
					     NULL, params, NULL));
		}
		CHECK(cuEventRecord(e1, NULL));
		CHECK(cuEventSynchronize(e1));
		CHECK(cuEventElapsedTime(&ms, e0, e1));
		ms /= 10;
		for (int i = 0; i < runs[r].extend; i++)
			flops += 2.0 * (kd->lq + kd->lv) * Hq * B * (runs[r].prefix + i + 1);
		printf("# bench %s (%s): batch %d, %d q heads, prefix %d, extend %d: %.3f ms, %.1f TFLOP/s\n",
		       kd->name, runs[r].what, B, Hq, runs[r].prefix, runs[r].extend, ms, flops / ms / 1e9);
		cuEventDestroy(e0);
		cuEventDestroy(e1);
		cuMemFree(d_q);
		cuMemFree(d_kx);
		cuMemFree(d_vx);
		cuMemFree(d_o);
		cuMemFree(d_kb);
		cuMemFree(d_vb);
		cuMemFree(d_qo);
		cuMemFree(d_kvp);
		cuMemFree(d_idx);
		free(idx);
	}
}

int main(int argc, char **argv)
{
	CUmodule mod;
	int fails = 0;

	mod = gpu_test_module(argc > 1 ? argv[1] : NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!getenv("EXTEND_ATTN_CASE") || atoi(getenv("EXTEND_ATTN_CASE")) == (int)i)
			fails += run_case(mod, &cases[i]);
	if (getenv("EXTEND_ATTN_BENCH"))
		bench(mod);
	CHECK(cuModuleUnload(mod));
	return fails ? 1 : 0;
}
