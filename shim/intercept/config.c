/* config.c - see config.h. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../log/log.h"
#include "hooks.h"

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
	if (adv && *adv && strcmp(adv, "auto") != 0 && strcmp(adv, "off") != 0) {
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
}

const struct shim_config *shim_config(void)
{
	pthread_once(&cfg_once, cfg_init);
	return &cfg;
}

/* Device 0's limits for target auto, read once the driver can answer. */
static struct target_limits device_limits;
static atomic_int device_state; /* 0 unread, 1 read, -1 being read */

static int device_attr(void *ctx, int attr, int *value)
{
	shim_fn_cuDeviceGetAttribute *get = ctx;

	return get(value, (CUdevice_attribute)attr, 0) != CUDA_SUCCESS;
}

const struct target_limits *shim_limits(void)
{
	const struct shim_config *c = shim_config();
	shim_fn_cuDeviceGetAttribute *get;
	int expected = 0;

	if (!c->target_auto)
		return &c->target;
	if (atomic_load_explicit(&device_state, memory_order_acquire) == 1)
		return &device_limits;
	if (!atomic_compare_exchange_strong(&device_state, &expected, -1))
		return NULL; /* another thread is reading it: pass this call through */
	get = (shim_fn_cuDeviceGetAttribute *)shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	if (get && target_from_device(device_attr, (void *)get, &device_limits, NULL) == 0) {
		atomic_store_explicit(&device_state, 1, memory_order_release);
		return &device_limits;
	}
	atomic_store_explicit(&device_state, 0, memory_order_release);
	return NULL;
}
