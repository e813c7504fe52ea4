/*
 * test_synth.c - `sm120 ref make-model`'s library: tiny Kimi K2 and GLM-4.x
 * checkpoints in every weight format, reopened with st_open.  Checks names,
 * dtypes and shapes (partial FP8 blocks included), config.json fields, value
 * ranges, determinism (same seed same bytes, tensors independent of layer
 * and expert counts), each quantized tensor re-derived from the BF16 master
 * of the same seed (scales exactly, codes exactly, error within the format's
 * rounding), INT4 and NVFP4 nibble order, companions in other shards, the
 * K2.5 layout, the legacy NVFP4 config file, progress reports (only for
 * writes of at least progress_min bytes), the default sizes and the error
 * messages (which name the option as the command spells it, with no
 * command prefix of their own).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../engine/common/numfmt.h"
#include "../../engine/st/safetensors.h"
#include "../../engine/synth/synth.h"
#include "fixture.h"

static char tmp_root[256];

/* model - make (once per @sub) the model @o describes in tmp_root/@sub; returns its path. */
static const char *model(const char *sub, struct synth_opts o)
{
	static char dirs[8][600];
	static int next;
	char *dir = dirs[next++ % 8];
	struct sm_err err;

	snprintf(dir, 600, "%s/%s", tmp_root, sub);
	if (access(dir, F_OK) != 0 && synth_make_model(&o, dir, &err) != 0)
		fail_msg("make-model %s: %s", sub, err.msg);
	return dir;
}

static struct synth_opts opts(const char *arch, const char *quant)
{
	return (struct synth_opts){ .arch = arch, .quant = quant, .seed = 42 };
}

static struct st_set *open_model(const char *dir)
{
	struct sm_err err;
	struct st_set *s = st_open(dir, &err);

	if (!s)
		fail_msg("st_open %s: %s", dir, err.msg);
	return s;
}

/* want - @name with dtype @dt and shape (@ndim of d0, d1); fails the test otherwise. */
static const struct st_tensor *want(const struct st_set *s, const char *name, enum st_dtype dt,
				    int ndim, int64_t d0, int64_t d1)
{
	int64_t shape[2] = { d0, d1 };
	struct sm_err err;
	const struct st_tensor *t = st_expect(s, name, (int)dt, ndim, shape, &err);

	if (!t)
		fail_msg("%s", err.msg);
	return t;
}

/* part - "@name@suffix" in one of 8 static buffers (several may be in use at once). */
static const char *part(const char *name, const char *suffix)
{
	static char bufs[8][256];
	static int next;
	char *buf = bufs[next++ % 8];

	snprintf(buf, sizeof(bufs[0]), "%s%s", name, suffix);
	return buf;
}

static cJSON *read_json(const char *dir, const char *file)
{
	char path[700], *text;
	size_t n;
	cJSON *j;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	text = read_file(path, &n);
	if (!text)
		fail_msg("cannot read %s", path);
	j = cJSON_Parse(text);
	free(text);
	assert_non_null(j);
	return j;
}

static int file_exists(const char *dir, const char *file)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		fail_msg("config: %s is not a number", key);
	return v->valuedouble;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v))
		fail_msg("config: %s is not a string", key);
	return v->valuestring;
}

static int boolean(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsBool(v))
		fail_msg("config: %s is not a bool", key);
	return cJSON_IsTrue(v);
}

static const cJSON *obj(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v)
		fail_msg("config: %s missing", key);
	return v;
}

/* has_str - whether the JSON array @a holds the string @s. */
static int has_str(const cJSON *a, const char *s)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, a)
		if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
			return 1;
	return 0;
}

/* has_strs - whether the JSON array @a holds every string of the NULL-terminated list. */
static __attribute__((sentinel)) int has_strs(const cJSON *a, ...)
{
	va_list ap;
	const char *s;
	int all = 1;

	va_start(ap, a);
	while (all && (s = va_arg(ap, const char *)))
		all = has_str(a, s);
	va_end(ap);
	return all;
}

/* want_arch - config @c names @arch first in "architectures" and has model_type @type. */
static void want_arch(const cJSON *c, const char *arch, const char *type)
{
	assert_string_equal(cJSON_GetArrayItem(obj(c, "architectures"), 0)->valuestring, arch);
	assert_string_equal(str(c, "model_type"), type);
}

static uint16_t u16_at(const struct st_tensor *t, int64_t i)
{
	uint16_t v;

	memcpy(&v, (const uint8_t *)t->data + 2 * i, 2);
	return v;
}

static float f32_at(const struct st_tensor *t, int64_t i)
{
	float v;

	memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
	return v;
}

static uint32_t u32_at(const struct st_tensor *t, int64_t i)
{
	uint32_t v;

	memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
	return v;
}

static uint8_t u8_at(const struct st_tensor *t, int64_t i)
{
	return ((const uint8_t *)t->data)[i];
}

static float bf16_at(const struct st_tensor *t, int64_t i)
{
	return nf_bf16_to_f32(u16_at(t, i));
}

static float absf(float x)
{
	return x < 0 ? -x : x;
}

/* spread - mean square of a BF16/F32 tensor's values around @center; @lo, @hi: the range. */
static double spread(const struct st_tensor *t, double center, double *lo, double *hi)
{
	double s = 0;
	int64_t i;

	*lo = 1e30;
	*hi = -1e30;
	for (i = 0; i < t->numel; i++) {
		double v = t->dtype == ST_F32 ? f32_at(t, i) : bf16_at(t, i);

		s += (v - center) * (v - center);
		if (v < *lo)
			*lo = v;
		if (v > *hi)
			*hi = v;
	}
	return t->numel ? s / (double)t->numel : 0;
}

/* want_range - @name's values (BF16/F32) all lie in [@lo, @hi] and are not all equal. */
static void want_range(const struct st_set *s, const char *name, double lo, double hi)
{
	double min, max;

	spread(st_find(s, name), 0, &min, &max);
	assert_true(min >= lo && max <= hi && max > min);
}

/* ---- the tensors each model holds ---- */

/* present - tensors that the model made as @sub (see model()) holds: name, dtype and
 * shape as for want(). */
static const struct {
	const char *sub, *name;
	enum st_dtype dt;
	int ndim;
	int64_t d0, d1;
} present[] = {
	/* 4 heads: q_b_proj 4 x (32 nope + 16 rope), kv_b_proj 4 x (32 nope + 32 v),
	 * o_proj 4 x 32 */
	{ "kimi-bf16", "model.embed_tokens.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-bf16", "model.norm.weight", ST_BF16, 1, 192, 0 },
	{ "kimi-bf16", "lm_head.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-bf16", "model.layers.0.mlp.gate_proj.weight", ST_BF16, 2, 320, 192 },
	{ "kimi-bf16", "model.layers.0.mlp.up_proj.weight", ST_BF16, 2, 320, 192 },
	{ "kimi-bf16", "model.layers.0.mlp.down_proj.weight", ST_BF16, 2, 192, 320 },
	{ "kimi-bf16", "model.layers.1.input_layernorm.weight", ST_BF16, 1, 192, 0 },
	{ "kimi-bf16", "model.layers.1.post_attention_layernorm.weight", ST_BF16, 1, 192, 0 },
	{ "kimi-bf16", "model.layers.1.self_attn.q_a_proj.weight", ST_BF16, 2, 96, 192 },
	{ "kimi-bf16", "model.layers.1.self_attn.q_a_layernorm.weight", ST_BF16, 1, 96, 0 },
	{ "kimi-bf16", "model.layers.1.self_attn.q_b_proj.weight", ST_BF16, 2, 192, 96 },
	{ "kimi-bf16", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", ST_BF16, 2, 80, 192 },
	{ "kimi-bf16", "model.layers.1.self_attn.kv_a_layernorm.weight", ST_BF16, 1, 64, 0 },
	{ "kimi-bf16", "model.layers.1.self_attn.kv_b_proj.weight", ST_BF16, 2, 256, 64 },
	{ "kimi-bf16", "model.layers.1.self_attn.o_proj.weight", ST_BF16, 2, 192, 128 },
	{ "kimi-bf16", "model.layers.1.mlp.gate.weight", ST_BF16, 2, 16, 192 },
	{ "kimi-bf16", "model.layers.1.mlp.gate.e_score_correction_bias", ST_F32, 1, 16, 0 },
	{ "kimi-bf16", "model.layers.1.mlp.experts.3.gate_proj.weight", ST_BF16, 2, 128, 192 },
	{ "kimi-bf16", "model.layers.1.mlp.experts.3.up_proj.weight", ST_BF16, 2, 128, 192 },
	{ "kimi-bf16", "model.layers.2.mlp.experts.15.down_proj.weight", ST_BF16, 2, 192, 128 },
	{ "kimi-bf16", "model.layers.2.mlp.shared_experts.gate_proj.weight", ST_BF16, 2, 128, 192 },
	{ "kimi-bf16", "model.layers.2.mlp.shared_experts.down_proj.weight", ST_BF16, 2, 192, 128 },
	/* 6 query heads and 2 KV heads of 32 */
	{ "glm-bf16", "model.layers.1.self_attn.q_proj.weight", ST_BF16, 2, 192, 192 },
	{ "glm-bf16", "model.layers.1.self_attn.q_proj.bias", ST_BF16, 1, 192, 0 },
	{ "glm-bf16", "model.layers.1.self_attn.k_proj.weight", ST_BF16, 2, 64, 192 },
	{ "glm-bf16", "model.layers.1.self_attn.k_proj.bias", ST_BF16, 1, 64, 0 },
	{ "glm-bf16", "model.layers.1.self_attn.v_proj.weight", ST_BF16, 2, 64, 192 },
	{ "glm-bf16", "model.layers.1.self_attn.v_proj.bias", ST_BF16, 1, 64, 0 },
	{ "glm-bf16", "model.layers.1.self_attn.o_proj.weight", ST_BF16, 2, 192, 192 },
	{ "glm-bf16", "model.layers.1.self_attn.q_norm.weight", ST_BF16, 1, 32, 0 },
	{ "glm-bf16", "model.layers.1.self_attn.k_norm.weight", ST_BF16, 1, 32, 0 },
	{ "glm-bf16", "model.layers.0.mlp.down_proj.weight", ST_BF16, 2, 192, 320 },
	{ "glm-bf16", "model.layers.1.mlp.gate.e_score_correction_bias", ST_F32, 1, 16, 0 },
	{ "glm-bf16", "model.layers.1.mlp.experts.3.gate_proj.weight", ST_BF16, 2, 128, 192 },
	{ "glm-bf16", "model.layers.1.mlp.shared_experts.up_proj.weight", ST_BF16, 2, 128, 192 },
	/* not quantized: embeddings, lm_head, norms, router */
	{ "kimi-fp8", "model.embed_tokens.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-fp8", "lm_head.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-fp8", "model.layers.1.self_attn.kv_a_layernorm.weight", ST_BF16, 1, 64, 0 },
	{ "kimi-fp8", "model.layers.1.mlp.gate.weight", ST_BF16, 2, 16, 192 },
	{ "kimi-fp8", "model.layers.1.mlp.gate.e_score_correction_bias", ST_F32, 1, 16, 0 },
	{ "glm-fp8", "model.layers.1.self_attn.q_proj.bias", ST_BF16, 1, 192, 0 },
	{ "glm-fp8", "model.layers.1.self_attn.q_norm.weight", ST_BF16, 1, 32, 0 },
	/* routed experts only: attention, shared experts, dense MLP, router stay BF16 */
	{ "kimi-int4", "model.layers.1.mlp.shared_experts.gate_proj.weight", ST_BF16, 2, 128, 192 },
	{ "kimi-int4", "model.layers.0.mlp.down_proj.weight", ST_BF16, 2, 192, 320 },
	{ "kimi-int4", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", ST_BF16, 2, 80, 192 },
	{ "kimi-int4", "model.layers.1.mlp.gate.weight", ST_BF16, 2, 16, 192 },
	{ "glm-int4", "model.layers.1.self_attn.q_proj.weight", ST_BF16, 2, 192, 192 },
	{ "kimi-nvfp4", "model.layers.1.mlp.shared_experts.gate_proj.weight", ST_BF16, 2, 128, 192 },
	{ "kimi-nvfp4", "model.layers.1.self_attn.q_b_proj.weight", ST_BF16, 2, 192, 96 },
	{ "kimi-nvfp4", "model.layers.0.mlp.gate_proj.weight", ST_BF16, 2, 320, 192 },
	/* K2.5: the text model under language_model., a vision tower beside it */
	{ "kimi-int4-k25", "language_model.model.embed_tokens.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-int4-k25", "language_model.model.norm.weight", ST_BF16, 1, 192, 0 },
	{ "kimi-int4-k25", "language_model.lm_head.weight", ST_BF16, 2, 256, 192 },
	{ "kimi-int4-k25", "vision_tower.patch_embed.weight", ST_BF16, 2, -1, -1 },
	/* one layer: it must be the MoE one */
	{ "kimi-l1", "model.layers.0.mlp.gate.weight", ST_BF16, 2, 16, 192 },
	/* 2 experts: a router of 2 */
	{ "kimi-x2", "model.layers.1.mlp.gate.e_score_correction_bias", ST_F32, 1, 2, 0 },
};

/* absent - tensors that the model made as @sub must not hold. */
static const struct {
	const char *sub, *name;
} absent[] = {
	{ "kimi-bf16", "model.layers.0.mlp.gate.weight" },
	{ "kimi-bf16", "model.layers.2.mlp.experts.16.down_proj.weight" },
	{ "kimi-bf16", "model.layers.3.input_layernorm.weight" },
	{ "glm-bf16", "model.layers.1.self_attn.o_proj.bias" },
	{ "kimi-fp8", "model.layers.1.mlp.gate.weight_scale_inv" },
	{ "kimi-int4-k25", "model.embed_tokens.weight" },
	{ "kimi-int4-k25", "lm_head.weight" },
	{ "kimi-l1", "model.layers.0.mlp.gate_proj.weight" },
	{ "kimi-l1", "model.layers.1.input_layernorm.weight" },
	{ "kimi-x2", "model.layers.1.mlp.experts.2.gate_proj.weight" },
};

/* quantized - Linear layers [rows, cols] (names without ".weight") that the model made as
 * @sub quantizes. */
static const struct {
	const char *sub, *name;
	int64_t rows, cols;
} quantized[] = {
	/* FP8: every Linear in attention and the MLPs, partial 128-blocks included */
	{ "kimi-fp8", "model.layers.1.self_attn.q_a_proj", 96, 192 },
	{ "kimi-fp8", "model.layers.1.self_attn.q_b_proj", 192, 96 },
	{ "kimi-fp8", "model.layers.1.self_attn.kv_a_proj_with_mqa", 80, 192 },
	{ "kimi-fp8", "model.layers.1.self_attn.kv_b_proj", 256, 64 },
	{ "kimi-fp8", "model.layers.1.self_attn.o_proj", 192, 128 },
	{ "kimi-fp8", "model.layers.0.mlp.gate_proj", 320, 192 },
	{ "kimi-fp8", "model.layers.0.mlp.down_proj", 192, 320 },
	{ "kimi-fp8", "model.layers.1.mlp.experts.3.gate_proj", 128, 192 },
	{ "kimi-fp8", "model.layers.2.mlp.experts.3.down_proj", 192, 128 },
	{ "kimi-fp8", "model.layers.1.mlp.shared_experts.up_proj", 128, 192 },
	{ "glm-fp8", "model.layers.1.self_attn.q_proj", 192, 192 },
	{ "glm-fp8", "model.layers.1.self_attn.k_proj", 64, 192 },
	{ "glm-fp8", "model.layers.2.mlp.experts.7.up_proj", 128, 192 },
	/* INT4: the routed experts */
	{ "kimi-int4", "model.layers.1.mlp.experts.3.gate_proj", 128, 192 },
	{ "kimi-int4", "model.layers.1.mlp.experts.3.up_proj", 128, 192 },
	{ "kimi-int4", "model.layers.2.mlp.experts.15.down_proj", 192, 128 },
	{ "glm-int4", "model.layers.1.mlp.experts.3.gate_proj", 128, 192 },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* want_layout - @s (the model made as @sub) holds every tensor present[] lists for @sub
 * and none that absent[] lists; fails the test otherwise, or when neither lists @sub. */
static void want_layout(const struct st_set *s, const char *sub)
{
	size_t i, n = 0;

	for (i = 0; i < COUNT(present); i++)
		if (strcmp(present[i].sub, sub) == 0) {
			want(s, present[i].name, present[i].dt, present[i].ndim, present[i].d0,
			     present[i].d1);
			n++;
		}
	for (i = 0; i < COUNT(absent); i++)
		if (strcmp(absent[i].sub, sub) == 0) {
			assert_null(st_find(s, absent[i].name));
			n++;
		}
	if (!n)
		fail_msg("no tensors listed for %s", sub);
}

/* check_fn - re-derive the quantized Linear @name [@rows, @cols] in @q from the BF16 master @m. */
typedef void check_fn(const struct st_set *q, const struct st_set *m, const char *name,
		      int64_t rows, int64_t cols);

/* check_quantized - @check every Linear that quantized[] lists for @sub (the model @q)
 * against the BF16 master @m; fails the test when it lists none. */
static void check_quantized(const struct st_set *q, const struct st_set *m, const char *sub,
			    check_fn *check)
{
	size_t i, n = 0;

	for (i = 0; i < COUNT(quantized); i++)
		if (strcmp(quantized[i].sub, sub) == 0) {
			check(q, m, quantized[i].name, quantized[i].rows, quantized[i].cols);
			n++;
		}
	if (!n)
		fail_msg("no quantized Linear listed for %s", sub);
}

/* ---- layouts and configs ---- */

static void test_kimi_bf16(void **state)
{
	const char *dir = model("kimi-bf16", opts("kimi-k2", "bf16"));
	struct st_set *s = open_model(dir);
	cJSON *c = read_json(dir, "config.json");
	const cJSON *r = obj(c, "rope_scaling");
	double lo, hi, ms;

	(void)state;
	assert_true(file_exists(dir, "model.safetensors"));
	assert_false(file_exists(dir, "model.safetensors.index.json"));
	/* 3 global, 9 per layer around attention, 3 dense, 2 + 16*3 + 3 per MoE layer */
	assert_int_equal(st_count(s), 3 + 3 * 9 + 3 + 2 * 53);
	want_layout(s, "kimi-bf16");

	/* value ranges: uniform with the std the header promises (variance within 10%):
	 * embeddings 1, Linear 1/sqrt(in), o_proj and down_proj half that */
	ms = spread(st_find(s, "model.embed_tokens.weight"), 0, &lo, &hi);
	assert_true(ms > 0.9 && ms < 1.1 && hi < 1.74 && lo > -1.74);
	ms = spread(st_find(s, "model.layers.1.self_attn.q_a_proj.weight"), 0, &lo, &hi);
	assert_true(ms * 192 > 0.9 && ms * 192 < 1.1);
	ms = spread(st_find(s, "model.layers.1.self_attn.o_proj.weight"), 0, &lo, &hi);
	assert_true(ms * 128 * 4 > 0.9 && ms * 128 * 4 < 1.1);
	ms = spread(st_find(s, "model.layers.1.mlp.experts.3.down_proj.weight"), 0, &lo, &hi);
	assert_true(ms * 128 * 4 > 0.9 && ms * 128 * 4 < 1.1);
	want_range(s, "model.layers.1.self_attn.kv_a_layernorm.weight", 0.9, 1.1);
	want_range(s, "model.layers.1.mlp.gate.e_score_correction_bias", -0.05, 0.05);

	want_arch(c, "DeepseekV3ForCausalLM", "kimi_k2");
	assert_true(num(c, "vocab_size") == 256 && num(c, "hidden_size") == 192);
	assert_true(num(c, "num_hidden_layers") == 3 && num(c, "num_attention_heads") == 4);
	assert_true(num(c, "num_key_value_heads") == 4 && num(c, "q_lora_rank") == 96);
	assert_true(num(c, "kv_lora_rank") == 64 && num(c, "qk_nope_head_dim") == 32);
	assert_true(num(c, "qk_rope_head_dim") == 16 && num(c, "v_head_dim") == 32);
	assert_true(num(c, "n_routed_experts") == 16 && num(c, "n_shared_experts") == 1);
	assert_true(num(c, "num_experts_per_tok") == 4 && num(c, "moe_intermediate_size") == 128);
	assert_true(num(c, "intermediate_size") == 320 && num(c, "first_k_dense_replace") == 1);
	assert_true(num(c, "moe_layer_freq") == 1 && num(c, "n_group") == 4);
	assert_true(num(c, "topk_group") == 2 && num(c, "routed_scaling_factor") == 2.827);
	assert_string_equal(str(c, "topk_method"), "noaux_tc");
	assert_string_equal(str(c, "scoring_func"), "sigmoid");
	assert_string_equal(str(c, "hidden_act"), "silu");
	assert_string_equal(str(c, "torch_dtype"), "bfloat16");
	assert_true(boolean(c, "norm_topk_prob"));
	assert_false(boolean(c, "tie_word_embeddings"));
	assert_false(boolean(c, "attention_bias"));
	assert_true(num(c, "rms_norm_eps") == 1e-6 && num(c, "rope_theta") == 50000);
	assert_true(num(c, "max_position_embeddings") == 131072);
	assert_true(num(c, "num_nextn_predict_layers") == 0);
	assert_true(num(c, "bos_token_id") == 1 && num(c, "eos_token_id") == 2);
	assert_string_equal(str(r, "type"), "yarn");
	assert_true(num(r, "factor") == 32 && num(r, "original_max_position_embeddings") == 4096);
	assert_true(num(r, "beta_fast") == 32 && num(r, "beta_slow") == 1);
	assert_true(num(r, "mscale") == 1 && num(r, "mscale_all_dim") == 1);
	assert_null(cJSON_GetObjectItemCaseSensitive(c, "quantization_config"));
	cJSON_Delete(c);
	st_close(s);
}

static void test_glm_bf16(void **state)
{
	const char *dir = model("glm-bf16", opts("glm4-moe", "bf16"));
	struct st_set *s = open_model(dir);
	cJSON *c = read_json(dir, "config.json");

	(void)state;
	/* 3 global; per layer 2 norms, q/k/v weight+bias, o, q_norm, k_norm */
	assert_int_equal(st_count(s), 3 + 3 * 11 + 3 + 2 * 53);
	want_layout(s, "glm-bf16");
	want_range(s, "model.layers.2.self_attn.k_proj.bias", -0.1, 0.1);

	want_arch(c, "Glm4MoeForCausalLM", "glm4_moe");
	assert_true(num(c, "num_attention_heads") == 6 && num(c, "num_key_value_heads") == 2);
	assert_true(num(c, "head_dim") == 32 && num(c, "partial_rotary_factor") == 0.5);
	assert_true(boolean(c, "use_qk_norm") && boolean(c, "attention_bias"));
	assert_true(num(c, "rope_theta") == 1000000 && num(c, "rms_norm_eps") == 1e-5);
	assert_true(cJSON_IsNull(obj(c, "rope_scaling")));
	assert_true(num(c, "n_group") == 1 && num(c, "topk_group") == 1);
	assert_true(num(c, "routed_scaling_factor") == 2.5 && boolean(c, "norm_topk_prob"));
	assert_true(num(c, "first_k_dense_replace") == 1 && num(c, "intermediate_size") == 320);
	assert_true(num(c, "moe_intermediate_size") == 128 && num(c, "n_routed_experts") == 16);
	assert_true(num(c, "max_position_embeddings") == 131072);
	assert_true(num(c, "bos_token_id") == 1 && num(c, "eos_token_id") == 2);
	assert_false(boolean(c, "tie_word_embeddings"));
	cJSON_Delete(c);
	st_close(s);
}

/* ---- quantized formats against the BF16 master of the same seed ---- */

/* check_fp8 - @name's F8_E4M3 weight and scale [ceil(r/128), ceil(c/128)] re-derived from @m. */
static void check_fp8(const struct st_set *q, const struct st_set *m, const char *name,
		      int64_t rows, int64_t cols)
{
	int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128, r, c;
	const struct st_tensor *w, *s, *ms;

	w = want(q, part(name, ".weight"), ST_F8_E4M3, 2, rows, cols);
	s = want(q, part(name, ".weight_scale_inv"), ST_F32, 2, br, bc);
	ms = want(m, part(name, ".weight"), ST_BF16, 2, rows, cols);
	for (r = 0; r < br; r++)
		for (c = 0; c < bc; c++) {
			float amax = 0, scale = f32_at(s, r * bc + c);
			int64_t i, j;

			for (i = r * 128; i < rows && i < (r + 1) * 128; i++)
				for (j = c * 128; j < cols && j < (c + 1) * 128; j++)
					if (absf(bf16_at(ms, i * cols + j)) > amax)
						amax = absf(bf16_at(ms, i * cols + j));
			assert_true(scale == amax / 448.0f);
			for (i = r * 128; i < rows && i < (r + 1) * 128; i++)
				for (j = c * 128; j < cols && j < (c + 1) * 128; j++) {
					float x = bf16_at(ms, i * cols + j);
					uint8_t code = u8_at(w, i * cols + j);
					float d = nf_e4m3_to_f32(code) * scale;

					assert_int_equal(code, nf_f32_to_e4m3(x / scale));
					/* 3 mantissa bits: half an ulp is 1/16 of the value,
					 * subnormals step 2^-9 of the scale */
					assert_true(absf(d - x) <= absf(x) / 16 + scale * 0x1p-10f);
				}
		}
}

static void test_fp8(void **state)
{
	const char *kdir = model("kimi-fp8", opts("kimi-k2", "fp8"));
	const char *gdir = model("glm-fp8", opts("glm4-moe", "fp8"));
	struct st_set *k = open_model(kdir), *km = open_model(model("kimi-bf16", opts("kimi-k2", "bf16")));
	struct st_set *g = open_model(gdir), *gm = open_model(model("glm-bf16", opts("glm4-moe", "bf16")));
	cJSON *c = read_json(kdir, "config.json"), *cg = read_json(gdir, "config.json");
	const cJSON *q = obj(c, "quantization_config"), *b = obj(q, "weight_block_size");

	(void)state;
	check_quantized(k, km, "kimi-fp8", check_fp8);
	want_layout(k, "kimi-fp8");
	assert_string_equal(str(q, "quant_method"), "fp8");
	assert_string_equal(str(q, "fmt"), "e4m3");
	assert_string_equal(str(q, "activation_scheme"), "dynamic");
	assert_int_equal(cJSON_GetArraySize(b), 2);
	assert_true(cJSON_GetArrayItem(b, 0)->valuedouble == 128);
	assert_true(cJSON_GetArrayItem(b, 1)->valuedouble == 128);

	check_quantized(g, gm, "glm-fp8", check_fp8);
	want_layout(g, "glm-fp8");
	assert_string_equal(str(obj(cg, "quantization_config"), "quant_method"), "fp8");
	cJSON_Delete(c);
	cJSON_Delete(cg);
	st_close(k);
	st_close(km);
	st_close(g);
	st_close(gm);
}

/* check_int4 - @name's pack-quantized tensors re-derived from @m (nibble order included). */
static void check_int4(const struct st_set *q, const struct st_set *m, const char *name,
		       int64_t rows, int64_t cols)
{
	const struct st_tensor *p, *s, *h, *ms;
	int64_t r, c, shape[2];

	p = want(q, part(name, ".weight_packed"), ST_I32, 2, rows, cols / 8);
	s = want(q, part(name, ".weight_scale"), ST_BF16, 2, rows, cols / 32);
	h = want(q, part(name, ".weight_shape"), ST_I64, 1, 2, 0);
	memcpy(shape, h->data, sizeof(shape));
	assert_true(shape[0] == rows && shape[1] == cols);
	assert_null(st_find(q, part(name, ".weight")));
	ms = want(m, part(name, ".weight"), ST_BF16, 2, rows, cols);
	for (r = 0; r < rows; r++)
		for (c = 0; c < cols; c++) {
			float amax = 0, scale = bf16_at(s, r * (cols / 32) + c / 32);
			float x = bf16_at(ms, r * cols + c), e;
			int u = (int)((u32_at(p, r * (cols / 8) + c / 8) >> (4 * (c % 8))) & 15);
			int want_q;
			int64_t j;

			for (j = c / 32 * 32; j < c / 32 * 32 + 32; j++)
				if (absf(bf16_at(ms, r * cols + j)) > amax)
					amax = absf(bf16_at(ms, r * cols + j));
			assert_int_equal(u16_at(s, r * (cols / 32) + c / 32), nf_f32_to_bf16(amax / 7.5f));
			e = x / scale;
			want_q = e < 0 ? -(int)nf_round_even(-e) : (int)nf_round_even(e);
			want_q = want_q > 7 ? 7 : want_q < -8 ? -8 : want_q;
			/* element c in bits 4*(c%8), stored as q + 8 */
			assert_int_equal(u - 8, want_q);
			/* half a step, plus the clamp of +amax (7.5 -> 7) under a bf16 scale */
			assert_true(absf((float)(u - 8) * scale - x) <= 0.53f * scale);
		}
}

static void test_int4(void **state)
{
	const char *dir = model("kimi-int4", opts("kimi-k2", "int4"));
	struct st_set *q = open_model(dir), *m = open_model(model("kimi-bf16", opts("kimi-k2", "bf16")));
	struct st_set *g = open_model(model("glm-int4", opts("glm4-moe", "int4")));
	struct st_set *gm = open_model(model("glm-bf16", opts("glm4-moe", "bf16")));
	cJSON *c = read_json(dir, "config.json");
	const cJSON *qc = obj(c, "quantization_config"), *w, *ig;

	(void)state;
	check_quantized(q, m, "kimi-int4", check_int4);
	check_quantized(g, gm, "glm-int4", check_int4);
	want_layout(q, "kimi-int4");
	want_layout(g, "glm-int4");
	assert_memory_equal(st_find(q, "model.layers.1.self_attn.o_proj.weight")->data,
			    st_find(m, "model.layers.1.self_attn.o_proj.weight")->data, 192 * 128 * 2);

	w = obj(obj(obj(obj(qc, "config_groups"), "group_0"), "weights"), "num_bits");
	assert_true(w->valuedouble == 4);
	w = obj(obj(obj(qc, "config_groups"), "group_0"), "weights");
	assert_true(num(w, "group_size") == 32 && boolean(w, "symmetric") && !boolean(w, "dynamic"));
	assert_string_equal(str(w, "strategy"), "group");
	assert_string_equal(str(w, "type"), "int");
	assert_string_equal(str(w, "observer"), "minmax");
	assert_true(cJSON_IsNull(obj(w, "actorder")));
	assert_true(cJSON_IsNull(obj(obj(obj(qc, "config_groups"), "group_0"), "input_activations")));
	assert_true(has_str(obj(obj(obj(qc, "config_groups"), "group_0"), "targets"), "Linear"));
	assert_string_equal(str(qc, "format"), "pack-quantized");
	assert_string_equal(str(qc, "quant_method"), "compressed-tensors");
	assert_string_equal(str(qc, "quantization_status"), "compressed");
	assert_true(cJSON_IsNull(obj(qc, "kv_cache_scheme")));
	ig = obj(qc, "ignore");
	assert_int_equal(cJSON_GetArraySize(ig), 4);
	assert_true(has_strs(ig, "lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
			     "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", NULL));
	cJSON_Delete(c);
	st_close(q);
	st_close(m);
	st_close(g);
	st_close(gm);
}

/* check_nvfp4 - @name's ModelOpt tensors re-derived from @m with tensor scale amax/(6*448). */
static void check_nvfp4(const struct st_set *q, const struct st_set *m, const char *name,
			int64_t rows, int64_t cols, float amax)
{
	const struct st_tensor *w, *s, *s2, *is, *ms;
	float ws2;
	int64_t r, c;

	w = want(q, part(name, ".weight"), ST_U8, 2, rows, cols / 2);
	s = want(q, part(name, ".weight_scale"), ST_F8_E4M3, 2, rows, cols / 16);
	s2 = want(q, part(name, ".weight_scale_2"), ST_F32, 0, 0, 0);
	is = want(q, part(name, ".input_scale"), ST_F32, 0, 0, 0);
	assert_int_equal(s2->numel, 1);
	ws2 = f32_at(s2, 0);
	assert_true(ws2 == amax / (6.0f * 448.0f));
	assert_true(f32_at(is, 0) > 0);
	ms = want(m, part(name, ".weight"), ST_BF16, 2, rows, cols);
	for (r = 0; r < rows; r++)
		for (c = 0; c < cols; c++) {
			uint8_t sf = u8_at(s, r * (cols / 16) + c / 16), code;
			float bmax = 0, unit = nf_e4m3_to_f32(sf) * ws2, x = bf16_at(ms, r * cols + c);
			int64_t j;

			for (j = c / 16 * 16; j < c / 16 * 16 + 16; j++)
				if (absf(bf16_at(ms, r * cols + j)) > bmax)
					bmax = absf(bf16_at(ms, r * cols + j));
			assert_int_equal(sf, nf_f32_to_e4m3(bmax / 6.0f / ws2));
			/* the low nibble holds the even element */
			code = (uint8_t)((u8_at(w, r * (cols / 2) + c / 2) >> (c % 2 ? 4 : 0)) & 15);
			assert_int_equal(code, nf_f32_to_e2m1(x / unit));
			/* E2M1 steps are at most 2 units (4..6), a block scale rounded
			 * down saturates at 6 by at most 6/16 */
			assert_true(absf(nf_e2m1_to_f32(code) * unit - x) <= unit);
		}
}

static float tensor_amax(const struct st_tensor *t)
{
	float m = 0;
	int64_t i;

	for (i = 0; i < t->numel; i++)
		if (absf(bf16_at(t, i)) > m)
			m = absf(bf16_at(t, i));
	return m;
}

static void test_nvfp4(void **state)
{
	const char *dir = model("kimi-nvfp4", opts("kimi-k2", "nvfp4"));
	struct st_set *q = open_model(dir), *m = open_model(model("kimi-bf16", opts("kimi-k2", "bf16")));
	cJSON *c = read_json(dir, "config.json");
	const cJSON *qc = obj(c, "quantization_config"), *g0, *ig;
	float ag = tensor_amax(st_find(m, "model.layers.1.mlp.experts.3.gate_proj.weight"));
	float au = tensor_amax(st_find(m, "model.layers.1.mlp.experts.3.up_proj.weight"));
	float ad = tensor_amax(st_find(m, "model.layers.1.mlp.experts.3.down_proj.weight"));

	(void)state;
	/* gate and up of one expert share the amax (and so weight_scale_2); at
	 * the tiny sizes both are bf16(sqrt(3/192)) = 0.125 anyway */
	assert_true(f32_at(st_find(q, "model.layers.1.mlp.experts.3.gate_proj.weight_scale_2"), 0) ==
		    f32_at(st_find(q, "model.layers.1.mlp.experts.3.up_proj.weight_scale_2"), 0));
	check_nvfp4(q, m, "model.layers.1.mlp.experts.3.gate_proj", 128, 192, ag > au ? ag : au);
	check_nvfp4(q, m, "model.layers.1.mlp.experts.3.up_proj", 128, 192, ag > au ? ag : au);
	check_nvfp4(q, m, "model.layers.1.mlp.experts.3.down_proj", 192, 128, ad);
	want_layout(q, "kimi-nvfp4");
	assert_false(file_exists(dir, "hf_quant_config.json"));

	assert_string_equal(str(qc, "quant_method"), "modelopt");
	assert_string_equal(str(qc, "quant_algo"), "NVFP4");
	assert_string_equal(str(obj(qc, "producer"), "name"), "modelopt");
	g0 = obj(obj(qc, "config_groups"), "group_0");
	assert_true(num(obj(g0, "weights"), "group_size") == 16);
	assert_true(num(obj(g0, "weights"), "num_bits") == 4);
	assert_string_equal(str(obj(g0, "weights"), "type"), "float");
	assert_true(num(obj(g0, "input_activations"), "group_size") == 16);
	assert_false(boolean(obj(g0, "input_activations"), "dynamic"));
	ig = obj(qc, "ignore");
	assert_true(has_strs(ig, "lm_head", "model.layers.*.self_attn*",
			     "model.layers.*.mlp.shared_experts*", "model.layers.*.mlp.gate_proj",
			     "model.layers.*.mlp.gate", "model.layers.*.mlp.up_proj",
			     "model.layers.*.mlp.down_proj", NULL));
	cJSON_Delete(c);
	st_close(q);
	st_close(m);
}

static void test_nvfp4_legacy(void **state)
{
	struct synth_opts o = opts("glm4-moe", "nvfp4");
	const char *dir, *plain = model("glm-nvfp4", opts("glm4-moe", "nvfp4"));
	struct st_set *a, *b;
	cJSON *c, *h;
	const cJSON *qz;
	const char *n = "model.layers.2.mlp.experts.9.up_proj.weight_scale";

	(void)state;
	o.legacy_quant_config = 1;
	dir = model("glm-nvfp4-legacy", o);
	c = read_json(dir, "config.json");
	h = read_json(dir, "hf_quant_config.json");
	assert_null(cJSON_GetObjectItemCaseSensitive(c, "quantization_config"));
	assert_string_equal(str(obj(h, "producer"), "name"), "modelopt");
	qz = obj(h, "quantization");
	assert_string_equal(str(qz, "quant_algo"), "NVFP4");
	assert_true(cJSON_IsNull(obj(qz, "kv_cache_quant_algo")));
	assert_true(num(qz, "group_size") == 16);
	assert_true(has_strs(obj(qz, "exclude_modules"), "lm_head", "model.layers.*.mlp.gate",
			     "model.layers.*.self_attn*", NULL));
	/* the same tensors as with quantization_config */
	a = open_model(dir);
	b = open_model(plain);
	assert_int_equal(st_count(a), st_count(b));
	assert_memory_equal(st_find(a, n)->data, st_find(b, n)->data, st_find(b, n)->nbytes);
	cJSON_Delete(c);
	cJSON_Delete(h);
	st_close(a);
	st_close(b);
}

/* ---- determinism ---- */

static int same_tensor(const struct st_set *a, const struct st_set *b, const char *name)
{
	const struct st_tensor *x = st_find(a, name), *y = st_find(b, name);

	assert_non_null(x);
	assert_non_null(y);
	return x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
}

static void test_determinism(void **state)
{
	struct synth_opts o = opts("kimi-k2", "bf16");
	const char *e3 = "model.layers.1.mlp.experts.3.gate_proj.weight";
	struct st_set *a = open_model(model("kimi-bf16", o)), *b, *d, *l2, *x8;
	const struct st_tensor *t;

	(void)state;
	b = open_model(model("kimi-bf16-again", o));
	o.seed = 43;
	d = open_model(model("kimi-bf16-seed43", o));
	o.seed = 42;
	o.layers = 2;
	l2 = open_model(model("kimi-bf16-l2", o));
	o.layers = 0;
	o.experts = 8;
	x8 = open_model(model("kimi-bf16-x8", o));
	for (size_t i = 0; i < st_count(a); i++)
		assert_true(same_tensor(a, b, st_at(a, i)->name));
	assert_false(same_tensor(a, d, e3));
	assert_false(same_tensor(a, d, "model.embed_tokens.weight"));
	/* keyed by name: independent of layer count, expert count and order */
	assert_true(same_tensor(a, l2, e3));
	assert_true(same_tensor(a, l2, "lm_head.weight"));
	assert_true(same_tensor(a, x8, e3));
	assert_true(same_tensor(a, x8, "model.layers.2.mlp.experts.7.down_proj.weight"));
	/* the generator is pinned: these bytes are what every machine writes */
	t = st_find(a, e3);
	assert_int_equal(u16_at(t, 0), 0x3d49);
	assert_int_equal(u16_at(t, 1), 0xbd8e);
	assert_int_equal(u16_at(t, 12345), 0xbdf5);
	st_close(a);
	st_close(b);
	st_close(d);
	st_close(l2);
	st_close(x8);
}

/* ---- shards and layouts ---- */

/* check_companions - every tensor named *@suffix sits in another shard than @name's weight. */
static int check_companions(const struct st_set *s, const char *suffix, const char *weight)
{
	size_t i, ls = strlen(suffix), n = 0;

	for (i = 0; i < st_count(s); i++) {
		const struct st_tensor *t = st_at(s, i), *w;
		size_t ln = strlen(t->name);
		char wn[200];

		if (ln < ls || strcmp(t->name + ln - ls, suffix) != 0)
			continue;
		snprintf(wn, sizeof(wn), "%.*s%s", (int)(ln - ls), t->name, weight);
		w = st_find(s, wn);
		assert_non_null(w);
		if (strcmp(w->file, t->file) == 0)
			fail_msg("%s and %s share %s", t->name, wn, t->file);
		n++;
	}
	return (int)n;
}

/* open_sharded - the model @sub: @arch in @quant written in @shards shards, opened. */
static struct st_set *open_sharded(const char *sub, const char *arch, const char *quant, int shards)
{
	struct synth_opts o = opts(arch, quant);

	o.shards = shards;
	return open_model(model(sub, o));
}

static void test_shards(void **state)
{
	struct synth_opts o = opts("kimi-k2", "fp8");
	const char *dir;
	struct st_set *s, *plain;
	cJSON *idx;
	size_t i;

	(void)state;
	o.shards = 3;
	dir = model("kimi-fp8-3", o);
	assert_true(file_exists(dir, "model-00001-of-00003.safetensors"));
	assert_true(file_exists(dir, "model-00002-of-00003.safetensors"));
	assert_true(file_exists(dir, "model-00003-of-00003.safetensors"));
	assert_false(file_exists(dir, "model.safetensors"));
	idx = read_json(dir, "model.safetensors.index.json");
	s = open_model(dir);
	plain = open_model(model("kimi-fp8", opts("kimi-k2", "fp8")));
	assert_int_equal(cJSON_GetArraySize(obj(idx, "weight_map")), st_count(s));
	assert_int_equal(st_count(s), st_count(plain));
	for (i = 0; i < st_count(s); i++)
		assert_true(same_tensor(s, plain, st_at(s, i)->name));
	assert_int_equal(check_companions(s, ".weight_scale_inv", ".weight"), 3 * 5 + 3 + 2 * 51);
	cJSON_Delete(idx);
	st_close(s);
	st_close(plain);

	s = open_sharded("kimi-int4-2", "kimi-k2", "int4", 2);
	assert_int_equal(check_companions(s, ".weight_scale", ".weight_packed"), 2 * 48);
	assert_int_equal(check_companions(s, ".weight_shape", ".weight_packed"), 2 * 48);
	st_close(s);

	s = open_sharded("glm-nvfp4-4", "glm4-moe", "nvfp4", 4);
	assert_int_equal(check_companions(s, ".weight_scale", ".weight"), 2 * 48);
	assert_int_equal(check_companions(s, ".weight_scale_2", ".weight"), 2 * 48);
	assert_int_equal(check_companions(s, ".input_scale", ".weight"), 2 * 48);
	st_close(s);
}

static void test_k25(void **state)
{
	struct synth_opts o = opts("kimi-k2", "int4");
	const char *dir, *n = "model.layers.1.mlp.experts.3.gate_proj.weight_packed";
	struct st_set *s, *plain = open_model(model("kimi-int4", opts("kimi-k2", "int4")));
	cJSON *c, *cn;
	const cJSON *tc;
	char pn[200];

	(void)state;
	o.k25_layout = 1;
	o.shards = 2;
	dir = model("kimi-int4-k25", o);
	s = open_model(dir);
	c = read_json(dir, "config.json");
	want_arch(c, "KimiK25ForConditionalGeneration", "kimi_k25");
	assert_null(cJSON_GetObjectItemCaseSensitive(c, "quantization_config"));
	assert_true(cJSON_IsObject(obj(c, "vision_config")));
	assert_true(num(c, "media_placeholder_token_id") < 256 && num(c, "pad_token_id") < 256);
	assert_true(num(c, "bos_token_id") == 1 && num(c, "eos_token_id") == 2);
	assert_false(boolean(c, "tie_word_embeddings"));
	tc = obj(c, "text_config");
	assert_string_equal(str(tc, "model_type"), "kimi_k2");
	assert_true(num(tc, "q_lora_rank") == 96 && num(tc, "n_routed_experts") == 16);
	assert_string_equal(str(obj(tc, "rope_scaling"), "type"), "yarn");
	assert_string_equal(str(obj(tc, "quantization_config"), "format"), "pack-quantized");
	assert_true(has_str(obj(obj(tc, "quantization_config"), "ignore"), "re:.*self_attn.*"));

	want_layout(s, "kimi-int4-k25");
	assert_int_equal(st_count(s), st_count(plain) + 1);
	snprintf(pn, sizeof(pn), "language_model.%s", n);
	want(s, pn, ST_I32, 2, 128, 24);
	assert_memory_equal(st_find(s, pn)->data, st_find(plain, n)->data, 128 * 24 * 4);
	assert_int_equal(check_companions(s, ".weight_scale", ".weight_packed"), 2 * 48);

	o.quant = "nvfp4";
	o.legacy_quant_config = 1;
	dir = model("kimi-nvfp4-k25-legacy", o);
	cn = read_json(dir, "hf_quant_config.json");
	assert_true(has_strs(obj(obj(cn, "quantization"), "exclude_modules"),
			     "language_model.model.layers.*.self_attn*", "language_model.lm_head",
			     NULL));
	cJSON_Delete(cn);
	cJSON_Delete(c);
	st_close(s);
	st_close(plain);
}

/* ---- options ---- */

/* What the progress callback saw. */
struct seen_progress {
	int calls, backwards, starts;
	uint64_t last, total;
};

static void on_progress(const struct synth_progress *p, void *ctx)
{
	struct seen_progress *s = ctx;

	assert_non_null(p->what);
	if (p->done < s->last)
		s->backwards++;
	s->starts += p->done == 0 && !p->what[0];
	s->last = p->done;
	s->total = p->total;
	s->calls++;
}

/* seen_total_plus_one - one byte more than the tensors of the model in @dir. */
static uint64_t seen_total_plus_one(const char *dir)
{
	struct st_set *s = open_model(dir);
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < st_count(s); i++)
		total += st_at(s, i)->nbytes;
	st_close(s);
	return total + 1;
}

static void test_overrides(void **state)
{
	struct synth_opts o = opts("kimi-k2", "nvfp4");
	struct seen_progress seen = { 0 };
	const char *dir;
	struct st_set *s;
	cJSON *c;

	(void)state;
	/* one layer: it must be the MoE one; progress from the start to the whole */
	o.layers = 1;
	o.progress = on_progress;
	o.progress_ctx = &seen;
	o.progress_min = 0;
	dir = model("kimi-l1", o);
	assert_true(seen.calls > 16 && seen.backwards == 0 && seen.starts == 1);
	assert_true(seen.total > 0 && seen.last == seen.total);
	/* a write below progress_min reports nothing */
	memset(&seen, 0, sizeof(seen));
	o.progress_min = seen_total_plus_one(dir);
	model("kimi-l1-quiet", o);
	assert_int_equal(seen.calls, 0);
	o.progress = NULL;
	c = read_json(dir, "config.json");
	assert_true(num(c, "num_hidden_layers") == 1 && num(c, "first_k_dense_replace") == 0);
	s = open_model(dir);
	want_layout(s, "kimi-l1");
	st_close(s);
	cJSON_Delete(c);

	/* 6 experts: 4 groups do not divide them, 3 do */
	o = opts("kimi-k2", "bf16");
	o.experts = 6;
	c = read_json(model("kimi-x6", o), "config.json");
	assert_true(num(c, "n_routed_experts") == 6 && num(c, "n_group") == 3);
	assert_true(num(c, "topk_group") == 2 && num(c, "num_experts_per_tok") == 4);
	cJSON_Delete(c);
	o.experts = 2;
	dir = model("kimi-x2", o);
	c = read_json(dir, "config.json");
	assert_true(num(c, "n_routed_experts") == 2 && num(c, "n_group") == 1);
	assert_true(num(c, "topk_group") == 1 && num(c, "num_experts_per_tok") == 2);
	s = open_model(dir);
	want_layout(s, "kimi-x2");
	st_close(s);
	cJSON_Delete(c);
}

static void test_errors(void **state)
{
	struct synth_opts o = opts("llama", "bf16");
	struct sm_err err;
	char dir[600];
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/never", tmp_root);
	assert_int_equal(synth_make_model(&o, dir, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--arch 'llama'"));
	assert_non_null(strstr(err.msg, "kimi-k2") && strstr(err.msg, "glm4-moe"));
	o = opts("kimi-k2", "int8");
	assert_int_equal(synth_make_model(&o, dir, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--quant 'int8'"));
	assert_non_null(strstr(err.msg, "bf16, fp8, int4, nvfp4"));
	o = opts("glm4-moe", "int4");
	o.k25_layout = 1;
	assert_int_equal(synth_make_model(&o, dir, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--k25 is for --arch kimi-k2"));	/* the option's name */
	o = opts("kimi-k2", "fp8");
	o.legacy_quant_config = 1;
	assert_int_equal(synth_make_model(&o, dir, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--legacy-quant-config") && strstr(err.msg, "nvfp4"));
	o = opts("kimi-k2", "bf16");
	o.layers = -1;
	assert_int_equal(synth_make_model(&o, dir, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--layers"));
	assert_int_equal(access(dir, F_OK), -1);
	/* the command adds its own name: none of the library's own */
	assert_null(strstr(err.msg, "make-model"));

	/* a file where a directory has to go: the message names the path */
	snprintf(dir, sizeof(dir), "%s/plainfile", tmp_root);
	f = fopen(dir, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(dir, sizeof(dir), "%s/plainfile/model", tmp_root);
	o = opts("kimi-k2", "bf16");
	assert_true(synth_make_model(&o, dir, &err) < 0);
	assert_non_null(strstr(err.msg, dir));
}

/* The default sizes the command's --help prints come from the size table. */
static void test_defaults(void **state)
{
	struct synth_opts o = opts("glm4-moe", "bf16");
	int layers, experts;
	cJSON *c;

	(void)state;
	assert_int_equal(synth_defaults("kimi-k2", 1, &layers, &experts), 0);
	assert_true(layers == 2 && experts == 384);
	assert_int_equal(synth_defaults("glm4-moe", 1, &layers, &experts), 0);
	assert_true(layers == 4 && experts == 160);
	assert_int_equal(synth_defaults("llama", 0, &layers, &experts), -EINVAL);
	assert_int_equal(synth_defaults("glm4-moe", 0, &layers, &experts), 0);
	c = read_json(model("glm-defaults", o), "config.json");
	assert_true(num(c, "num_hidden_layers") == layers && num(c, "n_routed_experts") == experts);
	cJSON_Delete(c);
}

static int setup(void **state)
{
	(void)state;
	return tmp_dir(tmp_root, sizeof(tmp_root), "sm120-synth-") ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp_root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kimi_bf16),
		cmocka_unit_test(test_glm_bf16),
		cmocka_unit_test(test_fp8),
		cmocka_unit_test(test_int4),
		cmocka_unit_test(test_nvfp4),
		cmocka_unit_test(test_nvfp4_legacy),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_shards),
		cmocka_unit_test(test_k25),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_defaults),
	};

	return cmocka_run_group_tests_name("synth", tests, setup, teardown);
}
