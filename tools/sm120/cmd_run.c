/*
 * cmd_run.c - `sm120 run`: run a command with the shim preloaded.
 *
 * The options become the shim's SM120SHIM_* variables, checked here before
 * the command starts (the shim itself can only fall back to a safe default
 * and warn): each option's value, then every SM120SHIM_* value the command
 * will see (the options' and those already in the environment), through the
 * shim's own parser (core/settings), and whether the log can be written.
 * The shim's absolute path goes first in LD_PRELOAD, and the command replaces
 * this process, so its exit status is the command's.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../../core/route/route.h"
#include "../../core/rules/rules.h"
#include "../../core/settings/settings.h"
#include "commands.h"

#define SHIM_NAME "libsm120shim.so"

static const char *usage_text =
	"usage: sm120 run [--mode M] [--target T] [--log PATH] [--advertise A] [--trace]\n"
	"                 [--set NAME=VALUE]... [--model DIR] -- CMD [ARGS...]\n"
	"\n"
	"Runs CMD with the shim preloaded (LD_PRELOAD, first); children inherit it.\n"
	"  --mode M       off, diagnose, enforce or reroute (SM120SHIM_MODE; default reroute)\n"
	"  --target T     auto (the GPU's own limits), sm120, sm121, sm89, sm86, sm80, sm90,\n"
	"                 sm100, or opt-in bytes such as 232448 (SM120SHIM_TARGET)\n"
	"  --log PATH     JSON-lines event log (SM120SHIM_LOG); %p expands to the pid, so\n"
	"                 /tmp/sm120.%p.jsonl gives one file per process (without %p the\n"
	"                 processes append to one file); a relative PATH is made absolute;\n"
	"                 its directory must exist.  Summarise with 'sm120 report PATH...'\n"
	"  --advertise A  kernel (per kernel, through the Python hook: the default),\n"
	"                 auto, off or opt-in bytes to report to every caller\n"
	"                 (SM120SHIM_ADVERTISE)\n"
	"  --trace        one stderr line per intercepted call (SM120SHIM_TRACE=1)\n"
	"  --set N=V      a value rules need that a launch cannot show (SM120SHIM_<N>):\n"
	"                 kv_cache_dtype=bf16|fp8_e4m3 (SGLang --kv-cache-dtype),\n"
	"                 page_size=N (vLLM --block-size), top_k=N and hidden_size=N\n"
	"                 (the model's; fused MoE); may be repeated\n"
	"  --model DIR    set top_k and hidden_size from DIR/config.json (or a\n"
	"                 config.json path): num_experts_per_tok and hidden_size, also\n"
	"                 inside text_config; --set wins\n"
	"Options not given keep the environment's SM120SHIM_* values.  Every value is\n"
	"checked before CMD starts, those from the environment too.  The shim is\n"
	"$SM120SHIM_LIB, else " SHIM_NAME " next to the sm120 program.\n"
	"exit: CMD's status; 2 usage error, a bad setting, a log that cannot be\n"
	"written or no shim; 127 CMD cannot be run\n";

/* @path made absolute against the current directory, in @out of @n bytes. */
static int absolute_path(char *out, size_t n, const char *path)
{
	char cwd[PATH_MAX];

	if (path[0] == '/')
		return snprintf(out, n, "%s", path) < (int)n ? 0 : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	return snprintf(out, n, "%s/%s", cwd, path) < (int)n ? 0 : -ENAMETOOLONG;
}

/* 0 if @path is a readable regular file, else -errno. */
static int readable_file(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0 || access(path, R_OK) != 0)
		return -errno;
	return S_ISREG(st.st_mode) ? 0 : -EISDIR;
}

int tool_find_shim(char *out, struct sm_err *err)
{
	const char *lib = getenv("SM120SHIM_LIB");
	char exe[PATH_MAX], *slash;
	ssize_t n;
	int rc;

	if (lib && *lib) {
		rc = realpath(lib, out) ? readable_file(out) : -errno;
		if (rc != 0)
			return sm_err_set(err, rc, "SM120SHIM_LIB=%s: %s; point it at %s", lib,
					  strerror(-rc), SHIM_NAME);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return sm_err_set(err, -errno, "cannot find the sm120 program (/proc/self/exe: "
				  "%s); set SM120SHIM_LIB=/path/to/%s", strerror(errno), SHIM_NAME);
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	if (snprintf(out, PATH_MAX, "%s/%s", exe, SHIM_NAME) >= PATH_MAX)
		return sm_err_set(err, -ENAMETOOLONG, "%s: path too long", exe);
	rc = readable_file(out);
	if (rc != 0)
		return sm_err_set(err, rc, "no shim at %s (%s): set SM120SHIM_LIB=/path/to/%s, "
				  "or build it with 'make'", out, strerror(-rc), SHIM_NAME);
	return 0;
}

/* "@shim:@old" (just @shim when @old is empty), malloc'ed; NULL without memory. */
static char *preload_value(const char *shim, const char *old)
{
	size_t n = strlen(shim) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(n);

	if (v && old && *old)
		snprintf(v, n, "%s:%s", shim, old);
	else if (v)
		snprintf(v, n, "%s", shim);
	return v;
}

/*
 * set_setting - --set NAME=VALUE: SM120SHIM_<NAME> for a rule setting
 * (RULE_SETTINGS), with a VALUE the setting accepts.  0, or non-zero after
 * printing what is accepted.
 */
static int set_setting(const char *arg, int given[RULE_NSETTINGS])
{
	const char *eq = strchr(arg, '=');
	int row = eq && eq[1] ? rule_setting_index(arg, (size_t)(eq - arg)) : -1;
	struct sm_err err;
	char var[64];
	size_t i;

	if (row >= 0 && settings_rule_check(row, eq + 1, &err) != 0) {
		fprintf(stderr, "sm120 run: --set %s\n", err.msg);
		return -1;
	}
	if (row >= 0) {
		settings_rule_var(row, var, sizeof(var));
		given[row] = 1;
		return setenv(var, eq + 1, 1);
	}
	fprintf(stderr, "sm120 run: --set takes NAME=VALUE with NAME one of");
	for (i = 0; i < RULE_NSETTINGS; i++)
		fprintf(stderr, " %s", rule_setting_names[i]);
	fprintf(stderr, ", not '%s'\n", arg);
	return -1;
}

/* read_text - the whole of @path (at most 1 MiB) as a string to free, or NULL with errno set. */
static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = f ? malloc((1u << 20) + 1) : NULL;
	size_t n;

	if (!text) {
		if (f)
			fclose(f);
		return NULL;
	}
	n = fread(text, 1, 1u << 20, f);
	fclose(f);
	if (n == 1u << 20) {
		free(text);
		errno = EFBIG;
		return NULL;
	}
	text[n] = '\0';
	return text;
}

/* model_int - @key of config.json's top level, else of its text_config (Kimi K2.5); -1 if absent. */
static long model_int(const cJSON *root, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");

	if (!cJSON_IsNumber(v) && cJSON_IsObject(text))
		v = cJSON_GetObjectItemCaseSensitive(text, key);
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 1e6 ? (long)v->valuedouble : -1;
}

/* arg_value - the value of option @name in @argv ("--name V" or "--name=V"), or NULL. */
static const char *arg_value(char **argv, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; argv[i]; i++) {
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
		if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=')
			return argv[i] + n + 1;
	}
	return NULL;
}

/*
 * fused_shared_experts - how many shared experts SGLang adds to the routed
 * ones of each token when it runs @argv on the model of @root (config.json),
 * which raises the top_k compiled into the gate/up fused_moe_kernel by as
 * many.  SGLang 0.5.8-0.5.23 fuse (determine_num_fused_shared_experts in
 * models/glm4_moe.py and deepseek_v2.py) unless --disable-shared-experts-
 * fusion is given or expert parallelism or DeepEP is on: Glm4MoeForCausalLM
 * with n_shared_experts >= 1; DeepseekV3ForCausalLM with 256 routed experts
 * and 1 shared (DeepSeek-V3/R1 itself; Kimi K2's 384 are not fused).  0 for
 * any other command or model.
 */
static long fused_shared_experts(const cJSON *root, char **argv)
{
	const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "architectures"), 0);
	const char *name = cJSON_GetStringValue(arch), *ep = arg_value(argv, "--ep-size");
	const char *a2a = arg_value(argv, "--moe-a2a-backend");
	long shared = model_int(root, "n_shared_experts"), routed = model_int(root, "n_routed_experts");
	int i, sglang = 0;

	for (i = 0; argv[i]; i++)
		sglang |= strstr(argv[i], "sglang") != NULL;
	if (!sglang || !name || shared < 1)
		return 0;
	if (!ep)
		ep = arg_value(argv, "--expert-parallel-size");
	for (i = 0; argv[i]; i++)
		if (strcmp(argv[i], "--disable-shared-experts-fusion") == 0 ||
		    strcmp(argv[i], "--enable-deepep-moe") == 0)
			return 0;
	if ((ep && strtol(ep, NULL, 10) > 1) || (a2a && strcmp(a2a, "none") != 0))
		return 0;
	if (strcmp(name, "Glm4MoeForCausalLM") == 0)
		return shared;
	if (strcmp(name, "DeepseekV3ForCausalLM") == 0 && routed == 256 && shared == 1)
		return 1;
	return 0;
}

/*
 * set_model - --model DIR: SM120SHIM_TOP_K and SM120SHIM_HIDDEN_SIZE from
 * DIR/config.json (or the file DIR), except those --set gave.  top_k is the
 * one the gate/up launch compiles in: num_experts_per_tok, plus the shared
 * experts SGLang fuses into the routed ones when it runs @argv
 * (fused_shared_experts; said on stderr).  0, or 2 after naming the file and
 * the field that is missing.
 */
static int set_model(const char *dir, const int given[RULE_NSETTINGS], char **argv)
{
	static const struct {
		const char *setting, *key, *var;
	} fields[] = {
		{ "top_k", "num_experts_per_tok", "SM120SHIM_TOP_K" },
		{ "hidden_size", "hidden_size", "SM120SHIM_HIDDEN_SIZE" },
	};
	char path[PATH_MAX], num[32];
	struct stat st;
	cJSON *root;
	char *text;
	size_t i, j;
	int rc = 0;

	snprintf(path, sizeof(path), "%s%s", dir,
		 stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? "/config.json" : "");
	text = read_text(path);
	if (!text) {
		fprintf(stderr, "sm120 run: --model: cannot read %s: %s\n", path, strerror(errno));
		return 2;
	}
	root = cJSON_Parse(text);
	free(text);
	if (!root) {
		fprintf(stderr, "sm120 run: --model: %s is not JSON\n", path);
		return 2;
	}
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]) && !rc; i++) {
		long v = model_int(root, fields[i].key);

		for (j = 0; j < RULE_NSETTINGS && strcmp(rule_setting_names[j], fields[i].setting) != 0; j++)
			;
		if (j < RULE_NSETTINGS && given[j])
			continue;
		if (v < 0) {
			fprintf(stderr, "sm120 run: --model: %s has no %s (nor text_config.%s); give it "
				"with --set %s=N\n", path, fields[i].key, fields[i].key, fields[i].setting);
			rc = 2;
			break;
		}
		if (strcmp(fields[i].setting, "top_k") == 0 && fused_shared_experts(root, argv)) {
			long fused = fused_shared_experts(root, argv);

			fprintf(stderr, "sm120 run: SGLang fuses %ld shared expert%s into the routed ones "
				"of this model, so its gate/up launch has top_k %ld (%ld routed + %ld); "
				"pass --disable-shared-experts-fusion to SGLang to keep %ld\n", fused,
				fused == 1 ? "" : "s", v + fused, v, fused, v);
			v += fused;
		}
		snprintf(num, sizeof(num), "%ld", v);
		if (setenv(fields[i].var, num, 1) != 0)
			rc = 2;
	}
	cJSON_Delete(root);
	return rc;
}

/*
 * sum_all_reduce_flag - SGLang's --enable-fused-moe-sum-all-reduce compiles
 * an atomic sum into the down launch that the launch does not show: a
 * rerouted down would write instead of add.  The index of the flag in
 * @argv, or -1.
 */
static int sum_all_reduce_flag(char **argv)
{
	int i;

	for (i = 0; argv[i]; i++)
		if (strcmp(argv[i], "--enable-fused-moe-sum-all-reduce") == 0)
			return i;
	return -1;
}

/* Print "sm120 run: <message>" and return the usage-error status. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("sm120 run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/* env_warn - one bad SM120SHIM_* value the command would see: named, and counted in *@ctx. */
static void env_warn(void *ctx, const char *var, const char *problem, const char *fallback)
{
	(void)var;
	fprintf(stderr, "sm120 run: %s; correct or unset it (the shim would only warn, %s)\n",
		problem, fallback);
	++*(int *)ctx;
}

/*
 * check_environment - the SM120SHIM_* values the command will see, resolved
 * by the shim's own parser, and its log opened as the shim will open it (the
 * command keeps this process's pid, so %p expands to the same file).  0, or
 * 2 after naming each bad value; @log_option: the log came from --log.
 */
static int check_environment(int log_option)
{
	struct settings_env env;
	static struct settings s;
	struct sm_err err;
	int bad = 0;

	settings_env_read(&env, getenv);
	settings_resolve(&env, 0, (int)getpid(), &s, env_warn, &bad);
	if (bad)
		return 2;
	if (s.log_path[0] && settings_log_check(s.log_path, &err) != 0)
		return fail("%s cannot be written: %s", log_option ? "--log" : "SM120SHIM_LOG",
			    err.msg);
	return 0;
}

/*
 * cmd_run - `sm120 run [OPTIONS] -- CMD [ARGS...]`: on success does not
 * return (CMD replaces the process); returns 2 on a usage error or when the
 * shim cannot be found, 127 when CMD cannot be run.
 */
int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "target", required_argument, NULL, 't' },
		{ "log", required_argument, NULL, 'l' },
		{ "advertise", required_argument, NULL, 'a' },
		{ "trace", no_argument, NULL, 'T' },
		{ "set", required_argument, NULL, 's' },
		{ "model", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mode = NULL, *target = NULL, *log = NULL, *advertise = NULL, *model = NULL;
	int given[RULE_NSETTINGS] = { 0 };
	char shim[PATH_MAX], log_abs[PATH_MAX], *preload;
	struct target_limits limits;
	struct sm_err err;
	uint32_t advertise_bytes;
	int c, rc, trace = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+m:t:l:a:Ts:M:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (set_setting(optarg, given) != 0)
				return 2;
			break;
		case 'M':
			model = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 't':
			target = optarg;
			break;
		case 'l':
			log = optarg;
			break;
		case 'a':
			advertise = optarg;
			break;
		case 'T':
			trace = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fputs("sm120 run: no command given\n", stderr);
		fputs(usage_text, stderr);
		return 2;
	}
	if (mode && route_mode_parse(mode) < 0)
		return fail("--mode takes off, diagnose, enforce or reroute, not '%s'", mode);
	if (target && strcmp(target, "auto") != 0 && target_parse(target, &limits, &err) != 0)
		return fail("--target: %s", err.msg);
	if (advertise && settings_advertise_parse(advertise, 0, &advertise_bytes) != 0)
		return fail("--advertise takes %s, not '%s'", settings_accepted(SETTINGS_ADVERTISE),
			    advertise);
	if (log && (!*log || absolute_path(log_abs, sizeof(log_abs), log) != 0))
		return fail("--log takes a file name such as /tmp/sm120.%%p.jsonl, not '%s'", log);
	if (model && set_model(model, given, argv + optind) != 0)
		return 2;
	if ((!mode || strcmp(mode, "reroute") == 0) && sum_all_reduce_flag(argv + optind) >= 0)
		return fail("%s passes --enable-fused-moe-sum-all-reduce: SGLang then compiles an "
			    "atomic sum into fused_moe_kernel that a launch does not show, so a "
			    "rerouted launch would not add; drop the flag or use --mode diagnose",
			    argv[optind]);
	if ((mode && setenv("SM120SHIM_MODE", mode, 1) != 0) ||
	    (target && setenv("SM120SHIM_TARGET", target, 1) != 0) ||
	    (log && setenv("SM120SHIM_LOG", log_abs, 1) != 0) ||
	    (advertise && setenv("SM120SHIM_ADVERTISE", advertise, 1) != 0) ||
	    (trace && setenv("SM120SHIM_TRACE", "1", 1) != 0))
		return fail("cannot set the environment: %s", strerror(errno));
	rc = check_environment(log != NULL);
	if (rc != 0)
		return rc;
	if (tool_find_shim(shim, &err) != 0)
		return fail("%s", err.msg);
	if (strpbrk(shim, ": "))
		return fail("the shim's path %s holds a ':' or a space, which LD_PRELOAD splits "
			    "on; set SM120SHIM_LIB to a copy elsewhere", shim);
	preload = preload_value(shim, getenv("LD_PRELOAD"));
	if (!preload || setenv("LD_PRELOAD", preload, 1) != 0) {
		free(preload);
		return fail("cannot set the environment: %s", strerror(errno));
	}
	free(preload);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "sm120 run: cannot run '%s': %s\n", argv[optind], strerror(errno));
	return 127;
}
