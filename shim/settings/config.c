/* config.c - see config.h. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../log/log.h"
#include "../../core/rules/rules.h"
#include "../state/facts.h"
#include "../driver/hooks.h"

static struct shim_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

/* warn - one bad setting, one stderr line: what is wrong, then what is done instead. */
static void warn(void *ctx, const char *var, const char *problem, const char *fallback)
{
	(void)ctx;
	(void)var;
	shim_log_warn("%s; %s", problem, fallback);
}

static void cfg_init(void)
{
	struct settings_env env;
	static struct settings s; /* 4 KiB of path: not on a hook's stack */

	settings_env_read(&env, getenv);
	settings_resolve(&env, (uint32_t)rules_max_dynamic(rules_builtin, rules_builtin_count),
			 (int)getpid(), &s, warn, NULL);
	cfg.mode = s.mode;
	cfg.target_auto = s.target_auto;
	cfg.target = s.target;
	cfg.advertise = s.advertise;
	cfg.advertise_kernel = s.advertise_kernel;
	cfg.trace = s.trace;
	cfg.emulate_occupancy = s.emulate_occupancy;
	memcpy(cfg.log_path, s.log_path, sizeof(cfg.log_path));
	memcpy(cfg.settings, s.rule, sizeof(cfg.settings));
	shim_log_setup(cfg.log_path, cfg.target_auto ? "device's" : cfg.target.name,
		       route_mode_name(cfg.mode));
}

const struct shim_config *shim_config(void)
{
	pthread_once(&cfg_once, cfg_init);
	return &cfg;
}

const char *shim_setting(const char *name)
{
	const struct shim_config *c = shim_config();
	int i;

	for (i = 0; i < RULE_NSETTINGS; i++)
		if (strcmp(rule_setting_names[i], name) == 0)
			return c->settings[i][0] ? c->settings[i] : NULL;
	return NULL;
}

/* Target auto: every device's limits, read once the driver can answer. */
#define MAX_DEVICES 64
static struct target_limits device_limits[MAX_DEVICES];
static struct target_limits device_floor; /* the device with the least opt-in bytes */
static int n_devices;
static atomic_int device_state; /* 0 unread, 1 read, -1 being read */

typedef CUresult device_count_fn(int *);

struct device_query {
	shim_fn_cuDeviceGetAttribute *get;
	CUdevice dev;
};

static int device_attr(void *ctx, int attr, int *value)
{
	const struct device_query *q = ctx;

	return q->get(value, (CUdevice_attribute)attr, q->dev) != CUDA_SUCCESS;
}

/* read_devices - fill the table; 0, or -1 if the driver cannot answer yet (before cuInit). */
static int read_devices(void)
{
	device_count_fn *count = shim_call(SHIM_CALL_cuDeviceGetCount);
	struct device_query q = { shim_real(SHIM_HOOK_cuDeviceGetAttribute), 0 };
	int n = 1, d;

	if (!q.get || (count && (count(&n) != CUDA_SUCCESS || n < 1)))
		return -1;
	n = n < MAX_DEVICES ? n : MAX_DEVICES;
	for (d = 0; d < n; d++) {
		q.dev = d;
		if (target_from_device(device_attr, &q, &device_limits[d], NULL) != 0)
			return -1;
		if (d == 0 || device_limits[d].optin_per_block < device_floor.optin_per_block)
			device_floor = device_limits[d];
	}
	n_devices = n;
	return 0;
}

/* devices_ready - the table is filled (reading it now if nobody else is). */
static int devices_ready(void)
{
	int expected = 0;

	if (atomic_load_explicit(&device_state, memory_order_acquire) == 1)
		return 1;
	if (!atomic_compare_exchange_strong(&device_state, &expected, -1))
		return 0; /* another thread is reading it: pass this call through */
	expected = read_devices() == 0;
	atomic_store_explicit(&device_state, expected ? 1 : 0, memory_order_release);
	return expected;
}

const struct target_limits *shim_limits_floor(void)
{
	const struct shim_config *c = shim_config();

	if (!c->target_auto)
		return &c->target;
	return devices_ready() ? &device_floor : NULL;
}

const struct target_limits *shim_limits_of(CUdevice dev)
{
	const struct shim_config *c = shim_config();

	if (!c->target_auto)
		return &c->target;
	if (!devices_ready())
		return NULL;
	return dev >= 0 && dev < n_devices ? &device_limits[dev] : &device_floor;
}

const struct target_limits *shim_limits(void)
{
	const struct shim_config *c = shim_config();

	return c->target_auto ? shim_limits_of(shim_current_device()) : &c->target;
}
