/*
 * settings.h - the shim's SM120SHIM_* settings, parsed.
 *
 * The shim (shim/settings/config.c) reads the environment once and resolves
 * it here; `sm120 doctor` resolves the same environment with the same code
 * to print what the shim will use, and `sm120 run` to refuse a bad value
 * before the command starts.  Everything but settings_log_check is pure: no
 * environment, no global state, no allocation.
 *
 * One rule for every bad value: it is never an error that stops the
 * process.  The safe choice is taken, the one that changes least of what the
 * process would do without the shim (never something stricter than what was
 * asked), and @warn gets one line naming the variable, the value, what is
 * accepted and the fallback:
 *
 *   SM120SHIM_MODE       -> diagnose (logs, changes nothing)
 *   SM120SHIM_TARGET     -> auto (each device's own limits), and the mode at
 *                           most diagnose: enforce or reroute against limits
 *                           that were not the ones asked for would refuse or
 *                           reroute launches the user never meant (a typo for
 *                           sm90 must not make a Hopper process fail)
 *   SM120SHIM_ADVERTISE  -> off (frameworks are told the target's own limit)
 *                           (default kernel: the target's own limit, and to
 *                           Triton, through the Python hook, a rule-covered
 *                           kernel's need while it loads)
 *   SM120SHIM_TRACE      -> off
 *   SM120SHIM_EMULATE_OCCUPANCY -> off (launches keep their own dynamic
 *                           shared memory)
 *   SM120SHIM_LOG        -> no log file (a path too long once %p is expanded)
 *   SM120SHIM_<SETTING>  -> unset: the launches a rule reroutes only with it
 *                           are refused as the target refuses them, never
 *                           rerouted on a value the adapter would misread
 * An empty value is the same as an unset one (the default).
 */
#ifndef SM120_CORE_SETTINGS_SETTINGS_H
#define SM120_CORE_SETTINGS_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../limits/target.h"
#include "../route/route.h"
#include "../rules/rules.h"

#define SETTINGS_ADVERTISE_MAX (16u << 20) /* bytes; what a byte-count target allows too */
#define SETTINGS_LOG_MAX 4096              /* the expanded SM120SHIM_LOG, NUL included */
#define SETTINGS_VALUE_MAX 64              /* a rule setting's value, NUL included */

/* The variables, one bit each in struct settings' given and fallback. */
enum settings_var {
	SETTINGS_MODE = 0,
	SETTINGS_TARGET,
	SETTINGS_ADVERTISE,
	SETTINGS_TRACE,
	SETTINGS_LOG,
	SETTINGS_OCCUPANCY,  /* SM120SHIM_EMULATE_OCCUPANCY */
	SETTINGS_RULE0,      /* + the RULE_SETTINGS row */
	SETTINGS_NVARS = SETTINGS_RULE0 + RULE_NSETTINGS
};

/* The raw values (NULL: unset), as the environment holds them. */
struct settings_env {
	const char *mode, *target, *advertise, *trace, *log, *occupancy;
	const char *rule[RULE_NSETTINGS];    /* SM120SHIM_<NAME>, by RULE_SETTINGS row */
};

/* What the shim uses, every fallback applied. */
struct settings {
	enum shim_mode mode;
	int target_auto;                     /* limits come from each device */
	struct target_limits target;         /* valid unless target_auto */
	uint32_t advertise;                  /* opt-in bytes reported to every caller in reroute
						mode; 0: none */
	int advertise_auto;                  /* advertise is the rules' most (SM120SHIM_ADVERTISE=auto) */
	int advertise_kernel;                /* per kernel, through the Python hook (the default) */
	int trace;                           /* one stderr line per hooked call */
	int emulate_occupancy;               /* pad dynamic shared memory so that the device
						keeps the target's blocks per SM */
	char log_path[SETTINGS_LOG_MAX];     /* %p expanded; "" for no log */
	char rule[RULE_NSETTINGS][SETTINGS_VALUE_MAX]; /* "" unset */
	uint32_t given;                      /* 1u << settings_var: a non-empty value was given */
	uint32_t fallback;                   /* 1u << settings_var: it was bad; the fallback is used */
	int mode_lowered;                    /* the mode is diagnose because the target was bad */
};

/*
 * settings_warn_fn - one bad value: @var ("SM120SHIM_TRACE"), @problem
 * ("SM120SHIM_TRACE='maybe' is not 1, 0, ...") and @fallback ("using off
 * (no trace)").  The shim prints "@problem; @fallback".
 */
typedef void settings_warn_fn(void *ctx, const char *var, const char *problem,
			      const char *fallback);

/*
 * settings_resolve - fill @out from @env: defaults for what is unset, the
 * fallbacks above for what is bad (each reported once through @warn, which
 * may be NULL).  @advertise_auto is what SM120SHIM_ADVERTISE=auto means (the
 * rules' rules_max_dynamic); @pid replaces %p in the log path.
 */
void settings_resolve(const struct settings_env *env, uint32_t advertise_auto, int pid,
		      struct settings *out, settings_warn_fn *warn, void *ctx);

/* settings_bool_parse - 1, 0, true, false, yes, no, on, off (any case): 1 or 0; -1 otherwise. */
int settings_bool_parse(const char *s);

/* settings_advertise_parse - kernel (0; see advertise_kernel), auto
 * (@advertise_auto), off (0) or bytes up to SETTINGS_ADVERTISE_MAX into
 * *@out; 0, or -EINVAL. */
int settings_advertise_parse(const char *s, uint32_t advertise_auto, uint32_t *out);

/*
 * settings_rule_check - is @value one that rule setting @row accepts
 * (kv_cache_dtype: bf16 or fp8_e4m3; page_size, top_k, hidden_size: a
 * positive integer in the range the adapters take)?  0, or -EINVAL with
 * @err saying "<name> takes <what is accepted>, not '<value>'".
 */
int settings_rule_check(int row, const char *value, struct sm_err *err);

/* settings_rule_var - "SM120SHIM_<NAME>" of rule setting @row into @out (@n bytes). */
void settings_rule_var(int row, char *out, size_t n);

/*
 * settings_env_read - every SM120SHIM_* variable's raw value into @env, as
 * @get (getenv, or a test's table) answers for each name.  Pure but for @get.
 */
void settings_env_read(struct settings_env *env, char *(*get)(const char *name));

/* settings_var_name - "SM120SHIM_MODE" ... for @v below SETTINGS_RULE0, else NULL. */
const char *settings_var_name(enum settings_var v);

/* settings_accepted - what @v accepts, for messages ("off, diagnose, enforce or reroute"). */
const char *settings_accepted(enum settings_var v);

/*
 * settings_log_expand - @pattern with every %p replaced by @pid into @out of
 * @n bytes; 0, or -ENAMETOOLONG (then @out is "").
 */
int settings_log_expand(const char *pattern, int pid, char *out, size_t n);

/*
 * settings_log_check - can the shim write the log @path (already expanded)?
 * Opens it as the shim does (append, never through a symlink); a file that
 * did not exist is created and removed again.  Not pure: it touches the file
 * system.  0, or -errno with @err naming the path and the reason
 * ("/x/log.jsonl: No such file or directory (its directory does not exist)").
 */
int settings_log_check(const char *path, struct sm_err *err);

#endif
