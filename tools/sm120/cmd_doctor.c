/*
 * cmd_doctor.c - `sm120 doctor`: is this machine ready for the shim?
 *
 * Prints the driver (path, CUDA version), every device with its
 * shared-memory limits, the settings the shim will use in this environment
 * after its fallbacks (target: SM120SHIM_TARGET or --target; mode, advertise,
 * trace, log, the rule settings), resolved by the shim's own parser
 * (core/settings) with each bad value named as the shim names it, whether
 * the log can be written, the shim library that `sm120 run` would preload and
 * whether it exports every hooked entry point, and for each row of the hook
 * table (core/hooks/hook_table.h) whether this driver resolves it through
 * dlsym and through cuGetProcAddress.  A hook the driver lacks is not an
 * error: the shim answers CUDA_ERROR_NOT_FOUND if it is called, as the driver
 * would have no such function.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/hooks/hook_table.h"
#include "../../core/route/route.h"
#include "../../core/rules/rules.h"
#include "../../core/settings/settings.h"
#include "commands.h"

typedef CUresult gpa_fn(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult count_fn(int *);
typedef CUresult attr_fn(int *, CUdevice_attribute, CUdevice);
typedef CUresult name_fn(char *, int, CUdevice);
typedef CUresult version_fn(int *);

static const struct hook_row {
	const char *name;
	int since;
} hooks[] = {
#define HOOK_ROW(sym, api, since) { #sym, since },
	SHIM_HOOKS(HOOK_ROW)
#undef HOOK_ROW
};

#define NHOOKS (sizeof(hooks) / sizeof(hooks[0]))

/*
 * gpa_name - the cuGetProcAddress request for exported symbol @sym: the base
 * name, with the per-thread-stream flag for a _ptsz symbol and the version
 * that maps cuGetProcAddress to its _v2.
 */
static void gpa_request(const char *sym, char *base, size_t n, cuuint64_t *flags, int *version)
{
	size_t len = strlen(sym);

	*flags = CU_GET_PROC_ADDRESS_DEFAULT;
	*version = 12000;
	snprintf(base, n, "%s", sym);
	if (len > 5 && strcmp(sym + len - 5, "_ptsz") == 0) {
		base[len - 5] = '\0';
		*flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	} else if (strcmp(sym, "cuGetProcAddress_v2") == 0) {
		base[strlen("cuGetProcAddress")] = '\0';
	} else if (strcmp(sym, "cuGetProcAddress") == 0) {
		*version = 11030;
	}
}

static void print_devices(void *drv)
{
	count_fn *count = (count_fn *)dlsym(drv, "cuDeviceGetCount");
	attr_fn *attr = (attr_fn *)dlsym(drv, "cuDeviceGetAttribute");
	name_fn *name = (name_fn *)dlsym(drv, "cuDeviceGetName");
	int n = 0, d;

	if (!count || !attr || count(&n) != CUDA_SUCCESS)
		n = 0;
	for (d = 0; d < n; d++) {
		char label[256] = "?";
		int v[6] = { 0 };
		static const CUdevice_attribute which[6] = {
			CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
			CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
			CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
			CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
			CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
		};
		int i;

		if (name)
			name(label, sizeof(label), d);
		for (i = 0; i < 6; i++)
			attr(&v[i], which[i], d);
		printf("device %-4d %s, sm_%d%d, %d SMs: opt-in %d B per block, %d B per SM, "
		       "%d B reserved per block\n", d, label, v[0], v[1], v[2], v[3], v[4], v[5]);
	}
	if (n == 0)
		printf("device      none visible (CUDA_VISIBLE_DEVICES, or no GPU)\n");
}

/* print_hooks - one row per hooked entry point; returns how many this driver lacks. */
static int print_hooks(void *drv)
{
	gpa_fn *gpa = (gpa_fn *)dlsym(drv, "cuGetProcAddress_v2");
	size_t i;
	int missing = 0;

	printf("\n%-56s %6s  %-6s %s\n", "HOOKED ENTRY POINT", "SINCE", "DLSYM",
	       "CUGETPROCADDRESS");
	for (i = 0; i < NHOOKS; i++) {
		char base[128];
		cuuint64_t flags;
		int version;
		void *p = NULL;
		CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		int by_dlsym = dlsym(drv, hooks[i].name) != NULL;
		int by_gpa;

		gpa_request(hooks[i].name, base, sizeof(base), &flags, &version);
		by_gpa = gpa && gpa(base, &p, version, flags, &st) == CUDA_SUCCESS &&
			 st == CU_GET_PROC_ADDRESS_SUCCESS && p;
		missing += !by_dlsym && !by_gpa;
		printf("%-56s %6d  %-6s %s\n", hooks[i].name, hooks[i].since, by_dlsym ? "yes" : "NO",
		       by_gpa ? "yes" : "NO");
	}
	return missing;
}

/* defines - does the library loaded as @lib itself define @sym (not a dependency)? */
static int defines(void *lib, struct link_map *map, const char *sym)
{
	void *p = dlsym(lib, sym);
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname && strcmp(info.dli_fname, map->l_name) == 0;
}

/*
 * check_python_hook - the Python hook beside the shim at @shim (python/ with
 * sitecustomize.py and sm120shim_hook.py: the shim puts that directory on
 * PYTHONPATH); 0 if both files are there.
 */
static int check_python_hook(const char *shim)
{
	static const char *const files[] = { "sitecustomize.py", "sm120shim_hook.py" };
	const char *slash = strrchr(shim, '/');
	char file[PATH_MAX + 64];
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(file, sizeof(file), "%.*s/python/%s", slash ? (int)(slash - shim) : 1,
			 slash ? shim : ".", files[i]);
		if (access(file, R_OK) != 0) {
			printf("python hook MISSING: %s: copy build/python/ beside the shim; without it "
			       "Triton kernels see the target's limit and none is rerouted\n", file);
			return -1;
		}
	}
	printf("python hook %.*s/python: put first on PYTHONPATH by the shim (advertise kernel), "
	       "so Triton loads past the limit only what a rule reroutes\n",
	       slash ? (int)(slash - shim) : 1, slash ? shim : ".");
	return 0;
}

/* check_shim - where the shim is, whether it exports every hook and has its Python hook; 0 if usable. */
static int check_shim(void)
{
	char path[PATH_MAX];
	struct sm_err err;
	struct link_map *map;
	void *shim;
	size_t i, exported = 0;
	int own_dlsym;

	if (tool_find_shim(path, &err) != 0) {
		printf("shim        NOT FOUND: %s\n", err.msg);
		return -1;
	}
	shim = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!shim) {
		printf("shim        %s cannot be loaded: %s\n", path, dlerror());
		return -1;
	}
	if (dlinfo(shim, RTLD_DI_LINKMAP, &map) != 0) {
		printf("shim        %s: cannot inspect it: %s\n", path, dlerror());
		return -1;
	}
	for (i = 0; i < NHOOKS; i++)
		exported += defines(shim, map, hooks[i].name);
	own_dlsym = defines(shim, map, "dlsym");
	printf("shim        %s: exports %zu of %zu hooked entry points%s\n", path, exported,
	       NHOOKS, own_dlsym ? " and dlsym" : ", but NOT dlsym");
	return exported == NHOOKS && own_dlsym && check_python_hook(path) == 0 ? 0 : -1;
}

/* The bad values settings_resolve reported, to print after the settings. */
struct bad_values {
	char line[SETTINGS_NVARS][768];
	int n;
};

static void collect(void *ctx, const char *var, const char *problem, const char *fallback)
{
	struct bad_values *b = ctx;

	(void)var;
	if (b->n < SETTINGS_NVARS)
		snprintf(b->line[b->n++], sizeof(b->line[0]), "%s; %s", problem, fallback);
}

/* origin - how a setting's value came about: " (default)", "", or that its value was bad. */
static const char *origin(const struct settings *s, enum settings_var v, char *buf, size_t n)
{
	char var[64];

	if (s->fallback & (1u << v)) {
		if (v >= SETTINGS_RULE0)
			settings_rule_var((int)(v - SETTINGS_RULE0), var, sizeof(var));
		snprintf(buf, n, " (%s is NOT VALID, see below)",
			 v < SETTINGS_RULE0 ? settings_var_name(v) : var);
		return buf;
	}
	return s->given & (1u << v) ? "" : " (default)";
}

/*
 * print_settings - what the shim will use in this environment (@env), every
 * fallback applied, as the shim computes it; then each bad value, worded as
 * the shim's stderr line.  Returns 0, or -1 if a value is bad, the target
 * cannot be resolved or the log cannot be written.
 */
static int print_settings(const struct settings_env *env)
{
	static struct settings s;
	static struct bad_values bad;
	struct target_limits t;
	struct sm_err err;
	char buf[128];
	int i, rc = 0;

	settings_resolve(env, (uint32_t)rules_max_dynamic(rules_builtin, rules_builtin_count),
			 (int)getpid(), &s, collect, &bad);
	if (tool_target(s.target_auto ? "auto" : env->target, &t, &err) == 0)
		printf("target      %s: opt-in %u B per block, %u B per SM, %u B reserved per "
		       "block%s\n", t.name, t.optin_per_block, t.per_sm, t.reserved_per_block,
		       origin(&s, SETTINGS_TARGET, buf, sizeof(buf)));
	else
		printf("target      %s: %s%s\n", s.target_auto ? "auto" : env->target, err.msg,
		       origin(&s, SETTINGS_TARGET, buf, sizeof(buf))), rc = -1;
	if (s.mode_lowered)
		printf("mode        diagnose (not %s: SM120SHIM_TARGET is NOT VALID, see below)\n",
		       env->mode && *env->mode ? env->mode : "reroute");
	else
		printf("mode        %s%s\n", route_mode_name(s.mode),
		       origin(&s, SETTINGS_MODE, buf, sizeof(buf)));
	if (s.advertise)
		printf("advertise   %u B%s, reported as opt-in per block in reroute mode to every "
		       "caller (Triton then loads kernels no rule reroutes, and their launches are "
		       "refused where the card would raise OutOfResources)%s\n",
		       s.advertise, s.advertise_auto ? ", the most a rule reroutes" : "",
		       origin(&s, SETTINGS_ADVERTISE, buf, sizeof(buf)));
	else if (s.advertise_kernel)
		printf("advertise   kernel: frameworks see the target's own limit; Triton, through "
		       "the Python hook, sees a kernel's need while it loads a kernel a rule "
		       "reroutes%s\n", origin(&s, SETTINGS_ADVERTISE, buf, sizeof(buf)));
	else
		printf("advertise   off: frameworks see the target's own limit%s\n",
		       origin(&s, SETTINGS_ADVERTISE, buf, sizeof(buf)));
	printf("trace       %s%s\n", s.trace ? "on" : "off",
	       origin(&s, SETTINGS_TRACE, buf, sizeof(buf)));
	printf("occupancy   %s%s\n", !s.emulate_occupancy ? "off" :
	       s.target_auto || s.mode == SHIM_MODE_OFF ? "on, but nothing is emulated: no padding" :
	       "on: dynamic shared memory is padded so that each GPU keeps no more blocks per SM "
	       "than the target", origin(&s, SETTINGS_OCCUPANCY, buf, sizeof(buf)));
	if (!s.log_path[0])
		printf("log         none%s\n", origin(&s, SETTINGS_LOG, buf, sizeof(buf)));
	else if (settings_log_check(s.log_path, &err) == 0)
		printf("log         %s%s\n", env->log,
		       strstr(env->log, "%p") ? " (one file per process: %p is the pid)" : "");
	else
		printf("log         %s CANNOT BE WRITTEN (%s): the shim will log to stderr only\n",
		       env->log, err.msg), rc = -1;
	for (i = 0; i < RULE_NSETTINGS; i++) {
		if (s.rule[i][0])
			printf("setting     %s=%s\n", rule_setting_names[i], s.rule[i]);
		else
			printf("setting     %s unset%s\n", rule_setting_names[i],
			       origin(&s, (enum settings_var)(SETTINGS_RULE0 + i), buf, sizeof(buf)));
	}
	for (i = 0; i < bad.n; i++)
		printf("NOT VALID   %s\n", bad.line[i]);
	return bad.n || rc ? -1 : 0;
}

int cmd_doctor(int argc, char **argv)
{
	struct settings_env env;
	struct sm_err err;
	version_fn *version;
	void *drv;
	int v = 0, rc = 0, missing;
	Dl_info info;

	settings_env_read(&env, getenv);
	if (argc == 3 && strcmp(argv[1], "--target") == 0) {
		env.target = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: sm120 doctor [--target T]\n"
				"  checks the driver, the devices, the settings the shim will use\n"
				"  (SM120SHIM_*; --target T stands for SM120SHIM_TARGET) and the shim\n"
				"exit: 0 ready, 1 something is missing or a setting is not valid\n"
				"      (named in the output)\n");
		return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
	}
	drv = tool_driver(&err);
	if (!drv) {
		printf("driver      NOT USABLE: %s\n", err.msg);
		rc = 1;
	} else {
		version = (version_fn *)dlsym(drv, "cuDriverGetVersion");
		if (version)
			version(&v);
		printf("driver      %s, CUDA %d.%d\n",
		       dladdr(dlsym(drv, "cuInit"), &info) && info.dli_fname ? info.dli_fname :
									    "libcuda.so.1",
		       v / 1000, v % 1000 / 10);
		print_devices(drv);
	}
	if (print_settings(&env) != 0)
		rc = 1;
	if (check_shim() != 0)
		rc = 1;
	if (drv) {
		missing = print_hooks(drv);
		printf("\n%zu hooked entry points, %d not in this driver%s\n", NHOOKS, missing,
		       missing ? " (calls to those get CUDA_ERROR_NOT_FOUND from the shim, as "
				 "they would not exist without it)" : "");
	}
	return rc;
}
