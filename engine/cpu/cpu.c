/*
 * cpu.c - the CPU reference forward pass (see cpu.h).
 *
 * Nothing non-finite passes silently: the hidden state after every norm of
 * the residual stream (input_layernorm, post_attention_layernorm, the final
 * norm) must be finite, and so must every router score; otherwise the
 * forward call fails with an error naming the layer and the position, and
 * the cache position does not advance.
 */
#include "cpu.h"

#include "../common/numfmt.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ref_cpu {
	const struct ref_model *m;
	const struct ref_config *c;
	int max_seq, pos, absorbed, threads;
	float *inv_freq;		/* [rotary_dim / 2] */
	/* per layer KV cache: MLA naive K [pos][h][P+R], V [pos][h][V];
	 * MLA absorbed C [pos][kv_lora + R]; GQA K, V [pos][kvh][hd] */
	float **kcache, **vcache;
	float **kv_b;			/* absorbed: dequantized kv_b_proj per layer */
	struct ref_route_sink routes;
};

/* ---- parallel loop over rows ---------------------------------------- */

struct par_job {
	void (*fn)(void *ctx, int lo, int hi);
	void *ctx;
	int lo, hi;
};

static void *par_thread(void *p)
{
	struct par_job *j = p;

	j->fn(j->ctx, j->lo, j->hi);
	return NULL;
}

/* par_for - fn(ctx, lo, hi) over [0, n) split across @threads; serial when small. */
static void par_for(int threads, int n, double work, void (*fn)(void *, int, int), void *ctx)
{
	struct par_job jobs[REF_CPU_MAX_THREADS];
	pthread_t tid[REF_CPU_MAX_THREADS];
	int started[REF_CPU_MAX_THREADS] = { 0 };
	int t, nt = threads < REF_CPU_MAX_THREADS ? threads : REF_CPU_MAX_THREADS;

	if (nt > n)
		nt = n;
	if (nt <= 1 || work < 2e5) {
		fn(ctx, 0, n);
		return;
	}
	for (t = 0; t < nt; t++) {
		jobs[t] = (struct par_job){ fn, ctx, (int)((int64_t)n * t / nt),
					    (int)((int64_t)n * (t + 1) / nt) };
		if (t > 0)
			started[t] = pthread_create(&tid[t], NULL, par_thread, &jobs[t]) == 0;
	}
	fn(ctx, jobs[0].lo, jobs[0].hi);
	for (t = 1; t < nt; t++) {
		if (started[t])
			pthread_join(tid[t], NULL);
		else
			fn(ctx, jobs[t].lo, jobs[t].hi);
	}
}

/* ---- Y[n][out] = X[n][in] . W^T -------------------------------------- */

struct mm_ctx {
	const struct ref_linear *w;
	const float *x;
	float *y;
	int n, ldx, ldy;
};

static void mm_rows(void *p, int lo, int hi)
{
	struct mm_ctx *m = p;
	int in = m->w->in, r, t, k;
	float *row = malloc(sizeof(float) * (size_t)in);

	if (!row)
		abort();
	for (r = lo; r < hi; r++) {
		ref_linear_row(m->w, r, row);
		for (t = 0; t < m->n; t++) {
			const float *x = m->x + (size_t)t * m->ldx;
			double acc = 0;

			for (k = 0; k < in; k++)
				acc += (double)row[k] * x[k];
			m->y[(size_t)t * m->ldy + r] = (float)acc;
		}
	}
	free(row);
}

/* matmul_ld - rows of X @ldx floats apart (X may be a slice of wider rows). */
static void matmul_ld(const struct ref_cpu *r, const struct ref_linear *w, const float *x, int ldx,
		      int n, float *y)
{
	struct mm_ctx ctx = { w, x, y, n, ldx, w->out };

	par_for(r->threads, w->out, (double)w->out * w->in * n, mm_rows, &ctx);
}

static void matmul(const struct ref_cpu *r, const struct ref_linear *w, const float *x, int n,
		   float *y)
{
	struct mm_ctx ctx = { w, x, y, n, w->in, w->out };

	par_for(r->threads, w->out, (double)w->out * w->in * n, mm_rows, &ctx);
}

/* ---- elementwise pieces ------------------------------------------------ */

/* rmsnorm - y = w * (x / sqrt(mean(x^2) + eps)), statistics in double. */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
	double ss = 0;
	int i;

	for (i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	ss = 1.0 / sqrt(ss / n + eps);
	for (i = 0; i < n; i++)
		y[i] = (float)(x[i] * ss) * w[i];
}

/*
 * norm_rows - @y[t] = rmsnorm(@x[t]) for the @n tokens at positions r->pos..,
 * then refuse a non-finite result: the error names @norm (e.g.
 * "model.layers.3.post_attention_layernorm"), the position, and @source,
 * where the residual stream's value came from.  Returns 0 or -ERANGE.
 */
static int norm_rows(const struct ref_cpu *r, float *y, const float *x, const float *w, int n,
		     const char *norm, const char *source, struct sm_err *err)
{
	int H = r->c->hidden, t, bad;

	for (t = 0; t < n; t++) {
		rmsnorm(y + (size_t)t * H, x + (size_t)t * H, w, H, r->c->rms_eps);
		bad = nf_first_nonfinite(y + (size_t)t * H, H);
		if (bad >= 0)
			return sm_err_set(err, -ERANGE, "position %d: the hidden state after %s is not "
					  "finite (element %d is %s): %s holds NaN or Inf weights, or "
					  "its values overflow fp32; the checkpoint is corrupt (download "
					  "or export it again)", r->pos + t, norm, bad,
					  isnan(y[(size_t)t * H + bad]) ? "NaN" : "Inf", source);
	}
	return 0;
}

static float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/*
 * rope - rotate @x at position @pos.  Interleaved (MLA checkpoints): pairs
 * (2i, 2i+1); NeoX (GLM): pairs (i, i + dim/2) over the first dim entries.
 */
static void rope(const struct ref_cpu *r, float *x, int pos, int interleaved)
{
	int dim = r->c->rotary_dim, half = dim / 2, i;
	float mul = (float)r->c->rope_attn_factor;

	for (i = 0; i < half; i++) {
		float ang = (float)pos * r->inv_freq[i];
		float cs = (float)cos(ang) * mul, sn = (float)sin(ang) * mul;
		int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
		float xa = x[a], xb = x[b];

		x[a] = xa * cs - xb * sn;
		x[b] = xb * cs + xa * sn;
	}
}

/* softmax_inplace - over @n scores, in double. */
static void softmax_inplace(double *s, int n)
{
	double mx = -DBL_MAX, sum = 0;
	int i;

	for (i = 0; i < n; i++)
		mx = s[i] > mx ? s[i] : mx;
	for (i = 0; i < n; i++)
		sum += (s[i] = exp(s[i] - mx));
	for (i = 0; i < n; i++)
		s[i] /= sum;
}

static double dot(const float *a, const float *b, int n)
{
	double acc = 0;
	int i;

	for (i = 0; i < n; i++)
		acc += (double)a[i] * b[i];
	return acc;
}

/* ---- attention ------------------------------------------------------------ */

/*
 * mla - Kimi / DeepSeek attention for @n tokens at positions pos0...:
 * writes o_proj's input [n][nh * V] into @out.
 */
static void mla(struct ref_cpu *r, int l, const float *h, int n, float *out, float *scratch)
{
	const struct ref_config *c = r->c;
	const struct ref_layer *L = &r->m->layers[l];
	int nh = c->n_heads, P = c->qk_nope, R = c->qk_rope, V = c->v_head, kvl = c->kv_lora_rank;
	int qk = P + R, t, hd, s, i, j;
	float *q = scratch;					/* [n][nh * qk] */
	float *kv = q + (size_t)n * nh * qk;			/* [n][kvl + R] */
	float *cq = kv + (size_t)n * (kvl + R);			/* [n][q_lora] or [n][nh (P+V)] */
	double *sc = malloc(sizeof(double) * (size_t)(r->pos + n));

	if (!sc)
		abort();
	if (c->q_lora_rank) {
		matmul(r, &L->q_a, h, n, cq);
		for (t = 0; t < n; t++)
			rmsnorm(cq + (size_t)t * c->q_lora_rank, cq + (size_t)t * c->q_lora_rank,
				L->q_a_norm, c->q_lora_rank, c->rms_eps);
		matmul(r, &L->q_b, cq, n, q);
	} else {
		matmul(r, &L->q, h, n, q);
	}
	matmul(r, &L->kv_a, h, n, kv);
	for (t = 0; t < n; t++) {
		float *row = kv + (size_t)t * (kvl + R);

		rmsnorm(row, row, L->kv_a_norm, kvl, c->rms_eps); /* c_kv only, never k_pe */
		rope(r, row + kvl, r->pos + t, 1);
		for (hd = 0; hd < nh; hd++)
			rope(r, q + (size_t)t * nh * qk + hd * qk + P, r->pos + t, 1);
	}
	if (!r->absorbed) {
		float *kvb = cq;	/* [n][nh (P+V)]: the q_lora buffer is free again */

		matmul_ld(r, &L->kv_b, kv, kvl + R, n, kvb);
		for (t = 0; t < n; t++) {
			float *K = r->kcache[l] + (size_t)(r->pos + t) * nh * qk;
			float *Vc = r->vcache[l] + (size_t)(r->pos + t) * nh * V;

			for (hd = 0; hd < nh; hd++) {
				memcpy(K + hd * qk, kvb + (size_t)t * nh * (P + V) + hd * (P + V), sizeof(float) * P);
				memcpy(K + hd * qk + P, kv + (size_t)t * (kvl + R) + kvl, sizeof(float) * R);
				memcpy(Vc + hd * V, kvb + (size_t)t * nh * (P + V) + hd * (P + V) + P, sizeof(float) * V);
			}
		}
		for (t = 0; t < n; t++) {
			int len = r->pos + t + 1;

			for (hd = 0; hd < nh; hd++) {
				const float *qh = q + (size_t)t * nh * qk + hd * qk;
				float *o = out + (size_t)t * nh * V + hd * V;

				for (s = 0; s < len; s++)
					sc[s] = dot(qh, r->kcache[l] + (size_t)s * nh * qk + hd * qk, qk) * c->softmax_scale;
				softmax_inplace(sc, len);
				for (i = 0; i < V; i++) {
					double acc = 0;

					for (s = 0; s < len; s++)
						acc += sc[s] * r->vcache[l][(size_t)s * nh * V + hd * V + i];
					o[i] = (float)acc;
				}
			}
		}
	} else {
		const float *W = r->kv_b[l];	/* [nh (P+V)][kvl] */
		float *qlat = malloc(sizeof(float) * (size_t)(kvl + R));
		double *olat = malloc(sizeof(double) * (size_t)kvl);

		if (!qlat || !olat)
			abort();
		for (t = 0; t < n; t++)
			memcpy(r->kcache[l] + (size_t)(r->pos + t) * (kvl + R), kv + (size_t)t * (kvl + R),
			       sizeof(float) * (size_t)(kvl + R));
		for (t = 0; t < n; t++) {
			int len = r->pos + t + 1;

			for (hd = 0; hd < nh; hd++) {
				const float *qh = q + (size_t)t * nh * qk + hd * qk;
				const float *Wh = W + (size_t)hd * (P + V) * kvl;
				float *o = out + (size_t)t * nh * V + hd * V;

				/* q_lat = W_UK[h]^T q_nope; then [q_lat ; q_pe] against [c ; k_pe] */
				for (j = 0; j < kvl; j++) {
					double acc = 0;

					for (i = 0; i < P; i++)
						acc += (double)qh[i] * Wh[(size_t)i * kvl + j];
					qlat[j] = (float)acc;
				}
				memcpy(qlat + kvl, qh + P, sizeof(float) * R);
				for (s = 0; s < len; s++)
					sc[s] = dot(qlat, r->kcache[l] + (size_t)s * (kvl + R), kvl + R) * c->softmax_scale;
				softmax_inplace(sc, len);
				for (j = 0; j < kvl; j++) {
					double acc = 0;

					for (s = 0; s < len; s++)
						acc += sc[s] * r->kcache[l][(size_t)s * (kvl + R) + j];
					olat[j] = acc;
				}
				for (i = 0; i < V; i++) {	/* o = W_UV[h] o_lat */
					double acc = 0;

					for (j = 0; j < kvl; j++)
						acc += Wh[(size_t)(P + i) * kvl + j] * olat[j];
					o[i] = (float)acc;
				}
			}
		}
		free(qlat);
		free(olat);
	}
	free(sc);
}

/* gqa - GLM attention for @n tokens: writes o_proj's input [n][nh * hd] into @out. */
static void gqa(struct ref_cpu *r, int l, const float *h, int n, float *out, float *scratch)
{
	const struct ref_config *c = r->c;
	const struct ref_layer *L = &r->m->layers[l];
	int nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, grp = nh / nkv;
	int t, i, s, k;
	float *q = scratch, *kk = q + (size_t)n * nh * hd, *vv = kk + (size_t)n * nkv * hd;
	double *sc = malloc(sizeof(double) * (size_t)(r->pos + n));

	if (!sc)
		abort();
	matmul(r, &L->qp, h, n, q);
	matmul(r, &L->kp, h, n, kk);
	matmul(r, &L->vp, h, n, vv);
	for (t = 0; t < n; t++) {
		float *qt = q + (size_t)t * nh * hd, *kt = kk + (size_t)t * nkv * hd, *vt = vv + (size_t)t * nkv * hd;

		for (i = 0; L->q_bias && i < nh * hd; i++)
			qt[i] += L->q_bias[i];
		for (i = 0; L->k_bias && i < nkv * hd; i++) {
			kt[i] += L->k_bias[i];
			vt[i] += L->v_bias[i];
		}
		for (i = 0; i < nh; i++) {
			if (L->q_norm)
				rmsnorm(qt + i * hd, qt + i * hd, L->q_norm, hd, c->rms_eps);
			rope(r, qt + i * hd, r->pos + t, 0);
		}
		for (i = 0; i < nkv; i++) {
			if (L->k_norm)
				rmsnorm(kt + i * hd, kt + i * hd, L->k_norm, hd, c->rms_eps);
			rope(r, kt + i * hd, r->pos + t, 0);
		}
		memcpy(r->kcache[l] + (size_t)(r->pos + t) * nkv * hd, kt, sizeof(float) * (size_t)nkv * hd);
		memcpy(r->vcache[l] + (size_t)(r->pos + t) * nkv * hd, vt, sizeof(float) * (size_t)nkv * hd);
	}
	for (t = 0; t < n; t++) {
		int len = r->pos + t + 1;

		for (i = 0; i < nh; i++) {
			const float *qh = q + (size_t)t * nh * hd + i * hd;
			int kvh = i / grp;

			for (s = 0; s < len; s++)
				sc[s] = dot(qh, r->kcache[l] + (size_t)s * nkv * hd + kvh * hd, hd) * c->softmax_scale;
			softmax_inplace(sc, len);
			for (k = 0; k < hd; k++) {
				double acc = 0;

				for (s = 0; s < len; s++)
					acc += sc[s] * r->vcache[l][(size_t)s * nkv * hd + kvh * hd + k];
				out[(size_t)t * nh * hd + i * hd + k] = (float)acc;
			}
		}
	}
	free(sc);
}

/* ---- MLP and MoE ------------------------------------------------------------ */

/* swiglu - y[n][H] = down(silu(gate x) * up x), for an MLP of width @w. */
static void swiglu(const struct ref_cpu *r, const struct ref_mlp *p, const float *x, int n, float *y)
{
	int w = p->gate.out, i;
	float *g = malloc(sizeof(float) * (size_t)n * w), *u = malloc(sizeof(float) * (size_t)n * w);

	if (!g || !u)
		abort();
	matmul(r, &p->gate, x, n, g);
	matmul(r, &p->up, x, n, u);
	for (i = 0; i < n * w; i++)
		g[i] = silu(g[i]) * u[i];
	matmul(r, &p->down, g, n, y);
	free(g);
	free(u);
}

/*
 * route - noaux_tc: choose @ids[top_k] and @w[top_k] for one token from
 * router logits @logit[E] (fp32).  Selection uses sigmoid + correction bias,
 * limited to the topk_group groups with the largest sums of their two best
 * biased scores (the others masked with -inf); ties pick the lower index.
 * Weights use the unbiased sigmoid, normalised (norm_topk_prob), then times
 * routed_scaling_factor.  Returns -1, or the first expert whose score is not
 * finite (NaN: no order can rank it, and nothing is chosen).
 */
static int route(const struct ref_config *c, const float *bias, const float *logit, int *ids, float *w)
{
	int E = c->n_routed, per = E / c->n_group, e, g, j, k;
	float s[1024], sb[1024], gs[256];
	int keep[256] = { 0 };
	double sum = 0;

	for (e = 0; e < E; e++) {
		s[e] = 1.0f / (1.0f + expf(-logit[e]));
		sb[e] = s[e] + bias[e];
		if (!isfinite(sb[e]))
			return e;
	}
	for (g = 0; g < c->n_group; g++) {
		float b1 = -INFINITY, b2 = -INFINITY;

		for (e = g * per; e < (g + 1) * per; e++) {
			if (sb[e] > b1) {
				b2 = b1;
				b1 = sb[e];
			} else if (sb[e] > b2) {
				b2 = sb[e];
			}
		}
		gs[g] = per > 1 ? b1 + b2 : b1;
	}
	for (j = 0; j < c->topk_group; j++) {
		int best = -1;

		for (g = 0; g < c->n_group; g++)
			if (!keep[g] && (best < 0 || gs[g] > gs[best]))
				best = g;
		keep[best] = 1;
	}
	for (e = 0; e < E; e++)
		if (!keep[e / per])
			sb[e] = -INFINITY;
	for (k = 0; k < c->top_k; k++) {
		int best = -1;

		for (e = 0; e < E; e++)
			if (sb[e] > -INFINITY && (best < 0 || sb[e] > sb[best]))
				best = e;
		ids[k] = best;
		w[k] = s[best];
		sum += s[best];
		sb[best] = -INFINITY;
	}
	for (k = 0; k < c->top_k; k++) {
		if (c->norm_topk_prob)
			w[k] = (float)(w[k] / (sum + 1e-20));
		w[k] *= c->routed_scaling;
	}
	return -1;
}

/*
 * moe - routed experts (tokens grouped per expert) plus the shared expert,
 * into @y[n][H].  Returns 0, or -ERANGE with @err when a router score is not
 * finite (naming the layer, the position and the expert).
 */
static int moe(const struct ref_cpu *r, int l, const float *x, int n, float *y, struct sm_err *err)
{
	const struct ref_config *c = r->c;
	const struct ref_layer *L = &r->m->layers[l];
	int H = c->hidden, E = c->n_routed, K = c->top_k, t, e, k, i, rc = 0;
	float *logit = malloc(sizeof(float) * (size_t)n * E);
	int *ids = malloc(sizeof(int) * (size_t)n * K), *rows = malloc(sizeof(int) * (size_t)n);
	float *w = malloc(sizeof(float) * (size_t)n * K), *wt = malloc(sizeof(float) * (size_t)n);
	float *xs = malloc(sizeof(float) * (size_t)n * H), *ys = malloc(sizeof(float) * (size_t)n * H);

	if (!logit || !ids || !rows || !w || !wt || !xs || !ys)
		abort();
	matmul(r, &L->router, x, n, logit);
	for (t = 0; t < n && !rc; t++) {
		e = route(c, L->router_bias, logit + (size_t)t * E, ids + (size_t)t * K, w + (size_t)t * K);
		if (e >= 0)
			rc = sm_err_set(err, -ERANGE, "layer %d, position %d: the router score of "
					"expert %d is %s, so no expert can be chosen: "
					"%smodel.layers.%d.mlp.gate.weight holds NaN or Inf; the "
					"checkpoint is corrupt (download or export it again)", l,
					r->pos + t, e, isnan(logit[(size_t)t * E + e]) ? "NaN" :
					"not finite", r->m->prefix, l);
	}
	if (rc)
		goto out;
	if (r->routes.fn)
		r->routes.fn(r->routes.ctx, l, r->pos, n, ids);
	if (c->n_shared)
		swiglu(r, &L->shared, x, n, y);
	else
		memset(y, 0, sizeof(float) * (size_t)n * H);
	for (e = 0; e < E; e++) {
		int m = 0;

		for (t = 0; t < n; t++)
			for (k = 0; k < K; k++)
				if (ids[t * K + k] == e) {
					rows[m] = t;
					wt[m] = w[t * K + k];
					memcpy(xs + (size_t)m * H, x + (size_t)t * H, sizeof(float) * H);
					m++;
				}
		if (!m)
			continue;
		swiglu(r, &L->experts[e], xs, m, ys);
		for (i = 0; i < m; i++)
			for (k = 0; k < H; k++)
				y[(size_t)rows[i] * H + k] += wt[i] * ys[(size_t)i * H + k];
	}
out:
	free(logit);
	free(ids);
	free(rows);
	free(w);
	free(wt);
	free(xs);
	free(ys);
	return rc;
}

/* ---- the whole pass ------------------------------------------------------------ */

int ref_cpu_forward(struct ref_cpu *r, const int *tokens, int n, int all, float *logits, struct sm_err *err)
{
	const struct ref_config *c = r->c;
	const struct ref_model *m = r->m;
	int H = c->hidden, t, l, i, attn_w, scratch_w, rc = 0;
	float *x, *h, *a, *o, *scratch;
	char norm[96], source[96];

	if (n <= 0 || r->pos + n > r->max_seq)
		return sm_err_set(err, -ENOSPC, "%d tokens after %d do not fit the KV cache of %d positions; "
				  "pass a larger --max-seq", n, r->pos, r->max_seq);
	for (t = 0; t < n; t++)
		if (tokens[t] < 0 || tokens[t] >= c->vocab)
			return sm_err_set(err, -EINVAL, "token %d is outside the vocabulary (0..%d)",
					  tokens[t], c->vocab - 1);
	if (c->attn == REF_ATTN_MLA) {
		attn_w = c->n_heads * c->v_head;
		scratch_w = c->n_heads * (c->qk_nope + c->qk_rope) + c->kv_lora_rank + c->qk_rope +
			    (c->q_lora_rank > c->n_heads * (c->qk_nope + c->v_head) ?
			     c->q_lora_rank : c->n_heads * (c->qk_nope + c->v_head));
	} else {
		attn_w = c->n_heads * c->head_dim;
		scratch_w = (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
	}
	x = malloc(sizeof(float) * (size_t)n * H);
	h = malloc(sizeof(float) * (size_t)n * H);
	a = malloc(sizeof(float) * (size_t)n * H);
	o = malloc(sizeof(float) * (size_t)n * attn_w);
	scratch = malloc(sizeof(float) * (size_t)n * scratch_w);
	if (!x || !h || !a || !o || !scratch)
		abort();
	for (t = 0; t < n; t++)
		ref_linear_row(&m->embed, tokens[t], x + (size_t)t * H);
	for (l = 0; l < c->n_layers && !rc; l++) {
		const struct ref_layer *L = &m->layers[l];

		snprintf(norm, sizeof(norm), "%smodel.layers.%d.input_layernorm", m->prefix, l);
		if (l == 0)
			snprintf(source, sizeof(source), "%smodel.embed_tokens.weight", m->prefix);
		else
			snprintf(source, sizeof(source), "layer %d's MLP", l - 1);
		rc = norm_rows(r, h, x, L->in_norm, n, norm, source, err);
		if (rc)
			break;
		if (c->attn == REF_ATTN_MLA)
			mla(r, l, h, n, o, scratch);
		else
			gqa(r, l, h, n, o, scratch);
		matmul(r, &L->o, o, n, a);
		for (i = 0; i < n * H; i++)
			x[i] += a[i];
		snprintf(norm, sizeof(norm), "%smodel.layers.%d.post_attention_layernorm", m->prefix, l);
		snprintf(source, sizeof(source), "layer %d's attention", l);
		rc = norm_rows(r, h, x, L->post_norm, n, norm, source, err);
		if (rc)
			break;
		if (L->moe)
			rc = moe(r, l, h, n, a, err);
		else
			swiglu(r, &L->dense, h, n, a);
		for (i = 0; !rc && i < n * H; i++)
			x[i] += a[i];
	}
	if (!rc) {
		snprintf(norm, sizeof(norm), "%smodel.norm", m->prefix);
		snprintf(source, sizeof(source), "layer %d's MLP", c->n_layers - 1);
		rc = norm_rows(r, h, x, m->final_norm, n, norm, source, err);
	}
	if (!rc) {
		matmul(r, &m->lm_head, all ? h : h + (size_t)(n - 1) * H, all ? n : 1, logits);
		r->pos += n;
	}
	free(x);
	free(h);
	free(a);
	free(o);
	free(scratch);
	return rc;
}

struct ref_cpu *ref_cpu_new(const struct ref_model *m, int max_seq, int absorbed, int threads,
			    const struct ref_route_sink *routes, struct sm_err *err)
{
	const struct ref_config *c = &m->cfg;
	struct ref_cpu *r;
	size_t kw = 0, vw = 0;
	int l, ok;

	if (c->n_routed > 1024 || c->n_group > 256 || max_seq <= 0) {
		sm_err_set(err, -EINVAL, "the CPU backend takes at most 1024 experts in 256 groups and "
			   "a positive --max-seq (%d experts, %d groups, max-seq %d)", c->n_routed,
			   c->n_group, max_seq);
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	ok = r != NULL;

	if (ok) {
		r->m = m;
		r->c = c;
		r->max_seq = max_seq;
		r->absorbed = c->attn == REF_ATTN_MLA && absorbed;
		r->threads = threads < 1 ? 1 : threads;
		if (routes)
			r->routes = *routes;
		r->inv_freq = malloc(sizeof(float) * (size_t)(c->rotary_dim / 2 + 1));
		r->kcache = calloc((size_t)c->n_layers, sizeof(float *));
		r->vcache = calloc((size_t)c->n_layers, sizeof(float *));
		r->kv_b = calloc((size_t)c->n_layers, sizeof(float *));
		ok = r->inv_freq && r->kcache && r->vcache && r->kv_b;
	}
	if (ok) {
		ref_rope_freqs(c, r->inv_freq);
		if (c->attn == REF_ATTN_GQA)
			kw = vw = (size_t)c->n_kv_heads * c->head_dim;
		else if (r->absorbed)
			kw = (size_t)c->kv_lora_rank + c->qk_rope;
		else {
			kw = (size_t)c->n_heads * (c->qk_nope + c->qk_rope);
			vw = (size_t)c->n_heads * c->v_head;
		}
	}
	for (l = 0; ok && l < c->n_layers; l++) {
		r->kcache[l] = malloc(sizeof(float) * kw * (size_t)max_seq);
		r->vcache[l] = vw ? malloc(sizeof(float) * vw * (size_t)max_seq) : NULL;
		ok = r->kcache[l] && (!vw || r->vcache[l]);
		if (ok && r->absorbed) {
			const struct ref_linear *kvb = &m->layers[l].kv_b;
			int row;

			r->kv_b[l] = malloc(sizeof(float) * (size_t)kvb->out * kvb->in);
			ok = r->kv_b[l] != NULL;
			for (row = 0; ok && row < kvb->out; row++)
				ref_linear_row(kvb, row, r->kv_b[l] + (size_t)row * kvb->in);
		}
	}
	if (!ok) {
		ref_cpu_free(r);
		sm_err_set(err, -ENOMEM, "out of memory for a KV cache of %d positions", max_seq);
		return NULL;
	}
	return r;
}

void ref_cpu_free(struct ref_cpu *r)
{
	int l;

	if (!r)
		return;
	for (l = 0; l < r->c->n_layers; l++) {
		if (r->kcache)
			free(r->kcache[l]);
		if (r->vcache)
			free(r->vcache[l]);
		if (r->kv_b)
			free(r->kv_b[l]);
	}
	free(r->kcache);
	free(r->vcache);
	free(r->kv_b);
	free(r->inv_freq);
	free(r);
}
