/*
 * generic.c - see generic.h: the bounds of a generic entry, and the
 * shared-memory models that turn a kernel's compiled facts into the
 * configuration core/limits/triton_smem.c computes Triton's shared memory of.
 */
#include "generic.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../limits/triton_smem.h"
#include "compiled.h"

const char *const rule_smem_model_names[RULE_NSMEM_MODELS] = {
#define RULE_SMEM_MODEL_NAME(name, what) #name,
	RULE_SMEM_MODELS(RULE_SMEM_MODEL_NAME)
#undef RULE_SMEM_MODEL_NAME
};

/* The architectures the formula models, for a kernel whose architecture is not known. */
static const int modelled_sms[] = { 120, 121, 90 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* flag - @name of @compiled as a whole number, 0 when not stated; -EINVAL if not a number. */
static int flag(const char *compiled, const char *name, int64_t *out)
{
	int rc = compiled_int(compiled, name, out);

	if (rc == -ENOENT)
		*out = 0;
	return rc == -ENOENT ? 0 : rc;
}

/* ---------------------------------------------------------------- the models */

enum framework { SGLANG, VLLM, GPTQ };

/*
 * tile_of - the triton_moe_tile the facts @c describe for @fw on sm_@sm; 0,
 * or -EINVAL with @why naming what the model does not cover or the facts lack.
 */
static int tile_of(enum framework fw, const char *c, int sm, struct triton_moe_tile *t,
		   struct sm_err *why)
{
	static const char *const needed[] = { "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
					      "num_warps", "num_stages" };
	int64_t v[COUNT(needed)], fp8, int8, w8a16, w4a16, gn, gk, swap, td, v3 = 1;
	char ct[32];
	size_t i;

	for (i = 0; i < COUNT(needed); i++)
		if (compiled_int(c, needed[i], &v[i]) != 0 || v[i] < 1 || v[i] > 65536)
			return sm_err_set(why, -EINVAL, "the compiled facts do not state %s as a whole "
					  "number from 1 to 65536", needed[i]);
	if (!triton_moe_sm_supported(sm))
		return sm_err_set(why, -EINVAL, "the formula models Triton's compiles for sm_90, "
				  "sm_120 and sm_121, not sm_%d", sm);
	if (flag(c, "use_fp8_w8a8", &fp8) || flag(c, "use_int8_w8a8", &int8) ||
	    flag(c, "use_int8_w8a16", &w8a16) || flag(c, "use_int4_w4a16", &w4a16) ||
	    flag(c, "group_n", &gn) || flag(c, "group_k", &gk) ||
	    flag(c, fw == VLLM ? "SWAP_AB" : "swap_ab", &swap) || flag(c, "USE_TD", &td))
		return sm_err_set(why, -EINVAL, "a weight-format flag, group_n, group_k, the swap "
				  "flag or USE_TD of the compiled facts is not a number");
	/* mma_v3 0: compiled with DISABLE_MMA_V3 on (the hook reads it off Triton's
	 * metadata); absent: MMA v3 allowed, as Triton does by default. */
	if (compiled_int(c, "mma_v3", &v3) == -EINVAL || (v3 != 0 && v3 != 1))
		return sm_err_set(why, -EINVAL, "the compiled facts state mma_v3 as neither 0 "
				  "nor 1");
	memset(t, 0, sizeof(*t));
	t->sm = sm;
	t->no_mma_v3 = v3 == 0;
	t->kernel = fw == GPTQ ? TRITON_MOE_GPTQ_AWQ : TRITON_MOE_FUSED;
	t->block_m = (uint32_t)v[0], t->block_n = (uint32_t)v[1], t->block_k = (uint32_t)v[2];
	t->num_warps = (uint32_t)v[3], t->num_stages = (uint32_t)v[4];
	if (fw == VLLM && td)
		return sm_err_set(why, -EINVAL, "vLLM's tensor-descriptor path (USE_TD 1, "
				  "VLLM_TRITON_USE_TD) is not modelled");
	if (fp8 || int8) {
		t->a_bytes = 1, t->b_bits = 8;
	} else if (compiled_get(c, "compute_type", '=', ct, sizeof(ct)) != 0) {
		return sm_err_set(why, -EINVAL, "the compiled facts do not state compute_type, the "
				  "activations' element size");
	} else if (strcmp(ct, "bf16") == 0 || strcmp(ct, "fp16") == 0) {
		t->a_bytes = 2;
	} else if (strcmp(ct, "fp32") == 0 && fw != GPTQ) {
		t->a_bytes = 4;
	} else {
		return sm_err_set(why, -EINVAL, "compute_type %s is not modelled", ct);
	}
	if (fw == GPTQ) {
		int64_t k;

		if ((w4a16 != 0) == (w8a16 != 0))
			return sm_err_set(why, -EINVAL, "the kernel was compiled with use_int4_w4a16 "
					  "%lld and use_int8_w8a16 %lld: exactly one is the weight "
					  "format", (long long)w4a16, (long long)w8a16);
		t->b_bits = w4a16 ? 4 : 8;
		/* N and K are constexpr here: a K of one k step compiles unpipelined */
		if (flag(c, "K", &k) || k < 0 || k > INT32_MAX)
			return sm_err_set(why, -EINVAL, "the compiled facts state K as no whole "
					  "number from 0 to %d", INT32_MAX);
		t->k_steps = (uint32_t)((k + t->block_k - 1) / t->block_k);
		return 0;
	}
	if (!t->b_bits)
		t->b_bits = w8a16 ? 8 : t->a_bytes * 8;
	if (gn > 0 && gk > 0 && (fp8 || int8)) {
		t->group_n = (uint32_t)gn, t->group_k = (uint32_t)gk;
		t->b_scale_vector = fw == VLLM || t->block_n > t->group_n;
	}
	t->swap_ab = swap != 0;
	if (fw == SGLANG) {
		char ty[64];

		t->tma_a = compiled_get(c, "a_desc", ':', ty, sizeof(ty)) != -ENOENT;
		t->tma_b = compiled_get(c, "b_desc", ':', ty, sizeof(ty)) != -ENOENT;
	}
	return 0;
}

/* Which framework's kernel each model describes (every RULE_SMEM_MODELS name once). */
static const struct {
	const char *name;
	enum framework fw;
} models[] = {
	{ "triton_fused_moe_sglang", SGLANG },
	{ "triton_fused_moe_vllm", VLLM },
	{ "triton_fused_moe_gptq_awq", GPTQ },
};
_Static_assert(COUNT(models) == RULE_NSMEM_MODELS, "one framework per shared-memory model");

uint64_t rule_smem_model(const char *model, const char *compiled, int sm, struct sm_err *why)
{
	struct triton_moe_tile t;
	uint64_t bytes;
	size_t i;

	for (i = 0; model && i < COUNT(models); i++)
		if (strcmp(models[i].name, model) == 0)
			break;
	if (!model || i == COUNT(models)) {
		sm_err_set(why, -EINVAL, "no shared-memory model is named %s", model ? model : "(none)");
		return 0;
	}
	if (tile_of(models[i].fw, compiled, sm, &t, why) != 0)
		return 0;
	bytes = triton_moe_smem(&t);
	if (!bytes)
		sm_err_set(why, -EINVAL, "the formula gives no size for this configuration");
	return bytes;
}

/* ---------------------------------------------------------------- the bounds */

/* bounds_text - what @b accepts, for messages ("from 16 to 256 in steps of 16"). */
static const char *bounds_text(const struct rule_bound *b, char *buf, size_t n)
{
	size_t o = 0, i;

	if (b->n_one_of) {
		o += (size_t)snprintf(buf, n, "only at");
		for (i = 0; i < b->n_one_of && o < n; i++)
			o += (size_t)snprintf(buf + o, n - o, "%s %lld", !i ? "" :
					      i + 1 < b->n_one_of ? "," : " or",
					      (long long)b->one_of[i]);
		return buf;
	}
	o = (size_t)snprintf(buf, n, "from %lld to %lld", (long long)b->min, (long long)b->max);
	if (b->multiple_of > 1 && o < n)
		snprintf(buf + o, n - o, " in multiples of %lld", (long long)b->multiple_of);
	return buf;
}

/* within - does @v satisfy @b's range, step and list? */
static int within(const struct rule_bound *b, int64_t v)
{
	uint32_t i;

	if (b->n_one_of) {
		for (i = 0; i < b->n_one_of; i++)
			if (b->one_of[i] == v)
				return 1;
		return 0;
	}
	return v >= b->min && v <= b->max && (b->multiple_of < 2 || v % b->multiple_of == 0);
}

/*
 * bound_holds - bound @b of @r on the facts @c, its value into *@v, all but
 * the divisor condition (divides_holds); 0, or -EINVAL with @why.
 */
static int bound_holds(const struct rule *r, const struct rule_bound *b, const char *c, int64_t *v,
		       struct sm_err *why)
{
	char text[160], got[64];
	int rc = compiled_int(c, b->name, v);

	if (rc == -ENOENT)
		return sm_err_set(why, -EINVAL, "the compiled facts of %s do not state %s, which rule "
				  "%s needs to reroute it at any configuration (%s)", r->kernel,
				  b->name, r->id, b->why ? b->why : "a compiled-in value");
	if (rc) {
		if (compiled_get(c, b->name, '=', got, sizeof(got)) != 0)
			snprintf(got, sizeof(got), "(a long value)");
		return sm_err_set(why, -EINVAL, "the kernel was compiled with %s %s, not a whole "
				  "number; rule %s reroutes %s %s", b->name, got, r->id, b->name,
				  bounds_text(b, text, sizeof(text)));
	}
	if (!within(b, *v))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with %s %lld; rule %s "
				  "reroutes %s %s (%s)", b->name, (long long)*v, r->id, b->name,
				  bounds_text(b, text, sizeof(text)), b->why ? b->why : "its bounds");
	return 0;
}

/*
 * divides_holds - @v, the value of bound @b of @r, divides the value the
 * facts @c give @b->divides, when that is above 0; 0, or -EINVAL with @why.
 */
static int divides_holds(const struct rule *r, const struct rule_bound *b, const char *c, int64_t v,
			 struct sm_err *why)
{
	int64_t d;

	if (b->divides && compiled_int(c, b->divides, &d) == 0 && d > 0 && d % v != 0)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with %s %lld and %s %lld; "
				  "rule %s reroutes it only when %s divides %s (%s)", b->name,
				  (long long)v, b->divides, (long long)d, r->id, b->name, b->divides,
				  b->why ? b->why : "its bounds");
	return 0;
}

/* config_text - "BLOCK_SIZE_M 64, BLOCK_SIZE_N 256, ..." of the tile's values, for messages. */
static const char *config_text(const struct rule_generic_tile *g, char *buf, size_t n)
{
	size_t o = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < g->tile.n_values && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%s %g", i ? ", " : "", g->values[i].name,
				      g->values[i].value);
	return buf;
}

/*
 * smem_agrees - @k->shared is the model's for @k's facts: on @k->sm, or on
 * one of the modelled architectures when @k->sm is 0; 0, or -EINVAL with @why.
 */
static int smem_agrees(const struct rule *r, const struct rule_kernel *k,
		       const struct rule_generic_tile *g, struct sm_err *why)
{
	const char *model = r->generic->smem_model;
	char config[512], sizes[160];
	struct sm_err not_modelled = { "" };
	uint64_t want[COUNT(modelled_sms)];
	size_t i, o = 0, n = k->sm ? 1 : COUNT(modelled_sms);
	int modelled = 0;

	for (i = 0; i < n; i++) {
		want[i] = rule_smem_model(model, k->compiled, k->sm ? k->sm : modelled_sms[i],
					  &not_modelled);
		if (want[i] == k->shared)
			return 0;
		modelled += want[i] != 0;
	}
	config_text(g, config, sizeof(config));
	if (!modelled)
		return sm_err_set(why, -EINVAL, "the shared memory of %s at %s cannot be checked "
				  "against its compiled facts (%s: %s); rule %s reroutes it only at "
				  "the sizes of its tiles", r->kernel, config, model, not_modelled.msg,
				  r->id);
	sizes[0] = '\0';
	for (i = 0; i < n; i++)
		if (want[i] && o < sizeof(sizes))
			o += (size_t)snprintf(sizes + o, sizeof(sizes) - o, "%s%llu B on sm_%d",
					      o ? ", " : "", (unsigned long long)want[i],
					      k->sm ? k->sm : modelled_sms[i]);
	return sm_err_set(why, -EINVAL, "%s has %llu B of dynamic shared memory, but Triton "
			  "compiles %s for %s (%s): the kernel and its compiled facts disagree, so "
			  "rule %s does not take either", r->kernel, (unsigned long long)k->shared,
			  sizes, config, model, r->id);
}

int rule_generic_tile(const struct rule *r, const struct rule_kernel *k,
		      struct rule_generic_tile *out, struct sm_err *why)
{
	const struct rule_generic *gen = r->generic;
	int64_t v = 0, warps;
	uint32_t i;

	if (!gen || !k->compiled)
		return -ENOENT;
	if (gen->n_bounds > RULE_MAX_BOUNDS)
		return sm_err_set(why, -EINVAL, "rule %s has more than %d generic bounds", r->id,
				  RULE_MAX_BOUNDS);
	for (i = 0; i < gen->n_bounds; i++) {
		if (bound_holds(r, &gen->bounds[i], k->compiled, &v, why))
			return -EINVAL;
		out->values[i].name = gen->bounds[i].name;
		out->values[i].value = (double)v;
	}
	/* every value in its own bounds first: a divisor out of bounds is the reason */
	for (i = 0; i < gen->n_bounds; i++)
		if (divides_holds(r, &gen->bounds[i], k->compiled, (int64_t)out->values[i].value, why))
			return -EINVAL;
	out->tile.dynamic_smem = k->shared;
	out->tile.values = out->values;
	out->tile.n_values = gen->n_bounds;
	if (compiled_int(k->compiled, "num_warps", &warps) == 0 && (uint64_t)warps * 32 != k->threads)
		return sm_err_set(why, -EINVAL, "%s runs %u threads a block, but its compiled "
				  "num_warps %lld makes %lld: the launch and its compiled facts "
				  "disagree", r->kernel, k->threads, (long long)warps,
				  (long long)warps * 32);
	return smem_agrees(r, k, out, why);
}
