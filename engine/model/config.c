/*
 * config.c - config.json / hf_quant_config.json into struct ref_config.
 *
 * One table lists every hyper-parameter: its key, its type, where it goes,
 * for each family either the transformers default or "required", and the
 * range the engine accepts.  A value outside its range (a negative epsilon,
 * a zero size, a count that would overflow the engine's arithmetic) is an
 * error naming the key, the value and the range: a model that would compute
 * NaN or index outside its tensors never reaches a backend.  A second table
 * lists the architectures the engine runs; any other "architectures" value
 * is refused by name.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/common/file.h"

#define REF_MAX_CONFIG (64u << 20)	/* a config.json larger than this is not one */

/* The architectures the engine runs, as config.json's "architectures" names them. */
static const struct arch {
	const char *name;
	enum ref_attn attn;
	int nested;		/* the text model sits in "text_config" (K2.5) */
} archs[] = {
	{ "DeepseekV3ForCausalLM", REF_ATTN_MLA, 0 },		/* Kimi K2, DeepSeek-V3 */
	{ "KimiK25ForConditionalGeneration", REF_ATTN_MLA, 1 },	/* Kimi K2.5 */
	{ "Glm4MoeForCausalLM", REF_ATTN_GQA, 0 },		/* GLM-4.5 / 4.6 / 4.7 / Air */
};

#define NARCHS (sizeof(archs) / sizeof(archs[0]))

enum fkind { F_INT, F_FLOAT, F_BOOL, F_INT_NULL /* null reads as 0 */ };

#define REQ NAN		/* no default: the file must have it */
#define NA (-1.0)	/* not read for this family */

/*
 * Ranges: [lo, hi] for counts; (lo, hi] for floats, so that 0 excludes zero.
 * The caps keep every product of sizes the engine forms (heads x head
 * dimension, shared experts x width, rows x columns in 64 bits) far from
 * overflow; real checkpoints sit well inside them.
 */
#define DIM (1 << 12)		/* heads, head dimensions, layers */
#define WIDE (1 << 20)		/* MLP widths */

static const struct field {
	const char *key;
	enum fkind kind;
	size_t off;
	double mla, gqa;	/* DeepseekV3Config / Glm4MoeConfig default, REQ or NA */
	double lo, hi;		/* the accepted range (bools: unused) */
} fields[] = {
	{ "hidden_size", F_INT, offsetof(struct ref_config, hidden), REQ, REQ, 1, 1 << 18 },
	{ "num_hidden_layers", F_INT, offsetof(struct ref_config, n_layers), REQ, REQ, 1, DIM },
	{ "num_attention_heads", F_INT, offsetof(struct ref_config, n_heads), REQ, REQ, 1, DIM },
	{ "num_key_value_heads", F_INT, offsetof(struct ref_config, n_kv_heads), NA, REQ, 1, DIM },
	{ "vocab_size", F_INT, offsetof(struct ref_config, vocab), REQ, REQ, 1, 1 << 24 },
	{ "rms_norm_eps", F_FLOAT, offsetof(struct ref_config, rms_eps), 1e-6, 1e-5, 0, 1 },
	{ "q_lora_rank", F_INT_NULL, offsetof(struct ref_config, q_lora_rank), REQ, NA, 0, 1 << 16 },
	{ "kv_lora_rank", F_INT, offsetof(struct ref_config, kv_lora_rank), REQ, NA, 1, 1 << 16 },
	{ "qk_nope_head_dim", F_INT, offsetof(struct ref_config, qk_nope), REQ, NA, 0, DIM },
	{ "qk_rope_head_dim", F_INT, offsetof(struct ref_config, qk_rope), REQ, NA, 0, DIM },
	{ "v_head_dim", F_INT, offsetof(struct ref_config, v_head), REQ, NA, 1, DIM },
	{ "use_qk_norm", F_BOOL, offsetof(struct ref_config, qk_norm), NA, 0, 0, 0 },
	{ "attention_bias", F_BOOL, offsetof(struct ref_config, attn_bias), 0, 0, 0, 0 },
	{ "intermediate_size", F_INT, offsetof(struct ref_config, intermediate), REQ, REQ, 1, WIDE },
	{ "moe_intermediate_size", F_INT, offsetof(struct ref_config, moe_intermediate), REQ, REQ,
	  1, WIDE },
	{ "n_routed_experts", F_INT, offsetof(struct ref_config, n_routed), REQ, REQ, 1, 1 << 16 },
	{ "n_shared_experts", F_INT, offsetof(struct ref_config, n_shared), 1, 1, 0, 64 },
	{ "num_experts_per_tok", F_INT, offsetof(struct ref_config, top_k), REQ, REQ, 1, 1 << 16 },
	{ "first_k_dense_replace", F_INT, offsetof(struct ref_config, first_dense), 3, 1, 0, DIM },
	{ "moe_layer_freq", F_INT, offsetof(struct ref_config, moe_freq), 1, 1, 1, DIM },
	{ "n_group", F_INT, offsetof(struct ref_config, n_group), 8, 1, 1, 1 << 16 },
	{ "topk_group", F_INT, offsetof(struct ref_config, topk_group), 4, 1, 1, 1 << 16 },
	{ "norm_topk_prob", F_BOOL, offsetof(struct ref_config, norm_topk_prob), 1, 1, 0, 0 },
	{ "routed_scaling_factor", F_FLOAT, offsetof(struct ref_config, routed_scaling), 2.5, 1.0,
	  0, 1e6 },
	{ "tie_word_embeddings", F_BOOL, offsetof(struct ref_config, tie_embeddings), 0, 0, 0, 0 },
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static cJSON *parse_json(const char *path, struct sm_err *err, int *rc)
{
	struct stat st;
	size_t len;
	char *text;
	cJSON *j;

	text = sm_read_small(path, REF_MAX_CONFIG, &len);
	*rc = text ? 0 : -errno;
	if (*rc == -EINVAL && stat(path, &st) == 0) {
		sm_err_set(err, *rc, "%s: not a regular file (%s): the loader reads only regular "
			   "files; put the checkpoint's own file there", path,
			   S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" :
			   "a device or socket");
		return NULL;
	}
	if (*rc) {
		sm_err_set(err, *rc, "%s: cannot read (%s)", path, strerror(-*rc));
		return NULL;
	}
	j = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		*rc = sm_err_set(err, -EINVAL, "%s: not a JSON object", path);
		return NULL;
	}
	return j;
}

static const cJSON *get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* in_range - whether @x lies in [@lo, @hi] (@count) or (@lo, @hi]; NaN never does. */
static int in_range(double x, double lo, double hi, int count)
{
	return (count ? x >= lo : x > lo) && x <= hi;
}

/*
 * out_of_range - the error for @key = @x outside its range, naming the file,
 * the key, the value, the range, and the fix.
 */
static int out_of_range(const char *path, const char *key, double x, double lo, double hi,
			int count, struct sm_err *err)
{
	if (count)
		return sm_err_set(err, -EINVAL, "%s: \"%s\" = %.17g is out of range: the engine "
				  "accepts a whole number in %.0f..%.0f; correct it in the file",
				  path, key, x, lo, hi);
	return sm_err_set(err, -EINVAL, "%s: \"%s\" = %.17g is out of range: the engine accepts "
			  "a finite number > %g and <= %g; correct it in the file", path, key, x,
			  lo, hi);
}

/*
 * num_checked - the number @key of @o (@def when absent or null) in *@v,
 * which must lie in the range (see in_range; @count: a whole number).
 * Returns 0 or -EINVAL with @err.
 */
static int num_checked(const cJSON *o, const char *key, double def, double lo, double hi,
		       int count, double *v, const char *path, struct sm_err *err)
{
	const cJSON *j = get(o, key);

	*v = def;
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsNumber(j))
			return sm_err_set(err, -EINVAL, "%s: \"%s\" must be a number", path, key);
		*v = j->valuedouble;
	}
	if (!in_range(*v, lo, hi, count) || (count && *v != floor(*v)))
		return out_of_range(path, key, *v, lo, hi, count, err);
	return 0;
}

static int set_field(struct ref_config *c, const struct field *f, const cJSON *v, double def,
		     const char *path, struct sm_err *err)
{
	char *dst = (char *)c + f->off;
	double x;

	if (!v || (cJSON_IsNull(v) && f->kind != F_INT_NULL)) {
		if (isnan(def))
			return sm_err_set(err, -EINVAL, "%s: field \"%s\" is missing; a %s model needs it",
					  path, f->key, c->model_type);
		x = def;
	} else if (cJSON_IsNull(v)) {
		x = 0;
	} else if (f->kind == F_BOOL) {
		if (!cJSON_IsBool(v))
			return sm_err_set(err, -EINVAL, "%s: \"%s\" must be true or false", path, f->key);
		x = cJSON_IsTrue(v);
	} else {
		if (!cJSON_IsNumber(v))
			return sm_err_set(err, -EINVAL, "%s: \"%s\" must be a number", path, f->key);
		x = v->valuedouble;
	}
	if (f->kind != F_BOOL && (!in_range(x, f->lo, f->hi, f->kind != F_FLOAT) ||
				  (f->kind != F_FLOAT && x != floor(x))))
		return out_of_range(path, f->key, x, f->lo, f->hi, f->kind != F_FLOAT, err);
	/* Kept as fp32: 1e-86 is in range as a double, but 0 as a float (a zero epsilon). */
	if (f->kind == F_FLOAT && !in_range((float)x, f->lo, f->hi, 0))
		return sm_err_set(err, -EINVAL, "%s: \"%s\" = %.17g is out of range for the engine's "
				  "fp32, where it is %g: the engine accepts a number > %g and <= %g "
				  "that fp32 holds; correct it in the file", path, f->key, x,
				  (double)(float)x, f->lo, f->hi);
	if (f->kind == F_FLOAT)
		*(float *)dst = (float)x;
	else
		*(int *)dst = (int)x;
	return 0;
}

/* arch_find - the row of archs[] called @name, or NULL. */
static const struct arch *arch_find(const char *name)
{
	size_t i;

	for (i = 0; i < NARCHS; i++)
		if (strcmp(archs[i].name, name) == 0)
			return &archs[i];
	return NULL;
}

/* arch_list - "A, B (with text_config), C": the supported names, for messages. */
static void arch_list(char *out, size_t len)
{
	size_t i, n = 0;

	out[0] = '\0';
	for (i = 0; i < NARCHS && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%s%s", i ? ", " : "", archs[i].name,
				      archs[i].nested ? " (with text_config)" : "");
}

/*
 * read_archs - check the "architectures" list of @o (config.json's top level,
 * or its text_config when @in_text): every entry must be a supported
 * architecture, and one that keeps its text model in text_config needs one
 * (@has_text).  *@found is the last entry's row, left alone when the list is
 * absent.  Returns 0 or -errno with @err naming the value and the supported ones.
 */
static int read_archs(const cJSON *o, int in_text, int has_text, const struct arch **found,
		      const char *path, struct sm_err *err)
{
	const cJSON *a = get(o, "architectures"), *it;
	const char *where = in_text ? "text_config.architectures" : "architectures";
	char list[256];

	if (!a)
		return 0;
	arch_list(list, sizeof(list));
	if (!cJSON_IsArray(a))
		return sm_err_set(err, -EINVAL, "%s: \"%s\" must be a list of class names (the "
				  "engine runs %s)", path, where, list);
	cJSON_ArrayForEach(it, a) {
		const struct arch *r = cJSON_IsString(it) ? arch_find(it->valuestring) : NULL;

		if (!r)
			return sm_err_set(err, -ENOTSUP, "%s: %s names \"%s\", which the engine does "
					  "not run (it runs %s)", path, where,
					  cJSON_IsString(it) ? it->valuestring : "(not a string)", list);
		if (r->nested && !has_text)
			return sm_err_set(err, -EINVAL, "%s: %s names %s, whose text model sits in "
					  "\"text_config\", but the file has no text_config object",
					  path, where, r->name);
		*found = r;
	}
	return 0;
}

/* yarn_mscale - YaRN's attention temperature 0.1 * m * ln(s) + 1 (1 for s <= 1). */
static double yarn_mscale(double s, double m)
{
	return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0;
}

static double num_or(const cJSON *o, const char *key, double def)
{
	const cJSON *v = get(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/*
 * The RoPE and attention-scale values read_rope derives, each with the key a
 * bad value comes from and the range in which the math stays finite:
 * (lo, hi].  YaRN's rows apply only when rope_scaling is yarn.  YaRN's betas
 * count rotations (DeepSeek's are 32 and 1); ref_rope_freqs divides by them,
 * and a beta near 0 (1e-310) made its correction dimension infinite and every
 * blended frequency NaN, hence BETA_MIN.
 */
#define BETA_MIN 1e-3
static const struct rope_range {
	const char *key;
	size_t off;		/* a double in struct ref_config */
	double lo, hi;
	int yarn_only;
} rope_ranges[] = {
	{ "rope_theta (must be > 1)", offsetof(struct ref_config, rope_theta), 1, 1e12, 0 },
	{ "rope_scaling.factor", offsetof(struct ref_config, yarn_factor), 0, 1e6, 1 },
	{ "rope_scaling.original_max_position_embeddings", offsetof(struct ref_config, yarn_orig_max),
	  0, 1e9, 1 },
	{ "rope_scaling.beta_fast", offsetof(struct ref_config, yarn_beta_fast), BETA_MIN, 1e6, 1 },
	{ "rope_scaling.beta_slow", offsetof(struct ref_config, yarn_beta_slow), BETA_MIN, 1e6, 1 },
	{ "rope_scaling.attention_factor (or mscale / mscale_all_dim)",
	  offsetof(struct ref_config, rope_attn_factor), 0, 1e6, 0 },
	{ "the softmax scale (from the head dimensions and mscale_all_dim)",
	  offsetof(struct ref_config, softmax_scale), 0, 1e6, 0 },
};

#define NROPE (sizeof(rope_ranges) / sizeof(rope_ranges[0]))

/* check_rope - every derived RoPE value of @c within its row of rope_ranges. */
static int check_rope(const struct ref_config *c, const char *path, struct sm_err *err)
{
	size_t i;

	for (i = 0; i < NROPE; i++) {
		const struct rope_range *r = &rope_ranges[i];
		double v = *(const double *)((const char *)c + r->off);

		if ((!r->yarn_only || c->yarn) && !in_range(v, r->lo, r->hi, 0))
			return out_of_range(path, r->key, v, r->lo, r->hi, 0, err);
	}
	return 0;
}

/*
 * read_rope - theta, rotary dims, YaRN and the attention scales.  transformers
 * rules: beta_fast/beta_slow default 32/1; cos/sin carry attention_factor, or
 * mscale(f, mscale)/mscale(f, mscale_all_dim) when both are set, else
 * mscale(f, mscale or 1); MLA's softmax scale is multiplied by
 * mscale(f, mscale_all_dim)^2 when mscale_all_dim is set.
 */
static int read_rope(struct ref_config *c, const cJSON *t, const char *path, struct sm_err *err)
{
	const cJSON *params = get(t, "rope_parameters");
	const cJSON *scaling = get(t, "rope_scaling");
	const cJSON *r = cJSON_IsObject(params) ? params : scaling;
	const cJSON *type = NULL;
	double partial, qk_dim;
	int rc;

	rc = num_checked(t, "partial_rotary_factor", c->attn == REF_ATTN_GQA ? 0.5 : 1.0, 0, 1, 0,
			 &partial, path, err);
	if (rc)
		return rc;
	c->rope_theta = num_or(t, "rope_theta", num_or(params, "rope_theta", 10000.0));
	if (c->attn == REF_ATTN_MLA) {
		c->rotary_dim = c->qk_rope;
		qk_dim = c->qk_nope + c->qk_rope;
	} else {
		c->rotary_dim = (int)(c->head_dim * partial);
		qk_dim = c->head_dim;
	}
	c->rope_attn_factor = 1.0;
	c->softmax_scale = 1.0 / sqrt(qk_dim);
	if (cJSON_IsObject(r)) {
		type = get(r, "rope_type");
		if (!cJSON_IsString(type))
			type = get(r, "type");
	}
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "default") == 0)
		return check_rope(c, path, err);
	if (strcmp(type->valuestring, "yarn") != 0 && strcmp(type->valuestring, "deepseek_yarn") != 0)
		return sm_err_set(err, -ENOTSUP, "%s: rope type \"%s\" is not supported (default and "
				  "yarn are)", path, type->valuestring);
	c->yarn = 1;
	c->yarn_factor = num_or(r, "factor", 1.0);
	c->yarn_orig_max = num_or(r, "original_max_position_embeddings",
				  num_or(t, "max_position_embeddings", 0));
	c->yarn_beta_fast = num_or(r, "beta_fast", 0) ? num_or(r, "beta_fast", 0) : 32.0;
	c->yarn_beta_slow = num_or(r, "beta_slow", 0) ? num_or(r, "beta_slow", 0) : 1.0;
	if (c->yarn_orig_max <= 0 || c->yarn_factor <= 0)
		return sm_err_set(err, -EINVAL, "%s: yarn needs factor and original_max_position_embeddings",
				  path);
	{
		double ms = num_or(r, "mscale", 0), msa = num_or(r, "mscale_all_dim", 0);
		const cJSON *af = get(r, "attention_factor");

		if (cJSON_IsNumber(af))
			c->rope_attn_factor = af->valuedouble;
		else if (ms && msa)
			c->rope_attn_factor = yarn_mscale(c->yarn_factor, ms) / yarn_mscale(c->yarn_factor, msa);
		else
			c->rope_attn_factor = yarn_mscale(c->yarn_factor, ms ? ms : 1.0);
		if (c->attn == REF_ATTN_MLA && msa) {
			double m = yarn_mscale(c->yarn_factor, msa);

			c->softmax_scale *= m * m;
		}
	}
	return check_rope(c, path, err);
}

static void add_ignore(struct ref_quant *q, const char *s)
{
	if (q->n_ignore < REF_MAX_IGNORE)
		snprintf(q->ignore[q->n_ignore++], sizeof(q->ignore[0]), "%s", s);
}

static void add_ignores(struct ref_quant *q, const cJSON *list)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, list)
		if (cJSON_IsString(it))
			add_ignore(q, it->valuestring);
}

/* read_quant - the quantization block of config.json (or text_config). */
static int read_quant(struct ref_quant *q, const cJSON *qc, const char *path, struct sm_err *err)
{
	const cJSON *m = get(qc, "quant_method"), *fmt = get(qc, "format");
	const char *method = cJSON_IsString(m) ? m->valuestring : "";

	if (strcmp(method, "fp8") == 0) {
		const cJSON *bs = get(qc, "weight_block_size");

		double bn = 128, bk = 128;

		q->method = REF_Q_FP8_BLOCK;
		if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2) {
			bn = cJSON_GetArrayItem(bs, 0)->valuedouble;
			bk = cJSON_GetArrayItem(bs, 1)->valuedouble;
		}
		if (!in_range(bn, 1, 1 << 16, 1) || !in_range(bk, 1, 1 << 16, 1) || bn != floor(bn) ||
		    bk != floor(bk))
			return sm_err_set(err, -EINVAL, "%s: weight_block_size must be two whole sizes "
					  "in 1..65536 (DeepSeek's is [128, 128])", path);
		q->block_n = (int)bn;
		q->block_k = (int)bk;
		return 0;
	}
	if (strcmp(method, "compressed-tensors") == 0) {
		const cJSON *g = get(qc, "config_groups"), *grp, *w;
		const char *f = cJSON_IsString(fmt) ? fmt->valuestring : "";

		add_ignores(q, get(qc, "ignore"));
		grp = g ? g->child : NULL;
		w = grp ? get(grp, "weights") : NULL;
		if (strcmp(f, "pack-quantized") == 0) {
			double gs = num_or(w, "group_size", 0);

			q->method = REF_Q_CT_INT4;
			if (num_or(w, "num_bits", 4) != 4 || !in_range(gs, 1, 1 << 16, 1) || gs != floor(gs))
				return sm_err_set(err, -ENOTSUP, "%s: pack-quantized is supported with num_bits 4 "
						  "and a group_size in 1..65536 (strategy group)", path);
			q->group_size = (int)gs;
			return 0;
		}
		if (strcmp(f, "float-quantized") == 0) {
			q->method = REF_Q_CT_FP8;
			return 0;
		}
		return sm_err_set(err, -ENOTSUP, "%s: compressed-tensors format \"%s\" is not supported "
				  "(pack-quantized INT4 and float-quantized FP8 are)", path, f);
	}
	if (strcmp(method, "modelopt") == 0) {
		const cJSON *algo = get(qc, "quant_algo");

		if (!cJSON_IsString(algo) || strcmp(algo->valuestring, "NVFP4") != 0)
			return sm_err_set(err, -ENOTSUP, "%s: modelopt quant_algo must be NVFP4", path);
		q->method = REF_Q_MODELOPT_NVFP4;
		q->group_size = 16;
		add_ignores(q, get(qc, "ignore"));
		return 0;
	}
	return sm_err_set(err, -ENOTSUP, "%s: quant_method \"%s\" is not supported (fp8, "
			  "compressed-tensors, modelopt are)", path, method);
}

/* read_hf_quant - ModelOpt's legacy hf_quant_config.json, when the directory has one. */
static int read_hf_quant(struct ref_quant *q, const char *dir, struct sm_err *err)
{
	char path[4096];
	const cJSON *qz, *algo;
	cJSON *j;
	int rc;

	snprintf(path, sizeof(path), "%s/hf_quant_config.json", dir);
	j = parse_json(path, err, &rc);
	if (!j)
		return rc == -ENOENT ? (sm_err_clear(err), 0) : rc;
	qz = get(j, "quantization");
	algo = get(qz, "quant_algo");
	if (!cJSON_IsString(algo) || strcmp(algo->valuestring, "NVFP4") != 0) {
		cJSON_Delete(j);
		return sm_err_set(err, -ENOTSUP, "%s: quantization.quant_algo must be NVFP4", path);
	}
	q->method = REF_Q_MODELOPT_NVFP4;
	q->group_size = 16;
	if (num_or(qz, "group_size", 16) != 16) {
		cJSON_Delete(j);
		return sm_err_set(err, -ENOTSUP, "%s: quantization.group_size must be 16 (NVFP4's block)",
				  path);
	}
	add_ignores(q, get(qz, "exclude_modules"));
	snprintf(q->source, sizeof(q->source), "hf_quant_config.json");
	cJSON_Delete(j);
	return 0;
}

/* check_dims - the sizes fit each other (each alone is in range already). */
static int check_dims(const struct ref_config *c, const char *path, struct sm_err *err)
{
	if (c->top_k > c->n_routed)
		return sm_err_set(err, -EINVAL, "%s: num_experts_per_tok %d > n_routed_experts %d",
				  path, c->top_k, c->n_routed);
	if (c->n_routed % c->n_group || c->topk_group > c->n_group ||
	    c->topk_group * (c->n_routed / c->n_group) < c->top_k)
		return sm_err_set(err, -EINVAL, "%s: n_group %d / topk_group %d do not fit %d experts and "
				  "top_k %d", path, c->n_group, c->topk_group, c->n_routed, c->top_k);
	if (c->attn == REF_ATTN_GQA && c->n_heads % c->n_kv_heads)
		return sm_err_set(err, -EINVAL, "%s: num_attention_heads %d is not a multiple of "
				  "num_key_value_heads %d", path, c->n_heads, c->n_kv_heads);
	if (c->attn == REF_ATTN_MLA && (c->qk_rope % 2 || c->qk_nope + c->qk_rope < 1))
		return sm_err_set(err, -EINVAL, "%s: qk_rope_head_dim %d must be even, and "
				  "qk_nope_head_dim + qk_rope_head_dim positive", path, c->qk_rope);
	return 0;
}

/* check_rotary - GQA's rotary part of the head: even, within the head. */
static int check_rotary(const struct ref_config *c, const char *path, struct sm_err *err)
{
	if (c->attn == REF_ATTN_GQA && (c->rotary_dim % 2 || c->rotary_dim > c->head_dim))
		return sm_err_set(err, -EINVAL, "%s: head_dim %d x partial_rotary_factor gives %d rotary "
				  "dimensions; they must be even", path, c->head_dim, c->rotary_dim);
	return 0;
}

/*
 * read_family - MLA or GQA: from "architectures" (top level and text_config,
 * every entry checked), else, when the file names none, from the text
 * model's fields (kv_lora_rank: MLA; model_type glm4_moe: GQA).
 */
static int read_family(struct ref_config *c, const cJSON *root, const cJSON *t, const char *path,
		       struct sm_err *err)
{
	const struct arch *a = NULL;
	int rc = read_archs(root, 0, t != root, &a, path, err);

	if (!rc && t != root)
		rc = read_archs(t, 1, 0, &a, path, err);
	if (rc)
		return rc;
	if (a)
		c->attn = a->attn;
	else if (get(t, "kv_lora_rank"))
		c->attn = REF_ATTN_MLA;
	else if (strcmp(c->model_type, "glm4_moe") == 0)
		c->attn = REF_ATTN_GQA;
	else
		return sm_err_set(err, -ENOTSUP, "%s: model_type \"%s\" is not supported (kimi_k2, "
				  "deepseek_v3 and kimi_k25 with MLA; glm4_moe)", path, c->model_type);
	return 0;
}

int ref_config_load(const char *dir, struct ref_config *c, struct sm_err *err)
{
	char path[4096];
	const cJSON *t, *mt, *qc;
	cJSON *root;
	size_t i;
	int rc;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	root = parse_json(path, err, &rc);
	if (!root)
		return rc;
	t = get(root, "text_config");
	if (!cJSON_IsObject(t))
		t = root;
	mt = get(t, "model_type");
	snprintf(c->model_type, sizeof(c->model_type), "%s", cJSON_IsString(mt) ? mt->valuestring : "");
	rc = read_family(c, root, t, path, err);
	for (i = 0; !rc && i < NFIELDS; i++) {
		double def = c->attn == REF_ATTN_MLA ? fields[i].mla : fields[i].gqa;

		if (!isnan(def) && def == NA)
			continue;
		rc = set_field(c, &fields[i], get(t, fields[i].key), def, path, err);
	}
	if (!rc && c->attn == REF_ATTN_GQA) {
		double hd;

		rc = num_checked(t, "head_dim", c->hidden / c->n_heads, 1, DIM, 1, &hd, path, err);
		if (!rc)
			c->head_dim = (int)hd;	/* in range only: 3e30 does not fit an int */
	}
	if (!rc)
		rc = check_dims(c, path, err);
	if (!rc)
		rc = read_rope(c, t, path, err);
	if (!rc)
		rc = check_rotary(c, path, err);
	if (rc)
		goto out;
	qc = get(t, "quantization_config");
	if (!qc)
		qc = get(root, "quantization_config");
	if (cJSON_IsObject(qc)) {
		snprintf(c->quant.source, sizeof(c->quant.source), "%s",
			 t == root ? "config.json" : "config.json text_config");
		rc = read_quant(&c->quant, qc, path, err);
	} else {
		rc = read_hf_quant(&c->quant, dir, err);
	}
out:
	cJSON_Delete(root);
	return rc;
}

int ref_layer_is_moe(const struct ref_config *c, int l)
{
	return c->n_routed > 0 && l >= c->first_dense && l % c->moe_freq == 0;
}

void ref_config_describe(const struct ref_config *c, char *out, int len)
{
	static const char *const qname[] = {
		[REF_Q_NONE] = "bf16", [REF_Q_FP8_BLOCK] = "fp8 block", [REF_Q_CT_INT4] = "int4 pack-quantized",
		[REF_Q_CT_FP8] = "fp8 per-channel", [REF_Q_MODELOPT_NVFP4] = "nvfp4",
	};

	snprintf(out, (size_t)len, "%s (%s): %d layers (%d dense), hidden %d, %d heads, %d experts "
		 "top-%d, vocab %d, weights %s", c->model_type, c->attn == REF_ATTN_MLA ? "MLA" : "GQA",
		 c->n_layers, c->first_dense < c->n_layers ? c->first_dense : c->n_layers, c->hidden,
		 c->n_heads, c->n_routed, c->top_k, c->vocab, qname[c->quant.method]);
}

/*
 * ref_rope_freqs - see config.h. inv_freq[i] = theta^(-2i/dim) in fp32 as the frameworks
 * build their tables, corrected by YaRN's ramp between the correction dims
 * of beta_fast and beta_slow (floor / ceil, clamped to [0, dim - 1]).
 */
void ref_rope_freqs(const struct ref_config *c, float *inv)
{
	int dim = c->rotary_dim, i;
	double low = 0, high = 0;

	if (c->yarn) {
		double lt = 2 * log(c->rope_theta);

		low = floor(dim * log(c->yarn_orig_max / (c->yarn_beta_fast * 2 * M_PI)) / lt);
		high = ceil(dim * log(c->yarn_orig_max / (c->yarn_beta_slow * 2 * M_PI)) / lt);
		low = low < 0 ? 0 : low;
		high = high > dim - 1 ? dim - 1 : high;
		if (low == high)
			high += 0.001;
	}
	for (i = 0; i < dim / 2; i++) {
		float pos_freq = powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
		float extra = 1.0f / pos_freq;

		if (c->yarn) {
			float ramp = (float)(((double)i - low) / (high - low));
			float interp = 1.0f / ((float)c->yarn_factor * pos_freq);

			ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
			inv[i] = interp * ramp + extra * (1.0f - ramp);
		} else {
			inv[i] = extra;
		}
	}
}
