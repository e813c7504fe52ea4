/* settings.c - see settings.h. */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/*
 * What each rule setting accepts: a list of words, or an integer range.  The
 * ranges are the adapters' own (core/adapters: fused_moe.c setting_int,
 * vllm_mla_decode.c pages_of), so a value accepted here is one they read.
 */
static const struct rule_value_spec {
	const char *name;
	const char *words;          /* NULL: an integer in [min, max] */
	long min, max;
	const char *what;
} rule_specs[] = {
	{ "kv_cache_dtype", "bf16 fp8_e4m3", 0, 0, "bf16 or fp8_e4m3 (SGLang's --kv-cache-dtype)" },
	{ "page_size", NULL, 1, 65536, "a page size in tokens, 1..65536 (vLLM's --block-size)" },
	{ "top_k", NULL, 1, 1 << 20,
	  "a number of experts per token, 1..1048576 (config.json num_experts_per_tok)" },
	{ "hidden_size", NULL, 1, 1 << 20, "a hidden size, 1..1048576 (config.json hidden_size)" },
};
_Static_assert(sizeof(rule_specs) / sizeof(rule_specs[0]) == RULE_NSETTINGS,
	       "one rule_specs row per RULE_SETTINGS row");
_Static_assert(SETTINGS_NVARS <= 32, "settings.given and .fallback hold a bit per variable");

static const char *const var_names[SETTINGS_RULE0] = {
	"SM120SHIM_MODE", "SM120SHIM_TARGET", "SM120SHIM_ADVERTISE", "SM120SHIM_TRACE",
	"SM120SHIM_LOG", "SM120SHIM_EMULATE_OCCUPANCY",
};

const char *settings_var_name(enum settings_var v)
{
	return (unsigned)v < SETTINGS_RULE0 ? var_names[v] : NULL;
}

const char *settings_accepted(enum settings_var v)
{
	switch (v) {
	case SETTINGS_MODE:
		return "off, diagnose, enforce or reroute";
	case SETTINGS_TARGET:
		return "auto, sm120, sm121, sm89, sm86, sm80, sm90, sm100, or a byte count "
		       "1024..16777216";
	case SETTINGS_ADVERTISE:
		return "kernel, auto, off or a byte count up to 16777216";
	case SETTINGS_TRACE:
	case SETTINGS_OCCUPANCY:
		return "1, 0, true, false, yes, no, on or off";
	case SETTINGS_LOG:
		return "a file path (%p: the pid) shorter than 4096 bytes";
	default:
		if ((unsigned)v - SETTINGS_RULE0 < RULE_NSETTINGS)
			return rule_specs[v - SETTINGS_RULE0].what;
		return "?";
	}
}

int settings_bool_parse(const char *s)
{
	static const char *const on[] = { "1", "true", "yes", "on" };
	static const char *const off[] = { "0", "false", "no", "off" };
	size_t i;

	for (i = 0; s && i < sizeof(on) / sizeof(on[0]); i++) {
		if (strcasecmp(s, on[i]) == 0)
			return 1;
		if (strcasecmp(s, off[i]) == 0)
			return 0;
	}
	return -1;
}

/* parse_count - @s as decimal digits only (no sign, no space) up to @max; 0, or -EINVAL. */
static int parse_count(const char *s, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (max - (unsigned long)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	*out = v;
	return 0;
}

int settings_advertise_parse(const char *s, uint32_t advertise_auto, uint32_t *out)
{
	unsigned long v;

	if (s && strcmp(s, "kernel") == 0) {
		*out = 0;
		return 0;
	}
	if (s && strcmp(s, "auto") == 0) {
		*out = advertise_auto;
		return 0;
	}
	if (s && strcmp(s, "off") == 0) {
		*out = 0;
		return 0;
	}
	if (parse_count(s, SETTINGS_ADVERTISE_MAX, &v) != 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int settings_rule_check(int row, const char *value, struct sm_err *err)
{
	const struct rule_value_spec *spec;
	unsigned long v;
	const char *w;
	size_t len;

	if (row < 0 || row >= RULE_NSETTINGS)
		return sm_err_set(err, -EINVAL, "no rule setting %d", row);
	spec = &rule_specs[row];
	if (spec->words) {
		len = strlen(value);
		for (w = spec->words; *w; w += strcspn(w, " "), w += *w == ' ')
			if (strcspn(w, " ") == len && strncmp(w, value, len) == 0)
				return 0;
	} else if (parse_count(value, (unsigned long)spec->max, &v) == 0 &&
		   v >= (unsigned long)spec->min) {
		return 0;
	}
	return sm_err_set(err, -EINVAL, "%s takes %s, not '%.80s'", spec->name, spec->what, value);
}

void settings_rule_var(int row, char *out, size_t n)
{
	const char *name = row >= 0 && row < RULE_NSETTINGS ? rule_setting_names[row] : "?";
	size_t o = (size_t)snprintf(out, n, "SM120SHIM_");

	for (; *name && o + 1 < n; name++)
		out[o++] = (char)toupper((unsigned char)*name);
	if (o < n)
		out[o] = '\0';
}

void settings_env_read(struct settings_env *env, char *(*get)(const char *name))
{
	char var[64];
	int i;

	env->mode = get("SM120SHIM_MODE");
	env->target = get("SM120SHIM_TARGET");
	env->advertise = get("SM120SHIM_ADVERTISE");
	env->trace = get("SM120SHIM_TRACE");
	env->log = get("SM120SHIM_LOG");
	env->occupancy = get("SM120SHIM_EMULATE_OCCUPANCY");
	for (i = 0; i < RULE_NSETTINGS; i++) {
		settings_rule_var(i, var, sizeof(var));
		env->rule[i] = get(var);
	}
}

int settings_log_expand(const char *pattern, int pid, char *out, size_t n)
{
	size_t o = 0;
	int k;

	for (; *pattern; pattern++) {
		if (pattern[0] == '%' && pattern[1] == 'p') {
			k = snprintf(out + o, n - o, "%d", pid);
			if (k < 0 || (size_t)k >= n - o)
				goto too_long;
			o += (size_t)k;
			pattern++;
		} else {
			if (o + 1 >= n)
				goto too_long;
			out[o++] = *pattern;
		}
	}
	out[o] = '\0';
	return 0;
too_long:
	out[0] = '\0';
	return -ENAMETOOLONG;
}

int settings_log_check(const char *path, struct sm_err *err)
{
	const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	int fd, created = 0;

	fd = open(path, flags);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, flags | O_CREAT | O_EXCL, 0644);
		created = fd >= 0;
	}
	if (fd < 0) {
		if (errno == ELOOP)
			return sm_err_set(err, -ELOOP, "%s is a symbolic link, which the shim never "
					  "writes through", path);
		return sm_err_set(err, -errno, "%s: %s%s", path, strerror(errno),
				  errno == ENOENT ? " (its directory does not exist)" : "");
	}
	close(fd);
	if (created)
		unlink(path);
	return 0;
}

/* Reporting one bad value: "<VAR>='<value>' is not <accepted>", then the fallback. */
struct reporter {
	settings_warn_fn *warn;
	void *ctx;
	struct settings *out;
};

static void report(struct reporter *r, enum settings_var v, const char *var, const char *value,
		   const char *accepted, const char *hint, const char *fallback)
{
	char problem[512];

	r->out->fallback |= 1u << v;
	if (!r->warn)
		return;
	snprintf(problem, sizeof(problem), "%s='%.80s%s' is not %s%s", var, value,
		 strlen(value) > 80 ? "..." : "", accepted, hint ? hint : "");
	r->warn(r->ctx, var, problem, fallback);
}

static int given(const char *s)
{
	return s && *s;
}

/* target_hint - " (did you mean sm90?)" when @spec lowercased without '_' or '-' is a profile. */
static void target_hint(const char *spec, char *out, size_t n)
{
	struct target_limits t;
	char name[32];
	size_t o = 0;

	out[0] = '\0';
	for (; *spec && o + 1 < sizeof(name); spec++)
		if (*spec != '_' && *spec != '-' && *spec != ' ')
			name[o++] = (char)tolower((unsigned char)*spec);
	if (*spec)
		return;
	name[o] = '\0';
	if (name[0] >= 'a' && name[0] <= 'z' && target_parse(name, &t, NULL) == 0)
		snprintf(out, n, " (did you mean %s?)", name);
}

static void resolve_target(const struct settings_env *env, struct settings *s, struct reporter *r)
{
	char hint[64], fallback[160];

	s->target_auto = 1;
	if (!given(env->target) || strcmp(env->target, "auto") == 0)
		return;
	if (target_parse(env->target, &s->target, NULL) == 0) {
		s->target_auto = 0;
		return;
	}
	/* Limits nobody asked for: enforce or reroute against them could refuse or
	 * reroute what runs without the shim; diagnose only logs. */
	s->mode_lowered = s->mode == SHIM_MODE_ENFORCE || s->mode == SHIM_MODE_REROUTE;
	if (s->mode_lowered)
		snprintf(fallback, sizeof(fallback), "using auto (each GPU's own limits) and mode "
			 "diagnose (changes nothing) instead of %s", route_mode_name(s->mode));
	else
		snprintf(fallback, sizeof(fallback), "using auto (each GPU's own limits)");
	if (s->mode_lowered)
		s->mode = SHIM_MODE_DIAGNOSE;
	target_hint(env->target, hint, sizeof(hint));
	report(r, SETTINGS_TARGET, "SM120SHIM_TARGET", env->target,
	       settings_accepted(SETTINGS_TARGET), hint, fallback);
}

static void resolve_rules(const struct settings_env *env, struct settings *s, struct reporter *r)
{
	char var[64], fallback[200];
	struct sm_err err;
	int i;

	for (i = 0; i < RULE_NSETTINGS; i++) {
		const char *v = env->rule[i];

		s->rule[i][0] = '\0';
		if (!given(v))
			continue;
		s->given |= 1u << (SETTINGS_RULE0 + i);
		settings_rule_var(i, var, sizeof(var));
		snprintf(fallback, sizeof(fallback), "taken as unset: launches that need %s are "
			 "refused, not rerouted", rule_setting_names[i]);
		if (strlen(v) >= sizeof(s->rule[i]) || settings_rule_check(i, v, &err) != 0)
			report(r, (enum settings_var)(SETTINGS_RULE0 + i), var, v,
			       rule_specs[i].what, NULL, fallback);
		else
			strcpy(s->rule[i], v);
	}
}

void settings_resolve(const struct settings_env *env, uint32_t advertise_auto, int pid,
		      struct settings *out, settings_warn_fn *warn, void *ctx)
{
	struct reporter r = { warn, ctx, out };
	int m;

	memset(out, 0, sizeof(*out));
	out->given = (given(env->mode) << SETTINGS_MODE) | (given(env->target) << SETTINGS_TARGET) |
		     (given(env->advertise) << SETTINGS_ADVERTISE) |
		     (given(env->trace) << SETTINGS_TRACE) | (given(env->log) << SETTINGS_LOG) |
		     (given(env->occupancy) << SETTINGS_OCCUPANCY);

	out->mode = SHIM_MODE_REROUTE;
	if (given(env->mode)) {
		m = route_mode_parse(env->mode);
		if (m < 0)
			report(&r, SETTINGS_MODE, "SM120SHIM_MODE", env->mode,
			       settings_accepted(SETTINGS_MODE), NULL,
			       "using diagnose (changes nothing)");
		out->mode = m < 0 ? SHIM_MODE_DIAGNOSE : (enum shim_mode)m;
	}
	resolve_target(env, out, &r);

	out->advertise_kernel = 1;
	if (given(env->advertise)) {
		out->advertise_auto = strcmp(env->advertise, "auto") == 0;
		out->advertise_kernel = strcmp(env->advertise, "kernel") == 0;
		if (settings_advertise_parse(env->advertise, advertise_auto, &out->advertise) != 0) {
			out->advertise = 0;
			report(&r, SETTINGS_ADVERTISE, "SM120SHIM_ADVERTISE", env->advertise,
			       settings_accepted(SETTINGS_ADVERTISE), NULL,
			       "using off (frameworks are told the target's own limit)");
		}
	}

	if (given(env->trace)) {
		out->trace = settings_bool_parse(env->trace);
		if (out->trace < 0) {
			out->trace = 0;
			report(&r, SETTINGS_TRACE, "SM120SHIM_TRACE", env->trace,
			       settings_accepted(SETTINGS_TRACE), NULL, "using off (no trace)");
		}
	}

	if (given(env->occupancy)) {
		out->emulate_occupancy = settings_bool_parse(env->occupancy);
		if (out->emulate_occupancy < 0) {
			out->emulate_occupancy = 0;
			report(&r, SETTINGS_OCCUPANCY, "SM120SHIM_EMULATE_OCCUPANCY", env->occupancy,
			       settings_accepted(SETTINGS_OCCUPANCY), NULL,
			       "using off (launches keep their own dynamic shared memory)");
		}
	}

	if (given(env->log) &&
	    settings_log_expand(env->log, pid, out->log_path, sizeof(out->log_path)) != 0)
		report(&r, SETTINGS_LOG, "SM120SHIM_LOG", env->log, settings_accepted(SETTINGS_LOG),
		       NULL, "writing no log file (stderr only)");

	resolve_rules(env, out, &r);
}
