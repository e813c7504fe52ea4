/*
 * target.c - the table of shared-memory profiles.
 *
 * Values per architecture come from NVIDIA's arch traits (cudaDeviceProp /
 * cuDeviceGetAttribute 97, 81, 111, 8 per compute capability); the Hopper row
 * was measured on an H200 (sm_90).  For every cc >= 8.0 row,
 * per_sm = optin_per_block + reserved_per_block.
 */
#include "target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct target_limits profiles[] = {
	/* name      sm   opt-in/block  per SM  reserved  default/block */
	{ "sm120",  120, 101376, 102400, 1024, 49152 }, /* RTX 5090, RTX PRO 6000 */
	{ "sm121",  121, 101376, 102400, 1024, 49152 }, /* DGX Spark (GB10) */
	{ "sm89",    89, 101376, 102400, 1024, 49152 }, /* RTX 4090, L40S */
	{ "sm86",    86, 101376, 102400, 1024, 49152 }, /* RTX 3090, A10 */
	{ "sm80",    80, 166912, 167936, 1024, 49152 }, /* A100 */
	{ "sm90",    90, 232448, 233472, 1024, 49152 }, /* H100, H200 */
	{ "sm100",  100, 232448, 233472, 1024, 49152 }, /* B200, B300 */
};

#define NPROFILES (sizeof(profiles) / sizeof(profiles[0]))

const char *target_names(void)
{
	return "auto, sm120, sm121, sm89, sm86, sm80, sm90, sm100, or a byte count";
}

int target_parse(const char *spec, struct target_limits *out, struct sm_err *err)
{
	char *end;
	unsigned long bytes;
	size_t i;

	if (!spec || !*spec)
		return sm_err_set(err, -EINVAL, "empty target: use one of %s", target_names());
	for (i = 0; i < NPROFILES; i++) {
		if (strcmp(spec, profiles[i].name) == 0) {
			*out = profiles[i];
			return 0;
		}
	}
	errno = 0;
	bytes = strtoul(spec, &end, 10);
	if (errno || *end || spec[0] == '-' || bytes < 1024 || bytes > 16u * 1024 * 1024)
		return sm_err_set(err, -EINVAL,
				  "unknown target '%s': use one of %s (bytes: 1024..16777216)",
				  spec, target_names());
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%lu B", bytes);
	out->optin_per_block = (uint32_t)bytes;
	out->reserved_per_block = 1024;
	out->per_sm = (uint32_t)bytes + 1024;
	out->default_per_block = bytes < 49152 ? (uint32_t)bytes : 49152;
	return 0;
}

int target_from_device(int (*get_attr)(void *ctx, int attr, int *value), void *ctx,
		       struct target_limits *out, struct sm_err *err)
{
	static const struct {
		int attr;
		const char *name;
	} need[] = {
		{ TARGET_ATTR_OPTIN_PER_BLOCK, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN" },
		{ TARGET_ATTR_PER_SM, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR" },
		{ TARGET_ATTR_RESERVED_PER_BLOCK, "RESERVED_SHARED_MEMORY_PER_BLOCK" },
		{ TARGET_ATTR_PER_BLOCK, "MAX_SHARED_MEMORY_PER_BLOCK" },
		{ 75, "COMPUTE_CAPABILITY_MAJOR" },
		{ 76, "COMPUTE_CAPABILITY_MINOR" },
	};
	int v[sizeof(need) / sizeof(need[0])];
	size_t i;

	for (i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (get_attr(ctx, need[i].attr, &v[i]) != 0 || v[i] < 0)
			return sm_err_set(err, -ENODEV,
					  "device attribute %s (%d) could not be read; "
					  "pass an explicit target such as --target sm120",
					  need[i].name, need[i].attr);
	}
	memset(out, 0, sizeof(*out));
	out->optin_per_block = (uint32_t)v[0];
	out->per_sm = (uint32_t)v[1];
	out->reserved_per_block = (uint32_t)v[2];
	out->default_per_block = (uint32_t)v[3];
	out->sm = v[4] * 10 + v[5];
	snprintf(out->name, sizeof(out->name), "auto (sm_%d)", out->sm);
	return 0;
}

enum target_fit target_fit(const struct target_limits *t, uint32_t static_smem,
			   int64_t dynamic_smem)
{
	uint64_t need = static_smem + (uint64_t)(dynamic_smem > 0 ? dynamic_smem : 0);

	if (need > t->optin_per_block)
		return TARGET_TOO_LARGE;
	return dynamic_smem < 0 ? TARGET_FITS_STATIC : TARGET_FITS;
}
