/*
 * fake_launch.c - the fake Triton launch of fake_launch.h: build it by
 * parameter name over a built-in rule, edit its compiled facts, pack it as
 * Triton passes kernelParams, and check reroute_select's verdict on it
 * (and route_admit's on its compiled text).
 * Failures go through cmocka (fail_msg, assert_*), so these functions may be
 * called only from inside a running cmocka test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fake_launch.h"

const struct rule *fake_rule(const char *id)
{
	uint32_t i;

	for (i = 0; i < rules_builtin_count; i++)
		if (strcmp(rules_builtin[i].id, id) == 0)
			return &rules_builtin[i];
	fail_msg("no rule %s", id);
	return NULL;
}

/* fake_index - where parameter @name is in @f's rule; fails the test if it has none. */
static int fake_index(const struct fake_launch *f, const char *name)
{
	uint32_t i;

	for (i = 0; i < f->rule->n_params; i++)
		if (strcmp(f->rule->params[i].name, name) == 0)
			return (int)i;
	fail_msg("rule has no parameter %s", name);
	return -1;
}

void fake_init(struct fake_launch *f, const char *rule_id, const struct fake_value *values,
	       size_t n, const char *compiled)
{
	size_t i;

	memset(f, 0, sizeof(*f));
	f->rule = fake_rule(rule_id);
	for (i = 0; i < n; i++)
		fake_set(f, values[i].name, values[i].v);
	snprintf(f->compiled, sizeof(f->compiled), "%s", compiled);
}

void fake_set(struct fake_launch *f, const char *name, int64_t v)
{
	f->value[fake_index(f, name)] = v;
}

void fake_set_fp32(struct fake_launch *f, const char *name, float v)
{
	f->fvalue[fake_index(f, name)] = v;
}

void fake_drop(struct fake_launch *f, const char *name)
{
	f->dropped[fake_index(f, name)] = 1;
}

void fake_replace(struct fake_launch *f, const char *name, const char *value)
{
	char out[COMPILED_MAX], key[64];
	char *at, *end;

	snprintf(key, sizeof(key), ";%s", name);
	at = strncmp(f->compiled, name, strlen(name)) == 0 ? f->compiled : strstr(f->compiled, key);
	assert_non_null(at);
	at += at != f->compiled;
	end = strchr(at, ';');
	snprintf(out, sizeof(out), "%.*s%s%s%s", (int)(at - f->compiled), f->compiled, name, value,
		 end ? end : "");
	strcpy(f->compiled, out);
}

void fake_pack(struct fake_launch *f)
{
	uint32_t i, n = 0;

	for (i = 0; i < f->rule->n_params; i++) {
		const struct rule_param *p = &f->rule->params[i];

		if (f->dropped[i])
			continue;
		if (p->type == RULE_FP32)
			memcpy(f->storage[n], &f->fvalue[i], 4);
		else if (p->type == RULE_I32)
			memcpy(f->storage[n], &(int32_t){ (int32_t)f->value[i] }, 4);
		else
			memcpy(f->storage[n], &f->value[i], 8);
		f->params[n] = f->storage[n];
		f->sizes[n] = rule_type_size((enum rule_type)p->type);
		n++;
	}
	f->l.params = f->params;
	f->l.param_sizes = f->sizes;
	f->l.n_params = n;
}

void fake_expect_refusal(struct fake_launch *f, const char *text)
{
	struct reroute_plan plan;
	const struct rule *r = NULL;
	struct sm_err why = { "" };

	fake_pack(f);
	assert_int_equal(reroute_select(rules_builtin, rules_builtin_count, &f->l, &plan, &r, &why),
			 -EINVAL);
	if (!strstr(why.msg, text))
		fail_msg("reason '%s' lacks '%s'", why.msg, text);
}

void fake_expect_refusals(void (*start)(struct fake_launch *f), const struct fake_edit *cases,
			  size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct fake_launch f;

		start(&f);
		fake_replace(&f, cases[i].entry, cases[i].value);
		fake_expect_refusal(&f, cases[i].reason);
	}
}

void fake_expect_plan(struct fake_launch *f, const char *rule_id, struct reroute_plan *plan,
		      void *args, size_t args_size)
{
	const struct rule *r = NULL;
	struct sm_err why = { "" };

	fake_pack(f);
	if (reroute_select(rules_builtin, rules_builtin_count, &f->l, plan, &r, &why) != 0)
		fail_msg("not rerouted: %s", why.msg);
	assert_string_equal(r->id, rule_id);
	assert_int_equal(plan->args_size, args_size);
	memcpy(args, plan->args, args_size);
}

void fake_expect_admit(const struct route_kernel *k, const struct target_limits *t,
		       const char *rule_id, const char *from, const char *to, const char *reason,
		       size_t case_no)
{
	char text[COMPILED_MAX], *at;
	struct route_kernel kernel = *k;
	struct route_admission a;

	snprintf(text, sizeof(text), "%s", k->compiled);
	if (from) {
		at = strstr(text, from);
		assert_non_null(at);
		memmove(at + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
		memcpy(at, to, strlen(to));
	}
	kernel.compiled = text;
	route_admit(&kernel, t, SHIM_MODE_REROUTE, rules_builtin, rules_builtin_count, &a);
	if (!reason) {
		assert_int_equal(a.advertise, k->shared);
		assert_string_equal(a.rule->id, rule_id);
	} else {
		assert_int_equal(a.advertise, 0);
		if (!strstr(a.why.msg, reason))
			fail_msg("case %zu: reason '%s' lacks '%s'", case_no, a.why.msg, reason);
	}
}
