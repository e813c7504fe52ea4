/*
 * model.h - a loaded checkpoint: config, tensors (mapped, not copied) and
 * every layer's weights bound by name.
 *
 * Names: model.embed_tokens.weight, model.layers.L.{input_layernorm,
 * post_attention_layernorm, self_attn.*, mlp.*}, model.norm.weight,
 * lm_head.weight; K2.5 checkpoints prefix them with "language_model.".
 * Layers at or past num_hidden_layers (MTP) are not read.  Small vectors
 * (norms, biases, the router's correction bias) are copied to float arrays;
 * matrices stay in the mapping in their stored format (struct ref_linear).
 */
#ifndef SM120_ENGINE_MODEL_H
#define SM120_ENGINE_MODEL_H

#include "config.h"
#include "weights.h"

struct ref_mlp {
	struct ref_linear gate, up, down;
};

struct ref_layer {
	float *in_norm, *post_norm;
	/* MLA */
	struct ref_linear q_a, q_b, q, kv_a, kv_b, o;
	float *q_a_norm, *kv_a_norm;
	/* GQA (o shared with MLA) */
	struct ref_linear qp, kp, vp;
	float *q_bias, *k_bias, *v_bias, *q_norm, *k_norm;
	/* MLP: dense, or routed experts + shared */
	int moe;
	struct ref_mlp dense;
	struct ref_linear router;
	float *router_bias;		/* e_score_correction_bias [E] */
	struct ref_mlp *experts;	/* [n_routed] */
	struct ref_mlp shared;		/* when n_shared > 0 */
};

struct ref_model {
	struct ref_config cfg;
	struct st_set *st;
	char prefix[32];		/* "" or "language_model." */
	struct ref_linear embed, lm_head;
	float *final_norm;
	struct ref_layer *layers;
	char formats[128];		/* the weight formats found, e.g. "BF16 + int4 experts" */
};

/*
 * struct ref_route_sink - an observer of the router's choices (for checks,
 * e.g. `sm120 ref run --json`): @fn sees, for each MoE layer @layer (model
 * layer index), the @n tokens at positions @pos.. and their experts @ids
 * [n][top_k], in the order the router picked them.  fn NULL: no observer.
 */
struct ref_route_sink {
	void (*fn)(void *ctx, int layer, int pos, int n, const int *ids);
	void *ctx;
};

/*
 * ref_model_load - open the checkpoint in @dir and bind every tensor the
 * forward pass reads.  Returns the model, or NULL with @err naming the file
 * or tensor at fault.
 */
struct ref_model *ref_model_load(const char *dir, struct sm_err *err);

/* ref_model_free - release everything; NULL is allowed. */
void ref_model_free(struct ref_model *m);

#endif
