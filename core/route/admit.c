/* admit.c - see admit.h; a pure function. */
#include "admit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../adapters/adapter.h"
#include "../adapters/facts.h"
#include "../rules/compiled.h"
#include "../rules/generic.h"

/*
 * differs - the first of @values[0..n) that @compiled states with another
 * value, or NULL.  A value the compiler did not record (target_sm, a derived
 * flag) is the adapter's to check at launch.
 */
static const struct rule_value *differs(const struct rule_value *values, uint32_t n,
					const char *compiled, double *got)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (compiled_number(compiled, values[i].name, got) == 0 && *got != values[i].value)
			return &values[i];
	return NULL;
}

/* The parameters Triton appends to every kernel: in no source signature. */
static const char *const appended[] = { "global_scratch", "profile_scratch" };

static int is_appended(const char *name)
{
	size_t j;

	for (j = 0; j < sizeof(appended) / sizeof(appended[0]); j++)
		if (strcmp(name, appended[j]) == 0)
			return 1;
	return 0;
}

/* typed - does @compiled give parameter @name a runtime type ("name:type")? */
static int typed(const char *compiled, const char *name)
{
	char type[32];

	return compiled_get(compiled, name, ':', type, sizeof(type)) != -ENOENT;
}

/*
 * records_signature - do @compiled's facts type @r's parameters?  They do
 * when they type any parameter @r always passes: the Python hook types every
 * runtime argument, a text that types none (sm120 configs, an older hook)
 * says nothing of the signature.
 */
static int records_signature(const struct rule *r, const char *compiled)
{
	uint32_t i;

	for (i = 0; compiled && i < r->n_params; i++)
		if (r->params[i].drop == RULE_KEPT && !is_appended(r->params[i].name) &&
		    typed(compiled, r->params[i].name))
			return 1;
	return 0;
}

/*
 * missing_param - the first parameter @r always passes (never dropped) that
 * @compiled's signature lacks, or NULL; NULL too when @compiled records no
 * signature (names of a rule and of the framework's source are the same).
 */
static const char *missing_param(const struct rule *r, const char *compiled)
{
	uint32_t i;

	if (!records_signature(r, compiled))
		return NULL;
	for (i = 0; i < r->n_params; i++)
		if (r->params[i].drop == RULE_KEPT && !is_appended(r->params[i].name) &&
		    !typed(compiled, r->params[i].name))
			return r->params[i].name;
	return NULL;
}

/*
 * foreign_param - the first runtime argument @compiled types that @r does not
 * list, or NULL: the kernel has another signature (with the hook's facts the
 * missing one says so first; a text that types only some arguments, such as
 * sm120 configs' tensor descriptors, says it here).
 */
static const char *foreign_param(const struct rule *r, const char *compiled, char *name, size_t n)
{
	const char *p = compiled;
	uint32_t i;

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *colon = memchr(p, ':', len), *eq = memchr(p, '=', len);

		if (colon && (!eq || colon < eq) && (size_t)(colon - p) < n) {
			snprintf(name, n, "%.*s", (int)(colon - p), p);
			for (i = 0; i < r->n_params && strcmp(r->params[i].name, name) != 0; i++)
				;
			if (i == r->n_params)
				return name;
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

/*
 * unsupported_passed - the first parameter @r cannot reroute that @compiled
 * types as a runtime argument (it was passed, not None), or NULL: its
 * launches would all be refused, so the kernel is refused at load.
 */
static const char *unsupported_passed(const struct rule *r, const char *compiled)
{
	uint32_t i;

	for (i = 0; compiled && i < r->n_params; i++)
		if (r->params[i].unsupported && typed(compiled, r->params[i].name))
			return r->params[i].name;
	return NULL;
}

/* How far a kernel got with a rule: the reason kept is the furthest one's. */
enum stage { STAGE_NONE = 0, STAGE_SIGNATURE, STAGE_SUPPORTED, STAGE_TILE, STAGE_VALUES };

/*
 * rule_admits - does rule @r take @k?  STAGE_NONE when it does (with the
 * generic tile in @g, or one of @r's exact tiles), else the stage it failed
 * at, with @why.  With the hook's facts (a text that types the signature) a
 * constexpr that @r does not answer for refuses the kernel here as it would
 * refuse every launch (facts_unaudited), so that Triton sees its
 * OutOfResources at load, where its autotuner can skip the configuration,
 * and the rule named at load is the one that reroutes the launches.  A text
 * that types nothing (sm120 configs describes a config file for both
 * frameworks at once) is judged by the values alone.
 */
static enum stage rule_admits(const struct rule *r, const struct route_kernel *k,
			      struct rule_generic_tile *g, struct sm_err *why)
{
	const struct rule_kernel rk = { k->compiled, k->sm, k->threads, k->shared };
	const struct rule_tile *tile;
	const struct rule_value *v;
	const char *param;
	double warps, got;
	char name[64];
	int rc;

	if ((param = missing_param(r, k->compiled))) {
		sm_err_set(why, -EINVAL, "the kernel has no argument %s, which rule %s's signature "
			   "passes", param, r->id);
		return STAGE_SIGNATURE;
	}
	if ((param = foreign_param(r, k->compiled, name, sizeof(name)))) {
		sm_err_set(why, -EINVAL, "the kernel takes %s at run time, which rule %s's signature "
			   "does not list", param, r->id);
		return STAGE_SIGNATURE;
	}
	if ((param = unsupported_passed(r, k->compiled))) {
		sm_err_set(why, -EINVAL, "the kernel takes %s at run time, which rule %s cannot "
			   "reroute (its launches would all be refused)", param, r->id);
		return STAGE_SUPPORTED;
	}
	rc = rule_generic_tile(r, &rk, g, why);
	if (rc == -EINVAL)
		return STAGE_TILE;
	tile = rc == 0 ? &g->tile : rule_tile_for(r, k->shared);
	if (!tile) {
		sm_err_set(why, -EINVAL, "rule %s has no tile of %llu B%s", r->id,
			   (unsigned long long)k->shared, r->generic ? " (without the compiled "
			   "facts only its tiles are rerouted)" : "");
		return STAGE_TILE;
	}
	if (rc != 0 && rule_value_of(tile->values, tile->n_values, "num_warps", &warps) == 0 &&
	    (uint32_t)warps * 32 != k->threads) {
		sm_err_set(why, -EINVAL, "rule %s's %llu B tile runs %g warps, the kernel %u threads",
			   r->id, (unsigned long long)tile->dynamic_smem, warps, k->threads);
		return STAGE_TILE;
	}
	if ((v = differs(tile->values, tile->n_values, k->compiled, &got)) ||
	    (v = differs(r->values, r->n_values, k->compiled, &got))) {
		sm_err_set(why, -EINVAL, "compiled with %s %g; rule %s reroutes the kernel's %llu B "
			   "only with %s %g", v->name, got, r->id,
			   (unsigned long long)tile->dynamic_smem, v->name, v->value);
		return STAGE_VALUES;
	}
	if (records_signature(r, k->compiled) &&
	    facts_unaudited(r, tile, adapter_known(r->adapter), k->compiled, why))
		return STAGE_VALUES;
	return STAGE_NONE;
}

void route_admit(const struct route_kernel *k, const struct target_limits *t, enum shim_mode mode,
		 const struct rule *rules, uint32_t n_rules, struct route_admission *a)
{
	enum stage furthest = STAGE_NONE;
	int named = 0;
	uint32_t i;

	a->advertise = 0;
	a->rule = NULL;
	sm_err_clear(&a->why);
	a->over = target_fit(t, 0, (int64_t)k->shared) == TARGET_TOO_LARGE;
	if (!a->over || mode != SHIM_MODE_REROUTE || !k->name)
		return;
	for (i = 0; i < n_rules; i++) {
		struct rule_generic_tile g;
		struct sm_err why = { "" };
		enum stage s;

		if (strcmp(rules[i].kernel, k->name) != 0)
			continue;
		named = 1;
		s = rule_admits(&rules[i], k, &g, &why);
		if (s == STAGE_NONE) {
			a->advertise = k->shared;
			a->rule = &rules[i];
			sm_err_clear(&a->why);
			return;
		}
		if (s > furthest) {
			furthest = s;
			a->why = why;
		}
	}
	if (!named)
		sm_err_set(&a->why, -ENOENT, "no rule of this shim names kernel %s (the README's "
			   "Rerouting table lists the kernels it reroutes)", k->name);
}
