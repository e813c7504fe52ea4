/*
 * fake_launch.h - one fake launch of a Triton kernel for the unit tests of
 * a rule and its adapter (test_reroute, test_context, test_inkling,
 * test_lightning): the parameter values in the rule's order, the parameters
 * Triton compiled in and dropped, the launch geometry and the compiled-facts
 * text the Python hook records; packed into kernelParams as Triton passes them and handed to
 * reroute_select, which must plan it or refuse it with a reason; and the
 * load-time decision (route_admit) on the same compiled text.  Every
 * function fails the running cmocka test on a name the rule lacks or a text
 * that is not there, so a typo in a test is a failure, never a no-op.
 */
#ifndef SM120_TESTS_FAKE_LAUNCH_H
#define SM120_TESTS_FAKE_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "../../core/adapters/select.h"
#include "../../core/rules/compiled.h"
#include "../../core/route/admit.h"

/* One launch of the kernel: parameter values in the rule's order, and the facts. */
struct fake_launch {
	const struct rule *rule;
	int64_t value[RULE_MAX_PARAMS];            /* ints, or pointer values */
	float fvalue[RULE_MAX_PARAMS];             /* fp32 parameters */
	int dropped[RULE_MAX_PARAMS];              /* compiled in by Triton: not passed */
	unsigned char storage[RULE_MAX_PARAMS][8]; /* fake_pack()'s kernelParams */
	void *params[RULE_MAX_PARAMS];
	uint32_t sizes[RULE_MAX_PARAMS];
	struct select_launch l;
	char compiled[COMPILED_MAX];               /* the facts @l.compiled points to */
};

/* A parameter value by name, for fake_init(). */
struct fake_value {
	const char *name;
	int64_t v;
};

/* An edit of the compiled facts that must be refused, for fake_expect_refusals(). */
struct fake_edit {
	const char *entry, *value; /* as fake_replace() takes them */
	const char *reason;        /* what the refusal must say */
};

/* fake_rule - the built-in rule @id; fails the test when there is none. */
const struct rule *fake_rule(const char *id);

/*
 * fake_init - @f cleared, for rule @rule_id, with @values[0..n) set
 * (fake_set) and @compiled copied into @f->compiled.  @f->l is left zeroed:
 * the caller states the launch (kernel, grid, block, shared memory) and
 * points @f->l.compiled at @f->compiled.
 */
void fake_init(struct fake_launch *f, const char *rule_id, const struct fake_value *values,
	       size_t n, const char *compiled);

/* fake_set - int or pointer parameter @name takes @v; fails the test if the rule lacks it. */
void fake_set(struct fake_launch *f, const char *name, int64_t v);

/* fake_set_fp32 - fp32 parameter @name takes @v; fails the test if the rule lacks it. */
void fake_set_fp32(struct fake_launch *f, const char *name, float v);

/*
 * fake_drop - parameter @name is compiled in and left out of the launch;
 * fails the test if the rule lacks it.
 */
void fake_drop(struct fake_launch *f, const char *name);

/*
 * fake_replace - @f->compiled with entry @name (with its separator, "d="
 * or "K:") given @value instead.  Entries are matched at their start ("d="
 * is not the end of "E_FBLOCK=128;d="); fails the test when there is no
 * such entry.  @value may itself hold ';' (more entries).
 */
void fake_replace(struct fake_launch *f, const char *name, const char *value);

/*
 * fake_pack - @f->params and @f->sizes filled as Triton passes them (the
 * dropped parameters left out; i32 as 4 bytes, fp32 from @f->fvalue, the
 * rest 8 bytes) and @f->l pointed at them.  Valid until @f changes.
 */
void fake_pack(struct fake_launch *f);

/*
 * fake_expect_refusal - @f packed; reroute_select must return -EINVAL with
 * a reason that contains @text.
 */
void fake_expect_refusal(struct fake_launch *f, const char *text);

/*
 * fake_expect_refusals - for each of @cases[0..n): a launch made by
 * @start, its compiled facts edited (fake_replace), must be refused
 * (fake_expect_refusal).
 */
void fake_expect_refusals(void (*start)(struct fake_launch *f), const struct fake_edit *cases,
			  size_t n);

/*
 * fake_expect_plan - @f packed; reroute_select must plan it, by rule
 * @rule_id, with adapter arguments of @args_size bytes, copied into @args.
 * @plan is the caller's.
 */
void fake_expect_plan(struct fake_launch *f, const char *rule_id, struct reroute_plan *plan,
		      void *args, size_t args_size);

/*
 * fake_expect_admit - route_admit of @k on @t in reroute mode, with the
 * first @from in @k->compiled replaced by @to (@from NULL: as it is; it
 * fails the test when @from is not there).  With @reason NULL the kernel
 * must be admitted by rule @rule_id, advertising @k->shared; otherwise
 * refused (advertising 0) with a reason that contains @reason.  @case_no
 * names the case in the failure message.  @k is not changed.
 */
void fake_expect_admit(const struct route_kernel *k, const struct target_limits *t,
		       const char *rule_id, const char *from, const char *to, const char *reason,
		       size_t case_no);

#endif
