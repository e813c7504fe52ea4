/*
 * test_engine.c - the reference engine on the CPU: number formats, config
 * parsing, the four weight formats dequantized from hand-written tensors,
 * and whole tiny models written by `sm120 ref make-model`'s library: every
 * format runs, naive and absorbed MLA agree, prefill in one call equals
 * token-by-token decode, sharded / K2.5 layouts equal the plain layout, and
 * the logits match a golden file written by Hugging Face transformers
 * (tests/engine/golden, made by tests/gpu/engine_hf.py golden).
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../engine/common/numfmt.h"
#include "../../engine/cpu/cpu.h"
#include "../../engine/engine.h"
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

		assert_int_equal(ref_cpu_forward(r, tokens + i, k, logits + (size_t)i * *vocab, &err), 0);
	}
	assert_int_equal(ref_cpu_forward(r, tokens, 1, logits, &err), -ENOSPC);
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
			printf("  %s %s vs bf16: max |d| %.4f of max %.3f\n", archs[a], quants[q], d, mx);
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
	printf("  naive vs absorbed: max |d| %.3g of max %.3g\n", d, mx);
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
		cmocka_unit_test(test_gpu_backend_refuses),
		cmocka_unit_test(test_golden_kimi),
		cmocka_unit_test(test_golden_glm),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	if (tmp_root[0] && rm_tree(tmp_root) != 0)
		fprintf(stderr, "could not remove %s\n", tmp_root);
	return rc;
}
