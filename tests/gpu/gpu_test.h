/*
 * gpu_test.h - what the Driver-API GPU test programs share: a CUDA call that
 * must succeed, a reproducible random stream, and bf16 / e4m3 conversions
 * for building inputs and references on the CPU.
 */
#ifndef SM120_TESTS_GPU_TEST_H
#define SM120_TESTS_GPU_TEST_H

#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CHECK - run a driver call; on failure name it, its line and the error, and exit 1. */
#define CHECK(call)                                                                   \
	do {                                                                          \
		CUresult r_ = (call);                                                 \
		if (r_ != CUDA_SUCCESS) {                                             \
			const char *s_ = NULL;                                        \
			cuGetErrorString(r_, &s_);                                    \
			fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, \
				#call, s_ ? s_ : "?");                                \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#define NAN_BF16 0x7fc0
#define NAN_F32 0x7fc00000u

static uint64_t gpu_test_rng = 0x9e3779b97f4a7c15ull;

/* rand64 - the next value of the test's xorshift64 stream (same inputs every run). */
static inline uint64_t rand64(void)
{
	gpu_test_rng ^= gpu_test_rng << 13;
	gpu_test_rng ^= gpu_test_rng >> 7;
	gpu_test_rng ^= gpu_test_rng << 17;
	return gpu_test_rng;
}

/* urand - uniform in [0, 1). */
static inline double urand(void)
{
	return (double)(rand64() >> 11) / 9007199254740992.0;
}

static inline float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* bf16_from_double - round to nearest even (NaN stays NaN). */
static inline uint16_t bf16_from_double(double x)
{
	float f = (float)x;
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return NAN_BF16;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* bf16_ulp - the spacing of bf16 values at |x| (8 significant bits). */
static inline double bf16_ulp(double x)
{
	int e;

	if (x == 0)
		return ldexp(1.0, -133);
	frexp(fabs(x), &e);
	return ldexp(1.0, e - 8);
}

/* e4m3_to_double - an FP8 E4M3 code's value (no infinities; 0x7f/0xff are NaN). */
static inline double e4m3_to_double(uint8_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	double v;

	if ((b & 0x7f) == 0x7f)
		return NAN;
	v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
	return (b & 0x80) ? -v : v;
}

/*
 * gpu_test_module - device 0's primary context made current, and the module
 * under test: the cubin or fatbin @path (a standalone build), or with @path
 * NULL the bundle embedded in the shim (declare bundle_fatbin first by
 * including shim/reroute/bundle.h).  Prints which, as a TAP line.
 */
#ifdef SM120_SHIM_REROUTE_BUNDLE_H
static inline CUmodule gpu_test_module(const char *path)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	size_t len;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	if (path) {
		CHECK(cuModuleLoad(&mod, path));
		printf("ok - %s loaded\n", path);
	} else {
		CHECK(cuModuleLoadData(&mod, bundle_fatbin(&len)));
		printf("ok - bundled fatbin (%zu bytes) loaded\n", len);
	}
	return mod;
}
#endif

#endif
