/* config.c - see config.h. */
#include "config.h"

#include <ctype.h>
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

static void expand_pid(const char *in, char *out, size_t n)
{
	size_t o = 0;

	for (; *in && o + 1 < n; in++) {
		if (in[0] == '%' && in[1] == 'p') {
			o += (size_t)snprintf(out + o, n - o, "%d", (int)getpid());
			in++;
		} else {
			out[o++] = *in;
		}
	}
	out[o < n ? o : n - 1] = '\0';
}


/* read_settings - SM120SHIM_<NAME> of every rule setting, copied (too long: unset, and said). */
static void read_settings(void)
{
	char var[64];
	int i;

	for (i = 0; i < RULE_NSETTINGS; i++) {
		size_t o = (size_t)snprintf(var, sizeof(var), "SM120SHIM_"), k;
		const char *v;

		for (k = 0; rule_setting_names[i][k] && o + 1 < sizeof(var); k++)
			var[o++] = (char)toupper((unsigned char)rule_setting_names[i][k]);
		var[o] = '\0';
		v = getenv(var);
		if (v && strlen(v) >= sizeof(cfg.settings[i]))
			shim_log_warn("%s='%.40s...' is too long; taken as unset", var, v);
		else if (v)
			strcpy(cfg.settings[i], v);
	}
}

static void cfg_init(void)
{
	const char *mode = getenv("SM120SHIM_MODE");
	const char *target = getenv("SM120SHIM_TARGET");
	const char *adv = getenv("SM120SHIM_ADVERTISE");
	const char *log = getenv("SM120SHIM_LOG");
	struct sm_err err;
	int m;

	cfg.mode = SHIM_MODE_REROUTE;
	if (mode && *mode) {
		m = route_mode_parse(mode);
		if (m < 0) {
			shim_log_warn("SM120SHIM_MODE='%s' is not off, diagnose, enforce or reroute; "
				      "using diagnose (changes nothing)", mode);
			m = SHIM_MODE_DIAGNOSE;
		}
		cfg.mode = (enum shim_mode)m;
	}
	cfg.target_auto = !target || !*target || strcmp(target, "auto") == 0;
	if (!cfg.target_auto && target_parse(target, &cfg.target, &err) != 0) {
		shim_log_warn("SM120SHIM_TARGET: %s; using sm120", err.msg);
		target_parse("sm120", &cfg.target, NULL);
	}
	if (!adv || !*adv || strcmp(adv, "auto") == 0) {
		cfg.advertise = (uint32_t)rules_max_dynamic(rules_builtin, rules_builtin_count);
	} else if (strcmp(adv, "off") != 0) {
		char *end;
		unsigned long v = strtoul(adv, &end, 10);

		if (*end || v > (16ul << 20))
			shim_log_warn("SM120SHIM_ADVERTISE='%s' is not auto, off or a byte count; "
				      "advertising nothing", adv);
		else
			cfg.advertise = (uint32_t)v;
	}
	if (log && *log)
		expand_pid(log, cfg.log_path, sizeof(cfg.log_path));
	read_settings();
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
