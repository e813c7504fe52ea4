/* adapter.c - see adapter.h: the adapter table and reading parameters by name. */
#include "adapter.h"

#include <errno.h>
#include <string.h>

#include "adapter_known.h"
#include "adapter_table.h"

#define ADAPTER_DECL(name, what) adapter_fn adapt_##name;
SHIM_ADAPTERS(ADAPTER_DECL)
#undef ADAPTER_DECL

static const struct {
	const char *name;
	adapter_fn *fn;
} adapters[] = {
#define ADAPTER_ROW(name, what) { #name, adapt_##name },
	SHIM_ADAPTERS(ADAPTER_ROW)
#undef ADAPTER_ROW
};

static const struct {
	const char *name;
	const char *known;
} known_rows[] = {
#define ADAPTER_KNOWN_ROW(name, known) { #name, known },
	ADAPTER_KNOWN(ADAPTER_KNOWN_ROW)
#undef ADAPTER_KNOWN_ROW
};

const char *adapter_known(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(known_rows) / sizeof(known_rows[0]); i++)
		if (strcmp(known_rows[i].name, name) == 0)
			return known_rows[i].known;
	return NULL;
}

adapter_fn *adapter_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(adapters) / sizeof(adapters[0]); i++)
		if (strcmp(adapters[i].name, name) == 0)
			return adapters[i].fn;
	return NULL;
}

/*
 * find - the rule parameter @name: its index, type and where its value is
 * (NULL if dropped).  -EINVAL with @why if the rule has none of that name.
 */
static int find(const struct adapter_input *in, const char *name, const struct rule_param **p,
		const void **value, struct sm_err *why)
{
	uint32_t i, present = 0;

	for (i = 0; i < in->rule->n_params; i++) {
		int kept = (in->kept >> i) & 1;

		if (strcmp(in->rule->params[i].name, name) == 0) {
			*p = &in->rule->params[i];
			*value = kept ? in->params[present] : NULL;
			return 0;
		}
		present += (uint32_t)kept;
	}
	return sm_err_set(why, -EINVAL, "rule %s has no parameter %s (adapter and rule disagree)",
			  in->rule->id, name);
}

static int typed(const struct adapter_input *in, const char *name, enum rule_type type,
		 const struct rule_param **p, const void **value, struct sm_err *why)
{
	int rc = find(in, name, p, value, why);

	if (rc == 0 && (*p)->type != type)
		return sm_err_set(why, -EINVAL, "rule %s: parameter %s has another type than the "
				  "adapter reads", in->rule->id, name);
	return rc;
}

int adapter_ptr(const struct adapter_input *in, const char *name, const void **out,
		struct sm_err *why)
{
	const struct rule_param *p;
	const void *v;
	int rc = typed(in, name, RULE_PTR, &p, &v, why);

	if (rc == 0)
		memcpy(out, v ? v : &(const void *){ NULL }, sizeof(*out));
	return rc;
}

int adapter_i32(const struct adapter_input *in, const char *name, int32_t *out,
		struct sm_err *why)
{
	const struct rule_param *p;
	const void *v;
	int rc = typed(in, name, RULE_I32, &p, &v, why);

	if (rc == 0 && v)
		memcpy(out, v, sizeof(*out));
	else if (rc == 0)
		*out = 1; /* dropped: Triton compiled the 1 in */
	return rc;
}

int adapter_f32(const struct adapter_input *in, const char *name, float *out,
		struct sm_err *why)
{
	const struct rule_param *p;
	const void *v;
	int rc = typed(in, name, RULE_FP32, &p, &v, why);

	if (rc == 0 && !v)
		return sm_err_set(why, -EINVAL, "rule %s: float parameter %s cannot be dropped",
				  in->rule->id, name);
	if (rc == 0)
		memcpy(out, v, sizeof(*out));
	return rc;
}

int adapter_has(const struct adapter_input *in, const char *name)
{
	const struct rule_param *p;
	const void *v;

	return find(in, name, &p, &v, NULL) == 0;
}

int adapter_dropped(const struct adapter_input *in, const char *name)
{
	const struct rule_param *p;
	const void *v;

	return find(in, name, &p, &v, NULL) == 0 && !v;
}

int adapter_may_drop(const struct adapter_input *in, const char *name)
{
	const struct rule_param *p;
	const void *v;

	return find(in, name, &p, &v, NULL) == 0 && p->drop != RULE_KEPT;
}

int adapter_value(const struct adapter_input *in, const char *name, double *out,
		  struct sm_err *why)
{
	if (in->tile && rule_value_of(in->tile->values, in->tile->n_values, name, out) == 0)
		return 0;
	if (rule_value_of(in->rule->values, in->rule->n_values, name, out) == 0)
		return 0;
	return sm_err_set(why, -EINVAL, "rule %s does not give %s, which %s compiles in and the "
			  "launch cannot show; add it to the rule's values", in->rule->id, name,
			  in->rule->kernel);
}
