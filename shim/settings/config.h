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
 *   SM120SHIM_TRACE      1/0, true/false, yes/no, on/off (any case): one
 *                        stderr line per hooked call (default off)
 *   SM120SHIM_LOG        JSON-lines log file; %p is replaced by the pid
 *   SM120SHIM_EMULATE_OCCUPANCY  1/0 ... (as TRACE): pad dynamic shared
 *                        memory so that the device keeps no more blocks per
 *                        SM than the emulated target (shim/gate/occupancy.h;
 *                        default off)
 *   SM120SHIM_<SETTING>  values rules need that a launch cannot show
 *                        (RULE_SETTINGS: KV_CACHE_DTYPE, PAGE_SIZE, TOP_K,
 *                        HIDDEN_SIZE), checked when read
 *
 * The values are parsed by core/settings (settings_resolve), the code
 * `sm120 doctor` and `sm120 run` use, so the tool shows and checks exactly
 * what the shim does.  A bad value never stops the process: it is named in
 * one stderr line (the variable, the value, what is accepted, the fallback)
 * and the safe choice is taken, never something stricter than what was
 * asked:
 *   - a bad mode: diagnose (changes nothing);
 *   - a bad target: auto, each device's own limits, and if the mode was
 *     enforce or reroute, diagnose.  The limits asked for are unknown, so
 *     emulating any other GPU, or rerouting and advertising against the
 *     device's own limits, could refuse launches the process makes without
 *     the shim (sm_90 meant on a Hopper card must not fail its launches);
 *     diagnose against the device's own limits logs what it can and changes
 *     nothing.  off stays off, diagnose stays diagnose;
 *   - a bad advertise: off (frameworks see the target's own limit);
 *   - a bad trace: off;
 *   - a bad emulate-occupancy: off;
 *   - a log path too long once %p is expanded: no log file;
 *   - a bad rule setting: unset, so the launches that need it are refused as
 *     the target refuses them instead of rerouted on a misread value.
 */
#ifndef SM120_SHIM_SETTINGS_CONFIG_H
#define SM120_SHIM_SETTINGS_CONFIG_H

#include <cuda.h>
#include <stdint.h>

#include "../../core/route/route.h"
#include "../../core/rules/rules.h"
#include "../../core/settings/settings.h"

struct shim_config {
	enum shim_mode mode;
	int target_auto;              /* limits come from the device */
	struct target_limits target;  /* valid unless target_auto (then see shim_limits) */
	uint32_t advertise;           /* reported to every caller; 0: none */
	int advertise_kernel;         /* per kernel, to the Python hook (shim/gate/triton.h) */
	int trace;                    /* SM120SHIM_TRACE: one stderr line per hooked call */
	int emulate_occupancy;        /* SM120SHIM_EMULATE_OCCUPANCY */
	char log_path[SETTINGS_LOG_MAX]; /* "" if no log */
	/* SM120SHIM_<SETTING>, by RULE_SETTINGS row; "" unset (or not valid) */
	char settings[RULE_NSETTINGS][SETTINGS_VALUE_MAX];
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
