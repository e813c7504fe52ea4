/*
 * synth.c - `sm120 ref make-model`: synthetic Kimi K2 / GLM-4.x checkpoints
 * in the real on-disk layouts (see synth.h).
 *
 * Three steps.  The dimensions come from one table (arch x {tiny, real}),
 * then the options' overrides.  A plan lists every tensor of the model: its
 * name, how its values are drawn, how it is stored and in which shard.  Then
 * the tensors are written one at a time - drawn from a PRNG keyed by (seed,
 * name), rounded to BF16 (the master), quantized from the master, handed to
 * the shard's writer (which spools to disk) and freed - so memory stays at
 * one tensor (two for an NVFP4 gate/up pair) whatever the model's size, and a
 * tensor's bytes do not depend on the write order, the layer count or the
 * layout.  config.json (and hf_quant_config.json) come last, so a directory
 * with a config.json holds a complete model.
 *
 * Values are integers until the last step: a uniform draw is a fixed-point
 * number (units of 2^-32) converted once to float, so the bytes are the same
 * on every machine (no libm, no contractible float expression).  Data is
 * written in host byte order; safetensors is little-endian, as are x86-64
 * and aarch64.
 */
#include "synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/numfmt.h"
#include "../st/safetensors.h"
#include "quantize.h"

/* A model at or above this size with shards = 0 is written one shard per layer. */
#define SYNTH_AUTO_SHARD_BYTES (2ull << 30)

/* ------------------------------------------------------------------ dimensions */

enum synth_arch { ARCH_KIMI, ARCH_GLM, ARCH_N };
enum synth_quant { QUANT_BF16, QUANT_FP8, QUANT_INT4, QUANT_NVFP4, QUANT_N };

static const char *const arch_names[ARCH_N] = { "kimi-k2", "glm4-moe" };
static const char *const quant_names[QUANT_N] = { "bf16", "fp8", "int4", "nvfp4" };

struct synth_dims {
	int vocab, hidden, layers, heads, kv_heads;	/* layers: the default to write */
	int q_lora, kv_lora, qk_nope, qk_rope, v_head;	/* MLA (kimi) */
	int head_dim, use_qk_norm;			/* GQA (glm) */
	double partial_rotary;				/* glm */
	int experts, shared, top_k, moe_inter, inter, first_dense, n_group, topk_group;
	double routed_scaling, rms_eps, rope_theta;
	double yarn_factor, beta_fast, beta_slow, mscale, mscale_all_dim; /* kimi only */
	int yarn_orig_max, max_pos;
	int bos, pad, media;				/* < 0: not written */
	int eos[3], n_eos;				/* n_eos > 1: written as a list */
};

/*
 * The one table of sizes.  Tiny sizes are what the engine's tests run (other
 * tests depend on these exact values); real sizes are Kimi K2-Instruct-0905
 * and GLM-4.7 (models-and-formats.md §1), with only their layer count cut:
 * first_k_dense_replace + 1 for Kimi, 4 (3 dense + 1 MoE) for GLM.
 */
static const struct synth_dims synth_sizes[ARCH_N][2] = {
	[ARCH_KIMI] = {
		{ .vocab = 256, .hidden = 192, .layers = 3, .heads = 4, .kv_heads = 4,
		  .q_lora = 96, .kv_lora = 64, .qk_nope = 32, .qk_rope = 16, .v_head = 32,
		  .experts = 16, .shared = 1, .top_k = 4, .moe_inter = 128, .inter = 320,
		  .first_dense = 1, .n_group = 4, .topk_group = 2, .routed_scaling = 2.827,
		  .rms_eps = 1e-6, .rope_theta = 50000, .yarn_factor = 32, .beta_fast = 32,
		  .beta_slow = 1, .mscale = 1, .mscale_all_dim = 1, .yarn_orig_max = 4096,
		  .max_pos = 131072, .bos = 1, .pad = 255, .media = 254, .eos = { 2 }, .n_eos = 1 },
		{ .vocab = 163840, .hidden = 7168, .layers = 2, .heads = 64, .kv_heads = 64,
		  .q_lora = 1536, .kv_lora = 512, .qk_nope = 128, .qk_rope = 64, .v_head = 128,
		  .experts = 384, .shared = 1, .top_k = 8, .moe_inter = 2048, .inter = 18432,
		  .first_dense = 1, .n_group = 1, .topk_group = 1, .routed_scaling = 2.827,
		  .rms_eps = 1e-6, .rope_theta = 50000, .yarn_factor = 64, .beta_fast = 1,
		  .beta_slow = 1, .mscale = 1, .mscale_all_dim = 1, .yarn_orig_max = 4096,
		  .max_pos = 262144, .bos = 163584, .pad = 163839, .media = 163605,
		  .eos = { 163585 }, .n_eos = 1 },
	},
	[ARCH_GLM] = {
		{ .vocab = 256, .hidden = 192, .layers = 3, .heads = 6, .kv_heads = 2,
		  .head_dim = 32, .use_qk_norm = 1, .partial_rotary = 0.5,
		  .experts = 16, .shared = 1, .top_k = 4, .moe_inter = 128, .inter = 320,
		  .first_dense = 1, .n_group = 1, .topk_group = 1, .routed_scaling = 2.5,
		  .rms_eps = 1e-5, .rope_theta = 1000000, .max_pos = 131072,
		  .bos = 1, .pad = 255, .media = -1, .eos = { 2 }, .n_eos = 1 },
		{ .vocab = 151552, .hidden = 5120, .layers = 4, .heads = 96, .kv_heads = 8,
		  .head_dim = 128, .use_qk_norm = 1, .partial_rotary = 0.5,
		  .experts = 160, .shared = 1, .top_k = 8, .moe_inter = 1536, .inter = 12288,
		  .first_dense = 3, .n_group = 1, .topk_group = 1, .routed_scaling = 2.5,
		  .rms_eps = 1e-5, .rope_theta = 1000000, .max_pos = 202752,
		  .bos = -1, .pad = 151329, .media = -1, .eos = { 151329, 151336, 151338 },
		  .n_eos = 3 },
	},
};

/* Gains (percent) on the 1/sqrt(in_features) std of a Linear weight: the
 * projections that write into the residual stream are halved, so the stream
 * grows slowly (rms ~1 from the embedding, ~+0.3 per layer) instead of
 * doubling every layer. */
#define GAIN_IN 100		/* q/k/v, MLA down/up projections, gate/up, router, lm_head */
#define GAIN_OUT 50		/* o_proj, down_proj */

struct synth_model {
	enum synth_arch arch;
	enum synth_quant quant;
	struct synth_dims d;
	const struct synth_opts *o;
};

static int parse_name(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int synth_defaults(const char *arch, int real_dims, int *layers, int *experts)
{
	int a = parse_name(arch, arch_names, ARCH_N);

	if (a < 0)
		return -EINVAL;
	*layers = synth_sizes[a][real_dims ? 1 : 0].layers;
	*experts = synth_sizes[a][real_dims ? 1 : 0].experts;
	return 0;
}

/* model_resolve - check @o and fill @m: the table's dimensions with @o's overrides. */
static int model_resolve(const struct synth_opts *o, struct synth_model *m, struct sm_err *err)
{
	struct synth_dims *d = &m->d;
	int a = parse_name(o->arch, arch_names, ARCH_N);
	int q = parse_name(o->quant, quant_names, QUANT_N);

	if (a < 0)
		return sm_err_set(err, -EINVAL, "unknown --arch '%s' (accepted: kimi-k2, "
				  "glm4-moe)", o->arch ? o->arch : "");
	if (q < 0)
		return sm_err_set(err, -EINVAL, "unknown --quant '%s' (accepted: bf16, "
				  "fp8, int4, nvfp4)", o->quant ? o->quant : "");
	if (o->k25_layout && a != ARCH_KIMI)
		return sm_err_set(err, -EINVAL, "--k25 is for --arch kimi-k2 only (got "
				  "--arch %s)", o->arch);
	if (o->legacy_quant_config && q != QUANT_NVFP4)
		return sm_err_set(err, -EINVAL, "--legacy-quant-config is for --quant "
				  "nvfp4 only (got --quant %s)", o->quant);
	if (o->layers < 0 || o->layers > SYNTH_MAX_LAYERS)
		return sm_err_set(err, -EINVAL, "--layers %d out of range (accepted: "
				  "1..%d, 0 for the default)", o->layers, SYNTH_MAX_LAYERS);
	if (o->experts < 0 || o->experts > SYNTH_MAX_EXPERTS)
		return sm_err_set(err, -EINVAL, "--experts %d out of range (accepted: "
				  "1..%d, 0 for the default)", o->experts, SYNTH_MAX_EXPERTS);
	if (o->shards < 0 || o->shards > SYNTH_MAX_SHARDS)
		return sm_err_set(err, -EINVAL, "--shards %d out of range (accepted: "
				  "0..%d)", o->shards, SYNTH_MAX_SHARDS);
	m->arch = (enum synth_arch)a;
	m->quant = (enum synth_quant)q;
	m->o = o;
	*d = synth_sizes[a][o->real_dims ? 1 : 0];
	if (o->layers)
		d->layers = o->layers;
	/* Fewer layers than the real dense prefix: keep the last one MoE, so
	 * every checkpoint has routed experts to load. */
	if (d->layers <= d->first_dense)
		d->first_dense = d->layers - 1;
	if (o->experts) {
		d->experts = o->experts;
		if (d->top_k > d->experts)
			d->top_k = d->experts;
		/* n_group must divide the experts, with at least two per group
		 * (a group's score is its top-2 sum); the kept groups must hold
		 * at least top_k experts. */
		while (d->n_group > 1 && (d->experts % d->n_group || d->experts / d->n_group < 2))
			d->n_group--;
		if (d->topk_group > d->n_group)
			d->topk_group = d->n_group;
		while (d->topk_group < d->n_group &&
		       d->topk_group * (d->experts / d->n_group) < d->top_k)
			d->topk_group++;
	}
	return 0;
}

/* ------------------------------------------------------------------ values */

/* xoshiro256**, seeded through splitmix64 from (seed, FNV-1a of the name). */
struct prng {
	uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void prng_seed(struct prng *g, uint64_t seed, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull, x = seed;
	int i;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
	h ^= splitmix64(&x);
	for (i = 0; i < 4; i++)
		g->s[i] = splitmix64(&h);
}

static uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t prng_next(struct prng *g)
{
	uint64_t *s = g->s, r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return r;
}

/* How a tensor's values are drawn: uniform, center +- amp. */
enum synth_init {
	INIT_LINEAR,		/* std gain/sqrt(in) */
	INIT_EMBED,		/* std 1 */
	INIT_NORM,		/* 1 + U(-0.1, 0.1) */
	INIT_BIAS,		/* U(-0.1, 0.1) */
	INIT_ROUTER_BIAS,	/* U(-0.05, 0.05) */
};

#define FIX_ONE (1ll << 32)	/* fixed point: units of 2^-32 */

struct dist {
	int64_t center, amp;	/* in FIX_ONE units */
};

static uint64_t isqrt64(uint64_t n)
{
	uint64_t r = 0, bit = 1ull << 62;

	while (bit > n)
		bit >>= 2;
	while (bit) {
		if (n >= r + bit) {
			n -= r + bit;
			r = (r >> 1) + bit;
		} else {
			r >>= 1;
		}
		bit >>= 2;
	}
	return r;
}

/* std_amp - half-width of the uniform with std gain% / sqrt(n): sqrt(3/n) * gain%. */
static int64_t std_amp(int64_t n, int gain)
{
	return (int64_t)(2 * isqrt64((3ull << 62) / (uint64_t)n)) * gain / 100;
}

/* draw - one value: an odd 25-bit integer in (-2^24, 2^24) scales amp exactly. */
static float draw(const struct dist *d, struct prng *g)
{
	int64_t u = (int64_t)(prng_next(g) >> 40) * 2 - ((1 << 24) - 1);

	return (float)(d->center + u * d->amp / (1 << 24)) * 0x1p-32f;
}

/* ------------------------------------------------------------------ plan */

/* How a tensor is stored. */
enum synth_fmt { FMT_BF16, FMT_F32, FMT_FP8, FMT_INT4, FMT_NVFP4 };

struct plan_entry {
	char name[80];		/* without the K2.5 prefix; also the PRNG key */
	enum synth_init init;
	enum synth_fmt fmt;
	int64_t rows, cols;	/* cols 0: a vector [rows] */
	int gain;		/* INIT_LINEAR: percent */
	int in_lm;		/* K2.5: gets the language_model. prefix */
	int layer;		/* -1 before the layers, d.layers after them */
	int amax_with;		/* NVFP4 gate/up: the entry sharing the amax, else -1 */
	int shard;
	char group[48];		/* non-empty: a progress step ends after this entry */
};

struct plan {
	struct plan_entry *e;
	size_t n, cap;
	int failed;		/* out of memory or a name too long */
};

static struct plan_entry *plan_vadd(struct plan *p, enum synth_init init, enum synth_fmt fmt,
				    int64_t rows, int64_t cols, int gain, int layer,
				    const char *fmt_name, va_list ap)
{
	struct plan_entry *e;
	int n;

	if (p->failed)
		return NULL;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct plan_entry *ne = realloc(p->e, cap * sizeof(*ne));

		if (!ne) {
			p->failed = 1;
			return NULL;
		}
		p->e = ne;
		p->cap = cap;
	}
	e = &p->e[p->n];
	memset(e, 0, sizeof(*e));
	n = vsnprintf(e->name, sizeof(e->name), fmt_name, ap);
	if (n < 0 || (size_t)n >= sizeof(e->name)) {
		p->failed = 1;
		return NULL;
	}
	e->init = init;
	e->fmt = fmt;
	e->rows = rows;
	e->cols = cols;
	e->gain = gain;
	e->in_lm = 1;
	e->layer = layer;
	e->amax_with = -1;
	p->n++;
	return e;
}

/* plan_add - append a tensor [rows] (cols 0) or [rows, cols] named by @fmt_name. */
static struct plan_entry *plan_add(struct plan *p, enum synth_init init, enum synth_fmt fmt,
				   int64_t rows, int64_t cols, int gain, int layer,
				   const char *fmt_name, ...) __attribute__((format(printf, 8, 9)));

static struct plan_entry *plan_add(struct plan *p, enum synth_init init, enum synth_fmt fmt,
				   int64_t rows, int64_t cols, int gain, int layer,
				   const char *fmt_name, ...)
{
	struct plan_entry *e;
	va_list ap;

	va_start(ap, fmt_name);
	e = plan_vadd(p, init, fmt, rows, cols, gain, layer, fmt_name, ap);
	va_end(ap);
	return e;
}

/* plan_group - end a progress step after the last entry added. */
static void plan_group(struct plan *p, const char *fmt_label, ...)
	__attribute__((format(printf, 2, 3)));

static void plan_group(struct plan *p, const char *fmt_label, ...)
{
	va_list ap;

	if (p->failed || !p->n)
		return;
	va_start(ap, fmt_label);
	vsnprintf(p->e[p->n - 1].group, sizeof(p->e[0].group), fmt_label, ap);
	va_end(ap);
}

/* plan_linear - a Linear weight [out, in], stored as @m's quantization puts it. */
static void plan_linear(struct plan *p, const struct synth_model *m, int layer, int64_t out,
			int64_t in, int gain, int routed, const char *fmt_name, ...)
	__attribute__((format(printf, 8, 9)));

static void plan_linear(struct plan *p, const struct synth_model *m, int layer, int64_t out,
			int64_t in, int gain, int routed, const char *fmt_name, ...)
{
	enum synth_fmt fmt = FMT_BF16;
	va_list ap;

	if (m->quant == QUANT_FP8)
		fmt = FMT_FP8;
	else if (m->quant == QUANT_INT4 && routed)
		fmt = FMT_INT4;
	else if (m->quant == QUANT_NVFP4 && routed)
		fmt = FMT_NVFP4;
	va_start(ap, fmt_name);
	plan_vadd(p, INIT_LINEAR, fmt, out, in, gain, layer, fmt_name, ap);
	va_end(ap);
}

/* plan_mlp - gate/up/down of a SwiGLU MLP of width @inter under @prefix. */
static void plan_mlp(struct plan *p, const struct synth_model *m, int layer, const char *prefix,
		     int64_t inter, int routed)
{
	int64_t h = m->d.hidden;
	size_t gate = p->n;

	plan_linear(p, m, layer, inter, h, GAIN_IN, routed, "%s.gate_proj.weight", prefix);
	plan_linear(p, m, layer, inter, h, GAIN_IN, routed, "%s.up_proj.weight", prefix);
	plan_linear(p, m, layer, h, inter, GAIN_OUT, routed, "%s.down_proj.weight", prefix);
	/* ModelOpt gives the fused gate/up pair one weight_scale_2 */
	if (!p->failed && p->e[gate].fmt == FMT_NVFP4) {
		p->e[gate].amax_with = (int)gate + 1;
		p->e[gate + 1].amax_with = (int)gate;
	}
	plan_group(p, "%s", prefix);
}

#define ATTN "model.layers.%d.self_attn."

static void plan_attn_mla(struct plan *p, const struct synth_model *m, int l)
{
	const struct synth_dims *d = &m->d;
	int64_t h = d->hidden, nh = d->heads, qk = d->qk_nope + d->qk_rope;

	plan_linear(p, m, l, d->q_lora, h, GAIN_IN, 0, ATTN "q_a_proj.weight", l);
	plan_add(p, INIT_NORM, FMT_BF16, d->q_lora, 0, 0, l, ATTN "q_a_layernorm.weight", l);
	plan_linear(p, m, l, nh * qk, d->q_lora, GAIN_IN, 0, ATTN "q_b_proj.weight", l);
	plan_linear(p, m, l, d->kv_lora + d->qk_rope, h, GAIN_IN, 0,
		    ATTN "kv_a_proj_with_mqa.weight", l);
	plan_add(p, INIT_NORM, FMT_BF16, d->kv_lora, 0, 0, l, ATTN "kv_a_layernorm.weight", l);
	plan_linear(p, m, l, nh * (d->qk_nope + d->v_head), d->kv_lora, GAIN_IN, 0,
		    ATTN "kv_b_proj.weight", l);
	plan_linear(p, m, l, h, nh * d->v_head, GAIN_OUT, 0, ATTN "o_proj.weight", l);
}

static void plan_attn_gqa(struct plan *p, const struct synth_model *m, int l)
{
	const struct synth_dims *d = &m->d;
	int64_t h = d->hidden, q = (int64_t)d->heads * d->head_dim,
		kv = (int64_t)d->kv_heads * d->head_dim;

	plan_linear(p, m, l, q, h, GAIN_IN, 0, ATTN "q_proj.weight", l);
	plan_add(p, INIT_BIAS, FMT_BF16, q, 0, 0, l, ATTN "q_proj.bias", l);
	plan_linear(p, m, l, kv, h, GAIN_IN, 0, ATTN "k_proj.weight", l);
	plan_add(p, INIT_BIAS, FMT_BF16, kv, 0, 0, l, ATTN "k_proj.bias", l);
	plan_linear(p, m, l, kv, h, GAIN_IN, 0, ATTN "v_proj.weight", l);
	plan_add(p, INIT_BIAS, FMT_BF16, kv, 0, 0, l, ATTN "v_proj.bias", l);
	plan_linear(p, m, l, h, q, GAIN_OUT, 0, ATTN "o_proj.weight", l);
	if (d->use_qk_norm) {
		plan_add(p, INIT_NORM, FMT_BF16, d->head_dim, 0, 0, l, ATTN "q_norm.weight", l);
		plan_add(p, INIT_NORM, FMT_BF16, d->head_dim, 0, 0, l, ATTN "k_norm.weight", l);
	}
}

#undef ATTN

static void plan_layer(struct plan *p, const struct synth_model *m, int l)
{
	const struct synth_dims *d = &m->d;
	char prefix[64];
	int e;

	plan_add(p, INIT_NORM, FMT_BF16, d->hidden, 0, 0, l,
		 "model.layers.%d.input_layernorm.weight", l);
	if (m->arch == ARCH_KIMI)
		plan_attn_mla(p, m, l);
	else
		plan_attn_gqa(p, m, l);
	plan_add(p, INIT_NORM, FMT_BF16, d->hidden, 0, 0, l,
		 "model.layers.%d.post_attention_layernorm.weight", l);
	plan_group(p, "model.layers.%d.self_attn", l);
	if (l < d->first_dense) {
		snprintf(prefix, sizeof(prefix), "model.layers.%d.mlp", l);
		plan_mlp(p, m, l, prefix, d->inter, 0);
		return;
	}
	plan_add(p, INIT_LINEAR, FMT_BF16, d->experts, d->hidden, GAIN_IN, l,
		 "model.layers.%d.mlp.gate.weight", l);
	plan_add(p, INIT_ROUTER_BIAS, FMT_F32, d->experts, 0, 0, l,
		 "model.layers.%d.mlp.gate.e_score_correction_bias", l);
	plan_group(p, "model.layers.%d.mlp.gate", l);
	for (e = 0; e < d->experts; e++) {
		snprintf(prefix, sizeof(prefix), "model.layers.%d.mlp.experts.%d", l, e);
		plan_mlp(p, m, l, prefix, d->moe_inter, 1);
	}
	snprintf(prefix, sizeof(prefix), "model.layers.%d.mlp.shared_experts", l);
	plan_mlp(p, m, l, prefix, (int64_t)d->shared * d->moe_inter, 0);
}

/* plan_build - every tensor of @m in writing order (shards not yet assigned). */
static int plan_build(struct plan *p, const struct synth_model *m, struct sm_err *err)
{
	const struct synth_dims *d = &m->d;
	struct plan_entry *e;
	int l;

	if (m->o->k25_layout) {
		/* the vision tower a text-only loader must skip: 16 patches of 4x4x3 */
		e = plan_add(p, INIT_LINEAR, FMT_BF16, 16, 48, GAIN_IN, -1,
			     "vision_tower.patch_embed.weight");
		if (e)
			e->in_lm = 0;
	}
	plan_add(p, INIT_EMBED, FMT_BF16, d->vocab, d->hidden, 0, -1, "model.embed_tokens.weight");
	plan_group(p, "model.embed_tokens");
	for (l = 0; l < d->layers; l++)
		plan_layer(p, m, l);
	plan_add(p, INIT_NORM, FMT_BF16, d->hidden, 0, 0, d->layers, "model.norm.weight");
	plan_add(p, INIT_LINEAR, FMT_BF16, d->vocab, d->hidden, GAIN_IN, d->layers,
		 "lm_head.weight");
	plan_group(p, "lm_head");
	if (p->failed)
		return sm_err_set(err, -ENOMEM, "out of memory planning %zu tensors",
				  p->n);
	return 0;
}

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static int fmt_quantized(enum synth_fmt f)
{
	return f == FMT_FP8 || f == FMT_INT4 || f == FMT_NVFP4;
}

/* entry_bytes - bytes on disk of the entry with its companions. */
static uint64_t entry_bytes(const struct plan_entry *e)
{
	uint64_t n = (uint64_t)e->rows * (uint64_t)(e->cols ? e->cols : 1);

	switch (e->fmt) {
	case FMT_BF16: return 2 * n;
	case FMT_F32: return 4 * n;
	case FMT_FP8:
		return n + 4 * (uint64_t)(cdiv(e->rows, SYNTH_FP8_BLOCK) *
					  cdiv(e->cols, SYNTH_FP8_BLOCK));
	case FMT_INT4: return n / 2 + 2 * (n / SYNTH_INT4_GROUP) + 2 * 8;
	case FMT_NVFP4: return n / 2 + n / SYNTH_NVFP4_BLOCK + 2 * 4;
	}
	return 0;
}

/*
 * plan_shards - assign every entry a shard and return the shard count.
 * @requested > 1: that many, split by size; 0 and a model of 2 GiB or more:
 * one for the embeddings, one per layer, one for the final norm and lm_head;
 * else one file.  Companions go to the next shard (entry_companion_shard).
 */
static int plan_shards(struct plan *p, int requested, int layers, uint64_t *total)
{
	uint64_t sum = 0, cum = 0;
	size_t i;
	int n = 1;

	for (i = 0; i < p->n; i++)
		sum += entry_bytes(&p->e[i]);
	*total = sum;
	if (requested > 1)
		n = requested;
	else if (requested == 0 && sum >= SYNTH_AUTO_SHARD_BYTES)
		n = layers + 2;
	for (i = 0; i < p->n; i++) {
		struct plan_entry *e = &p->e[i];
		uint64_t b = entry_bytes(e);

		if (n == 1)
			e->shard = 0;
		else if (requested > 1)
			e->shard = (int)((cum + b / 2) * (uint64_t)n / (sum ? sum : 1));
		else
			e->shard = e->layer + 1;
		if (e->shard >= n)
			e->shard = n - 1;
		cum += b;
	}
	return n;
}

/* Companions (scales, shapes) live in a different shard from their weight
 * whenever there are shards, as in real checkpoints that loaders must handle. */
static int companion_shard(const struct plan_entry *e, int nshards)
{
	return (e->shard + 1) % nshards;
}

/* ------------------------------------------------------------------ writing */

struct synth_out {
	const struct synth_model *m;
	const char *dir;
	int nshards;
	struct st_writer **w;	/* [nshards]; NULL once finished */
	char **files;		/* [nshards] file names */
	char **paths;		/* [nshards] full paths */
	long *last;		/* [nshards] the last entry writing to the shard */
	char **names;		/* the index: tensor names ... */
	const char **where;	/* ... and their shard file names */
	size_t n, cap;
	uint64_t bytes;		/* tensor bytes written */
	long cached;		/* NVFP4: entry whose master is in cache, else -1 */
	uint16_t *cache;
	float cache_amax;
};

static int path_join(char *buf, size_t size, const char *dir, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * emit - add one tensor, module of @e + "." + @leaf (K2.5: prefixed), to
 * shard @shard and to the index.
 */
static int emit(struct synth_out *out, const struct plan_entry *e, int shard, const char *leaf,
		enum st_dtype dt, int ndim, const int64_t *shape, const void *data,
		struct sm_err *err)
{
	const char *dot = strrchr(e->name, '.');
	int base = dot ? (int)(dot - e->name) : (int)strlen(e->name);
	const char *prefix = out->m->o->k25_layout && e->in_lm ? "language_model." : "";
	char name[160], **nn;
	const char **nw;
	int64_t numel = 1;
	int i, rc;

	snprintf(name, sizeof(name), "%s%.*s.%s", prefix, base, e->name, leaf);
	if (out->n == out->cap) {
		size_t cap = out->cap ? 2 * out->cap : 1024;

		nn = realloc(out->names, cap * sizeof(*nn));
		if (nn)
			out->names = nn;
		nw = nn ? realloc(out->where, cap * sizeof(*nw)) : NULL;
		if (!nw)
			return sm_err_set(err, -ENOMEM, "out of memory at %s", name);
		out->where = nw;
		out->cap = cap;
	}
	if (!(out->names[out->n] = strdup(name)))
		return sm_err_set(err, -ENOMEM, "out of memory at %s", name);
	out->where[out->n++] = out->files[shard];
	rc = st_writer_add(out->w[shard], name, dt, ndim, shape, data, err);
	if (rc)
		return rc;
	for (i = 0; i < ndim; i++)
		numel *= shape[i];
	out->bytes += (uint64_t)numel * st_dtype_size(dt);
	return 0;
}

/* gen_master - draw @e's values into @out: BF16 (F32 for FMT_F32). */
static void gen_master(const struct plan_entry *e, uint64_t seed, void *out)
{
	size_t i, n = (size_t)e->rows * (size_t)(e->cols ? e->cols : 1);
	struct dist d = { 0, 0 };
	struct prng g;

	switch (e->init) {
	case INIT_LINEAR: d.amp = std_amp(e->cols, e->gain); break;
	case INIT_EMBED: d.amp = std_amp(1, 100); break;
	case INIT_NORM: d.center = FIX_ONE; d.amp = FIX_ONE / 10; break;
	case INIT_BIAS: d.amp = FIX_ONE / 10; break;
	case INIT_ROUTER_BIAS: d.amp = FIX_ONE / 20; break;
	}
	prng_seed(&g, seed, e->name);
	if (e->fmt == FMT_F32)
		for (i = 0; i < n; i++)
			((float *)out)[i] = draw(&d, &g);
	else
		for (i = 0; i < n; i++)
			((uint16_t *)out)[i] = nf_f32_to_bf16(draw(&d, &g));
}

/* new_master - a freshly drawn master of @e, or NULL (out of memory). */
static void *new_master(const struct plan_entry *e, uint64_t seed)
{
	size_t n = (size_t)e->rows * (size_t)(e->cols ? e->cols : 1);
	void *buf = malloc(n * (e->fmt == FMT_F32 ? 4 : 2));

	if (buf)
		gen_master(e, seed, buf);
	return buf;
}

/*
 * nvfp4_amax - the amax ModelOpt uses for entry @i with master @w: its own,
 * or for the first of a gate/up pair the joint one, drawing the second's
 * master into the cache, where the second's turn takes it (and the amax).
 */
static int nvfp4_amax(struct synth_out *out, const struct plan *p, size_t i, const uint16_t *w,
		      float *amax)
{
	const struct plan_entry *e = &p->e[i], *pe;
	float other;

	*amax = synth_amax(w, (size_t)(e->rows * e->cols));
	if (e->amax_with < 0)
		return 0;
	pe = &p->e[e->amax_with];
	free(out->cache);
	out->cached = -1;
	out->cache = new_master(pe, out->m->o->seed);
	if (!out->cache)
		return -ENOMEM;
	out->cached = e->amax_with;
	other = synth_amax(out->cache, (size_t)(pe->rows * pe->cols));
	if (other > *amax)
		*amax = other;
	out->cache_amax = *amax;
	return 0;
}

/* write_entry - draw, quantize and add entry @i (and its companions). */
static int write_entry(struct synth_out *out, const struct plan *p, size_t i, struct sm_err *err)
{
	const struct plan_entry *e = &p->e[i];
	const char *leaf = strrchr(e->name, '.') + 1;
	int64_t r = e->rows, c = e->cols, shape[2] = { r, c }, sshape[2];
	int cs = companion_shard(e, out->nshards), nd = c ? 2 : 1, rc = 0, oom = 0;
	int from_cache = out->cached == (long)i;
	void *master, *q = NULL, *s = NULL;
	size_t n = (size_t)r * (size_t)(c ? c : 1);

	if (from_cache) {
		master = out->cache;
		out->cache = NULL;
		out->cached = -1;
	} else {
		master = new_master(e, out->m->o->seed);
	}
	if (!master)
		return sm_err_set(err, -ENOMEM, "out of memory for %s", e->name);
	switch (e->fmt) {
	case FMT_BF16:
		rc = emit(out, e, e->shard, leaf, ST_BF16, nd, shape, master, err);
		break;
	case FMT_F32:
		rc = emit(out, e, e->shard, leaf, ST_F32, nd, shape, master, err);
		break;
	case FMT_FP8:
		sshape[0] = cdiv(r, SYNTH_FP8_BLOCK);
		sshape[1] = cdiv(c, SYNTH_FP8_BLOCK);
		q = malloc(n);
		s = malloc((size_t)(sshape[0] * sshape[1]) * sizeof(float));
		if (!q || !s) {
			oom = 1;
			break;
		}
		synth_quant_fp8(master, r, c, q, s);
		rc = emit(out, e, e->shard, "weight", ST_F8_E4M3, 2, shape, q, err);
		if (!rc)
			rc = emit(out, e, cs, "weight_scale_inv", ST_F32, 2, sshape, s, err);
		break;
	case FMT_INT4: {
		int64_t pshape[2] = { r, c / 8 }, wshape[1] = { 2 };

		sshape[0] = r;
		sshape[1] = c / SYNTH_INT4_GROUP;
		q = malloc(n / 2);
		s = malloc(n / SYNTH_INT4_GROUP * 2);
		if (!q || !s) {
			oom = 1;
			break;
		}
		synth_quant_int4(master, r, c, q, s);
		rc = emit(out, e, e->shard, "weight_packed", ST_I32, 2, pshape, q, err);
		if (!rc)
			rc = emit(out, e, cs, "weight_scale", ST_BF16, 2, sshape, s, err);
		if (!rc)
			rc = emit(out, e, cs, "weight_shape", ST_I64, 1, wshape, shape, err);
		break;
	}
	case FMT_NVFP4: {
		int64_t pshape[2] = { r, c / 2 };
		/* a fixed static activation scale: amax 6 -> 6/(6*448) */
		float amax, s2, in_scale = 1.0f / 448.0f;

		sshape[0] = r;
		sshape[1] = c / SYNTH_NVFP4_BLOCK;
		q = malloc(n / 2);
		s = malloc(n / SYNTH_NVFP4_BLOCK);
		if (from_cache)
			amax = out->cache_amax;
		if (!q || !s || (!from_cache && nvfp4_amax(out, p, i, master, &amax))) {
			oom = 1;
			break;
		}
		s2 = synth_nvfp4_scale_2(amax);
		synth_quant_nvfp4(master, r, c, s2, q, s);
		rc = emit(out, e, e->shard, "weight", ST_U8, 2, pshape, q, err);
		if (!rc)
			rc = emit(out, e, cs, "weight_scale", ST_F8_E4M3, 2, sshape, s, err);
		if (!rc)
			rc = emit(out, e, cs, "weight_scale_2", ST_F32, 0, NULL, &s2, err);
		if (!rc)
			rc = emit(out, e, cs, "input_scale", ST_F32, 0, NULL, &in_scale, err);
		break;
	}
	}
	if (oom)
		rc = sm_err_set(err, -ENOMEM, "out of memory for %s", e->name);
	free(master);
	free(q);
	free(s);
	return rc;
}

/* out_open - name the shards, start their writers, note each one's last entry. */
static int out_open(struct synth_out *out, const struct plan *p, struct sm_err *err)
{
	int s, n = out->nshards;
	size_t i;

	out->w = calloc((size_t)n, sizeof(*out->w));
	out->files = calloc((size_t)n, sizeof(*out->files));
	out->paths = calloc((size_t)n, sizeof(*out->paths));
	out->last = calloc((size_t)n, sizeof(*out->last));
	if (!out->w || !out->files || !out->paths || !out->last)
		return sm_err_set(err, -ENOMEM, "out of memory");
	for (s = 0; s < n; s++) {
		char file[64], path[4096];

		if (n == 1)
			snprintf(file, sizeof(file), "model.safetensors");
		else
			snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", s + 1, n);
		if (path_join(path, sizeof(path), out->dir, file))
			return sm_err_set(err, -ENAMETOOLONG, "%s/%s: path too long",
					  out->dir, file);
		out->files[s] = strdup(file);
		out->paths[s] = strdup(path);
		out->w[s] = out->paths[s] ? st_writer_new(out->paths[s]) : NULL;
		if (!out->files[s] || !out->w[s])
			return sm_err_set(err, -ENOMEM, "out of memory for %s", path);
		out->last[s] = -1;
	}
	for (i = 0; i < p->n; i++) {
		out->last[p->e[i].shard] = (long)i;
		if (fmt_quantized(p->e[i].fmt))
			out->last[companion_shard(&p->e[i], n)] = (long)i;
	}
	return 0;
}

/* out_finish - finish shard @s's writer; returns 0 or -errno with @err. */
static int out_finish(struct synth_out *out, int s, struct sm_err *err)
{
	int rc = st_writer_finish(out->w[s], err);

	out->w[s] = NULL;
	return rc;
}

/* out_close - free everything; on failure also drop the unfinished shards. */
static void out_close(struct synth_out *out, int failed)
{
	struct sm_err ignored;
	size_t i;
	int s;

	for (s = 0; out->w && s < out->nshards; s++) {
		if (!out->w[s])
			continue;
		/* the writer API frees only through finish: write, then remove */
		if (st_writer_finish(out->w[s], &ignored) == 0 && failed)
			unlink(out->paths[s]);
	}
	for (s = 0; s < out->nshards; s++) {
		if (out->files)
			free(out->files[s]);
		if (out->paths)
			free(out->paths[s]);
	}
	for (i = 0; i < out->n; i++)
		free(out->names[i]);
	free(out->names);
	free(out->where);
	free(out->w);
	free(out->files);
	free(out->paths);
	free(out->last);
	free(out->cache);
}

/* remove_stale - drop @name from @dir if present (a file another layout wrote). */
static int remove_stale(const char *dir, const char *name, struct sm_err *err)
{
	char path[4096];

	if (path_join(path, sizeof(path), dir, name))
		return sm_err_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir,
				  name);
	if (unlink(path) != 0 && errno != ENOENT)
		return sm_err_set(err, -errno, "cannot remove stale %s: %s", path,
				  strerror(errno));
	return 0;
}

/* report - tell @o's progress callback, when it has one and the write is large enough. */
static void report(const struct synth_opts *o, const char *what, uint64_t done, uint64_t total)
{
	struct synth_progress pr = { what, done, total };

	if (o->progress && total >= o->progress_min)
		o->progress(&pr, o->progress_ctx);
}

static int write_tensors(const struct synth_model *m, const char *dir, struct plan *p,
			 struct sm_err *err)
{
	struct synth_out out = { .m = m, .dir = dir, .cached = -1 };
	uint64_t total;
	size_t i;
	int s, rc;

	out.nshards = plan_shards(p, m->o->shards, m->d.layers, &total);
	rc = out_open(&out, p, err);
	if (!rc)
		report(m->o, "", 0, total);
	for (i = 0; !rc && i < p->n; i++) {
		rc = write_entry(&out, p, i, err);
		for (s = 0; !rc && s < out.nshards; s++)
			if (out.last[s] == (long)i)
				rc = out_finish(&out, s, err);
		if (!rc && p->e[i].group[0])
			report(m->o, p->e[i].group, out.bytes, total);
	}
	for (s = 0; !rc && s < out.nshards; s++)	/* shards that received nothing */
		if (out.w[s])
			rc = out_finish(&out, s, err);
	if (!rc && out.nshards > 1)
		rc = st_write_index(dir, out.n, (const char *const *)out.names, out.where,
				    out.bytes, err);
	if (!rc)
		rc = remove_stale(dir, out.nshards > 1 ? "model.safetensors"
				  : "model.safetensors.index.json", err);
	out_close(&out, rc != 0);
	return rc;
}

/* ------------------------------------------------------------------ config */

/* A cJSON builder that remembers a failed allocation instead of checking each call. */
struct jb {
	int failed;
};

static cJSON *jadd(struct jb *j, cJSON *obj, const char *key, cJSON *item)
{
	if (!item || !obj || !cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		j->failed = 1;
		return NULL;
	}
	return item;
}

static void jnum(struct jb *j, cJSON *o, const char *k, double v)
{
	jadd(j, o, k, cJSON_CreateNumber(v));
}

static void jbool(struct jb *j, cJSON *o, const char *k, int v)
{
	jadd(j, o, k, cJSON_CreateBool(v));
}

static void jstr(struct jb *j, cJSON *o, const char *k, const char *v)
{
	jadd(j, o, k, cJSON_CreateString(v));
}

static void jnull(struct jb *j, cJSON *o, const char *k)
{
	jadd(j, o, k, cJSON_CreateNull());
}

static cJSON *jobj(struct jb *j, cJSON *o, const char *k)
{
	return jadd(j, o, k, cJSON_CreateObject());
}

static void jstrs(struct jb *j, cJSON *o, const char *k, const char *const *v, int n)
{
	jadd(j, o, k, cJSON_CreateStringArray(v, n));
}

static void jids(struct jb *j, cJSON *o, const char *k, const int *ids, int n)
{
	if (n == 1)
		jnum(j, o, k, ids[0]);
	else
		jadd(j, o, k, cJSON_CreateIntArray(ids, n));
}

/* NVFP4's exclude list: everything but the routed experts (fnmatch patterns). */
static void nvfp4_excludes(struct jb *j, cJSON *o, const char *key, int k25)
{
	static const char *const pats[] = {
		"lm_head", "model.layers.*.self_attn*", "model.layers.*.mlp.shared_experts*",
		"model.layers.*.mlp.gate_proj", "model.layers.*.mlp.up_proj",
		"model.layers.*.mlp.down_proj", "model.layers.*.mlp.gate",
	};
	cJSON *a = jadd(j, o, key, cJSON_CreateArray());
	size_t i;

	for (i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
		char buf[96];

		snprintf(buf, sizeof(buf), "%s%s", k25 ? "language_model." : "", pats[i]);
		if (!a || !cJSON_AddItemToArray(a, cJSON_CreateString(buf)))
			j->failed = 1;
	}
	if (k25)
		for (i = 0; i < 2; i++)
			if (!a || !cJSON_AddItemToArray(a, cJSON_CreateString(
						i ? "mm_projector*" : "vision_tower*")))
				j->failed = 1;
}

static void modelopt_producer(struct jb *j, cJSON *o)
{
	cJSON *p = jobj(j, o, "producer");

	jstr(j, p, "name", "modelopt");
	jstr(j, p, "version", "0.37.0");
}

/* quant_config - config.json's quantization_config for @m into @o (none for bf16, legacy). */
static void quant_config(struct jb *j, cJSON *o, const struct synth_model *m)
{
	static const int block[2] = { SYNTH_FP8_BLOCK, SYNTH_FP8_BLOCK };
	static const char *const targets[] = { "Linear" };
	static const char *const ignore[] = {
		"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
		"re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
		"re:.*vision_tower.*", "re:.*mm_projector.*",	/* K2.5 only */
	};
	int k25 = m->o->k25_layout;
	cJSON *q, *g, *w, *a;

	if (m->quant == QUANT_BF16 || m->o->legacy_quant_config)
		return;
	q = jobj(j, o, "quantization_config");
	switch (m->quant) {
	case QUANT_FP8:
		jstr(j, q, "activation_scheme", "dynamic");
		jstr(j, q, "fmt", "e4m3");
		jstr(j, q, "quant_method", "fp8");
		jadd(j, q, "weight_block_size", cJSON_CreateIntArray(block, 2));
		break;
	case QUANT_INT4:
		g = jobj(j, jobj(j, q, "config_groups"), "group_0");
		jnull(j, g, "input_activations");
		jnull(j, g, "output_activations");
		jstrs(j, g, "targets", targets, 1);
		w = jobj(j, g, "weights");
		jnull(j, w, "actorder");
		jnull(j, w, "block_structure");
		jbool(j, w, "dynamic", 0);
		jnum(j, w, "group_size", SYNTH_INT4_GROUP);
		jnum(j, w, "num_bits", 4);
		jstr(j, w, "observer", "minmax");
		jobj(j, w, "observer_kwargs");
		jstr(j, w, "strategy", "group");
		jbool(j, w, "symmetric", 1);
		jstr(j, w, "type", "int");
		jstr(j, q, "format", "pack-quantized");
		jstrs(j, q, "ignore", ignore, k25 ? 6 : 4);
		jnull(j, q, "kv_cache_scheme");
		jstr(j, q, "quant_method", "compressed-tensors");
		jstr(j, q, "quantization_status", "compressed");
		break;
	case QUANT_NVFP4:
		g = jobj(j, jobj(j, q, "config_groups"), "group_0");
		for (int i = 0; i < 2; i++) {
			a = jobj(j, g, i ? "weights" : "input_activations");
			jbool(j, a, "dynamic", 0);
			jnum(j, a, "num_bits", 4);
			jstr(j, a, "type", "float");
			jnum(j, a, "group_size", SYNTH_NVFP4_BLOCK);
		}
		jstrs(j, g, "targets", targets, 1);
		nvfp4_excludes(j, q, "ignore", k25);
		jstr(j, q, "quant_algo", "NVFP4");
		modelopt_producer(j, q);
		jstr(j, q, "quant_method", "modelopt");
		break;
	case QUANT_BF16:
	case QUANT_N:
		break;
	}
}

/* text_config - the kimi_k2 / glm4_moe config object (K2.5: the text_config). */
static cJSON *text_config(struct jb *j, const struct synth_model *m)
{
	static const char *const kimi_arch[] = { "DeepseekV3ForCausalLM" };
	static const char *const glm_arch[] = { "Glm4MoeForCausalLM" };
	const struct synth_dims *d = &m->d;
	int kimi = m->arch == ARCH_KIMI;
	cJSON *c = cJSON_CreateObject(), *r;

	if (!c)
		j->failed = 1;
	jstrs(j, c, "architectures", kimi ? kimi_arch : glm_arch, 1);
	jstr(j, c, "model_type", kimi ? "kimi_k2" : "glm4_moe");
	jbool(j, c, "attention_bias", !kimi);
	jnum(j, c, "attention_dropout", 0.0);
	if (kimi)
		jnum(j, c, "aux_loss_alpha", 0.001);
	if (d->bos >= 0)
		jnum(j, c, "bos_token_id", d->bos);
	jids(j, c, "eos_token_id", d->eos, d->n_eos);
	jnum(j, c, "first_k_dense_replace", d->first_dense);
	if (!kimi)
		jnum(j, c, "head_dim", d->head_dim);
	jstr(j, c, "hidden_act", "silu");
	jnum(j, c, "hidden_size", d->hidden);
	jnum(j, c, "initializer_range", 0.02);
	jnum(j, c, "intermediate_size", d->inter);
	if (kimi)
		jnum(j, c, "kv_lora_rank", d->kv_lora);
	jnum(j, c, "max_position_embeddings", d->max_pos);
	jnum(j, c, "moe_intermediate_size", d->moe_inter);
	if (kimi)
		jnum(j, c, "moe_layer_freq", 1);
	jnum(j, c, "n_group", d->n_group);
	jnum(j, c, "n_routed_experts", d->experts);
	jnum(j, c, "n_shared_experts", d->shared);
	jbool(j, c, "norm_topk_prob", 1);
	jnum(j, c, "num_attention_heads", d->heads);
	jnum(j, c, "num_experts_per_tok", d->top_k);
	jnum(j, c, "num_hidden_layers", d->layers);
	jnum(j, c, "num_key_value_heads", d->kv_heads);
	/* no MTP layer is written (GLM's real checkpoints carry one) */
	jnum(j, c, "num_nextn_predict_layers", 0);
	if (d->pad >= 0)
		jnum(j, c, "pad_token_id", d->pad);
	if (!kimi)
		jnum(j, c, "partial_rotary_factor", d->partial_rotary);
	if (kimi) {
		jnum(j, c, "q_lora_rank", d->q_lora);
		jnum(j, c, "qk_nope_head_dim", d->qk_nope);
		jnum(j, c, "qk_rope_head_dim", d->qk_rope);
	}
	jnum(j, c, "rms_norm_eps", d->rms_eps);
	if (kimi) {
		r = jobj(j, c, "rope_scaling");
		jnum(j, r, "beta_fast", d->beta_fast);
		jnum(j, r, "beta_slow", d->beta_slow);
		jnum(j, r, "factor", d->yarn_factor);
		jnum(j, r, "mscale", d->mscale);
		jnum(j, r, "mscale_all_dim", d->mscale_all_dim);
		jnum(j, r, "original_max_position_embeddings", d->yarn_orig_max);
		jstr(j, r, "type", "yarn");
	} else {
		jnull(j, c, "rope_scaling");
	}
	jnum(j, c, "rope_theta", d->rope_theta);
	jnum(j, c, "routed_scaling_factor", d->routed_scaling);
	if (kimi) {
		jstr(j, c, "scoring_func", "sigmoid");
		jbool(j, c, "seq_aux", 1);
	}
	jbool(j, c, "tie_word_embeddings", 0);
	jnum(j, c, "topk_group", d->topk_group);
	if (kimi)
		jstr(j, c, "topk_method", "noaux_tc");
	jstr(j, c, "torch_dtype", "bfloat16");
	jbool(j, c, "use_cache", 1);
	if (!kimi)
		jbool(j, c, "use_qk_norm", d->use_qk_norm);
	if (kimi)
		jnum(j, c, "v_head_dim", d->v_head);
	jnum(j, c, "vocab_size", d->vocab);
	quant_config(j, c, m);
	return c;
}

static int write_json(const char *dir, const char *name, const cJSON *root, struct sm_err *err)
{
	char path[4096], *text;
	FILE *f;
	int rc = 0;

	if (path_join(path, sizeof(path), dir, name))
		return sm_err_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir,
				  name);
	text = cJSON_Print(root);
	if (!text)
		return sm_err_set(err, -ENOMEM, "out of memory writing %s", path);
	f = fopen(path, "we");
	if (!f) {
		rc = sm_err_set(err, -errno, "cannot create %s: %s", path,
				strerror(errno));
	} else {
		if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
			rc = -EIO;
		if (fclose(f) != 0 && !rc)
			rc = -errno;
		if (rc)
			sm_err_set(err, rc, "cannot write %s: %s", path, strerror(-rc));
	}
	cJSON_free(text);
	return rc;
}

/* write_configs - config.json, and hf_quant_config.json for legacy NVFP4. */
static int write_configs(const struct synth_model *m, const char *dir, struct sm_err *err)
{
	static const char *const k25_arch[] = { "KimiK25ForConditionalGeneration" };
	const struct synth_dims *d = &m->d;
	struct jb j = { 0 };
	cJSON *root = text_config(&j, m), *top = root, *hq = NULL, *q;
	int rc;

	if (m->o->k25_layout) {
		top = cJSON_CreateObject();
		jstrs(&j, top, "architectures", k25_arch, 1);
		jstr(&j, top, "model_type", "kimi_k25");
		jadd(&j, top, "text_config", root);	/* owns root from here on */
		jobj(&j, top, "vision_config");
		jnum(&j, top, "media_placeholder_token_id", d->media);
		jnum(&j, top, "pad_token_id", d->pad);
		jnum(&j, top, "bos_token_id", d->bos);
		jids(&j, top, "eos_token_id", d->eos, d->n_eos);
		jbool(&j, top, "tie_word_embeddings", 0);
	}
	if (m->o->legacy_quant_config) {
		hq = cJSON_CreateObject();
		modelopt_producer(&j, hq);
		q = jobj(&j, hq, "quantization");
		jstr(&j, q, "quant_algo", "NVFP4");
		jnull(&j, q, "kv_cache_quant_algo");
		jnum(&j, q, "group_size", SYNTH_NVFP4_BLOCK);
		nvfp4_excludes(&j, q, "exclude_modules", m->o->k25_layout);
	}
	if (j.failed || !top)
		rc = sm_err_set(err, -ENOMEM, "out of memory building config.json");
	else if (hq)
		rc = write_json(dir, "hf_quant_config.json", hq, err);
	else
		rc = remove_stale(dir, "hf_quant_config.json", err);
	if (!rc)
		rc = write_json(dir, "config.json", top, err);
	cJSON_Delete(top);
	cJSON_Delete(hq);
	return rc;
}

/* ------------------------------------------------------------------ entry point */

/* make_dirs - mkdir -p @dir; the error names the component that failed. */
static int make_dirs(const char *dir, struct sm_err *err)
{
	char path[4096];
	size_t i, n = strlen(dir);
	struct stat st;

	if (n == 0 || n >= sizeof(path))
		return sm_err_set(err, -EINVAL, "output directory '%.200s': empty or "
				  "too long", dir);
	memcpy(path, dir, n + 1);
	for (i = 1; i <= n; i++) {
		char ch = path[i];

		if (ch != '/' && ch != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST)
			return sm_err_set(err, -errno, "cannot create directory %s: %s",
					  path, strerror(errno));
		path[i] = ch;
	}
	if (stat(dir, &st) != 0)
		return sm_err_set(err, -errno, "cannot create directory %s: %s", dir,
				  strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sm_err_set(err, -ENOTDIR, "cannot create directory %s: a file "
				  "of that name exists", dir);
	return 0;
}

int synth_make_model(const struct synth_opts *o, const char *out_dir, struct sm_err *err)
{
	struct synth_model m;
	struct plan p = { 0 };
	int rc;

	sm_err_clear(err);
	rc = model_resolve(o, &m, err);
	if (!rc)
		rc = make_dirs(out_dir, err);
	if (!rc)
		rc = plan_build(&p, &m, err);
	if (!rc)
		rc = write_tensors(&m, out_dir, &p, err);
	if (!rc)
		rc = write_configs(&m, out_dir, err);
	free(p.e);
	return rc;
}
