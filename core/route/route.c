/* route.c - the decisions of route.h; pure functions only. */
#include "route.h"

#include <errno.h>
#include <string.h>

static const char *const mode_names[] = {
	[SHIM_MODE_OFF] = "off",
	[SHIM_MODE_DIAGNOSE] = "diagnose",
	[SHIM_MODE_ENFORCE] = "enforce",
	[SHIM_MODE_REROUTE] = "reroute",
};

int route_mode_parse(const char *s)
{
	int i;

	for (i = 0; s && i < (int)(sizeof(mode_names) / sizeof(mode_names[0])); i++)
		if (strcmp(s, mode_names[i]) == 0)
			return i;
	return -1;
}

const char *route_mode_name(enum shim_mode m)
{
	return (unsigned)m < sizeof(mode_names) / sizeof(mode_names[0]) ? mode_names[m] : "?";
}

const char *route_action_name(enum route_action a)
{
	switch (a) {
	case ROUTE_PASS:
		return "pass";
	case ROUTE_LOG:
		return "log";
	case ROUTE_REFUSE:
		return "refuse";
	case ROUTE_REROUTE:
		return "reroute";
	case ROUTE_ACCEPT:
		return "accept";
	case ROUTE_LIBRARY:
		return "library";
	}
	return "?";
}

int route_emulates(enum shim_mode mode)
{
	return mode == SHIM_MODE_ENFORCE || mode == SHIM_MODE_REROUTE;
}

/* reroute_or_refuse - REROUTE with the plan one consistent reading gives, else REFUSE. */
static void reroute_or_refuse(const struct route_launch *l, const struct rule *rules,
			      uint32_t n_rules, struct route_decision *d)
{
	int rc;

	d->action = ROUTE_REFUSE;
	if (!l->sel.kernel) {
		sm_err_set(&d->why, -ENOENT, "the kernel is unknown to the driver");
		return;
	}
	rc = reroute_select(rules, n_rules, &l->sel, &d->plan, &d->rule, &d->why);
	if (rc == 0)
		d->action = ROUTE_REROUTE;
	else if (rc == -ENOENT)
		sm_err_clear(&d->why); /* no rule names it: nothing more to say */
}

/* a_tile_of - does a rule naming @kernel have a tile of exactly @dynamic bytes? */
static int a_tile_of(const struct rule *rules, uint32_t n, const char *kernel, uint64_t dynamic)
{
	uint32_t i;

	for (i = 0; kernel && i < n; i++)
		if (strcmp(rules[i].kernel, kernel) == 0 && rule_tile_for(&rules[i], dynamic))
			return 1;
	return 0;
}

/*
 * accept_or_refuse - an over-limit attribute set in REROUTE: accepted within
 * @advertise, or when it asks exactly the bytes of a rule's tile (a launch
 * of that size will be rerouted); refused otherwise, as the target does.
 */
static void accept_or_refuse(const struct route_launch *l, uint32_t advertise,
			     const struct rule *rules, uint32_t n_rules,
			     const struct target_limits *t, struct route_decision *d)
{
	uint64_t need = (uint64_t)l->attr_value + l->static_smem;

	if (need <= advertise || a_tile_of(rules, n_rules, l->sel.kernel, (uint64_t)l->attr_value)) {
		d->action = ROUTE_ACCEPT;
		return;
	}
	d->action = ROUTE_REFUSE;
	if (advertise > t->optin_per_block)
		sm_err_set(&d->why, -EINVAL, "more than the %u B advertised for rerouting "
			   "(SM120SHIM_ADVERTISE)", advertise);
}

int route_rule_names(const struct rule *rules, uint32_t n, const char *kernel)
{
	uint32_t i;

	for (i = 0; kernel && rules && i < n; i++)
		if (strcmp(rules[i].kernel, kernel) == 0)
			return 1;
	return 0;
}

void route_decide(const struct route_launch *l, const struct target_limits *t, enum shim_mode mode,
		  const struct rule *rules, uint32_t n_rules, uint32_t advertise,
		  struct route_decision *d)
{
	int attr = l->event == ROUTE_EVENT_SET_ATTRIBUTE;
	int64_t dynamic = attr ? l->attr_value : (int64_t)l->sel.dynamic_smem;

	d->action = ROUTE_PASS;
	d->rule = NULL;
	d->plan.kernel = NULL;
	sm_err_clear(&d->why);
	sm_err_clear(&d->evidence);
	if (mode == SHIM_MODE_OFF || dynamic < 0 ||
	    target_fit(t, l->static_smem, dynamic) != TARGET_TOO_LARGE)
		return;
	if (evidence_library(l->evidence, t, l->sel.kernel,
			     route_rule_names(rules, n_rules, l->sel.kernel), &d->evidence))
		d->action = ROUTE_LIBRARY;
	else if (mode == SHIM_MODE_DIAGNOSE)
		d->action = ROUTE_LOG;
	else if (mode != SHIM_MODE_REROUTE)
		d->action = ROUTE_REFUSE;
	else if (attr)
		accept_or_refuse(l, advertise, rules, n_rules, t, d);
	else
		reroute_or_refuse(l, rules, n_rules, d);
}

static int min_int(int a, uint32_t b)
{
	return (uint32_t)a < b ? a : (int)b;
}

int route_device_attr(int attr, int real, const struct target_limits *t, enum shim_mode mode,
		      uint32_t advertise)
{
	if (!route_emulates(mode) || real < 0)
		return real;
	switch (attr) {
	case TARGET_ATTR_OPTIN_PER_BLOCK:
		/* Advertising is reporting more than the card has: that is its point on a real
		   SM120, where Triton would otherwise refuse a kernel the shim reroutes. */
		if (mode == SHIM_MODE_REROUTE && advertise > t->optin_per_block)
			return (int)advertise;
		return min_int(real, t->optin_per_block);
	case TARGET_ATTR_PER_SM:
		return min_int(real, t->per_sm);
	case TARGET_ATTR_PER_BLOCK:
		return min_int(real, t->default_per_block);
	case TARGET_ATTR_RESERVED_PER_BLOCK:
		/* the target reserves what it reserves, even if the device reserves less */
		return (int)t->reserved_per_block;
	default:
		return real;
	}
}

int route_occupancy_blocks(int real, uint32_t static_smem, uint64_t dynamic_smem,
			   const struct target_limits *t, enum shim_mode mode)
{
	uint64_t block = (uint64_t)static_smem + dynamic_smem;
	uint64_t fit;

	if (!route_emulates(mode) || real < 0)
		return real;
	if (block > t->optin_per_block)
		return 0;
	if (block == 0)
		return real;
	fit = t->per_sm / (block + t->reserved_per_block);
	return (uint64_t)real < fit ? real : (int)fit;
}

uint64_t route_occupancy_dynamic(uint64_t real, int blocks, uint32_t static_smem,
				 const struct target_limits *t, enum shim_mode mode)
{
	uint64_t per_block, cap, optin_cap;

	if (!route_emulates(mode) || blocks <= 0)
		return real;
	if (static_smem >= t->optin_per_block)
		return 0;
	per_block = t->per_sm / (uint64_t)blocks;
	if (per_block < (uint64_t)t->reserved_per_block + static_smem)
		return 0;
	cap = per_block - t->reserved_per_block - static_smem;
	optin_cap = t->optin_per_block - static_smem;
	if (cap > optin_cap)
		cap = optin_cap;
	return real < cap ? real : cap;
}

int route_potential_block(int max_block, int warp, uint32_t static_smem,
			  struct route_block_probe (*probe)(void *ctx, int block_size), void *ctx,
			  const struct target_limits *t, enum shim_mode mode, int *block_size,
			  int *blocks)
{
	int size, best_threads = 0;

	*block_size = 0;
	*blocks = 0;
	if (warp <= 0)
		return -1;
	for (size = max_block / warp * warp; size > 0; size -= warp) {
		struct route_block_probe p = probe(ctx, size);
		int b;

		if (p.blocks < 0)
			return -1;
		b = route_occupancy_blocks(p.blocks, static_smem, p.dynamic_smem, t, mode);
		if ((int64_t)b * size > best_threads) {
			best_threads = b * size;
			*block_size = size;
			*blocks = b;
		}
	}
	return 0;
}
