/* gate.c - see gate.h. */
#include "gate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../log/log.h"
#include "../reroute/reroute.h"
#include "../settings/config.h"
#include "../state/facts.h"
#include "occupancy.h"
#include "triton.h"

uint32_t shim_advertise(void)
{
	uint64_t window = shim_triton_advertise();

	return window ? (uint32_t)window : shim_config()->advertise;
}

/* What the shim did with one over-limit call, for report(). */
struct verdict {
	const char *event;           /* "launch", "set_attribute" */
	const char *action;          /* "log", "refuse", "accept", "reroute" */
	const char *decision;        /* route_decide's action (a reroute may fail to launch) */
	enum shim_hook_id via;
	uint32_t static_smem;
	uint64_t dynamic;
	const struct shim_launch *launch; /* NULL for attribute sets */
	const char *reason;          /* why a reroute did not happen, or NULL */
	const struct rule *rule;     /* the rule that rerouted it */
	const char *rerouted_to;     /* the bundled kernel */
	const struct route_evidence *evidence; /* what route_decide weighed */
	const char *found;           /* what it found in the evidence ("library: ..." or
					"judged: ..."), NULL when the target is not emulated */
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

/*
 * add_evidence - @v's evidence into @e's fields (@buf holds the formatted
 * parts), so that `sm120 route` can weigh it again.
 */
static void add_evidence(struct shim_event *e, const struct verdict *v, char buf[3][256])
{
	const struct route_evidence *ev = v->evidence;

	e->evidence = v->found;
	if (!v->found || !ev)
		return;
	if (ev->device_sm) {
		snprintf(buf[0], sizeof(buf[0]), "sm_%d", ev->device_sm);
		e->device = buf[0];
	}
	e->image = evidence_image_name(ev->image);
	if (ev->codes && ev->codes->n)
		e->image_codes = evidence_codes_format(ev->codes, buf[1], sizeof(buf[1]));
	if (ev->loader_codes && ev->loader_codes->n)
		e->loader_codes = evidence_codes_format(ev->loader_codes, buf[2], sizeof(buf[2]));
	e->image_file = ev->file;
	e->loader = ev->loader;
	e->runtime_compiled = ev->runtime_compiled;
}

/*
 * library_line - the stderr line of a library kernel, once per library (its
 * loader, else the object its image lies in): a process using cuBLAS or
 * NCCL has dozens of such kernels.
 */
static void library_line(const char *name, const char *origin, const struct verdict *v,
			 const struct target_limits *t)
{
	const struct route_evidence *ev = v->evidence;
	int by_loader = ev && ev->loader && (ev->image == EVIDENCE_IMAGE_CUBIN ||
					     strncmp(origin, "memory ", 7) == 0);
	const char *src = by_loader ? ev->loader : origin;
	const char *base = strrchr(src, '/');
	char key[320];
	int n;

	src = base ? base + 1 : src;
	n = (int)strcspn(src, "+");
	snprintf(key, sizeof(key), "library|%.*s", n, src);
	if (!shim_log_first(key))
		return;
	shim_log_warn("kernel %s (from %s): %s %llu B of shared memory per block; %s allows %u B: "
		      "passed unchanged, not counted as an %s failure (%s). Other kernels of %.*s "
		      "over the limit pass the same way, logged as \"library\" in SM120SHIM_LOG",
		      name, origin, v->launch ? "a launch needs" : "asks to be allowed",
		      (unsigned long long)(v->static_smem + v->dynamic), t->name,
		      t->optin_per_block, t->name, v->found, n, src);
}

/* report - the stderr line once per kernel, the JSON event and the count. */
static void report(struct kernel_rec *r, const struct verdict *v, const struct target_limits *t)
{
	const struct shim_config *c = shim_config();
	const struct kernel_rec *k = shim_kernel_facts(r);
	const char *name = r ? r->name : "?";
	int refused = strcmp(v->action, "refuse") == 0;
	const char *settings[RULE_NSETTINGS];
	char key[320], evidence[3][256];
	int i;
	struct shim_event e = {
		.event = v->event, .action = v->action, .decision = v->decision, .kernel = name,
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
	add_evidence(&e, v, evidence);
	if (v->launch) {
		memcpy(e.grid, v->launch->grid, sizeof(e.grid));
		memcpy(e.block, v->launch->block, sizeof(e.block));
		e.args = v->launch->params;
		for (i = 0; i < RULE_NSETTINGS; i++)
			settings[i] = c->settings[i];
		e.settings = settings;
		e.compiled = r ? atomic_load(&r->compiled) : NULL;
		e.sms = shim_device_sms();
	}
	shim_log_event(&e);
	if (strcmp(v->action, "library") == 0) {
		shim_log_count(SHIM_OUTCOME_LIBRARY);
		library_line(name, k ? k->origin : "?", v, t);
		return;
	}
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
 * gather - route_decide's view of launch @l of @r: the kernel's facts (name,
 * static bytes, parameter sizes into @sizes, the evidence of its image into
 * @ev) and what the hook received.
 */
static void gather(struct kernel_rec *r, const struct shim_launch *l, uint32_t *sizes,
		   struct route_evidence *ev, struct route_launch *rl)
{
	const struct kernel_rec *k = shim_kernel_facts(r);
	int emulated = !shim_config()->target_auto;
	uint32_t i, n = 0;

	memset(ev, 0, sizeof(*ev));
	if (emulated)
		shim_kernel_evidence(k, ev);
	if (k) {
		n = k->facts.n_params < RULE_MAX_PARAMS ? k->facts.n_params : RULE_MAX_PARAMS;
		for (i = 0; i < n; i++)
			sizes[i] = k->facts.params[i].size;
	}
	*rl = (struct route_launch){
		.event = ROUTE_EVENT_LAUNCH, .static_smem = r ? r->static_smem : 0,
		.sel = { .kernel = k ? r->name : NULL, .param_sizes = sizes, .n_params = n,
			 .params = l->params, .dynamic_smem = l->smem, .setting = shim_setting,
			 .compiled = r ? atomic_load(&r->compiled) : NULL, .sm = shim_device_sm(),
			 .sms = shim_device_sms() },
	};
	rl->evidence = emulated ? ev : NULL; /* auto: nothing is emulated, nothing to weigh */
	memcpy(rl->sel.grid, l->grid, sizeof(rl->sel.grid));
	memcpy(rl->sel.block, l->block, sizeof(rl->sel.block));
}

/*
 * judge_launch - the over-limit candidate @l against the current device's
 * limits @t: gather, decide, execute, log.  Kept out of shim_launch_gate so
 * the common case prepares none of this state.
 */
static __attribute__((noinline)) int judge_launch(const struct shim_launch *l,
						   const struct target_limits *t)
{
	const struct shim_config *c = shim_config();
	struct kernel_rec *r = shim_kernel(l->f, 0, NULL, NULL);
	uint32_t sizes[RULE_MAX_PARAMS];
	struct route_evidence ev;
	struct route_launch rl;
	struct route_decision d;
	struct verdict v = { .event = "launch", .via = l->via, .dynamic = l->smem, .launch = l,
			     .evidence = &ev };

	gather(r, l, sizes, &ev, &rl);
	route_decide(&rl, t, c->mode, rules_builtin, rules_builtin_count, shim_advertise(), &d);
	if (d.action == ROUTE_PASS)
		return 0;
	v.static_smem = rl.static_smem;
	v.decision = route_action_name(d.action);
	v.reason = d.why.msg[0] ? d.why.msg : NULL;
	v.found = d.evidence.msg[0] ? d.evidence.msg : NULL;
	if (d.action == ROUTE_REROUTE) {
		CUresult cr = reroute_launch(&d.plan, l->stream, per_thread(l->via),
					     shim_occupancy_bundled, &d.why);

		if (cr == CUDA_SUCCESS) {
			v.action = "reroute";
			v.rule = d.rule;
			v.rerouted_to = d.plan.kernel;
			report(r, &v, t);
			return SHIM_GATE_DONE;
		}
		/* What the target does with this launch: refuse it; why is in the reason. */
		d.action = ROUTE_REFUSE;
		v.reason = d.why.msg;
	}
	v.action = route_action_name(d.action);
	report(r, &v, t);
	return d.action == ROUTE_REFUSE ? CUDA_ERROR_INVALID_VALUE : 0;
}

int shim_launch_gate(const struct shim_launch *l)
{
	const struct target_limits *t;

	if (shim_config()->mode == SHIM_MODE_OFF)
		return 0;
	t = shim_limits_floor();
	if (!t || route_cannot_exceed(l->smem, t) || !(t = shim_limits()))
		return 0;
	return judge_launch(l, t);
}

int shim_set_dynamic_gate(enum shim_hook_id via, void *handle, int is_kernel, int *value)
{
	const struct shim_config *c = shim_config();
	const struct target_limits *t;
	struct kernel_rec *r;
	struct route_evidence ev = { 0 };
	struct route_launch rl = { .event = ROUTE_EVENT_SET_ATTRIBUTE, .attr_value = *value,
				   .evidence = &ev };
	struct route_decision d;
	struct verdict v = { .event = "set_attribute", .via = via, .dynamic = (uint64_t)*value,
			     .evidence = &ev };

	if (c->mode == SHIM_MODE_OFF || !(t = shim_limits()))
		return 0;
	if (*value >= 0 && route_cannot_exceed((uint64_t)*value, t))
		return 0;
	r = shim_kernel(handle, is_kernel, NULL, NULL);
	if (c->target_auto)
		rl.evidence = NULL; /* nothing is emulated */
	else
		shim_kernel_evidence(shim_kernel_facts(r), &ev);
	rl.static_smem = v.static_smem = r ? r->static_smem : 0;
	rl.sel.kernel = r ? r->name : NULL;
	route_decide(&rl, t, c->mode, rules_builtin, rules_builtin_count, shim_advertise(), &d);
	if (d.action == ROUTE_PASS)
		return 0;
	v.action = v.decision = route_action_name(d.action);
	v.reason = d.why.msg[0] ? d.why.msg : NULL;
	v.found = d.evidence.msg[0] ? d.evidence.msg : NULL;
	report(r, &v, t);
	if (d.action == ROUTE_ACCEPT) {
		reroute_prepare();
		*value = (int)(t->optin_per_block - v.static_smem);
	}
	return d.action == ROUTE_REFUSE ? CUDA_ERROR_INVALID_VALUE : 0;
}
