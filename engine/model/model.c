/* model.c - bind a checkpoint's tensors to the layers of the forward pass (see model.h). */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct binder {
	struct ref_model *m;
	struct sm_err *err;
	char name[256];
};

/* nm - "<prefix>model.layers.<l>.<what>" (l < 0: "<prefix><what>"). */
static const char *nm(struct binder *b, int l, const char *what)
{
	if (l < 0)
		snprintf(b->name, sizeof(b->name), "%s%s", b->m->prefix, what);
	else
		snprintf(b->name, sizeof(b->name), "%smodel.layers.%d.%s", b->m->prefix, l, what);
	return b->name;
}

static int lin(struct binder *b, struct ref_linear *l, int layer, const char *what, int out, int in)
{
	return ref_linear_bind(l, b->m->st, &b->m->cfg, nm(b, layer, what), out, in, b->err);
}

static int vec(struct binder *b, float **v, int layer, const char *what, int n)
{
	return ref_vector(b->m->st, nm(b, layer, what), n, v, b->err);
}

static int mlp(struct binder *b, struct ref_mlp *p, int layer, const char *what, int width)
{
	char base[128];
	int H = b->m->cfg.hidden, rc;

	snprintf(base, sizeof(base), "%s.gate_proj", what);
	rc = lin(b, &p->gate, layer, base, width, H);
	snprintf(base, sizeof(base), "%s.up_proj", what);
	if (!rc)
		rc = lin(b, &p->up, layer, base, width, H);
	snprintf(base, sizeof(base), "%s.down_proj", what);
	if (!rc)
		rc = lin(b, &p->down, layer, base, H, width);
	return rc;
}

static int bind_mla(struct binder *b, struct ref_layer *L, int l)
{
	const struct ref_config *c = &b->m->cfg;
	int H = c->hidden, nh = c->n_heads, qk = c->qk_nope + c->qk_rope;
	int rc;

	if (c->q_lora_rank) {
		rc = lin(b, &L->q_a, l, "self_attn.q_a_proj", c->q_lora_rank, H);
		if (!rc)
			rc = vec(b, &L->q_a_norm, l, "self_attn.q_a_layernorm.weight", c->q_lora_rank);
		if (!rc)
			rc = lin(b, &L->q_b, l, "self_attn.q_b_proj", nh * qk, c->q_lora_rank);
	} else {
		rc = lin(b, &L->q, l, "self_attn.q_proj", nh * qk, H);
	}
	if (!rc)
		rc = lin(b, &L->kv_a, l, "self_attn.kv_a_proj_with_mqa", c->kv_lora_rank + c->qk_rope, H);
	if (!rc)
		rc = vec(b, &L->kv_a_norm, l, "self_attn.kv_a_layernorm.weight", c->kv_lora_rank);
	if (!rc)
		rc = lin(b, &L->kv_b, l, "self_attn.kv_b_proj", nh * (c->qk_nope + c->v_head), c->kv_lora_rank);
	if (!rc)
		rc = lin(b, &L->o, l, "self_attn.o_proj", H, nh * c->v_head);
	return rc;
}

static int bind_gqa(struct binder *b, struct ref_layer *L, int l)
{
	const struct ref_config *c = &b->m->cfg;
	int H = c->hidden, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
	int rc;

	rc = lin(b, &L->qp, l, "self_attn.q_proj", q, H);
	if (!rc)
		rc = lin(b, &L->kp, l, "self_attn.k_proj", kv, H);
	if (!rc)
		rc = lin(b, &L->vp, l, "self_attn.v_proj", kv, H);
	if (!rc)
		rc = lin(b, &L->o, l, "self_attn.o_proj", H, q);
	if (!rc && c->attn_bias) {
		rc = vec(b, &L->q_bias, l, "self_attn.q_proj.bias", q);
		if (!rc)
			rc = vec(b, &L->k_bias, l, "self_attn.k_proj.bias", kv);
		if (!rc)
			rc = vec(b, &L->v_bias, l, "self_attn.v_proj.bias", kv);
	}
	if (!rc && c->qk_norm) {
		rc = vec(b, &L->q_norm, l, "self_attn.q_norm.weight", c->head_dim);
		if (!rc)
			rc = vec(b, &L->k_norm, l, "self_attn.k_norm.weight", c->head_dim);
	}
	return rc;
}

static int bind_moe(struct binder *b, struct ref_layer *L, int l)
{
	const struct ref_config *c = &b->m->cfg;
	char what[96];
	int e, rc;

	rc = lin(b, &L->router, l, "mlp.gate", c->n_routed, c->hidden);
	if (!rc)
		rc = vec(b, &L->router_bias, l, "mlp.gate.e_score_correction_bias", c->n_routed);
	if (rc)
		return rc;
	L->experts = calloc((size_t)c->n_routed, sizeof(*L->experts));
	if (!L->experts)
		return sm_err_set(b->err, -ENOMEM, "out of memory for %d experts", c->n_routed);
	for (e = 0; e < c->n_routed && !rc; e++) {
		snprintf(what, sizeof(what), "mlp.experts.%d", e);
		rc = mlp(b, &L->experts[e], l, what, c->moe_intermediate);
	}
	if (!rc && c->n_shared)
		rc = mlp(b, &L->shared, l, "mlp.shared_experts", c->n_shared * c->moe_intermediate);
	return rc;
}

/* note_format - add "<fmt> <what>" to the model's summary once per distinct pair. */
static void note_format(struct ref_model *m, const struct ref_linear *l, const char *what)
{
	char item[48];

	snprintf(item, sizeof(item), "%s %s", ref_wfmt_name(l), what);
	if (strstr(m->formats, item))
		return;
	if (m->formats[0])
		strncat(m->formats, ", ", sizeof(m->formats) - strlen(m->formats) - 1);
	strncat(m->formats, item, sizeof(m->formats) - strlen(m->formats) - 1);
}

static int bind_all(struct binder *b)
{
	struct ref_model *m = b->m;
	const struct ref_config *c = &m->cfg;
	int l, rc;

	if (st_find(m->st, "language_model.model.embed_tokens.weight"))
		snprintf(m->prefix, sizeof(m->prefix), "language_model.");
	rc = lin(b, &m->embed, -1, "model.embed_tokens", c->vocab, c->hidden);
	if (!rc)
		rc = vec(b, &m->final_norm, -1, "model.norm.weight", c->hidden);
	if (!rc && c->tie_embeddings)
		m->lm_head = m->embed;
	else if (!rc)
		rc = lin(b, &m->lm_head, -1, "lm_head", c->vocab, c->hidden);
	m->layers = calloc((size_t)c->n_layers, sizeof(*m->layers));
	if (!m->layers)
		return sm_err_set(b->err, -ENOMEM, "out of memory for %d layers", c->n_layers);
	for (l = 0; l < c->n_layers && !rc; l++) {
		struct ref_layer *L = &m->layers[l];

		rc = vec(b, &L->in_norm, l, "input_layernorm.weight", c->hidden);
		if (!rc)
			rc = vec(b, &L->post_norm, l, "post_attention_layernorm.weight", c->hidden);
		if (!rc)
			rc = c->attn == REF_ATTN_MLA ? bind_mla(b, L, l) : bind_gqa(b, L, l);
		L->moe = ref_layer_is_moe(c, l);
		if (!rc)
			rc = L->moe ? bind_moe(b, L, l) : mlp(b, &L->dense, l, "mlp", c->intermediate);
		if (!rc) {
			note_format(m, &L->o, "attention");
			if (L->moe)
				note_format(m, &L->experts[0].gate, "experts");
		}
	}
	return rc;
}

struct ref_model *ref_model_load(const char *dir, struct sm_err *err)
{
	struct ref_model *m = calloc(1, sizeof(*m));
	struct binder b = { .m = m, .err = err };

	if (!m) {
		sm_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if (ref_config_load(dir, &m->cfg, err) || !(m->st = st_open(dir, err)) || bind_all(&b)) {
		ref_model_free(m);
		return NULL;
	}
	return m;
}

static void free_layer(struct ref_layer *L)
{
	free(L->in_norm);
	free(L->post_norm);
	free(L->q_a_norm);
	free(L->kv_a_norm);
	free(L->q_bias);
	free(L->k_bias);
	free(L->v_bias);
	free(L->q_norm);
	free(L->k_norm);
	free(L->router_bias);
	free(L->experts);
}

void ref_model_free(struct ref_model *m)
{
	int l;

	if (!m)
		return;
	if (m->layers)
		for (l = 0; l < m->cfg.n_layers; l++)
			free_layer(&m->layers[l]);
	free(m->layers);
	free(m->final_norm);
	st_close(m->st);
	free(m);
}
