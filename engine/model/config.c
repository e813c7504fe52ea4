/*
 * config.c - config.json / hf_quant_config.json into struct ref_config.
 *
 * One table lists every hyper-parameter: its key, its type, where it goes,
 * and for each family either the transformers default or "required".
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/common/file.h"

enum fkind { F_INT, F_FLOAT, F_BOOL, F_INT_NULL /* null reads as 0 */ };

#define REQ NAN		/* no default: the file must have it */
#define NA (-1.0)	/* not read for this family */

static const struct field {
	const char *key;
	enum fkind kind;
	size_t off;
	double mla, gqa;	/* DeepseekV3Config / Glm4MoeConfig default, REQ or NA */
} fields[] = {
	{ "hidden_size", F_INT, offsetof(struct ref_config, hidden), REQ, REQ },
	{ "num_hidden_layers", F_INT, offsetof(struct ref_config, n_layers), REQ, REQ },
	{ "num_attention_heads", F_INT, offsetof(struct ref_config, n_heads), REQ, REQ },
	{ "num_key_value_heads", F_INT, offsetof(struct ref_config, n_kv_heads), NA, REQ },
	{ "vocab_size", F_INT, offsetof(struct ref_config, vocab), REQ, REQ },
	{ "rms_norm_eps", F_FLOAT, offsetof(struct ref_config, rms_eps), 1e-6, 1e-5 },
	{ "q_lora_rank", F_INT_NULL, offsetof(struct ref_config, q_lora_rank), REQ, NA },
	{ "kv_lora_rank", F_INT, offsetof(struct ref_config, kv_lora_rank), REQ, NA },
	{ "qk_nope_head_dim", F_INT, offsetof(struct ref_config, qk_nope), REQ, NA },
	{ "qk_rope_head_dim", F_INT, offsetof(struct ref_config, qk_rope), REQ, NA },
	{ "v_head_dim", F_INT, offsetof(struct ref_config, v_head), REQ, NA },
	{ "use_qk_norm", F_BOOL, offsetof(struct ref_config, qk_norm), NA, 0 },
	{ "attention_bias", F_BOOL, offsetof(struct ref_config, attn_bias), 0, 0 },
	{ "intermediate_size", F_INT, offsetof(struct ref_config, intermediate), REQ, REQ },
	{ "moe_intermediate_size", F_INT, offsetof(struct ref_config, moe_intermediate), REQ, REQ },
	{ "n_routed_experts", F_INT, offsetof(struct ref_config, n_routed), REQ, REQ },
	{ "n_shared_experts", F_INT, offsetof(struct ref_config, n_shared), 1, 1 },
	{ "num_experts_per_tok", F_INT, offsetof(struct ref_config, top_k), REQ, REQ },
	{ "first_k_dense_replace", F_INT, offsetof(struct ref_config, first_dense), 3, 1 },
	{ "moe_layer_freq", F_INT, offsetof(struct ref_config, moe_freq), 1, 1 },
	{ "n_group", F_INT, offsetof(struct ref_config, n_group), 8, 1 },
	{ "topk_group", F_INT, offsetof(struct ref_config, topk_group), 4, 1 },
	{ "norm_topk_prob", F_BOOL, offsetof(struct ref_config, norm_topk_prob), 1, 1 },
	{ "routed_scaling_factor", F_FLOAT, offsetof(struct ref_config, routed_scaling), 2.5, 1.0 },
	{ "tie_word_embeddings", F_BOOL, offsetof(struct ref_config, tie_embeddings), 0, 0 },
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static cJSON *parse_json(const char *path, struct sm_err *err, int *rc)
{
	size_t len;
	char *text = sm_read_small(path, 64 << 20, &len);
	cJSON *j;

	*rc = text ? 0 : -errno;
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
		if (f->kind != F_FLOAT && (x != floor(x) || x < 0 || x > 1e9))
			return sm_err_set(err, -EINVAL, "%s: \"%s\" = %g is not a count", path, f->key, x);
	}
	if (f->kind == F_FLOAT)
		*(float *)dst = (float)x;
	else
		*(int *)dst = (int)x;
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
	double partial = num_or(t, "partial_rotary_factor", c->attn == REF_ATTN_GQA ? 0.5 : 1.0);
	double qk_dim;

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
		return 0;
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
	return 0;
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

		q->method = REF_Q_FP8_BLOCK;
		q->block_n = q->block_k = 128;
		if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2) {
			q->block_n = cJSON_GetArrayItem(bs, 0)->valueint;
			q->block_k = cJSON_GetArrayItem(bs, 1)->valueint;
		}
		if (q->block_n <= 0 || q->block_k <= 0)
			return sm_err_set(err, -EINVAL, "%s: weight_block_size must be two positive sizes", path);
		return 0;
	}
	if (strcmp(method, "compressed-tensors") == 0) {
		const cJSON *g = get(qc, "config_groups"), *grp, *w;
		const char *f = cJSON_IsString(fmt) ? fmt->valuestring : "";

		add_ignores(q, get(qc, "ignore"));
		grp = g ? g->child : NULL;
		w = grp ? get(grp, "weights") : NULL;
		if (strcmp(f, "pack-quantized") == 0) {
			q->method = REF_Q_CT_INT4;
			q->group_size = (int)num_or(w, "group_size", 0);
			if ((int)num_or(w, "num_bits", 4) != 4 || q->group_size <= 0)
				return sm_err_set(err, -ENOTSUP, "%s: pack-quantized is supported with num_bits 4 "
						  "and a group_size (strategy group)", path);
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
	q->group_size = (int)num_or(qz, "group_size", 16);
	add_ignores(q, get(qz, "exclude_modules"));
	snprintf(q->source, sizeof(q->source), "hf_quant_config.json");
	cJSON_Delete(j);
	return 0;
}

static int check_dims(const struct ref_config *c, const char *path, struct sm_err *err)
{
	if (c->hidden <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->vocab <= 0 || c->top_k <= 0)
		return sm_err_set(err, -EINVAL, "%s: hidden_size, num_hidden_layers, num_attention_heads, "
				  "vocab_size and num_experts_per_tok must be positive", path);
	if (c->top_k > c->n_routed)
		return sm_err_set(err, -EINVAL, "%s: num_experts_per_tok %d > n_routed_experts %d",
				  path, c->top_k, c->n_routed);
	if (c->n_group <= 0 || c->n_routed % c->n_group || c->topk_group > c->n_group ||
	    c->topk_group * (c->n_routed / c->n_group) < c->top_k)
		return sm_err_set(err, -EINVAL, "%s: n_group %d / topk_group %d do not fit %d experts and "
				  "top_k %d", path, c->n_group, c->topk_group, c->n_routed, c->top_k);
	if (c->attn == REF_ATTN_GQA && (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads ||
					c->rotary_dim % 2 || c->rotary_dim > c->head_dim))
		return sm_err_set(err, -EINVAL, "%s: %d heads, %d kv heads, head_dim %d, rotary %d do not fit",
				  path, c->n_heads, c->n_kv_heads, c->head_dim, c->rotary_dim);
	if (c->attn == REF_ATTN_MLA && (c->qk_rope % 2 || c->kv_lora_rank <= 0))
		return sm_err_set(err, -EINVAL, "%s: qk_rope_head_dim must be even, kv_lora_rank positive",
				  path);
	if (c->moe_freq <= 0)
		return sm_err_set(err, -EINVAL, "%s: moe_layer_freq must be positive", path);
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
	if (get(t, "kv_lora_rank"))
		c->attn = REF_ATTN_MLA;
	else if (strcmp(c->model_type, "glm4_moe") == 0)
		c->attn = REF_ATTN_GQA;
	else {
		cJSON_Delete(root);
		return sm_err_set(err, -ENOTSUP, "%s: model_type \"%s\" is not supported (kimi_k2, "
				  "deepseek_v3 and kimi_k25 with MLA; glm4_moe)", path, c->model_type);
	}
	for (i = 0; i < NFIELDS; i++) {
		double def = c->attn == REF_ATTN_MLA ? fields[i].mla : fields[i].gqa;

		if (!isnan(def) && def == NA)
			continue;
		rc = set_field(c, &fields[i], get(t, fields[i].key), def, path, err);
		if (rc)
			goto out;
	}
	if (c->attn == REF_ATTN_GQA)
		c->head_dim = (int)num_or(t, "head_dim", c->hidden / c->n_heads);
	rc = read_rope(c, t, path, err);
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
	if (!rc)
		rc = check_dims(c, path, err);
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
