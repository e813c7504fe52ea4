/*
 * test_engine.c - the reference engine on the CPU: number formats, config
 * parsing, the four weight formats dequantized from hand-written tensors,
 * and whole tiny models written by `sm120 ref make-model`'s library: every
 * format runs, naive and absorbed MLA agree, prefill in one call equals
 * token-by-token decode, sharded / K2.5 layouts equal the plain layout, and
 * the logits match a golden file written by Hugging Face transformers
 * (tests/engine/golden, made by tests/gpu/engine_hf.py golden).  Bad
 * inputs, each written into a make-model checkpoint: config values out of
 * range, unknown architectures, a FIFO as config.json, NaN / Inf in scales,
 * norms and the router bias (refused at load), in the router weight, in a
 * layer's weights and in lm_head (refused at the step, naming the layer and
 * the position).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../engine/common/numfmt.h"
#include "../../engine/cpu/cpu.h"
#include "../../engine/engine.h"
#include "../../engine/gpu/gpu.h"
#include "../../engine/model/config.h"
#include "../../engine/model/weights.h"
#include "../../engine/st/safetensors.h"
#include "../../engine/synth/synth.h"
#include "fixture.h"

static char tmp_root[256];

static const char *tmpdir(const char *name)
{
	static char path[512];

	if (!tmp_root[0])
		assert_non_null(tmp_dir(tmp_root, sizeof(tmp_root), "sm120-engine-"));
	snprintf(path, sizeof(path), "%s/%s", tmp_root, name);
	return path;
}

static void write_text(const char *dir, const char *file, const char *text)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* ---- number formats ---- */

static void test_numfmt(void **state)
{
	int c;

	(void)state;
	for (c = 0; c < 0x7f; c++) {
		float v = nf_e4m3_to_f32((uint8_t)c);

		assert_int_equal(nf_f32_to_e4m3(v), c);
		if (c)
			assert_int_equal(nf_f32_to_e4m3(-v), c | 0x80);
	}
	for (c = 0; c < 0x7e; c++) {	/* midpoints go to the even code */
		float lo = nf_e4m3_to_f32((uint8_t)c), hi = nf_e4m3_to_f32((uint8_t)(c + 1));

		assert_int_equal(nf_f32_to_e4m3((lo + hi) / 2), c % 2 ? c + 1 : c);
	}
	assert_int_equal(nf_f32_to_e4m3(1000.0f), 0x7e);
	assert_true(nf_e4m3_to_f32(0x7e) == 448.0f);
	assert_true(nf_e4m3_to_f32(0x01) == 1.0f / 512);
	assert_true(isnan(nf_e4m3_to_f32(0xff)));
	assert_true(nf_e2m1_to_f32(0x7) == 6.0f && nf_e2m1_to_f32(0xb) == -1.5f);
	assert_int_equal(nf_f32_to_e2m1(2.5f), 4);	/* tie between 2 (code 4) and 3 (code 5) */
	assert_int_equal(nf_f32_to_e2m1(-0.3f), 9);
	assert_int_equal(nf_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);	/* tie to even */
	assert_int_equal(nf_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
	assert_true(nf_f16_to_f32(0x3c00) == 1.0f && nf_f16_to_f32(0x0001) == 1.0f / 16777216);
}

/* ---- config.json ---- */

static const char *kimi_cfg =
	"{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"kimi_k2\", "
	"\"hidden_size\": 7168, \"num_hidden_layers\": 61, \"num_attention_heads\": 64, "
	"\"num_key_value_heads\": 64, \"vocab_size\": 163840, \"q_lora_rank\": 1536, "
	"\"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, "
	"\"intermediate_size\": 18432, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 384, "
	"\"n_shared_experts\": 1, \"num_experts_per_tok\": 8, \"first_k_dense_replace\": 1, "
	"\"n_group\": 1, \"topk_group\": 1, \"routed_scaling_factor\": 2.827, \"rope_theta\": 50000.0, "
	"\"rope_scaling\": {\"type\": \"yarn\", \"factor\": %s, \"original_max_position_embeddings\": 4096, "
	"\"beta_fast\": 1.0, \"beta_slow\": 1.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}%s}";

static void test_config(void **state)
{
	const char *dir = tmpdir("cfg");
	struct ref_config c;
	struct sm_err err;
	char text[4096];

	(void)state;
	mkdir(dir, 0700);
	/* K2-Instruct: factor 32 -> m = 1.3465736, scale = 192^-0.5 m^2 = 0.1308608 */
	snprintf(text, sizeof(text), kimi_cfg, "32.0",
		 ", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}");
	write_text(dir, "config.json", text);
	assert_int_equal(ref_config_load(dir, &c, &err), 0);
	assert_int_equal(c.attn, REF_ATTN_MLA);
	assert_int_equal(c.rotary_dim, 64);
	assert_true(fabs(c.softmax_scale - 0.1308608) < 1e-6);
	assert_true(fabs(c.rope_attn_factor - 1.0) < 1e-12);
	assert_int_equal(c.quant.method, REF_Q_FP8_BLOCK);
	assert_true(fabs(c.rms_eps - 1e-6) < 1e-12);	/* DeepseekV3Config's default */
	assert_true(ref_layer_is_moe(&c, 1) && !ref_layer_is_moe(&c, 0));
	/* factor 64 (0905 / Thinking / K2.5): 0.1446796; K2.5 nests everything in text_config */
	snprintf(text, sizeof(text), kimi_cfg, "64.0",
		 ", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
		 "\"pack-quantized\", \"config_groups\": {\"group_0\": {\"weights\": {\"num_bits\": 4, "
		 "\"group_size\": 32}}}, \"ignore\": [\"lm_head\", \"re:.*self_attn.*\"]}");
	{
		char nested[5000];

		snprintf(nested, sizeof(nested), "{\"model_type\": \"kimi_k25\", \"text_config\": %s}", text);
		write_text(dir, "config.json", nested);
	}
	assert_int_equal(ref_config_load(dir, &c, &err), 0);
	assert_true(fabs(c.softmax_scale - 0.1446796) < 1e-6);
	assert_int_equal(c.quant.method, REF_Q_CT_INT4);
	assert_int_equal(c.quant.group_size, 32);
	assert_int_equal(c.quant.n_ignore, 2);
	assert_non_null(strstr(c.quant.source, "text_config"));
	/* GLM with transformers v5's rope_parameters, NeoX on half of head_dim */
	write_text(dir, "config.json",
		   "{\"model_type\": \"glm4_moe\", \"hidden_size\": 5120, \"num_hidden_layers\": 92, "
		   "\"num_attention_heads\": 96, \"num_key_value_heads\": 8, \"head_dim\": 128, "
		   "\"vocab_size\": 151552, \"intermediate_size\": 12288, \"moe_intermediate_size\": 1536, "
		   "\"n_routed_experts\": 160, \"num_experts_per_tok\": 8, \"first_k_dense_replace\": 3, "
		   "\"use_qk_norm\": true, \"attention_bias\": true, \"routed_scaling_factor\": 2.5, "
		   "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}}");
	assert_int_equal(ref_config_load(dir, &c, &err), 0);
	assert_int_equal(c.attn, REF_ATTN_GQA);
	assert_int_equal(c.rotary_dim, 64);	/* partial_rotary_factor defaults to 0.5 */
	assert_true(c.rope_theta == 1e6);
	assert_true(fabs(c.softmax_scale - 0.0883883) < 1e-6);
	assert_true(c.qk_norm && c.attn_bias && !ref_layer_is_moe(&c, 2) && ref_layer_is_moe(&c, 3));
	/* a missing required field is named */
	write_text(dir, "config.json", "{\"model_type\": \"glm4_moe\", \"hidden_size\": 64}");
	assert_int_equal(ref_config_load(dir, &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "num_hidden_layers"));
	assert_non_null(strstr(err.msg, "config.json"));
	write_text(dir, "config.json", "{\"model_type\": \"llama\"}");
	assert_int_equal(ref_config_load(dir, &c, &err), -ENOTSUP);
	assert_non_null(strstr(err.msg, "llama"));
}

/* ---- weight formats from hand-written tensors ---- */

static void test_weight_formats(void **state)
{
	const char *dir = tmpdir("formats");
	char path[600];
	struct st_writer *w;
	struct st_set *s;
	struct ref_config c;
	struct ref_linear l;
	struct sm_err err;
	int64_t shp[2];
	float row[256];
	int i;

	(void)state;
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	w = st_writer_new(path);
	assert_non_null(w);
	{	/* INT4: row 0 words 0x76543210 -> nibbles 0..7 -> q = -8..-1; scale 0.5 */
		int32_t packed[2][4] = { { 0x76543210, (int32_t)0xfedcba98, 0x88888888, 0x88888888 },
					 { 0, 0, 0, 0 } };
		uint16_t scale[2][1] = { { 0x3f00 }, { 0x4000 } };
		int64_t shape[2] = { 2, 32 };

		shp[0] = 2, shp[1] = 4;
		assert_int_equal(st_writer_add(w, "a.weight_packed", ST_I32, 2, shp, packed, &err), 0);
		shp[1] = 1;
		assert_int_equal(st_writer_add(w, "a.weight_scale", ST_BF16, 2, shp, scale, &err), 0);
		shp[0] = 2;
		assert_int_equal(st_writer_add(w, "a.weight_shape", ST_I64, 1, shp, shape, &err), 0);
	}
	{	/* NVFP4: byte 0x71 -> element 0 = code 1 (0.5), element 1 = code 7 (6) */
		uint8_t wt[1][16] = { { 0x71, 0x9a } };
		uint8_t sc[1][2] = { { 0x38, 0x40 } };	/* e4m3 1.0, 2.0 */
		float s2 = 0.25f;

		shp[0] = 1, shp[1] = 16;
		assert_int_equal(st_writer_add(w, "b.weight", ST_U8, 2, shp, wt, &err), 0);
		shp[1] = 2;
		assert_int_equal(st_writer_add(w, "b.weight_scale", ST_F8_E4M3, 2, shp, sc, &err), 0);
		assert_int_equal(st_writer_add(w, "b.weight_scale_2", ST_F32, 0, shp, &s2, &err), 0);
	}
	{	/* FP8 block 128: [130, 2]: rows 128.. in the second block row */
		static uint8_t wt[130][2];
		float inv[2][1] = { { 2.0f }, { 0.5f } };

		wt[0][0] = 0x38, wt[129][1] = 0x40;
		shp[0] = 130, shp[1] = 2;
		assert_int_equal(st_writer_add(w, "c.weight", ST_F8_E4M3, 2, shp, wt, &err), 0);
		shp[0] = 2, shp[1] = 1;
		assert_int_equal(st_writer_add(w, "c.weight_scale_inv", ST_F32, 2, shp, inv, &err), 0);
	}
	assert_int_equal(st_writer_finish(w, &err), 0);
	s = st_open(dir, &err);
	assert_non_null(s);
	memset(&c, 0, sizeof(c));
	c.quant.method = REF_Q_CT_INT4;
	c.quant.group_size = 32;
	assert_int_equal(ref_linear_bind(&l, s, &c, "a", 2, 32, &err), 0);
	assert_int_equal(l.fmt, REF_W_INT4);
	ref_linear_row(&l, 0, row);
	for (i = 0; i < 16; i++)
		assert_true(row[i] == (float)(i - 8) * 0.5f);
	assert_true(row[16] == 0.0f);
	ref_linear_row(&l, 1, row);
	assert_true(row[0] == -16.0f);
	/* NVFP4 under an INT4 config: refused, naming the tensor */
	assert_int_equal(ref_linear_bind(&l, s, &c, "b", -1, -1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "b.weight"));
	c.quant.method = REF_Q_MODELOPT_NVFP4;
	assert_int_equal(ref_linear_bind(&l, s, &c, "b", 1, 32, &err), 0);
	ref_linear_row(&l, 0, row);
	assert_true(row[0] == 0.5f * 0.25f && row[1] == 6.0f * 0.25f);
	assert_true(row[2] == -1.0f * 0.25f && row[3] == -0.5f * 0.25f); /* 0x9a: 0xa = -1, 0x9 = -0.5 */
	assert_true(row[16] == 0.0f);
	c.quant.method = REF_Q_FP8_BLOCK;
	c.quant.block_n = c.quant.block_k = 128;
	assert_int_equal(ref_linear_bind(&l, s, &c, "c", 130, 2, &err), 0);
	ref_linear_row(&l, 0, row);
	assert_true(row[0] == 2.0f && row[1] == 0.0f);
	ref_linear_row(&l, 129, row);
	assert_true(row[1] == 1.0f);
	/* a shape the config does not give is refused with both shapes */
	assert_int_equal(ref_linear_bind(&l, s, &c, "c", 131, 2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "[131, 2]"));
	assert_int_equal(ref_linear_bind(&l, s, &c, "missing", 1, 1, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "missing.weight"));
	st_close(s);
}

/* ---- whole tiny models ---- */

static const int prompt[] = { 5, 17, 42, 99, 3, 250, 7 };
#define NPROMPT 7

static const char *make(const char *arch, const char *quant, int shards, int k25)
{
	static char dir[600];
	struct synth_opts o = { .arch = arch, .quant = quant, .seed = 1, .shards = shards,
				.k25_layout = k25 };
	struct sm_err err;

	snprintf(dir, sizeof(dir), "%s/%s-%s-%d-%d", tmp_root[0] ? tmp_root : tmpdir(""), arch, quant,
		 shards, k25);
	if (access(dir, F_OK) != 0 && synth_make_model(&o, dir, &err) != 0)
		fail_msg("make-model %s %s: %s", arch, quant, err.msg);
	return dir;
}

/*
 * run_routed - logits of every position of @tokens[@n]: in one call (@chunk 0)
 * or @chunk at a time; @routes (may be NULL) sees the router's choices.
 */
static float *run_routed(const char *dir, int absorbed, const int *tokens, int n, int chunk, int *vocab,
			 const struct ref_route_sink *routes)
{
	struct sm_err err;
	struct ref_model *m = ref_model_load(dir, &err);
	struct ref_cpu *r;
	float *logits;
	int i;

	if (!m)
		fail_msg("load %s: %s", dir, err.msg);
	r = ref_cpu_new(m, n, absorbed, 2, routes, &err);
	assert_non_null(r);
	*vocab = m->cfg.vocab;
	logits = malloc(sizeof(float) * (size_t)n * *vocab);
	for (i = 0; i < n; i += chunk ? chunk : n) {
		int k = chunk && i + chunk < n ? chunk : n - i;

		assert_int_equal(ref_cpu_forward(r, tokens + i, k, 1, logits + (size_t)i * *vocab, &err), 0);
	}
	assert_int_equal(ref_cpu_forward(r, tokens, 1, 1, logits, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "--max-seq"));
	ref_cpu_free(r);
	ref_model_free(m);
	return logits;
}

static float *run(const char *dir, int absorbed, const int *tokens, int n, int chunk, int *vocab)
{
	return run_routed(dir, absorbed, tokens, n, chunk, vocab, NULL);
}

static double max_diff(const float *a, const float *b, size_t n, double *max_abs)
{
	double d = 0;
	size_t i;

	*max_abs = 0;
	for (i = 0; i < n; i++) {
		d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
		*max_abs = fabs(b[i]) > *max_abs ? fabs(b[i]) : *max_abs;
	}
	return d;
}

static void test_every_format_runs(void **state)
{
	static const char *const archs[] = { "kimi-k2", "glm4-moe" };
	static const char *const quants[] = { "bf16", "fp8", "int4", "nvfp4" };
	int a, q, v, vocab;

	(void)state;
	for (a = 0; a < 2; a++) {
		float *ref = run(make(archs[a], "bf16", 0, 0), 1, prompt, NPROMPT, 0, &vocab);

		for (q = 1; q < 4; q++) {
			float *x = run(make(archs[a], quants[q], 0, 0), 1, prompt, NPROMPT, 0, &vocab);
			double mx, d = max_diff(x, ref, (size_t)NPROMPT * vocab, &mx);

			for (v = 0; v < NPROMPT * vocab; v++)
				assert_true(isfinite(x[v]));
			/* the same master weights, quantized: close to bf16, but not equal */
			printf("  %s %s vs bf16: max |logit difference| %.4f, passes in (0, 0.25 x the "
			       "largest logit %.3f = %.3f]\n", archs[a], quants[q], d, mx, 0.25 * mx);
			assert_true(d > 0 && d < 0.25 * mx);
			free(x);
		}
		free(ref);
	}
}

static void test_mla_naive_equals_absorbed(void **state)
{
	const char *dir = make("kimi-k2", "int4", 0, 0);
	int vocab;
	float *a = run(dir, 1, prompt, NPROMPT, 0, &vocab);
	float *n = run(dir, 0, prompt, NPROMPT, 0, &vocab);
	double mx, d = max_diff(a, n, (size_t)NPROMPT * vocab, &mx);

	(void)state;
	/* The same math in another order; fp32 intermediates: relative 1e-5 is generous. */
	printf("  naive vs absorbed: max |logit difference| %.3g, passes up to 1e-5 x the largest "
	       "logit %.3g = %.3g\n", d, mx, 1e-5 * mx);
	assert_true(d <= 1e-5 * mx);
	free(a);
	free(n);
}

static void test_prefill_equals_decode(void **state)
{
	static const char *const archs[] = { "kimi-k2", "glm4-moe" };
	int a, vocab;

	(void)state;
	for (a = 0; a < 2; a++) {
		const char *dir = make(archs[a], "bf16", 0, 0);
		float *one = run(dir, 1, prompt, NPROMPT, 0, &vocab);
		float *each = run(dir, 1, prompt, NPROMPT, 1, &vocab);
		float *three = run(dir, 0, prompt, NPROMPT, 3, &vocab);
		double mx;

		assert_true(max_diff(one, each, (size_t)NPROMPT * vocab, &mx) <= 1e-5 * mx);
		if (a == 0) {
			float *naive = run(dir, 0, prompt, NPROMPT, 0, &vocab);

			assert_true(max_diff(naive, three, (size_t)NPROMPT * vocab, &mx) <= 1e-5 * mx);
			free(naive);
		}
		free(one);
		free(each);
		free(three);
	}
}

/* Every routing decision of a run: ids [layer][position][top_k], -1 where none was seen. */
#define ROUTE_MAX (8 * NPROMPT * 8)
struct seen_routes {
	int ids[ROUTE_MAX], calls[8], top_k;
};

static void see_routes(void *ctx, int layer, int pos, int n, const int *ids)
{
	struct seen_routes *s = ctx;

	assert_true(layer >= 0 && layer < 8 && pos >= 0 && n > 0 && pos + n <= NPROMPT);
	memcpy(s->ids + ((size_t)layer * NPROMPT + pos) * s->top_k, ids, sizeof(int) * (size_t)n * s->top_k);
	s->calls[layer]++;
}

/* The route sink sees each MoE layer's choice for every position, once per forward
 * call: valid, distinct experts within topk_group groups, and the same choice whether
 * the prompt comes in one call or token by token. */
static void test_routes_observed(void **state)
{
	static const char *const archs[] = { "kimi-k2", "glm4-moe" };
	int a, l, p, k, j, vocab;

	(void)state;
	for (a = 0; a < 2; a++) {
		const char *dir = make(archs[a], "bf16", 0, 0);
		struct sm_err err;
		struct ref_model *m = ref_model_load(dir, &err);
		const struct ref_config *c = &m->cfg;
		struct seen_routes one = { .top_k = c->top_k }, each = { .top_k = c->top_k };
		struct ref_route_sink s1 = { see_routes, &one }, s2 = { see_routes, &each };
		int per = c->n_routed / c->n_group;

		assert_true(c->n_layers <= 8 && c->top_k <= 8 && c->n_routed / c->n_group > 0);
		memset(one.ids, 0xff, sizeof(one.ids));
		memset(each.ids, 0xff, sizeof(each.ids));
		free(run_routed(dir, 1, prompt, NPROMPT, 0, &vocab, &s1));
		free(run_routed(dir, 1, prompt, NPROMPT, 1, &vocab, &s2));
		for (l = 0; l < c->n_layers; l++) {
			int moe = m->layers[l].moe;

			assert_int_equal(one.calls[l], moe ? 1 : 0);
			assert_int_equal(each.calls[l], moe ? NPROMPT : 0);
			for (p = 0; moe && p < NPROMPT; p++) {
				const int *ids = one.ids + ((size_t)l * NPROMPT + p) * c->top_k;
				int groups = 0, in_group[256] = { 0 };

				for (k = 0; k < c->top_k; k++) {
					assert_true(ids[k] >= 0 && ids[k] < c->n_routed);
					for (j = 0; j < k; j++)
						assert_int_not_equal(ids[j], ids[k]);
					groups += !in_group[ids[k] / per]++;
				}
				assert_true(groups <= c->topk_group);
			}
		}
		assert_memory_equal(one.ids, each.ids, sizeof(one.ids));
		ref_model_free(m);
	}
}

static void test_layouts_agree(void **state)
{
	int vocab;
	float *plain = run(make("kimi-k2", "nvfp4", 0, 0), 1, prompt, 3, 0, &vocab);
	float *sharded = run(make("kimi-k2", "nvfp4", 3, 0), 1, prompt, 3, 0, &vocab);
	float *k25 = run(make("kimi-k2", "nvfp4", 2, 1), 1, prompt, 3, 0, &vocab);

	(void)state;
	/* the same tensors wherever they sit: bit-equal logits */
	assert_memory_equal(plain, sharded, sizeof(float) * 3 * (size_t)vocab);
	assert_memory_equal(plain, k25, sizeof(float) * 3 * (size_t)vocab);
	free(plain);
	free(sharded);
	free(k25);
}

static void test_bad_checkpoints(void **state)
{
	const char *src = make("glm4-moe", "bf16", 0, 0);
	const char *dir = tmpdir("broken");
	char cmd[2048], path[700];
	struct sm_err err;
	FILE *f;

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", dir, src, dir);
	assert_int_equal(system(cmd), 0);
	/* truncate the data: the header's offsets no longer fit the file */
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "r+");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), 4096), 0);
	fclose(f);
	assert_null(ref_model_load(dir, &err));
	assert_non_null(strstr(err.msg, "model.safetensors"));
	/* a config that names a tensor shape the file does not have */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\"moe_intermediate_size\":[[:space:]]*128/"
		 "\"moe_intermediate_size\": 96/' '%s/config.json'", dir, src, dir, dir);
	assert_int_equal(system(cmd), 0);
	assert_null(ref_model_load(dir, &err));
	assert_non_null(strstr(err.msg, "mlp.experts.0.gate_proj"));
}

/* ---- bad inputs: every one refused with a message that names it ---- */

/* copy_model - a fresh copy of checkpoint @src in tmpdir(@name); its path. */
static const char *copy_model(const char *src, const char *name)
{
	static char dir[700];
	char cmd[2048];

	snprintf(dir, sizeof(dir), "%s", tmpdir(name));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", dir, src, dir);
	assert_int_equal(system(cmd), 0);
	return dir;
}

/*
 * poke_tensor - overwrite elements [@first, @first + @count) (@count < 0:
 * all) of tensor @name in @dir/model.safetensors with the @size bytes of
 * @value, located through the file's own header.
 */
static void poke_tensor(const char *dir, const char *name, int64_t first, int64_t count,
			const void *value, size_t size)
{
	char path[800], *hdr;
	uint64_t hlen = 0;
	unsigned char len8[8];
	cJSON *j, *off;
	int64_t begin, end, i;
	FILE *f;

	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fread(len8, 1, 8, f), 8);
	for (i = 7; i >= 0; i--)
		hlen = hlen << 8 | len8[i];
	hdr = malloc(hlen + 1);
	assert_non_null(hdr);
	assert_int_equal(fread(hdr, 1, hlen, f), hlen);
	hdr[hlen] = '\0';
	j = cJSON_Parse(hdr);
	off = cJSON_GetObjectItem(cJSON_GetObjectItem(j, name), "data_offsets");
	if (!off)
		fail_msg("%s has no tensor %s", path, name);
	begin = (int64_t)cJSON_GetArrayItem(off, 0)->valuedouble;
	end = (int64_t)cJSON_GetArrayItem(off, 1)->valuedouble;
	if (count < 0)
		count = (end - begin) / (int64_t)size - first;
	assert_true(begin + (first + count) * (int64_t)size <= end);
	assert_int_equal(fseek(f, (long)(8 + hlen + begin + first * (int64_t)size), SEEK_SET), 0);
	for (i = 0; i < count; i++)
		assert_int_equal(fwrite(value, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
	cJSON_Delete(j);
	free(hdr);
}

static const uint16_t bf16_nan = 0x7fc0, bf16_inf = 0x7f80;
static const float f32_nan = NAN, f32_inf = INFINITY;
static const uint8_t e4m3_nan = 0x7f;

/*
 * edit_config - @src's config.json with @key (in text_config when there is
 * one) set to the JSON @value (NULL: removed), written to tmpdir(@name); its
 * directory.
 */
static const char *edit_config(const char *src, const char *name, const char *key, const char *value)
{
	static char dir[600];
	char path[700], *text;
	size_t len;
	cJSON *root, *t;

	snprintf(path, sizeof(path), "%s/config.json", src);
	text = read_file(path, &len);
	assert_non_null(text);
	root = cJSON_Parse(text);
	free(text);
	assert_non_null(root);
	t = cJSON_GetObjectItem(root, "text_config") ? cJSON_GetObjectItem(root, "text_config") : root;
	cJSON_DeleteItemFromObject(t, key);
	if (value)
		assert_non_null(cJSON_AddItemToObject(t, key, cJSON_Parse(value)) ? t : NULL);
	snprintf(dir, sizeof(dir), "%s", tmpdir(name));
	mkdir(dir, 0700);
	text = cJSON_Print(root);
	write_text(dir, "config.json", text);
	cJSON_free(text);
	cJSON_Delete(root);
	return dir;
}

/* Config values outside the engine's range: each refused, naming the key and the range. */
static void test_config_ranges(void **state)
{
	static const struct {
		const char *arch, *key, *value, *expect;
	} bad[] = {
		{ "kimi-k2", "rms_norm_eps", "-1", "> 0 and <= 1" },
		{ "kimi-k2", "rms_norm_eps", "0", "> 0 and <= 1" },
		{ "glm4-moe", "rms_norm_eps", "2", "> 0 and <= 1" },
		{ "kimi-k2", "routed_scaling_factor", "-2.5", "> 0" },
		{ "kimi-k2", "moe_intermediate_size", "0", "1..1048576" },
		{ "kimi-k2", "n_routed_experts", "1e9", "1..65536" },
		{ "kimi-k2", "num_attention_heads", "100000", "1..4096" },
		{ "kimi-k2", "vocab_size", "1.5", "whole number" },
		{ "kimi-k2", "q_lora_rank", "-1", "0..65536" },
		{ "kimi-k2", "rope_theta", "0", "rope_theta (must be > 1)" },
		{ "glm4-moe", "rope_theta", "-5", "rope_theta (must be > 1)" },
		{ "glm4-moe", "head_dim", "0", "1..4096" },
		{ "glm4-moe", "partial_rotary_factor", "0", "> 0 and <= 1" },
		{ "glm4-moe", "num_key_value_heads", "0", "1..4096" },
	};
	struct ref_config c;
	struct sm_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *dir = edit_config(make(bad[i].arch, "bf16", 0, 0), "ranges", bad[i].key,
					      bad[i].value);

		err.msg[0] = '\0';
		if (ref_config_load(dir, &c, &err) != -EINVAL)
			fail_msg("%s = %s was accepted (%s)", bad[i].key, bad[i].value, err.msg);
		if (!strstr(err.msg, bad[i].key) || !strstr(err.msg, bad[i].expect) ||
		    !strstr(err.msg, "config.json"))
			fail_msg("%s = %s: message \"%s\" lacks \"%s\"", bad[i].key, bad[i].value,
				 err.msg, bad[i].expect);
	}
	/* the unedited configs load */
	assert_int_equal(ref_config_load(make("kimi-k2", "bf16", 0, 0), &c, &err), 0);
	assert_int_equal(ref_config_load(make("glm4-moe", "bf16", 0, 0), &c, &err), 0);
}

/* "architectures" must name what the engine runs; absent, the fields decide (test_config). */
static void test_architectures(void **state)
{
	static const struct {
		const char *arch, *value;
		int rc;
		const char *expect;
	} cases[] = {
		{ "kimi-k2", "[\"LlamaForCausalLM\"]", -ENOTSUP, "\"LlamaForCausalLM\"" },
		{ "glm4-moe", "[\"Glm4MoeForCausalLM\", \"Qwen3MoeForCausalLM\"]", -ENOTSUP,
		  "\"Qwen3MoeForCausalLM\"" },
		{ "glm4-moe", "[42]", -ENOTSUP, "(not a string)" },
		{ "kimi-k2", "\"DeepseekV3ForCausalLM\"", -EINVAL, "must be a list" },
		{ "kimi-k2", "[\"KimiK25ForConditionalGeneration\"]", -EINVAL, "no text_config" },
		{ "kimi-k2", "[\"DeepseekV3ForCausalLM\"]", 0, "" },
		{ "glm4-moe", "[\"Glm4MoeForCausalLM\"]", 0, "" },
	};
	struct ref_config c;
	struct sm_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *dir = edit_config(make(cases[i].arch, "bf16", 0, 0), "archs",
					      "architectures", cases[i].value);
		int rc = ref_config_load(dir, &c, &err);

		if (rc != cases[i].rc)
			fail_msg("architectures %s: %d, expected %d (%s)", cases[i].value, rc,
				 cases[i].rc, err.msg);
		if (rc && !strstr(err.msg, cases[i].expect))
			fail_msg("architectures %s: message \"%s\" lacks \"%s\"", cases[i].value,
				 err.msg, cases[i].expect);
		if (rc == -ENOTSUP)	/* the supported ones are listed */
			assert_true(strstr(err.msg, "DeepseekV3ForCausalLM") &&
				    strstr(err.msg, "KimiK25ForConditionalGeneration") &&
				    strstr(err.msg, "Glm4MoeForCausalLM"));
	}
	/* K2.5: KimiK25ForConditionalGeneration at the top, the text model nested */
	assert_int_equal(ref_config_load(make("kimi-k2", "int4", 2, 1), &c, &err), 0);
	assert_int_equal(c.attn, REF_ATTN_MLA);
}

/* on_alarm - the loader blocked on a FIFO: end the program (no cmocka verdict: a failure). */
static void on_alarm(int sig)
{
	static const char msg[] = "a FIFO blocked the loader\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	_exit(3);
}

/* A FIFO as config.json is refused by name, never waited on. */
static void test_config_fifo(void **state)
{
	const char *dir = copy_model(make("glm4-moe", "bf16", 0, 0), "fifo");
	char path[800];
	struct sm_err err;

	(void)state;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	signal(SIGALRM, on_alarm);
	alarm(20);
	assert_null(ref_model_load(dir, &err));
	alarm(0);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "not a regular file"));
}

/* NaN / Inf in what binding reads whole - scales, norms, the router bias - fail the load. */
static void test_nonfinite_at_load(void **state)
{
	static const struct {
		const char *quant, *tensor;
		int64_t at;
		const void *value;
		size_t size;
		const char *expect;
	} cases[] = {
		{ "bf16", "model.layers.1.post_attention_layernorm.weight", 3, &bf16_nan, 2,
		  "element 3 is NaN" },
		{ "bf16", "model.layers.0.self_attn.kv_a_layernorm.weight", 1, &bf16_inf, 2,
		  "element 1 is Inf" },
		{ "bf16", "model.layers.2.mlp.gate.e_score_correction_bias", 15, &f32_nan, 4,
		  "element 15 is NaN" },
		{ "fp8", "model.layers.0.self_attn.o_proj.weight_scale_inv", 1, &f32_inf, 4,
		  "element 1 is Inf" },
		{ "int4", "model.layers.1.mlp.experts.3.down_proj.weight_scale", 2, &bf16_nan, 2,
		  "element 2 is NaN" },
		{ "nvfp4", "model.layers.2.mlp.experts.0.up_proj.weight_scale", 9, &e4m3_nan, 1,
		  "element 9 is NaN" },
		{ "nvfp4", "model.layers.1.mlp.experts.5.gate_proj.weight_scale_2", 0, &f32_nan, 4,
		  "element 0 is NaN" },
	};
	struct sm_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *dir = copy_model(make("kimi-k2", cases[i].quant, 0, 0), "nonfinite");

		poke_tensor(dir, cases[i].tensor, cases[i].at, 1, cases[i].value, cases[i].size);
		err.msg[0] = '\0';
		if (ref_model_load(dir, &err))
			fail_msg("%s with a non-finite element loaded", cases[i].tensor);
		if (!strstr(err.msg, cases[i].tensor) || !strstr(err.msg, cases[i].expect))
			fail_msg("%s: message \"%s\" lacks \"%s\"", cases[i].tensor, err.msg,
				 cases[i].expect);
	}
}

/*
 * forward_error - load @dir, run the prompt through the CPU backend and
 * return its error code, with the message in @err.
 */
static int forward_error(const char *dir, struct sm_err *err)
{
	struct ref_model *m = ref_model_load(dir, err);
	struct ref_cpu *r;
	float *logits;
	int rc;

	if (!m)
		fail_msg("load %s: %s", dir, err->msg);
	r = ref_cpu_new(m, NPROMPT, 1, 2, NULL, err);
	assert_non_null(r);
	logits = malloc(sizeof(float) * NPROMPT * (size_t)m->cfg.vocab);
	rc = ref_cpu_forward(r, prompt, NPROMPT, 1, logits, err);
	if (rc) {	/* the position did not advance: the same error again */
		char first[sizeof(err->msg)];

		memcpy(first, err->msg, sizeof(first));
		assert_int_equal(ref_cpu_forward(r, prompt, NPROMPT, 1, logits, err), rc);
		assert_string_equal(err->msg, first);
	}
	free(logits);
	ref_cpu_free(r);
	ref_model_free(m);
	return rc;
}

/* A NaN router score refuses the step, naming the layer, the position and the expert. */
static void test_router_nonfinite(void **state)
{
	const char *dir;
	struct sm_err err;

	(void)state;
	/* one expert's row of kimi's layer-1 router (hidden 192): expert 5 */
	dir = copy_model(make("kimi-k2", "bf16", 0, 0), "router");
	poke_tensor(dir, "model.layers.1.mlp.gate.weight", 5 * 192, 192, &bf16_nan, 2);
	assert_int_equal(forward_error(dir, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "layer 1, position 0"));
	assert_non_null(strstr(err.msg, "expert 5 is NaN"));
	assert_non_null(strstr(err.msg, "model.layers.1.mlp.gate.weight"));
	/* the whole router of GLM's layer 2 */
	dir = copy_model(make("glm4-moe", "bf16", 0, 0), "router");
	poke_tensor(dir, "model.layers.2.mlp.gate.weight", 0, -1, &bf16_nan, 2);
	assert_int_equal(forward_error(dir, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "layer 2, position 0"));
}

/* A non-finite hidden state after a norm is refused, naming the norm and where it came from. */
static void test_hidden_nonfinite(void **state)
{
	static const struct {
		const char *arch, *tensor, *norm, *source;
	} cases[] = {
		{ "kimi-k2", "model.layers.0.self_attn.o_proj.weight",
		  "after model.layers.0.post_attention_layernorm", "layer 0's attention" },
		{ "kimi-k2", "model.layers.0.mlp.down_proj.weight",
		  "after model.layers.1.input_layernorm", "layer 0's MLP" },
		{ "glm4-moe", "model.layers.2.mlp.shared_experts.down_proj.weight",
		  "after model.norm", "layer 2's MLP" },
	};
	struct sm_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *dir = copy_model(make(cases[i].arch, "bf16", 0, 0), "hidden");

		poke_tensor(dir, cases[i].tensor, 0, -1, &bf16_nan, 2);
		assert_int_equal(forward_error(dir, &err), -ERANGE);
		if (!strstr(err.msg, cases[i].norm) || !strstr(err.msg, cases[i].source) ||
		    !strstr(err.msg, "position 0"))
			fail_msg("%s: message \"%s\" lacks \"%s\" / \"%s\"", cases[i].tensor, err.msg,
				 cases[i].norm, cases[i].source);
	}
}

/* rows_seen - a ref_generate rows callback: counts the rows and keeps the last position. */
struct rows_seen {
	int count, last;
};

static void count_row(void *p, int i, const float *logits)
{
	struct rows_seen *s = p;

	(void)logits;
	s->count++;
	s->last = i;
}

/*
 * Prefill of the last row only (sm120 ref run --last-logits): the CPU backend
 * gives the same bits as that row of the whole prompt's logits, and greedy
 * generation the same tokens, its rows callback seeing the prompt's last
 * position and the generated ones only.
 */
static void test_last_logits(void **state)
{
	static const int prompt[5] = { 11, 4, 29, 7, 140 };
	const struct ref_backend *b = ref_backend_find("cpu");
	struct ref_opts o = { .max_seq = 16, .absorbed = 1, .threads = 2 };
	struct rows_seen seen[2] = { { 0, -1 }, { 0, -1 } };
	struct ref_timing t;
	struct sm_err err = { "" };
	struct ref_model *m;
	float *all, *last;
	int tokens[2][4], vocab, k;
	void *ctx;

	(void)state;
	m = ref_model_load(make("kimi-k2", "bf16", 0, 0), &err);
	assert_non_null(m);
	vocab = m->cfg.vocab;
	all = malloc(sizeof(float) * 5 * (size_t)vocab);
	last = malloc(sizeof(float) * (size_t)vocab);
	assert_non_null(all);
	assert_non_null(last);
	for (k = 0; k < 2; k++) {
		struct ref_cpu *r = ref_cpu_new(m, 8, 1, 2, NULL, &err);

		assert_non_null(r);
		assert_int_equal(ref_cpu_forward(r, prompt, 5, !k, k ? last : all, &err), 0);
		ref_cpu_free(r);
	}
	assert_memory_equal(last, all + 4 * (size_t)vocab, sizeof(float) * (size_t)vocab);
	for (k = 0; k < 2; k++) {
		ctx = b->create(m, &o, &err);
		assert_non_null(ctx);
		assert_int_equal(ref_generate(b, ctx, vocab, prompt, 5, !k, 4, tokens[k], count_row, &seen[k], NULL,
					      &t, &err), 0);
		b->destroy(ctx);
	}
	assert_memory_equal(tokens[0], tokens[1], sizeof(tokens[0]));
	assert_int_equal(seen[0].count, 5 + 3);
	assert_int_equal(seen[1].count, 1 + 3);
	assert_int_equal(seen[0].last, 7);
	assert_int_equal(seen[1].last, 7);
	free(all);
	free(last);
	ref_model_free(m);
}

/* A non-finite logit stops generation (argmax would take token 0 and go on). */
static void test_logits_nonfinite(void **state)
{
	const char *dir = copy_model(make("kimi-k2", "bf16", 0, 0), "logits");
	const struct ref_backend *b = ref_backend_find("cpu");
	struct ref_opts o = { .max_seq = 16, .absorbed = 1, .threads = 1 };
	struct ref_timing t;
	struct sm_err err = { "" };
	struct ref_model *m;
	int tokens[4];
	void *ctx;

	(void)state;
	poke_tensor(dir, "lm_head.weight", 7 * 192, 1, &bf16_inf, 2);	/* token 7's row */
	m = ref_model_load(dir, &err);
	assert_non_null(m);
	ctx = b->create(m, &o, &err);
	assert_non_null(ctx);
	assert_int_equal(ref_generate(b, ctx, m->cfg.vocab, prompt, 3, 1, 4, tokens, NULL, NULL, NULL, &t,
				      &err), -ERANGE);
	assert_non_null(strstr(err.msg, "position 0: the logit of token 7"));
	assert_non_null(strstr(err.msg, "lm_head.weight"));
	b->destroy(ctx);
	ref_model_free(m);
}

/* ---- the golden file from transformers ---- */

static void golden(const char *arch)
{
	char path[600], *text;
	cJSON *j, *it;
	size_t len;
	int args_n = 0, np = 0, nt = 0, i, v, vocab, tokens[64], rows;
	const char *args[16];
	struct synth_opts o = { .seed = 1 };
	struct sm_err err;
	const char *dir;
	float *ours;
	double err32, tol, worst = 0, mx = 0;

	snprintf(path, sizeof(path), "%s/tests/engine/golden/%s.json",
		 getenv("SM120_SRC") ? getenv("SM120_SRC") : ".", arch);
	text = read_file(path, &len);
	if (!text)
		fail_msg("%s is missing: make it on a machine with transformers: "
			 "python3 tests/gpu/engine_hf.py --build build golden --out tests/engine/golden", path);
	j = cJSON_Parse(text);
	free(text);
	assert_non_null(j);
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "make_model"))
		if (args_n < 16)
			args[args_n++] = it->valuestring;
	for (i = 0; i + 1 < args_n; i++) {
		if (!strcmp(args[i], "--arch"))
			o.arch = args[i + 1];
		else if (!strcmp(args[i], "--quant"))
			o.quant = args[i + 1];
		else if (!strcmp(args[i], "--seed"))
			o.seed = strtoull(args[i + 1], NULL, 0);
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "prompt"))
		tokens[np++] = it->valueint;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "tokens"))
		tokens[np + nt++] = it->valueint;
	err32 = cJSON_GetObjectItem(j, "err32")->valuedouble;
	snprintf(path, sizeof(path), "%s/golden-%s", tmpdir(""), arch);
	assert_int_equal(synth_make_model(&o, path, &err), 0);
	dir = path;
	rows = np + nt - 1;
	ours = run(dir, 1, tokens, rows, 0, &vocab);
	i = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "logits64")) {
		const cJSON *x;

		v = 0;
		assert_true(i < rows);
		cJSON_ArrayForEach(x, it) {
			double d = fabs(ours[(size_t)i * vocab + v] - x->valuedouble);

			worst = d > worst ? d : worst;
			mx = fabs(x->valuedouble) > mx ? fabs(x->valuedouble) : mx;
			v++;
		}
		assert_int_equal(v, vocab);
		i++;
	}
	assert_int_equal(i, rows);
	/* fp32 against transformers' fp64: within 4x transformers' own fp32 error + 1e-5 relative */
	tol = 4 * err32 + 1e-5 * mx;
	printf("  %s golden: max |ours - transformers fp64| %.3g, tolerance %.3g (transformers fp32: %.3g)\n",
	       arch, worst, tol, err32);
	assert_true(worst <= tol);
	for (i = 0; i < nt; i++) {	/* greedy tokens: transformers' own, from its fp64 run */
		double margin = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "margins"), i)->valuedouble;
		int got = ref_argmax(ours + (size_t)(np - 1 + i) * vocab, vocab);

		if (margin < tol)
			break;
		assert_int_equal(got, tokens[np + i]);
	}
	free(ours);
	cJSON_Delete(j);
}

/*
 * The GPU backend where it cannot run names why and what to do instead:
 * MLA naive (it serves MLA absorbed only), and, in this test program (no
 * embedded kernel images; on CI no driver either), the missing driver or
 * kernels, pointing at --backend cpu or at make.
 */
static void test_gpu_backend_refuses(void **state)
{
	const struct ref_backend *b = ref_backend_find("gpu");
	struct ref_opts o = { .max_seq = 16, .absorbed = 0, .threads = 1 };
	struct sm_err err = { "" };
	struct ref_model *m = ref_model_load(make("kimi-k2", "bf16", 0, 0), &err);

	(void)state;
	assert_non_null(b);
	assert_non_null(m);
	assert_null(b->create(m, &o, &err));
	assert_non_null(strstr(err.msg, "MLA absorbed only"));
	o.absorbed = 1;
	err.msg[0] = '\0';
	assert_null(b->create(m, &o, &err));
	assert_true(strstr(err.msg, "libcuda.so.1") || strstr(err.msg, "built without its GPU kernels"));
	assert_true(strstr(err.msg, "--backend cpu") || strstr(err.msg, "make"));
	ref_model_free(m);
}

/*
 * The GPU backend's attention kernels by head size, as its backend lines
 * name them: the bundled ones at GLM-4.7's GQA 128 and Kimi K2's MLA
 * 576/512 (prefill there the stand-in of SGLang's extend kernel, which the
 * shim reroutes), eng_attention at any other size (the tiny models', MLA
 * with another rope size).
 */
static void test_gpu_attention_kernels(void **state)
{
	static const struct {
		const char *arch;
		int head_dim, kv_lora, rope;	/* 0: the tiny model's */
		const char *prefill, *decode;
	} cases[] = {
		{ "glm4-moe", 0, 0, 0, "eng_attention", "eng_attention" },
		{ "glm4-moe", 128, 0, 0, "attn_extend_128_bf16", "attn_decode_gqa128_bf16 + attn_decode_merge_bf16" },
		{ "glm4-moe", 64, 0, 0, "eng_attention", "eng_attention" },
		{ "kimi-k2", 0, 0, 0, "eng_attention", "eng_attention" },
		{ "kimi-k2", 0, 512, 64, "_fwd_kernel", "attn_decode_mla_bf16 + attn_decode_merge_bf16" },
		{ "kimi-k2", 0, 512, 32, "eng_attention", "eng_attention" },
		{ "kimi-k2", 0, 448, 128, "eng_attention", "eng_attention" },
	};
	const struct ref_backend *gpu = ref_backend_find("gpu"), *cpu = ref_backend_find("cpu");
	size_t i;

	(void)state;
	assert_non_null(gpu->attention);
	assert_null(cpu->attention);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sm_err err = { "" };
		struct ref_model *m = ref_model_load(make(cases[i].arch, "bf16", 0, 0), &err);
		struct ref_config c;

		assert_non_null(m);
		c = m->cfg;
		if (cases[i].head_dim)
			c.head_dim = cases[i].head_dim;
		if (cases[i].kv_lora)
			c.kv_lora_rank = cases[i].kv_lora, c.qk_rope = cases[i].rope;
		if (strncmp(gpu->attention(&c, 0), cases[i].prefill, strlen(cases[i].prefill)) ||
		    strncmp(gpu->attention(&c, 1), cases[i].decode, strlen(cases[i].decode)))
			fail_msg("case %zu (%s): prefill %s, decode %s", i, cases[i].arch, gpu->attention(&c, 0),
				 gpu->attention(&c, 1));
		ref_model_free(m);
	}
}

/*
 * ref_gpu_decode_splits against the decode kernel's own split length for
 * the count it returns (decode.h: cdiv(cdiv(seq, splits), 32) * 32): every
 * split holds keys and together they hold all of them, at most the splits
 * asked for (clamped to 1 .. 64), and no fewer than half of what the keys
 * allow (32 a split) where that is below the ask, so the grid still fills.
 */
static void test_gpu_decode_splits(void **state)
{
	int seq, want;

	(void)state;
	for (seq = 1; seq <= 9000; seq += seq < 300 ? 1 : 37)
		for (want = -1; want <= 70; want++) {
			int s = ref_gpu_decode_splits(seq, want), cap = want < 1 ? 1 : want > 64 ? 64 : want;
			int len = ((seq + s - 1) / s + 31) / 32 * 32, fill = (seq + 31) / 32;

			if (s < 1 || s > cap || (s - 1) * len >= seq || s * len < seq ||
			    2 * s < (cap < fill ? cap : fill))
				fail_msg("seq %d want %d: %d splits of %d keys", seq, want, s, len);
		}
	assert_int_equal(ref_gpu_decode_splits(1, 33), 1);
	assert_int_equal(ref_gpu_decode_splits(1024, 33), 32);
	assert_int_equal(ref_gpu_decode_splits(100000, 66), 64);
}

static void test_golden_kimi(void **state)
{
	(void)state;
	golden("kimi-k2");
}

static void test_golden_glm(void **state)
{
	(void)state;
	golden("glm4-moe");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numfmt),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_weight_formats),
		cmocka_unit_test(test_every_format_runs),
		cmocka_unit_test(test_mla_naive_equals_absorbed),
		cmocka_unit_test(test_prefill_equals_decode),
		cmocka_unit_test(test_routes_observed),
		cmocka_unit_test(test_layouts_agree),
		cmocka_unit_test(test_bad_checkpoints),
		cmocka_unit_test(test_config_ranges),
		cmocka_unit_test(test_architectures),
		cmocka_unit_test(test_config_fifo),
		cmocka_unit_test(test_nonfinite_at_load),
		cmocka_unit_test(test_router_nonfinite),
		cmocka_unit_test(test_hidden_nonfinite),
		cmocka_unit_test(test_last_logits),
		cmocka_unit_test(test_logits_nonfinite),
		cmocka_unit_test(test_gpu_backend_refuses),
		cmocka_unit_test(test_gpu_attention_kernels),
		cmocka_unit_test(test_gpu_decode_splits),
		cmocka_unit_test(test_golden_kimi),
		cmocka_unit_test(test_golden_glm),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	if (tmp_root[0] && rm_tree(tmp_root) != 0)
		fprintf(stderr, "could not remove %s\n", tmp_root);
	return rc;
}
