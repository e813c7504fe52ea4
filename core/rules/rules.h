/*
 * rules.h - reroute rules as the shim holds them, and the pure functions that
 * match a launch against one.
 *
 * The rules are written as JSON in rules/ (schema: rules/README.md); the
 * build compiles them into a C table (`sm120 rules compile`), so the shim
 * parses nothing at run time.  Matching needs only what a launch shows: the
 * kernel name, the parameter sizes of its image, and the dynamic shared
 * memory.  Which parameters Triton dropped is worked out here; what their
 * values mean is the adapter's business (shim/reroute).
 */
#ifndef SM120_CORE_RULES_RULES_H
#define SM120_CORE_RULES_RULES_H

#include <stddef.h>
#include <stdint.h>

enum rule_type { RULE_PTR = 0, RULE_I64, RULE_I32, RULE_FP32, RULE_U1 };

enum rule_drop {
	RULE_KEPT = 0,       /* always present */
	RULE_DROP_NONE,      /* a pointer Triton drops when it is passed as None */
	RULE_DROP_ONE,       /* an int Triton drops when it equals 1 */
	RULE_DROP_ALWAYS,    /* an int the framework always passes as 1: never present */
};

struct rule_param {
	const char *name;
	uint8_t type;        /* enum rule_type */
	uint8_t drop;        /* enum rule_drop */
	uint8_t unsupported; /* the adapter refuses a launch that carries it */
};

struct rule_value {
	const char *name;
	double value;
};

/* A compiled-in configuration, told apart by its dynamic shared memory. */
struct rule_tile {
	uint64_t dynamic_smem;
	const struct rule_value *values;   /* BLOCK_M, BLOCK_N, num_warps, Lq, ... */
	uint32_t n_values;
};

/*
 * A compiled-in value a tile-generic rule takes from the kernel's compiled
 * facts (core/rules/compiled.h), and the values its bundled kernel computes
 * correctly: a whole number in [min, max], a multiple of multiple_of (1:
 * any), one of one_of[0..n_one_of) when that list is given, and a divisor of
 * the kernel's compiled value @divides when that is above 0 (NULL: no such
 * condition).  @why says why the bundled kernel needs it (for refusals).
 */
struct rule_bound {
	const char *name;
	int64_t min, max, multiple_of;
	const int64_t *one_of;
	uint32_t n_one_of;
	const char *divides;
	const char *why;
};

#define RULE_MAX_BOUNDS 16

/*
 * A rule's tile-generic entry (rules/README.md "generic"): with the kernel's
 * compiled facts, the rule reroutes any configuration whose bounds all hold,
 * whose block is num_warps * 32 threads and whose dynamic shared memory is
 * the one @smem_model (core/rules/generic.h) computes for it; its exact tiles
 * then serve only launches without facts.
 */
struct rule_generic {
	const char *smem_model;            /* a RULE_SMEM_MODELS name */
	const struct rule_bound *bounds;
	uint32_t n_bounds;                 /* at most RULE_MAX_BOUNDS */
};

struct rule {
	const char *id;
	const char *kernel;
	const char *adapter;
	const char *source;
	const struct rule_param *params;
	uint32_t n_params;                 /* at most RULE_MAX_PARAMS */
	const struct rule_tile *tiles;
	uint32_t n_tiles;
	const struct rule_value *values;
	uint32_t n_values;
	const char *const *settings;
	uint32_t n_settings;
	const struct rule_generic *generic; /* NULL: the exact tiles only */
	uint8_t needs_compiled_facts;      /* 1: reroutes only launches with compiled facts */
};

#define RULE_MAX_PARAMS 64

/* The deployment settings a rule may need, with the values each accepts (SM120SHIM_<NAME>). */
#define RULE_SETTINGS(X)                                                            \
	X(kv_cache_dtype, "bf16 fp8_e4m3")                                          \
	X(page_size, "tokens per KV page")                                          \
	X(top_k, "experts per token (config.json num_experts_per_tok)")            \
	X(hidden_size, "the model's hidden size (config.json hidden_size)")
#define RULE_SETTING_COUNT(name, values) +1
#define RULE_NSETTINGS (0 RULE_SETTINGS(RULE_SETTING_COUNT))

/* rule_setting_names - the RULE_SETTINGS names, by row ("kv_cache_dtype", ...). */
extern const char *const rule_setting_names[RULE_NSETTINGS];

/* rule_setting_index - the row of setting @name (exactly @len bytes), or -1. */
int rule_setting_index(const char *name, size_t len);

/* The rules compiled from the JSON files in rules/ (build/rules/rules_table.c). */
extern const struct rule rules_builtin[];
extern const uint32_t rules_builtin_count;

/* rule_type_size - bytes of a parameter of @type in the parameter block. */
uint32_t rule_type_size(enum rule_type type);

/* rule_type_parse - "ptr", "i64", "i32", "fp32", "u1"; -1 if unknown. */
int rule_type_parse(const char *s);

/*
 * rule_match - the ways @r's parameter list produces the observed parameter
 * sizes @sizes[0..n): each way is a mask of the rule's parameters that are
 * present (bit i = params[i]).  Stores up to @max masks in @kept and returns
 * how many ways there are (0: no match).  Pure.
 */
int rule_match(const struct rule *r, const uint32_t *sizes, uint32_t n, uint64_t *kept, int max);

/*
 * rule_match_supported - rule_match over the readings an adapter can take:
 * parameters marked unsupported are read as dropped.  The shim tries these
 * first; only when there are none does it look at the others, to say which
 * unsupported parameter the launch passes.  Pure.
 */
int rule_match_supported(const struct rule *r, const uint32_t *sizes, uint32_t n, uint64_t *kept,
			 int max);

/* rule_tile_for - @r's exact tile for a launch with @dynamic_smem bytes, or NULL. */
const struct rule_tile *rule_tile_for(const struct rule *r, uint64_t dynamic_smem);

/*
 * rules_max_dynamic - the most dynamic shared memory any exact tile of
 * @rules[0..n) reroutes: what `SM120SHIM_ADVERTISE=auto` reports, so that
 * frameworks load exactly the kernels a rule can take and no larger ones.
 * Generic entries are not counted: they need the compiled facts, which only
 * the Python hook gives, and that advertises per kernel instead.
 */
uint64_t rules_max_dynamic(const struct rule *rules, uint32_t n);

/* rule_value_of - @name in @values[0..n) into *@out; 0, or -1 if absent. */
int rule_value_of(const struct rule_value *values, uint32_t n, const char *name, double *out);

#endif
