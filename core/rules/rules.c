/* rules.c - see rules.h. */
#include "rules.h"

#include <string.h>

static const struct {
	const char *name;
	uint32_t size;
} types[] = {
	[RULE_PTR] = { "ptr", 8 }, [RULE_I64] = { "i64", 8 }, [RULE_I32] = { "i32", 4 },
	[RULE_FP32] = { "fp32", 4 }, [RULE_U1] = { "u1", 1 },
};

uint32_t rule_type_size(enum rule_type type)
{
	return (unsigned)type < sizeof(types) / sizeof(types[0]) ? types[type].size : 0;
}

int rule_type_parse(const char *s)
{
	size_t i;

	for (i = 0; s && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(s, types[i].name) == 0)
			return (int)i;
	return -1;
}

/* One search for rule_match: parameters from @i on against sizes from @j on. */
struct search {
	const struct rule *r;
	const uint32_t *sizes;
	uint32_t n;
	uint64_t *kept;
	int max;
	int found;
	int supported_only;   /* read unsupported parameters as dropped */
};

static void search(struct search *s, uint32_t i, uint32_t j, uint64_t mask)
{
	const struct rule_param *p;

	if (i == s->r->n_params) {
		if (j == s->n && s->found++ < s->max)
			s->kept[s->found - 1] = mask;
		return;
	}
	p = &s->r->params[i];
	if (p->drop != RULE_KEPT)
		search(s, i + 1, j, mask);
	if (p->drop != RULE_DROP_ALWAYS && !(s->supported_only && p->unsupported) && j < s->n && s->sizes[j] == rule_type_size((enum rule_type)p->type))
		search(s, i + 1, j + 1, mask | (1ull << i));
}

static int match(const struct rule *r, const uint32_t *sizes, uint32_t n, uint64_t *kept, int max,
		 int supported_only)
{
	struct search s = { r, sizes, n, kept, max, 0, supported_only };

	if (r->n_params > RULE_MAX_PARAMS || n > r->n_params)
		return 0;
	search(&s, 0, 0, 0);
	return s.found;
}

int rule_match(const struct rule *r, const uint32_t *sizes, uint32_t n, uint64_t *kept, int max)
{
	return match(r, sizes, n, kept, max, 0);
}

int rule_match_supported(const struct rule *r, const uint32_t *sizes, uint32_t n, uint64_t *kept,
			 int max)
{
	return match(r, sizes, n, kept, max, 1);
}

const struct rule_tile *rule_tile_for(const struct rule *r, uint64_t dynamic_smem)
{
	uint32_t i;

	for (i = 0; i < r->n_tiles; i++)
		if (r->tiles[i].dynamic_smem == dynamic_smem)
			return &r->tiles[i];
	return NULL;
}

int rule_value_of(const struct rule_value *values, uint32_t n, const char *name, double *out)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (strcmp(values[i].name, name) == 0) {
			*out = values[i].value;
			return 0;
		}
	return -1;
}

uint64_t rules_max_dynamic(const struct rule *rules, uint32_t n)
{
	uint64_t most = 0;
	uint32_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < rules[i].n_tiles; j++)
			if (rules[i].tiles[j].dynamic_smem > most)
				most = rules[i].tiles[j].dynamic_smem;
	return most;
}

const char *const rule_setting_names[RULE_NSETTINGS] = {
#define RULE_SETTING_NAME(name, values) #name,
	RULE_SETTINGS(RULE_SETTING_NAME)
#undef RULE_SETTING_NAME
};

int rule_setting_index(const char *name, size_t len)
{
	int i;

	for (i = 0; i < RULE_NSETTINGS; i++)
		if (strlen(rule_setting_names[i]) == len && strncmp(rule_setting_names[i], name, len) == 0)
			return i;
	return -1;
}
