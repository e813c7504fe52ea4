/*
 * images.c - see facts.h: images recorded as the driver loads them, and the
 * "load" events of the JSON log.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../log/log.h"
#include "../settings/config.h"
#include "../state/facts.h"

/* Unreadable images named on stderr before the rest go to the JSON log only. */
#define MAX_IMAGE_WARNINGS 4

/* device_sm - compute capability * 10 of the current device. */
static int device_sm(void)
{
	shim_fn_cuDeviceGetAttribute *get = shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	CUdevice dev = shim_current_device();
	int major = 0, minor = 0;

	if (!get || get(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
	    get(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
		return 0;
	return major * 10 + minor;
}

/*
 * name_memory - "libfoo.so+0x1234" for bytes inside a mapped object (which
 * live as long as it stays loaded: *@in_object = 1), else "memory 0x7f...".
 */
static void name_memory(const void *p, char *out, size_t n, int *in_object)
{
	Dl_info info;

	*in_object = dladdr(p, &info) && info.dli_fname && info.dli_fbase;
	if (*in_object) {
		const char *base = strrchr(info.dli_fname, '/');

		snprintf(out, n, "%s+0x%lx", base ? base + 1 : info.dli_fname,
			 (unsigned long)((uintptr_t)p - (uintptr_t)info.dli_fbase));
	} else {
		snprintf(out, n, "memory %p", p);
	}
}

void shim_image_loaded(void *owner, enum shim_hook_id via, const void *image, const char *path,
		       int preserved)
{
	static atomic_int warnings;
	struct loaded_summary sum = { .n_kernels = -1 };
	struct sm_err err = { "" };
	char origin[192], arch[16] = "";
	const void *bytes = image;
	size_t len = 0;
	int rc, in_object = 0, nth;

	if (shim_config()->mode == SHIM_MODE_OFF || !owner)
		return;
	if (path) {
		snprintf(origin, sizeof(origin), "%s", path);
		rc = loaded_add_file(owner, path, device_sm(), &sum, &err);
	} else {
		if (!(bytes = img_wrapper_fatbin(image, &len)))
			bytes = image, len = img_image_size(image);
		name_memory(bytes, origin, sizeof(origin), &in_object);
		rc = loaded_add(owner, bytes, len, device_sm(), preserved || in_object, origin, &sum,
				&err);
	}
	if (sum.sm)
		snprintf(arch, sizeof(arch), "sm_%d%s", sum.sm, sum.variant == 'a' ? "a" :
							       sum.variant == 'f' ? "f" : "");
	shim_log_event(&(struct shim_event){
		.event = "load", .action = rc ? "unreadable" : sum.deferred ? "deferred" : "parsed",
		.via = shim_hook_table[via].name, .origin = origin, .image = img_kind_name(sum.kind),
		.arch = arch[0] ? arch : NULL, .kernels = sum.n_kernels, .static_smem = -1,
		.dynamic_smem = -1, .limit = -1, .regs = -1, .param_bytes = -1,
		.error = rc ? err.msg : NULL });
	if (rc && (nth = atomic_fetch_add(&warnings, 1)) < MAX_IMAGE_WARNINGS)
		shim_log_warn("%s (loaded by %s); its kernels are judged by what the driver reports%s",
			      err.msg, shim_hook_table[via].name,
			      nth == MAX_IMAGE_WARNINGS - 1 ?
				      "; further unreadable images are only in SM120SHIM_LOG" : "");
}

void shim_image_unloaded(void *owner)
{
	if (shim_config()->mode == SHIM_MODE_OFF)
		return; /* nothing was recorded */
	handles_drop_owner(owner);
	loaded_drop(owner);
}
