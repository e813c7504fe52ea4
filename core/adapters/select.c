/* select.c - see select.h. */
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../rules/generic.h"
#include "facts.h"

#define MAX_WAYS 16

/*
 * How far a launch got with the rules.  The reason reported is the one of the
 * furthest stage; among readings that got as far, the most literal one: the
 * fewest ints read as a compiled-in 1, then the most parameters present.
 */
enum stage {
	STAGE_NAME = 0, STAGE_TILE, STAGE_PARAMS, STAGE_SIGNATURE,
	STAGE_CONFIG,       /* the facts' reading is the rule's; their configuration is not */
	STAGE_SUPPORTED, STAGE_ADAPTER
};

struct progress {
	enum stage stage;
	int weight;
	struct sm_err why;
};

static int literalness(const struct rule *r, uint64_t way)
{
	int ints = 0;
	uint32_t i;

	for (i = 0; r && i < r->n_params; i++)
		ints += r->params[i].drop == RULE_DROP_ONE && ((way >> i) & 1);
	return ints * 128 + __builtin_popcountll(way);
}

static void note(struct progress *p, enum stage s, const struct rule *r, uint64_t way,
		 const struct sm_err *why)
{
	int weight = literalness(r, way);

	if (s > p->stage || (s == p->stage && weight > p->weight)) {
		p->stage = s;
		p->weight = weight;
		p->why = *why;
	}
}

/* sizes_text - "8,8,4" for messages. */
static void sizes_text(const struct select_launch *l, char *out, size_t n)
{
	size_t o = 0;
	uint32_t i;

	out[0] = '\0';
	for (i = 0; i < l->n_params && o + 12 < n; i++)
		o += (size_t)snprintf(out + o, n - o, "%s%u", i ? "," : "", l->param_sizes[i]);
}

/* unsupported_present - the first parameter of @way the adapter cannot take, or NULL. */
static const char *unsupported_present(const struct rule *r, uint64_t way)
{
	uint32_t i;

	for (i = 0; i < r->n_params; i++)
		if (r->params[i].unsupported && ((way >> i) & 1))
			return r->params[i].name;
	return NULL;
}

/*
 * read_facts - with the kernel's compiled facts there is one reading of @r,
 * the one they state; with a generic entry @r's tile is the one they give
 * (into @g, *@tile pointed at it); and every value of @r and the tile they
 * state must be @r's, and every other value they state one @r's adapter
 * answers for: 1 with ways[0], or 0 after noting why not.  Without a
 * generic entry *@tile is the exact tile of the launch (the caller found one).
 */
static int read_facts(const struct rule *r, const struct select_launch *l,
		      const struct rule_tile **tile, struct rule_generic_tile *g, uint64_t *ways,
		      struct progress *p)
{
	const struct rule_kernel k = { l->compiled, l->sm, l->block[0] * l->block[1] * l->block[2],
				       l->dynamic_smem };
	struct sm_err why;

	if (facts_reading(r, l->compiled, l->param_sizes, l->n_params, &ways[0], &why)) {
		note(p, STAGE_PARAMS, NULL, 0, &why);
		return 0;
	}
	if (r->generic) {
		if (rule_generic_tile(r, &k, g, &why) != 0) {
			note(p, STAGE_CONFIG, r, ways[0], &why);
			return 0;
		}
		*tile = &g->tile;
	}
	if (facts_values(r, *tile, l->compiled, &why) ||
	    facts_unaudited(r, *tile, adapter_known(r->adapter), l->compiled, &why)) {
		note(p, STAGE_ADAPTER, r, ways[0], &why);
		return 0;
	}
	return 1;
}

/* no_tile - note that @r has no exact tile of @l's shared memory. */
static void no_tile(const struct rule *r, const struct select_launch *l, struct progress *p)
{
	struct sm_err why;

	sm_err_set(&why, -EINVAL, "rule %s reroutes %s only at the shared-memory sizes of its "
		   "tiles, not %llu B%s", r->id, r->kernel, (unsigned long long)l->dynamic_smem,
		   r->generic ? " (at any other configuration only with the compiled facts of the "
		   "Python hook)" : "");
	note(p, STAGE_TILE, NULL, 0, &why);
}

/*
 * try_rule - every way @r reads @l (with compiled facts: the one they state);
 * counts consistent plans into @found/@plan.  A rule that needs compiled
 * facts refuses a launch without them that it would otherwise reroute.
 */
static void try_rule(const struct rule *r, const struct select_launch *l, struct progress *p,
		     struct reroute_plan *plan, const struct rule **chosen, int *found,
		     int *differ)
{
	struct adapter_input in = { .rule = r, .params = l->params, .dynamic_smem = l->dynamic_smem,
				    .setting = l->setting, .compiled = l->compiled, .sms = l->sms };
	adapter_fn *adapt = adapter_find(r->adapter);
	struct rule_generic_tile generic;
	uint64_t ways[MAX_WAYS];
	struct sm_err why;
	char sizes[256];
	int n, i, rc;

	memcpy(in.grid, l->grid, sizeof(in.grid));
	memcpy(in.block, l->block, sizeof(in.block));
	in.tile = rule_tile_for(r, l->dynamic_smem);
	if (l->compiled) {
		if (!in.tile && !r->generic) {
			no_tile(r, l, p);
			return;
		}
		n = read_facts(r, l, &in.tile, &generic, ways, p);
		if (n == 0)
			return;
	} else if (!in.tile) {
		no_tile(r, l, p);
		return;
	} else {
		n = rule_match_supported(r, l->param_sizes, l->n_params, ways, MAX_WAYS);
		if (n == 0)
			n = rule_match(r, l->param_sizes, l->n_params, ways, MAX_WAYS);
	}
	if (n == 0 || n > MAX_WAYS) {
		sizes_text(l, sizes, sizeof(sizes));
		sm_err_set(&why, -EINVAL, "%s has %u parameters (%s bytes), which %s %s", r->kernel,
			   l->n_params, sizes, n ? "too many readings of rule" : "fit no reading of rule",
			   r->id);
		note(p, STAGE_PARAMS, NULL, 0, &why);
		return;
	}
	for (i = 0; i < n; i++) {
		struct reroute_plan candidate = { 0 };
		const char *bad = unsupported_present(r, ways[i]);

		if (bad) {
			sm_err_set(&why, -EINVAL, "the launch passes %s, which rule %s cannot reroute",
				   bad, r->id);
			note(p, STAGE_SUPPORTED, r, ways[i], &why);
			continue;
		}
		if (!adapt) {
			sm_err_set(&why, -EINVAL, "rule %s names adapter %s, which this shim lacks",
				   r->id, r->adapter);
			note(p, STAGE_SUPPORTED, r, ways[i], &why);
			return;
		}
		in.kept = ways[i];
		sm_err_clear(&why);
		rc = adapt(&in, &candidate, &why);
		if (rc != 0) {
			if (!why.msg[0])
				sm_err_set(&why, -EINVAL, "adapter %s refused rule %s without a "
					   "reason", r->adapter, r->id);
			note(p, rc == -ENOENT ? STAGE_SIGNATURE : STAGE_ADAPTER, r, ways[i], &why);
			continue;
		}
		if (r->needs_compiled_facts && !l->compiled) {
			sm_err_set(&why, -EINVAL, "rule %s reroutes only with the kernel's compiled "
				   "facts (the Python hook beside the shim): without them the "
				   "element types of its pointers, which the launch does not show, "
				   "cannot be checked",
				   r->id);
			note(p, STAGE_ADAPTER, r, ways[i], &why);
			continue;
		}
		if (*found && memcmp(&candidate, plan, sizeof(candidate)) != 0)
			*differ = 1;
		if (!*found) {
			*plan = candidate;
			*chosen = r;
		}
		(*found)++;
	}
}

int reroute_select(const struct rule *rules, uint32_t n, const struct select_launch *l,
		   struct reroute_plan *plan, const struct rule **rule, struct sm_err *why)
{
	struct progress p = { STAGE_NAME, -1, { "" } };
	int found = 0, differ = 0, named = 0;
	uint32_t i;

	memset(plan, 0, sizeof(*plan));
	for (i = 0; i < n && !named; i++)
		named = strcmp(rules[i].kernel, l->kernel) == 0;
	if (!named)
		return sm_err_set(why, -ENOENT, "no reroute rule names %s", l->kernel);
	if (!l->params)
		return sm_err_set(why, -EINVAL, "the launch of %s passes its arguments through "
				  "'extra', which adapters cannot read", l->kernel);
	for (i = 0; i < n; i++)
		if (strcmp(rules[i].kernel, l->kernel) == 0)
			try_rule(&rules[i], l, &p, plan, rule, &found, &differ);
	if (found && !differ)
		return 0;
	if (differ)
		return sm_err_set(why, -EINVAL, "%d readings of the launch of %s are consistent and "
				  "disagree; refusing rather than guessing", found, l->kernel);
	*why = p.why;
	return -EINVAL;
}
