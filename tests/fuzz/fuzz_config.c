/*
 * fuzz_config.c - libFuzzer target for the config.json loader
 * (engine/model/config.c, ref_config_load).
 *
 * config.h promises that every value comes from the file within the range
 * the engine accepts, or an error names the file and the field.  An input
 * is config.json, optionally followed by FUZZ_SEP (fuzz_util.h) and
 * hf_quant_config.json; both are written into a private directory and
 * ref_config_load reads it.  A failure must come with a one-line message
 * naming the file.  A success must keep the ranges and the relations the
 * backends rely on (sizes positive, top_k within the experts, groups that
 * divide them, heads that divide into KV heads, an even rotary part within
 * the head, finite positive RoPE and softmax scales), and its RoPE
 * frequencies (ref_rope_freqs) must be finite and positive: a config that
 * would compute NaN must not load.
 *
 * Build and run with `make fuzz-smoke` or `make fuzz` (tests/fuzz/fuzz.mk).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../core/common/file.h"
#include "../../engine/model/config.h"
#include "fuzz_util.h"

#define TARGET "fuzz_config"

static void broken(const char *what)
{
	fuzz_broken(TARGET, what, NULL);
}

static int pos_finite(double x)
{
	return isfinite(x) && x > 0;
}

static int terminated(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

/* check_config - the ranges and relations of a loaded @c. */
static void check_config(const struct ref_config *c)
{
	static float inv[4096];
	char line[512];
	int i;

	if (c->attn != REF_ATTN_MLA && c->attn != REF_ATTN_GQA)
		broken("no attention family");
	if (!terminated(c->model_type, sizeof(c->model_type)))
		broken("model_type is not terminated");
	if (c->hidden < 1 || c->n_layers < 1 || c->n_heads < 1 || c->vocab < 1 ||
	    c->intermediate < 1 || c->moe_intermediate < 1 || c->n_routed < 1 || c->top_k < 1)
		broken("a size is not positive");
	if (c->top_k > c->n_routed || c->n_group < 1 || c->n_routed % c->n_group ||
	    c->topk_group < 1 || c->topk_group > c->n_group || c->n_shared < 0 ||
	    c->first_dense < 0 || c->moe_freq < 1)
		broken("the experts, groups or MoE layers do not fit each other");
	if (!pos_finite(c->rms_eps) || !pos_finite(c->routed_scaling))
		broken("rms_norm_eps or routed_scaling_factor is not a positive number");
	if (c->attn == REF_ATTN_GQA) {
		if (c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads || c->head_dim < 1 ||
		    c->rotary_dim < 0 || c->rotary_dim % 2 || c->rotary_dim > c->head_dim)
			broken("GQA heads or rotary dimensions do not fit");
	} else {
		if (c->kv_lora_rank < 1 || c->q_lora_rank < 0 || c->qk_nope < 0 || c->qk_rope < 0 ||
		    c->qk_rope % 2 || c->qk_nope + c->qk_rope < 1 || c->v_head < 1 ||
		    c->rotary_dim != c->qk_rope)
			broken("MLA ranks or head dimensions do not fit");
	}
	if (c->rotary_dim > (int)(2 * sizeof(inv) / sizeof(inv[0])))
		broken("more rotary dimensions than the target can hold");
	if (!(c->rope_theta > 1) || !isfinite(c->rope_theta) || !pos_finite(c->rope_attn_factor) ||
	    !pos_finite(c->softmax_scale))
		broken("a RoPE or softmax scale is not a positive number");
	if (c->yarn && (!pos_finite(c->yarn_factor) || !pos_finite(c->yarn_orig_max) ||
			!pos_finite(c->yarn_beta_fast) || !pos_finite(c->yarn_beta_slow)))
		broken("a YaRN parameter is not a positive number");
	switch (c->quant.method) {
	case REF_Q_NONE:
	case REF_Q_CT_FP8:
		break;
	case REF_Q_FP8_BLOCK:
		if (c->quant.block_n < 1 || c->quant.block_k < 1)
			broken("an FP8 block size is not positive");
		break;
	case REF_Q_CT_INT4:
	case REF_Q_MODELOPT_NVFP4:
		if (c->quant.group_size < 1)
			broken("a quantization group size is not positive");
		break;
	default:
		broken("an unknown quantization method");
	}
	if (c->quant.n_ignore < 0 || c->quant.n_ignore > REF_MAX_IGNORE ||
	    !terminated(c->quant.source, sizeof(c->quant.source)))
		broken("the ignore list or the quantization source is broken");
	for (i = 0; i < c->quant.n_ignore; i++) {
		if (!terminated(c->quant.ignore[i], sizeof(c->quant.ignore[i])))
			broken("an ignore pattern is not terminated");
		fuzz_sink += fuzz_touch(c->quant.ignore[i], strlen(c->quant.ignore[i]));
	}
	ref_rope_freqs(c, inv);
	for (i = 0; i < c->rotary_dim / 2; i++)
		if (!isfinite(inv[i]) || !(inv[i] > 0))
			broken("a RoPE frequency is not a finite positive number");
	for (i = 0; i < c->n_layers; i++)
		fuzz_sink += (uint64_t)ref_layer_is_moe(c, i);
	ref_config_describe(c, line, (int)sizeof(line));
	fuzz_sink += fuzz_touch(line, strlen(line));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_part parts[2];
	size_t n = fuzz_split(data, size, parts, 2);
	const char *dir = fuzz_dir(TARGET);
	struct ref_config c;
	struct sm_err err;
	int rc;

	fuzz_write(TARGET, "config.json", parts[0]);
	if (n > 1)
		fuzz_write(TARGET, "hf_quant_config.json", parts[1]);
	sm_err_clear(&err);
	rc = ref_config_load(dir, &c, &err);
	if (rc > 0)
		broken("ref_config_load returned a positive code");
	if (rc < 0)
		fuzz_check_err(TARGET, "ref_config_load", &err, dir);
	else
		check_config(&c);
	fuzz_clear();
	return 0;
}
