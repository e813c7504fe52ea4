/* facts.c - see facts.h. */
#include "facts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../rules/compiled.h"

/* The parameters Triton appends to every kernel: the facts list the Python signature only. */
static const char *const appended[] = { "global_scratch", "profile_scratch" };

/* How Triton types a runtime argument of each rule type (a pointer: "*" and its element). */
static const struct {
	const char *name;
	enum rule_type type;
} scalar_kinds[] = {
	{ "i32", RULE_I32 }, { "u32", RULE_I32 }, { "i64", RULE_I64 }, { "u64", RULE_I64 },
	{ "fp32", RULE_FP32 }, { "i1", RULE_U1 }, { "u1", RULE_U1 },
};

static const char *const type_names[] = { "ptr", "i64", "i32", "fp32", "u1" };

/* kind_of - the rule type of a runtime argument Triton typed @ty, or -1. */
static int kind_of(const char *ty)
{
	size_t i;

	if (ty[0] == '*')
		return RULE_PTR;
	for (i = 0; i < sizeof(scalar_kinds) / sizeof(scalar_kinds[0]); i++)
		if (strcmp(scalar_kinds[i].name, ty) == 0)
			return (int)scalar_kinds[i].type;
	return -1;
}

static int is_appended(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(appended) / sizeof(appended[0]); i++)
		if (strcmp(appended[i], name) == 0)
			return 1;
	return 0;
}

/*
 * next_runtime - the name of the next "name:type" entry at or after *@p into
 * @name (@n bytes), advancing *@p past it; 0 when there is none.
 */
static int next_runtime(const char **p, char *name, size_t n)
{
	while (*p && **p) {
		const char *entry = *p, *end = strchr(entry, ';');
		size_t len = end ? (size_t)(end - entry) : strlen(entry);
		const char *colon = memchr(entry, ':', len), *eq = memchr(entry, '=', len);

		*p = end ? end + 1 : NULL;
		if (colon && (!eq || colon < eq)) {
			size_t k = (size_t)(colon - entry);

			snprintf(name, n, "%.*s", (int)(k < n ? k : n - 1), entry);
			return 1;
		}
	}
	return 0;
}

/* sizes_agree - do the launch's sizes @sizes[0..@n) equal those of @r's params in @way? */
static int sizes_agree(const struct rule *r, uint64_t way, const uint32_t *sizes, uint32_t n)
{
	uint32_t i, k = 0;

	for (i = 0; i < r->n_params; i++) {
		if (!((way >> i) & 1))
			continue;
		if (k >= n || sizes[k] != rule_type_size((enum rule_type)r->params[i].type))
			return 0;
		k++;
	}
	return k == n;
}

/*
 * passed - how @compiled states parameter @q of @r: 1 passed at run time (it
 * must then be the runtime argument at *@next, which is advanced past it), 0
 * compiled in as @q's drop allows, -EINVAL with @why when neither.
 */
static int passed(const struct rule *r, const struct rule_param *q, const char *compiled,
		  const char **next, struct sm_err *why)
{
	const char *want = q->drop == RULE_DROP_NONE ? "None" : "1";
	char v[64], name[64] = "";
	int rc = compiled_get(compiled, q->name, ':', v, sizeof(v));

	if (rc != -ENOENT) {
		if (!next_runtime(next, name, sizeof(name)) || strcmp(name, q->name) != 0)
			return sm_err_set(why, -EINVAL, "rule %s lists %s where the compiled kernel's "
					  "runtime arguments have %s: another signature", r->id,
					  q->name, name[0] ? name : "none");
		if (q->drop == RULE_DROP_ALWAYS)
			return sm_err_set(why, -EINVAL, "the compiled kernel takes %s at run time; rule "
					  "%s has it always 1 and compiled in", q->name, r->id);
		if (rc || kind_of(v) != q->type)
			return sm_err_set(why, -EINVAL, "%s is %s in the compiled kernel, not the %s "
					  "rule %s reads", q->name, rc ? "(a long type)" : v,
					  type_names[q->type], r->id);
		return 1;
	}
	rc = compiled_get(compiled, q->name, '=', v, sizeof(v));
	if (rc == -ENOENT && is_appended(q->name))
		return 1;
	if (rc == -ENOENT)
		return sm_err_set(why, -EINVAL, "rule %s lists %s, which the compiled kernel does not "
				  "have: another signature", r->id, q->name);
	if (q->drop == RULE_KEPT)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with %s=%s; rule %s reads it "
				  "from the launch", q->name, rc ? "(long)" : v, r->id);
	if (rc || strcmp(v, want) != 0)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with %s=%s; rule %s drops it "
				  "only as %s", q->name, rc ? "(long)" : v, r->id, want);
	return 0;
}

/* lists - does @r have a parameter named @name? */
static int lists(const struct rule *r, const char *name)
{
	uint32_t i;

	for (i = 0; i < r->n_params; i++)
		if (strcmp(r->params[i].name, name) == 0)
			return 1;
	return 0;
}

/*
 * compiled_in_unlisted - 0 when every argument the facts' "compiled_args"
 * names (not declared constexpr, compiled in as None or 1) is one @r lists;
 * -EINVAL with @why naming the first that is not: a later signature that
 * added it, read as @r's because Triton dropped it.
 */
static int compiled_in_unlisted(const struct rule *r, const char *compiled, struct sm_err *why)
{
	char list[COMPILED_MAX], value[64];
	char *name, *save = NULL;

	if (compiled_get(compiled, "compiled_args", '=', list, sizeof(list)) != 0)
		return 0;
	for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		if (lists(r, name))
			continue;
		if (compiled_get(compiled, name, '=', value, sizeof(value)) != 0)
			snprintf(value, sizeof(value), "(unstated)");
		return sm_err_set(why, -EINVAL, "the compiled kernel has the argument %s (compiled "
				  "in as %s), which rule %s does not list: another signature",
				  name, value, r->id);
	}
	return 0;
}

int facts_reading(const struct rule *r, const char *compiled, const uint32_t *sizes, uint32_t n,
		  uint64_t *way, struct sm_err *why)
{
	const char *next = compiled;
	char name[64];
	uint64_t kept = 0;
	uint32_t i;
	int rc;

	for (i = 0; i < r->n_params; i++) {
		rc = passed(r, &r->params[i], compiled, &next, why);
		if (rc < 0)
			return rc;
		kept |= (uint64_t)rc << i;
	}
	if (next_runtime(&next, name, sizeof(name)))
		return sm_err_set(why, -EINVAL, "the compiled kernel takes %s at run time, which "
				  "rule %s does not list: another signature", name, r->id);
	if (compiled_in_unlisted(r, compiled, why))
		return -EINVAL;
	if (!sizes_agree(r, kept, sizes, n))
		return sm_err_set(why, -EINVAL, "the launch's %u parameter sizes are not those of "
				  "the arguments the compiled kernel takes as rule %s lists them", n,
				  r->id);
	*way = kept;
	return 0;
}

/* value_agrees - @v (of @r) is not stated by @compiled or has its value there. */
static int value_agrees(const struct rule *r, const struct rule_value *v, const char *compiled,
			struct sm_err *why)
{
	char text[64];
	double got;
	int rc = compiled_number(compiled, v->name, &got);

	if (rc == -ENOENT || (rc == 0 && got == v->value))
		return 0;
	if (rc == 0)
		snprintf(text, sizeof(text), "%g", got);
	else if (compiled_get(compiled, v->name, '=', text, sizeof(text)) != 0)
		snprintf(text, sizeof(text), "(a long value)");
	return sm_err_set(why, -EINVAL, "the kernel was compiled with %s %s; rule %s reroutes it "
			  "only with %s %g, the value its bundled kernel computes as", v->name, text,
			  r->id, v->name, v->value);
}

int facts_values(const struct rule *r, const struct rule_tile *tile, const char *compiled,
		 struct sm_err *why)
{
	uint32_t i;

	for (i = 0; tile && i < tile->n_values; i++)
		if (value_agrees(r, &tile->values[i], compiled, why))
			return -EINVAL;
	for (i = 0; i < r->n_values; i++)
		if (value_agrees(r, &r->values[i], compiled, why))
			return -EINVAL;
	return 0;
}

/* The launch options the facts state (core/rules/compiled.h), not constexprs. */
static const char *const launch_options[] = { "num_warps", "num_stages", "mma_v3", "compiled_args" };

/* in_words - is @name one of the space-separated words of @list (NULL: none)? */
static int in_words(const char *list, const char *name)
{
	size_t len = strlen(name);

	while (list && *list) {
		size_t w = strcspn(list, " ");

		if (w == len && strncmp(list, name, len) == 0)
			return 1;
		list += w;
		list += strspn(list, " ");
	}
	return 0;
}

static int in_values(const struct rule_value *values, uint32_t n, const char *name)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (strcmp(values[i].name, name) == 0)
			return 1;
	return 0;
}

/* answered - does @r, its @tile, a launch option or @known answer for constexpr @name? */
static int answered(const struct rule *r, const struct rule_tile *tile, const char *known,
		    const char *name)
{
	uint32_t i;

	for (i = 0; i < sizeof(launch_options) / sizeof(launch_options[0]); i++)
		if (strcmp(launch_options[i], name) == 0)
			return 1;
	for (i = 0; r->generic && i < r->generic->n_bounds; i++)
		if (strcmp(r->generic->bounds[i].name, name) == 0)
			return 1;
	return lists(r, name) || in_values(r->values, r->n_values, name) ||
	       (tile && in_values(tile->values, tile->n_values, name)) || in_words(known, name);
}

int facts_unaudited(const struct rule *r, const struct rule_tile *tile, const char *known,
		    const char *compiled, struct sm_err *why)
{
	const char *p = compiled;
	char name[64];

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len), *colon = memchr(p, ':', len);

		if (eq && (!colon || eq < colon) && (size_t)(eq - p) < sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - p), p);
			if (!answered(r, tile, known, name))
				return sm_err_set(why, -EINVAL, "the kernel was compiled with %.*s, a "
						  "value rule %s and adapter %s do not know (a "
						  "newer release's?): not rerouted on the guess "
						  "that it changes nothing; rules/AUDIT.md must "
						  "cover it first", (int)len, p, r->id, r->adapter);
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

int facts_type(const char *compiled, const char *param, const char *want, const char *kernel,
	       const char *consequence, struct sm_err *why)
{
	char got[64];
	int rc = compiled_get(compiled, param, ':', got, sizeof(got));

	if (rc == -ENOENT || (rc == 0 && strcmp(got, want) == 0))
		return 0;
	return sm_err_set(why, -EINVAL, "%s is %s in the compiled kernel; %s reads it as %s, %s: "
			  "not rerouted", param, rc ? "(a long type)" : got, kernel, want,
			  consequence);
}

int facts_types(const char *compiled, const struct facts_ptype *types, size_t n,
		const char *kernel, struct sm_err *why)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (facts_type(compiled, types[i].param, types[i].type, kernel, types[i].consequence,
			       why))
			return -EINVAL;
	return 0;
}
