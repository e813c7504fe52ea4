/*
 * config.h - a model's hyper-parameters and quantization scheme, read from
 * its Hugging Face config.json (and hf_quant_config.json).
 *
 * Two families: MLA (DeepseekV3ForCausalLM: Kimi K2, K2-Thinking, the K2.5
 * text tower nested in text_config; DeepSeek-V3) and GQA (Glm4MoeForCausalLM:
 * GLM-4.5/4.6/4.7/Air).  Every value comes from the file; a field the file
 * leaves out takes the default of the transformers configuration class for
 * that model type (listed in config.c's field table), and a field the
 * engine cannot do without is an error naming it.  Both RoPE styles are
 * read: rope_theta + rope_scaling ("type" or "rope_type") and transformers
 * v5's rope_parameters.
 */
#ifndef SM120_ENGINE_CONFIG_H
#define SM120_ENGINE_CONFIG_H

#include "../../core/common/err.h"

enum ref_attn { REF_ATTN_MLA, REF_ATTN_GQA };

/* How the checkpoint's weights are stored, as the quantization config declares it. */
enum ref_qmethod {
	REF_Q_NONE,		/* no quantization_config */
	REF_Q_FP8_BLOCK,	/* quant_method "fp8", weight_block_size */
	REF_Q_CT_INT4,		/* compressed-tensors pack-quantized */
	REF_Q_CT_FP8,		/* compressed-tensors float-quantized */
	REF_Q_MODELOPT_NVFP4,	/* quant_method "modelopt" / hf_quant_config.json, NVFP4 */
};

#define REF_MAX_IGNORE 64

struct ref_quant {
	enum ref_qmethod method;
	int block_n, block_k;	/* REF_Q_FP8_BLOCK (128, 128) */
	int group_size;		/* INT4 (32) or NVFP4 (16) */
	int n_ignore;
	char ignore[REF_MAX_IGNORE][160]; /* as written: "re:..." regexes, fnmatch patterns, names */
	char source[64];	/* "config.json", "text_config", "hf_quant_config.json" */
};

struct ref_config {
	enum ref_attn attn;
	char model_type[32];	/* of the text model: kimi_k2, deepseek_v3, glm4_moe */
	int hidden, n_layers, n_heads, n_kv_heads, vocab;
	float rms_eps;
	/* MLA */
	int q_lora_rank;	/* 0: a single q_proj */
	int kv_lora_rank, qk_nope, qk_rope, v_head;
	/* GQA */
	int head_dim, rotary_dim, qk_norm, attn_bias;
	/* MLP and MoE */
	int intermediate, moe_intermediate, n_routed, n_shared, top_k;
	int first_dense, moe_freq, n_group, topk_group, norm_topk_prob;
	float routed_scaling;
	/* RoPE: inv_freq[i] = theta^(-2i/rotary), YaRN-corrected when yarn is set */
	double rope_theta;
	int yarn;
	double yarn_factor, yarn_orig_max, yarn_beta_fast, yarn_beta_slow;
	double rope_attn_factor;	/* cos and sin are multiplied by it (YaRN), else 1 */
	double softmax_scale;		/* 1/sqrt(qk head dim), times mscale^2 for MLA + YaRN */
	int tie_embeddings;
	struct ref_quant quant;
};

/*
 * ref_config_load - parse @dir/config.json (and @dir/hf_quant_config.json
 * when present) into @c.  Returns 0, or -errno with @err naming the file and
 * the field, and what was expected.
 */
int ref_config_load(const char *dir, struct ref_config *c, struct sm_err *err);

/* ref_layer_is_moe - whether layer @l has routed experts (first_dense, moe_freq). */
int ref_layer_is_moe(const struct ref_config *c, int l);

/*
 * ref_rope_freqs - the rotary frequencies inv_freq[rotary_dim / 2] of @c, in
 * fp32 as the frameworks build their tables (YaRN-corrected when set); every
 * backend rotates with these.
 */
void ref_rope_freqs(const struct ref_config *c, float *inv);

/* ref_config_describe - one line: family, dimensions and format, for logs. */
void ref_config_describe(const struct ref_config *c, char *out, int len);

#endif
