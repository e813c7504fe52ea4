/*
 * target.h - shared-memory limits of the GPUs the shim can emulate or check.
 *
 * One table (target.c) holds every named profile.  `sm120 scan --target`, the
 * shim's SM120SHIM_TARGET and the route decision all read limits from a
 * struct target_limits filled here, so a limit is written down exactly once.
 */
#ifndef SM120_CORE_LIMITS_TARGET_H
#define SM120_CORE_LIMITS_TARGET_H

#include <stdint.h>

#include "../common/err.h"

struct target_limits {
	char name[32];             /* "sm120", "auto (sm_90)", "232448 B" */
	int sm;                    /* compute capability * 10 (120), 0 if unknown */
	uint32_t optin_per_block;  /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97) */
	uint32_t per_sm;           /* ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR (81) */
	uint32_t reserved_per_block; /* ..._RESERVED_SHARED_MEMORY_PER_BLOCK (111) */
	uint32_t default_per_block;  /* ..._MAX_SHARED_MEMORY_PER_BLOCK (8), without opt-in */
};

/* The CUDA device attributes the limits correspond to (cuda.h values). */
enum target_attr {
	TARGET_ATTR_PER_BLOCK = 8,
	TARGET_ATTR_PER_SM = 81,
	TARGET_ATTR_OPTIN_PER_BLOCK = 97,
	TARGET_ATTR_RESERVED_PER_BLOCK = 111,
};

/*
 * target_parse - fill @out from a profile name ("sm120", "sm86", "sm89", ...)
 * or a byte count ("232448": opt-in bytes per block).  "auto" is not handled
 * here: it needs a device (see target_from_device).  Returns 0, or -EINVAL with
 * @err listing the accepted names.
 */
int target_parse(const char *spec, struct target_limits *out, struct sm_err *err);

/*
 * target_from_device - fill @out from a real device's attributes.
 * @get_attr returns 0 and stores the value of a CUDA device attribute, or
 * non-zero on failure (typically a wrapper around cuDeviceGetAttribute).
 * Returns 0, or -ENODEV with @err naming the attribute that failed.
 */
int target_from_device(int (*get_attr)(void *ctx, int attr, int *value), void *ctx,
		       struct target_limits *out, struct sm_err *err);

enum target_fit {
	TARGET_FITS = 0,        /* static + dynamic <= opt-in per block */
	TARGET_FITS_STATIC,     /* dynamic unknown (set at launch); static alone fits */
	TARGET_TOO_LARGE,       /* static + dynamic > opt-in per block */
};

/*
 * target_fit - does a block with @static_smem declared bytes and
 * @dynamic_smem dynamic bytes (-1: unknown) fit @t?  The opt-in limit already
 * excludes the reserved KiB (attr 81 = attr 97 + attr 111), so the reserved
 * bytes are not added here.
 */
enum target_fit target_fit(const struct target_limits *t, uint32_t static_smem,
			   int64_t dynamic_smem);

/* target_names - the accepted profile names, comma-separated, for messages. */
const char *target_names(void);

#endif
