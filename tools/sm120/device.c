/*
 * device.c - limits of the real device, for `--target auto`.
 *
 * The tools link no CUDA library: libcuda.so.1 is opened at run time, so the
 * same binary runs on machines without a GPU (where `auto` says so and names
 * the alternative).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "commands.h"

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_get_attribute_fn)(int *, int, int);

struct device_ctx {
	cu_device_get_attribute_fn get_attribute;
	int device;
};

static int device_attr(void *ctx, int attr, int *value)
{
	struct device_ctx *d = ctx;

	return d->get_attribute(value, attr, d->device);
}

void *tool_driver(struct sm_err *err)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cu_init_fn cu_init;
	int rc;

	if (!lib) {
		sm_err_set(err, -ENODEV, "the NVIDIA driver (libcuda.so.1) is not installed or not "
			   "on the library path: %s", dlerror());
		return NULL;
	}
	cu_init = (cu_init_fn)dlsym(lib, "cuInit");
	if (!cu_init || (rc = cu_init(0)) != 0) {
		sm_err_set(err, -ENODEV, "libcuda.so.1 %s: no usable GPU",
			   cu_init ? "cuInit failed" : "has no cuInit");
		return NULL;
	}
	/* The driver stays loaded: unloading libcuda after cuInit is not supported. */
	return lib;
}

int tool_target(const char *spec, struct target_limits *out, struct sm_err *err)
{
	struct device_ctx ctx = { 0 };
	cu_device_get_fn cu_device_get;
	struct sm_err why;
	void *lib;
	int rc;

	if (strcmp(spec, "auto") != 0)
		return target_parse(spec, out, err);
	lib = tool_driver(&why);
	if (!lib)
		return sm_err_set(err, -ENODEV, "--target auto: %s; name a target instead, e.g. "
				  "--target sm120", why.msg);
	cu_device_get = (cu_device_get_fn)dlsym(lib, "cuDeviceGet");
	ctx.get_attribute = (cu_device_get_attribute_fn)dlsym(lib, "cuDeviceGetAttribute");
	if (!cu_device_get || !ctx.get_attribute)
		rc = sm_err_set(err, -ENODEV, "libcuda.so.1 lacks cuDeviceGet/cuDeviceGetAttribute; "
				"name a target instead, e.g. --target sm120");
	else if ((rc = cu_device_get(&ctx.device, 0)) != 0)
		rc = sm_err_set(err, -ENODEV, "--target auto: the driver reports no usable GPU "
				"(CUresult %d); name a target instead, e.g. --target sm120", rc);
	else
		rc = target_from_device(device_attr, &ctx, out, err);
	return rc;
}
