/* triton.c - see triton.h. */
#include "triton.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/route/admit.h"
#include "../../core/rules/compiled.h"
#include "../log/log.h"
#include "../settings/config.h"
#include "../state/facts.h"

/* The load in progress in this thread, between begin and end. */
static __thread struct {
	int active;
	uint64_t advertise;
	char name[256];
	char compiled[COMPILED_MAX];
} load;

uint64_t shim_triton_advertise(void)
{
	return load.active ? load.advertise : 0;
}

int shim_triton_loading(void)
{
	return load.active;
}

int sm120shim_triton_abi(void)
{
	return SHIM_TRITON_ABI;
}

/* report - the JSON event, and the stderr line once per kernel, of an over-limit load. */
static void report(const struct route_kernel *k, const struct route_admission *a,
		   const struct target_limits *t)
{
	const struct shim_config *c = shim_config();
	char key[320];
	struct shim_event e = {
		.event = "triton_load", .action = a->advertise ? "admit" : "refuse",
		.decision = a->advertise ? "admit" : "refuse", .kernel = k->name, .via = "python",
		.target = t->name, .mode = route_mode_name(c->mode), .origin = "triton",
		.static_smem = 0, .dynamic_smem = (int64_t)k->shared, .limit = t->optin_per_block,
		.kernels = -1, .regs = -1, .param_bytes = -1,
		.reason = a->why.msg[0] ? a->why.msg : NULL, .rule = a->rule ? a->rule->id : NULL,
	};

	e.block[0] = k->threads, e.block[1] = e.block[2] = 1;
	shim_log_event(&e);
	snprintf(key, sizeof(key), "triton_load|%s|%s", e.action, k->name);
	if (!shim_log_first(key))
		return;
	if (a->advertise)
		shim_log_warn("Triton kernel %s needs %llu B of shared memory per block, %s allows "
			      "%u B: loaded for rule %s, which reroutes its launches",
			      k->name, (unsigned long long)k->shared, t->name, t->optin_per_block,
			      a->rule->id);
	else
		shim_log_warn("Triton kernel %s needs %llu B of shared memory per block, %s allows "
			      "%u B: Triton raises OutOfResources, as on that GPU (an autotuner "
			      "moves on to its next configuration)%s%s", k->name,
			      (unsigned long long)k->shared, t->name, t->optin_per_block,
			      a->why.msg[0] ? "; not rerouted: " : "", a->why.msg);
}

unsigned long long sm120shim_triton_begin(const char *name, unsigned long long shared,
					  unsigned int threads, const char *compiled)
{
	const struct shim_config *c = shim_config();
	const struct target_limits *t;
	struct route_admission a;
	struct route_kernel k = { .name = name, .shared = shared, .threads = threads,
				  .sm = shim_device_sm() };

	load.active = 1;
	load.advertise = 0;
	shim_runtime_compiled(1);
	snprintf(load.name, sizeof(load.name), "%s", name ? name : "");
	load.compiled[0] = '\0';
	if (compiled && strlen(compiled) < sizeof(load.compiled))
		strcpy(load.compiled, compiled);
	k.compiled = load.compiled[0] ? load.compiled : NULL;
	if (!name || c->mode == SHIM_MODE_OFF || !(t = shim_limits()))
		return 0;
	route_admit(&k, t, c->mode, rules_builtin, rules_builtin_count, &a);
	if (!a.over)
		return 0;
	/* Over the limit, Triton is refused the load as on the card (enforce, and
	   reroute unless admitted), or loads it (diagnose, and a global advertise,
	   whose launches are judged). */
	if (c->mode == SHIM_MODE_ENFORCE ||
	    (c->mode == SHIM_MODE_REROUTE && c->advertise_kernel && !c->advertise))
		report(&k, &a, t);
	if (c->advertise_kernel)
		load.advertise = a.advertise;
	return load.advertise;
}

int sm120shim_triton_end(unsigned long long function)
{
	struct kernel_rec *r;
	char *copy, *expected = NULL;

	if (load.active && function && load.compiled[0] &&
	    (r = shim_kernel((void *)(uintptr_t)function, 0, NULL, NULL)) &&
	    (copy = strdup(load.compiled)) &&
	    !atomic_compare_exchange_strong(&r->compiled, &expected, copy))
		free(copy);
	load.active = 0;
	load.advertise = 0;
	shim_runtime_compiled(0);
	return 0;
}
