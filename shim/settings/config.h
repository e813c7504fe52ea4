/*
 * config.h - the shim's settings, read once from the environment on first use
 * (not in a constructor: other libraries' constructors may call the driver
 * before ours runs).  Immutable afterwards, so hooks read it without locks.
 *
 *   SM120SHIM_MODE       off | diagnose | enforce | reroute (default)
 *   SM120SHIM_TARGET     auto (default: the device's own limits) | sm120 |
 *                        sm121 | sm89 | sm86 | sm80 | sm90 | sm100 | BYTES
 *   SM120SHIM_ADVERTISE  opt-in bytes to report to frameworks in reroute mode
 *                        so that they load kernels a rule reroutes: auto
 *                        (default: the most any rule's tiles need), off, or
 *                        BYTES
 *   SM120SHIM_LOG        JSON-lines log file; %p is replaced by the pid
 *   SM120SHIM_<SETTING>  values rules need that a launch cannot show
 *                        (RULE_SETTINGS: KV_CACHE_DTYPE, PAGE_SIZE)
 * A bad value is reported once on stderr and the safe choice is taken:
 * diagnose for the mode (changes nothing), sm120 for the target.
 */
#ifndef SM120_SHIM_SETTINGS_CONFIG_H
#define SM120_SHIM_SETTINGS_CONFIG_H

#include <cuda.h>
#include <stdint.h>

#include "../../core/route/route.h"
#include "../../core/rules/rules.h"

struct shim_config {
	enum shim_mode mode;
	int target_auto;              /* limits come from the device */
	struct target_limits target;  /* valid unless target_auto (then see shim_limits) */
	uint32_t advertise;           /* 0: none */
	char log_path[4096];          /* "" if no log */
	char settings[RULE_NSETTINGS][64]; /* SM120SHIM_<SETTING>, by RULE_SETTINGS row; "" unset */
};

/* shim_config - the settings (read on the first call). */
const struct shim_config *shim_config(void);

/* shim_setting - the value of rule setting @name (SM120SHIM_<NAME>), or NULL if unset. */
const char *shim_setting(const char *name);

/*
 * shim_limits - the limits launches are judged against: the emulated profile,
 * or for auto the current device's own (every device is read once through
 * the driver).  NULL if auto and the driver cannot answer yet (before
 * cuInit): callers then pass the call through.
 */
const struct target_limits *shim_limits(void);

/* shim_limits_of - as shim_limits, for device @dev rather than the current one. */
const struct target_limits *shim_limits_of(CUdevice dev);

/*
 * shim_limits_floor - limits no device is below: the emulated profile, or for
 * auto the device with the least opt-in bytes.  For the launch fast path,
 * which must not ask the driver for the current device.
 */
const struct target_limits *shim_limits_floor(void);

#endif
