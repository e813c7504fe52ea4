/* gate.c - see gate.h. */
#include "gate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../log/log.h"
#include "../../core/adapters/select.h"
#include "../reroute/reroute.h"
#include "../settings/config.h"
#include "../state/facts.h"

/* The most static shared memory any kernel can declare (ptxas limit). */
#define MAX_STATIC_SMEM 49152u

/* What the shim did with one over-limit call, for report(). */
struct verdict {
	const char *event;           /* "launch", "set_attribute" */
	const char *action;          /* "log", "refuse", "accept", "reroute" */
	enum shim_hook_id via;
	uint32_t static_smem;
	uint64_t dynamic;
	const struct shim_launch *launch; /* NULL for attribute sets */
	const char *reason;          /* why a reroute did not happen, or NULL */
	const struct rule *rule;     /* the rule that rerouted it */
	const char *rerouted_to;     /* the bundled kernel */
};

/* advice - the second sentence of the stderr line. */
static const char *advice(const struct verdict *v)
{
	if (strcmp(v->action, "log") == 0)
		return "Check with SM120SHIM_MODE=enforce before deploying.";
	if (strcmp(v->action, "refuse") != 0 || v->reason)
		return "";
	if (shim_config()->mode == SHIM_MODE_ENFORCE)
		return "SM120SHIM_MODE=reroute runs the kernels a rule covers on bundled SM120 "
		       "kernels.";
	return "No reroute rule names it: use a configuration with smaller tiles, or report the "
	       "kernel so a rule can be written.";
}

/* report - the stderr line once per kernel, the JSON event and the count. */
static void report(struct kernel_rec *r, const struct verdict *v, const struct target_limits *t)
{
	const struct shim_config *c = shim_config();
	const struct kernel_rec *k = shim_kernel_facts(r);
	const char *name = r ? r->name : "?";
	int refused = strcmp(v->action, "refuse") == 0;
	char key[320];
	struct shim_event e = {
		.event = v->event, .action = v->action, .kernel = name,
		.via = shim_hook_table[v->via].name, .target = t->name,
		.mode = route_mode_name(c->mode), .static_smem = v->static_smem,
		.dynamic_smem = (int64_t)v->dynamic, .limit = t->optin_per_block, .kernels = -1,
		.regs = -1, .param_bytes = -1, .reason = v->reason,
		.rule = v->rule ? v->rule->id : NULL, .rerouted_to = v->rerouted_to,
	};

	if (k) {
		e.origin = k->origin;
		e.regs = k->facts.regs;
		e.param_bytes = k->facts.n_params ? (int64_t)k->facts.param_bytes : -1;
		e.n_params = k->facts.n_params;
		e.params = k->facts.params;
	}
	if (v->launch) {
		memcpy(e.grid, v->launch->grid, sizeof(e.grid));
		memcpy(e.block, v->launch->block, sizeof(e.block));
	}
	shim_log_event(&e);
	shim_log_count(refused ? SHIM_OUTCOME_REFUSED :
		       v->rerouted_to ? SHIM_OUTCOME_REROUTED :
		       strcmp(v->action, "accept") == 0 ? SHIM_OUTCOME_ACCEPTED : SHIM_OUTCOME_LOGGED);
	snprintf(key, sizeof(key), "%s|%s|%s", v->event, v->action, name);
	if (!shim_log_first(key))
		return;
	if (v->rerouted_to) {
		shim_log_warn("kernel %s (from %s): needs %llu B of shared memory per block, %s allows "
			      "%u B: rerouted to the bundled %s (rule %s)", name,
			      k ? k->origin : "?", (unsigned long long)(v->static_smem + v->dynamic),
			      t->name, t->optin_per_block, v->rerouted_to, v->rule->id);
		return;
	}
	if (strcmp(v->action, "accept") == 0) {
		shim_log_warn("kernel %s (from %s): asks to be allowed %llu B of shared memory per "
			      "block; %s allows %u B: accepted for rerouting (the driver is given %u "
			      "B; launches over that run on a bundled kernel where a rule covers "
			      "them, and are refused otherwise)", name, k ? k->origin : "?",
			      (unsigned long long)(v->static_smem + v->dynamic), t->name,
			      t->optin_per_block, t->optin_per_block - v->static_smem);
		return;
	}
	shim_log_warn("kernel %s (from %s): %s %llu B of shared memory per block (%u static + "
		      "%llu dynamic, through %s); %s allows %u B: %s%s%s. %s",
		      name, k ? k->origin : "?", v->launch ? "a launch needs" : "asks to be allowed",
		      (unsigned long long)(v->static_smem + v->dynamic), v->static_smem,
		      (unsigned long long)v->dynamic, shim_hook_table[v->via].name, t->name,
		      t->optin_per_block,
		      refused ? "refused, as that GPU would (CUDA_ERROR_INVALID_VALUE)" :
				"that GPU would refuse it (launched unchanged: diagnose)",
		      v->reason ? "; not rerouted: " : "", v->reason ? v->reason : "", advice(v));
}

/* per_thread - did the launch come through a per-thread-default-stream (_ptsz) entry? */
static int per_thread(enum shim_hook_id via)
{
	return via == SHIM_HOOK_cuLaunchKernel_ptsz || via == SHIM_HOOK_cuLaunchKernelEx_ptsz ||
	       via == SHIM_HOOK_cuLaunchCooperativeKernel_ptsz;
}

/*
 * plan_reroute - the rule and plan for launch @l of @r, or why there is none
 * (-ENOENT: no rule names the kernel).
 */
static int plan_reroute(struct kernel_rec *r, const struct shim_launch *l,
			struct reroute_plan *plan, const struct rule **rule, struct sm_err *why)
{
	const struct kernel_rec *k = shim_kernel_facts(r);
	uint32_t sizes[RULE_MAX_PARAMS], i, n;
	struct select_launch sl = { .kernel = r ? r->name : "?", .param_sizes = sizes,
				    .params = l->params, .dynamic_smem = l->smem,
				    .setting = shim_setting };

	if (!k)
		return sm_err_set(why, -ENOENT, "the kernel is unknown to the driver");
	n = k->facts.n_params < RULE_MAX_PARAMS ? k->facts.n_params : RULE_MAX_PARAMS;
	for (i = 0; i < n; i++)
		sizes[i] = k->facts.params[i].size;
	sl.n_params = n;
	memcpy(sl.grid, l->grid, sizeof(sl.grid));
	memcpy(sl.block, l->block, sizeof(sl.block));
	return reroute_select(rules_builtin, rules_builtin_count, &sl, plan, rule, why);
}

/*
 * judge_launch - the over-limit candidate @l against the current device's
 * limits @t: log, refuse or reroute it.  Kept out of shim_launch_gate so the
 * common case prepares none of this state.
 */
static __attribute__((noinline)) int judge_launch(const struct shim_launch *l,
						   const struct target_limits *t)
{
	const struct shim_config *c = shim_config();
	struct kernel_rec *r = shim_kernel(l->f, 0, NULL, NULL);
	struct route_launch rl = { r ? r->static_smem : 0, l->smem, 0 };
	struct verdict v = { .event = "launch", .via = l->via, .static_smem = rl.static_smem,
			     .dynamic = l->smem, .launch = l };
	struct reroute_plan plan;
	const struct rule *rule = NULL;
	struct sm_err why = { "" };
	enum route_action a;
	int rc = 0, tried = 0;

	if (c->mode == SHIM_MODE_REROUTE &&
	    (uint64_t)rl.static_smem + l->smem > t->optin_per_block) {
		rc = plan_reroute(r, l, &plan, &rule, &why);
		rl.rule_matched = rc == 0;
		tried = 1;
	}
	a = route_launch_decide(&rl, t, c->mode);
	if (a == ROUTE_PASS)
		return 0;
	if (a == ROUTE_REROUTE) {
		CUresult cr = reroute_launch(&plan, l->stream, per_thread(l->via), &why);

		if (cr == CUDA_SUCCESS) {
			v.action = "reroute";
			v.rule = rule;
			v.rerouted_to = plan.kernel;
			report(r, &v, t);
			return SHIM_GATE_DONE;
		}
		/* What the target does with this launch: refuse it; why is in the reason. */
		v.action = "refuse";
		v.reason = why.msg;
		report(r, &v, t);
		return CUDA_ERROR_INVALID_VALUE;
	}
	v.action = route_action_name(a);
	v.reason = tried && rc != -ENOENT ? why.msg : NULL;
	report(r, &v, t);
	return a == ROUTE_REFUSE ? CUDA_ERROR_INVALID_VALUE : 0;
}

int shim_launch_gate(const struct shim_launch *l)
{
	const struct target_limits *t;

	if (shim_config()->mode == SHIM_MODE_OFF)
		return 0;
	t = shim_limits_floor();
	if (!t || (uint64_t)l->smem + MAX_STATIC_SMEM <= t->optin_per_block || !(t = shim_limits()))
		return 0;
	return judge_launch(l, t);
}

int shim_set_dynamic_gate(enum shim_hook_id via, void *handle, int is_kernel, int *value)
{
	const struct shim_config *c = shim_config();
	const struct target_limits *t;
	struct kernel_rec *r;
	struct verdict v = { .event = "set_attribute", .via = via, .dynamic = (uint64_t)*value };
	char why[128];

	if (c->mode == SHIM_MODE_OFF || !(t = shim_limits()))
		return 0;
	if (*value >= 0 && (uint64_t)*value + MAX_STATIC_SMEM <= t->optin_per_block)
		return 0;
	r = shim_kernel(handle, is_kernel, NULL, NULL);
	v.static_smem = r ? r->static_smem : 0;
	switch (route_set_max_dynamic(*value, v.static_smem, t, c->mode, c->advertise)) {
	case ROUTE_ATTR_PASS:
		return 0;
	case ROUTE_ATTR_LOG:
		v.action = "log";
		report(r, &v, t);
		return 0;
	case ROUTE_ATTR_ACCEPT:
		v.action = "accept";
		report(r, &v, t);
		reroute_prepare();
		*value = (int)(t->optin_per_block - v.static_smem);
		return 0;
	default:
		v.action = "refuse";
		if (c->mode == SHIM_MODE_REROUTE && c->advertise > t->optin_per_block) {
			snprintf(why, sizeof(why), "more than the %u B advertised for rerouting "
				 "(SM120SHIM_ADVERTISE)", c->advertise);
			v.reason = why;
		}
		report(r, &v, t);
		return CUDA_ERROR_INVALID_VALUE;
	}
}
