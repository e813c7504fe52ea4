/*
 * synth.h - synthetic checkpoints in the real on-disk layouts (`sm120 ref make-model`).
 *
 * Writes a Hugging Face model directory - config.json and safetensors (one
 * file, or shards with model.safetensors.index.json) - with exactly the
 * tensor names, dtypes, shapes, packing and config fields of a real Kimi K2
 * (DeepseekV3ForCausalLM, model_type kimi_k2) or GLM-4.x (Glm4MoeForCausalLM)
 * checkpoint, in one of four weight formats:
 *   bf16   every tensor BF16 (router bias F32)
 *   fp8    DeepSeek FP8 block 128x128: every Linear weight F8_E4M3 plus
 *          F32 weight_scale_inv [ceil(out/128), ceil(in/128)]
 *   int4   compressed-tensors pack-quantized W4A16 group 32, routed experts
 *          only (weight_packed I32, weight_scale BF16, weight_shape I64)
 *   nvfp4  ModelOpt NVFP4, routed experts only (weight U8, weight_scale
 *          F8_E4M3 per 16, weight_scale_2 and input_scale F32 scalars)
 * Weights are drawn from a deterministic PRNG (integer arithmetic only, so
 * the same seed gives the same bytes on every machine), in BF16 first, then
 * quantized as the real exporters do; scaled so activations keep a realistic
 * range through every layer.
 */
#ifndef SM120_ENGINE_SYNTH_H
#define SM120_ENGINE_SYNTH_H

#include <stdint.h>

#include "../../core/common/err.h"

/* The largest values synth_opts accepts (0 means the default for each). */
#define SYNTH_MAX_LAYERS 1000
#define SYNTH_MAX_EXPERTS 4096
#define SYNTH_MAX_SHARDS 99999	/* the shard names have 5 digits */

/* How far a write has come: @done of the @total tensor bytes. */
struct synth_progress {
	const char *what;	/* the group of tensors just written; "" before the first */
	uint64_t done, total;
};

struct synth_opts {
	const char *arch;	/* "kimi-k2" or "glm4-moe" */
	const char *quant;	/* "bf16", "fp8", "int4" or "nvfp4" */
	int layers;		/* 0: the size's default; else 1..SYNTH_MAX_LAYERS */
	int real_dims;		/* 1: the real model's dimensions; 0: tiny */
	uint64_t seed;
	int shards;		/* 0: one file, or one shard per layer from 2 GiB; 1: one
				 * file; >1: that many shards + index (<= SYNTH_MAX_SHARDS) */
	int k25_layout;		/* kimi-k2 only: K2.5's text_config + language_model. prefix */
	int legacy_quant_config; /* nvfp4 only: hf_quant_config.json instead of quantization_config */
	int experts;		/* 0: the size's default; else n_routed_experts
				 * (<= SYNTH_MAX_EXPERTS) */
	/*
	 * progress (may be NULL) - called before the first tensor (done 0) and
	 * after each group of tensors (an embedding, a layer's attention, one
	 * expert, ...), in increasing @done, when the tensors total at least
	 * @progress_min bytes; @progress_ctx is passed through.
	 */
	void (*progress)(const struct synth_progress *p, void *progress_ctx);
	void *progress_ctx;
	uint64_t progress_min;
};

/*
 * synth_defaults - the layer and routed-expert counts that @arch ("kimi-k2"
 * or "glm4-moe") gets at its tiny (@real_dims 0) or real size when
 * synth_opts leaves them 0.  Returns 0, or -EINVAL for an unknown @arch.
 */
int synth_defaults(const char *arch, int real_dims, int *layers, int *experts);

/*
 * synth_make_model - write the checkpoint described by @o into directory
 * @out_dir (created if missing; existing files of the same names replaced).
 * Returns 0, or -errno with @err naming the option or the file at fault.
 */
int synth_make_model(const struct synth_opts *o, const char *out_dir, struct sm_err *err);

#endif
