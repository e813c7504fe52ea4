/* gate.c - see gate.h. */
#include "gate.h"

#include <string.h>

#include "../log/log.h"
#include "config.h"
#include "facts.h"

/* The most static shared memory any kernel can declare (ptxas limit). */
#define MAX_STATIC_SMEM 49152u

/* report - the stderr line once per kernel, the JSON event and the count. */
static void report(struct kernel_rec *r, const char *event, const char *action,
		   enum shim_hook_id via, uint32_t static_smem, uint64_t dynamic,
		   const struct target_limits *t, const unsigned int grid[3],
		   const unsigned int block[3])
{
	const struct shim_config *c = shim_config();
	const struct kernel_rec *k = shim_kernel_facts(r);
	const char *name = r ? r->name : "?";
	int refused = strcmp(action, "refuse") == 0;
	struct shim_event e = {
		.event = event, .action = action, .kernel = name, .via = shim_hook_table[via].name,
		.target = t->name, .mode = route_mode_name(c->mode), .static_smem = static_smem,
		.dynamic_smem = (int64_t)dynamic, .limit = t->optin_per_block, .kernels = -1,
		.regs = -1, .param_bytes = -1,
	};

	if (k) {
		e.origin = k->origin;
		e.regs = k->facts.regs;
		e.param_bytes = k->facts.n_params ? (int64_t)k->facts.param_bytes : -1;
		e.n_params = k->facts.n_params;
		e.params = k->facts.params;
	}
	if (grid) {
		memcpy(e.grid, grid, sizeof(e.grid));
		memcpy(e.block, block, sizeof(e.block));
	}
	shim_log_event(&e);
	shim_log_count(refused);
	if (!shim_log_first(name))
		return;
	shim_log_warn("kernel %s (from %s): %s %llu B of shared memory per block (%u static + "
		      "%llu dynamic, through %s); %s allows %u B: %s. %s",
		      name, k ? k->origin : "?", grid ? "a launch needs" : "asks to be allowed",
		      (unsigned long long)(static_smem + dynamic), static_smem,
		      (unsigned long long)dynamic, shim_hook_table[via].name, t->name,
		      t->optin_per_block,
		      refused ? "refused, as that GPU would (CUDA_ERROR_INVALID_VALUE)" :
				"that GPU would refuse it (launched unchanged: diagnose)",
		      refused ? "No reroute rule matches it: use a configuration with smaller "
				"tiles, or report the kernel so a rule can be written." :
				"Check with SM120SHIM_MODE=enforce before deploying.");
}

CUresult shim_launch_gate(enum shim_hook_id via, CUfunction f, unsigned int smem,
			  unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			  unsigned int by, unsigned int bz)
{
	const struct shim_config *c = shim_config();
	const struct target_limits *t;
	struct kernel_rec *r;
	struct route_launch l = { 0, smem, 0 };
	enum route_action a;

	if (c->mode == SHIM_MODE_OFF)
		return CUDA_SUCCESS;
	t = shim_limits_floor();
	if (!t || (uint64_t)smem + MAX_STATIC_SMEM <= t->optin_per_block || !(t = shim_limits()))
		return CUDA_SUCCESS;
	r = shim_kernel(f, 0, NULL, NULL);
	l.static_smem = r ? r->static_smem : 0;
	a = route_launch_decide(&l, t, c->mode);
	if (a == ROUTE_PASS)
		return CUDA_SUCCESS;
	{
		const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };

		report(r, "launch", route_action_name(a), via, l.static_smem, smem, t, grid, block);
	}
	return a == ROUTE_REFUSE ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

int shim_set_dynamic_gate(enum shim_hook_id via, void *handle, int is_kernel, int value)
{
	const struct shim_config *c = shim_config();
	const struct target_limits *t;
	struct kernel_rec *r;
	enum route_attr_action a;

	if (c->mode == SHIM_MODE_OFF || !(t = shim_limits()))
		return 0;
	if (value >= 0 && (uint64_t)value + MAX_STATIC_SMEM <= t->optin_per_block)
		return 0;
	r = shim_kernel(handle, is_kernel, NULL, NULL);
	a = route_set_max_dynamic(value, r ? r->static_smem : 0, t, c->mode, c->advertise);
	switch (a) {
	case ROUTE_ATTR_PASS:
		return 0;
	case ROUTE_ATTR_LOG:
		report(r, "set_attribute", "log", via, r ? r->static_smem : 0, (uint64_t)value, t,
		       NULL, NULL);
		return 0;
	case ROUTE_ATTR_ACCEPT:
		report(r, "set_attribute", "accept", via, r ? r->static_smem : 0, (uint64_t)value, t,
		       NULL, NULL);
		return SHIM_GATE_ACCEPT;
	default:
		report(r, "set_attribute", "refuse", via, r ? r->static_smem : 0, (uint64_t)value, t,
		       NULL, NULL);
		return CUDA_ERROR_INVALID_VALUE;
	}
}
