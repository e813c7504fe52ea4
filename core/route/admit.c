/* admit.c - see admit.h; a pure function. */
#include "admit.h"

#include <errno.h>
#include <string.h>

#include "../rules/compiled.h"

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

/*
 * missing_param - the first parameter @r always passes (never dropped) that
 * @compiled's signature lacks, or NULL; NULL too when @compiled records no
 * signature (names of a rule and of the framework's source are the same).
 */
static const char *missing_param(const struct rule *r, const char *compiled)
{
	/* The parameters Triton appends to every kernel: in no source signature. */
	static const char *const appended[] = { "global_scratch", "profile_scratch" };
	char type[32];
	uint32_t i, j;

	if (!compiled || !strchr(compiled, ':'))
		return NULL;
	for (i = 0; i < r->n_params; i++) {
		const char *name = r->params[i].name;

		for (j = 0; j < sizeof(appended) / sizeof(appended[0]); j++)
			if (strcmp(name, appended[j]) == 0)
				break;
		if (j == sizeof(appended) / sizeof(appended[0]) && r->params[i].drop == RULE_KEPT &&
		    compiled_get(compiled, name, ':', type, sizeof(type)) == -ENOENT)
			return name;
	}
	return NULL;
}

/* tile_admits - does tile @tile of @r take @k?  0, or -EINVAL with @why. */
static int tile_admits(const struct rule *r, const struct rule_tile *tile,
		       const struct route_kernel *k, struct sm_err *why)
{
	const struct rule_value *v;
	const char *param;
	double warps, got;

	if ((param = missing_param(r, k->compiled)))
		return sm_err_set(why, -EINVAL, "the kernel has no argument %s, which rule %s's "
				  "signature passes", param, r->id);

	if (rule_value_of(tile->values, tile->n_values, "num_warps", &warps) == 0 &&
	    (uint32_t)warps * 32 != k->threads)
		return sm_err_set(why, -EINVAL, "rule %s's %llu B tile runs %g warps, the kernel %u "
				  "threads", r->id, (unsigned long long)tile->dynamic_smem, warps,
				  k->threads);
	if ((v = differs(tile->values, tile->n_values, k->compiled, &got)) ||
	    (v = differs(r->values, r->n_values, k->compiled, &got)))
		return sm_err_set(why, -EINVAL, "compiled with %s %g; rule %s's %llu B tile "
				  "reroutes %s %g", v->name, got, r->id,
				  (unsigned long long)tile->dynamic_smem, v->name, v->value);
	return 0;
}

void route_admit(const struct route_kernel *k, const struct target_limits *t, enum shim_mode mode,
		 const struct rule *rules, uint32_t n_rules, struct route_admission *a)
{
	uint32_t i;
	int named = 0;

	a->advertise = 0;
	a->rule = NULL;
	sm_err_clear(&a->why);
	a->over = target_fit(t, 0, (int64_t)k->shared) == TARGET_TOO_LARGE;
	if (!a->over || mode != SHIM_MODE_REROUTE || !k->name)
		return;
	for (i = 0; i < n_rules; i++) {
		const struct rule_tile *tile;

		if (strcmp(rules[i].kernel, k->name) != 0)
			continue;
		named = 1;
		tile = rule_tile_for(&rules[i], k->shared);
		if (!tile) {
			if (!a->why.msg[0])
				sm_err_set(&a->why, -EINVAL, "rule %s has no tile of %llu B",
					   rules[i].id, (unsigned long long)k->shared);
			continue;
		}
		if (tile_admits(&rules[i], tile, k, &a->why) == 0) {
			a->advertise = k->shared;
			a->rule = &rules[i];
			sm_err_clear(&a->why);
			return;
		}
	}
	if (!named)
		sm_err_clear(&a->why);
}
