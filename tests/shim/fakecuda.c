/*
 * fakecuda.c - a test-only libcuda.so.1.
 *
 * It exports the entry points the shim hooks (base and _ptsz twins, both
 * cuGetProcAddress ABIs) plus cuInit/cuDeviceGet/cuGetErrorString, records
 * every call as one line "<exact symbol>" in $FAKECUDA_LOG, and reports the
 * device limits it is given ($FAKECUDA_OPTIN, default the H200's 232448) and
 * compute capability ($FAKECUDA_SM, default 90).
 * Occupancy is computed like an H200 (2048 threads, 32 blocks and the
 * opt-in + 1 KiB of shared memory per SM, 1 KiB reserved per block, 132 SMs)
 * for kernels of $FAKECUDA_STATIC static bytes and at most 1024 threads.
 * With $FAKECUDA_OCCUPANCY set it also keeps each handle's
 * MAX_DYNAMIC_SHARED_SIZE_BYTES (default 49152 - static), refuses a launch of
 * more dynamic bytes than that (CUDA_ERROR_INVALID_VALUE), and a cooperative
 * launch whose grid is not co-resident (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE),
 * records each launch's dynamic bytes ("smem <n>" after its symbol), rounds
 * shared memory to 128 B in its occupancy, and reports a stream as being
 * captured while $FAKECUDA_CAPTURING is set: as the driver does.
 * cuGetProcAddress answers as the 580 driver was measured to: a version
 * newer than 13000 is CUDA_ERROR_INVALID_VALUE, an unknown or empty name is
 * success with NULL and status 1, flag 2 selects the _ptsz twin, and
 * "cuGetProcAddress" maps to _v2 from version 12000.  It resolves from its
 * own static table, never through dlsym (which the shim hooks).
 */
#include <cuda.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void record(const char *sym)
{
	static int fd = -2;
	char line[128];
	int n;

	if (fd == -2) {
		const char *path = getenv("FAKECUDA_LOG");

		fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
	}
	n = snprintf(line, sizeof(line), "%s\n", sym);
	if (fd >= 0 && n > 0 && write(fd, line, (size_t)n) < 0)
		return;
}

/* Handles are small distinct fake pointers. */
static char handles[64];

EXPORT CUresult cuInit(unsigned int flags) { (void)flags; record("cuInit"); return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) { record("cuDeviceGet"); *d = ordinal; return CUDA_SUCCESS; }
EXPORT CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = "fake error"; return CUDA_SUCCESS; }

EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }

EXPORT CUresult cuDeviceGetName(char *name, int n, CUdevice d)
{
	snprintf(name, (size_t)n, "Fake H200 %d", (int)d);
	return CUDA_SUCCESS;
}

/* $FAKECUDA_DEVICES devices (default 1); the current one is $FAKECUDA_CURRENT (default 0). */
EXPORT CUresult cuDeviceGetCount(int *n)
{
	const char *env = getenv("FAKECUDA_DEVICES");

	record("cuDeviceGetCount");
	*n = env ? atoi(env) : 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	const char *env = getenv("FAKECUDA_CURRENT");

	*d = env ? atoi(env) : 0;
	return CUDA_SUCCESS;
}

/* Opt-in bytes of device @d: $FAKECUDA_OPTIN_<d>, else $FAKECUDA_OPTIN, else the H200's. */
static int device_optin(CUdevice d)
{
	char name[32];
	const char *optin;

	snprintf(name, sizeof(name), "FAKECUDA_OPTIN_%d", (int)d);
	optin = getenv(name);
	if (!optin)
		optin = getenv("FAKECUDA_OPTIN");
	return optin ? atoi(optin) : 232448;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	int o = device_optin(d);
	const char *sm_env = getenv("FAKECUDA_SM");
	int sm = sm_env ? atoi(sm_env) : 90;

	record("cuDeviceGetAttribute");
	switch ((int)a) {
	case 97: *v = o; break;
	case 81: *v = o + 1024; break;
	case 111: *v = 1024; break;
	case 8: *v = 49152; break;
	case 16: *v = 132; break;
	case 10: *v = 32; break;
	case 39: *v = sm >= 120 ? 1536 : 2048; break;
	case 106: *v = sm >= 120 ? 24 : 32; break;
	case 82: case 12: *v = 65536; break;
	case 75: *v = sm / 10; break;
	case 76: *v = sm % 10; break;
	default: *v = 1; break;
	}
	return CUDA_SUCCESS;
}

/* FAKECUDA_OCCUPANCY: each handle's MAX_DYNAMIC_SHARED_SIZE_BYTES (-1: the default). */
static int max_dynamic[sizeof(handles)];
static int max_dynamic_set[sizeof(handles)];

static int strict(void)
{
	return getenv("FAKECUDA_OCCUPANCY") != NULL;
}

static int static_smem(void);
static int h200_blocks(int size, size_t dyn);

/* dynamic_of - @h's MAX_DYNAMIC_SHARED_SIZE_BYTES (a pointer into handles[]). */
static int *dynamic_of(const void *h)
{
	static int other;
	size_t i = (size_t)((const char *)h - handles);

	if (i >= sizeof(handles))
		return &other;
	if (!max_dynamic_set[i]) {
		max_dynamic[i] = 49152 - static_smem();
		max_dynamic_set[i] = 1;
	}
	return &max_dynamic[i];
}

/* launched - record a launch of @f with @smem bytes; FAKECUDA_OCCUPANCY: refuse it as the driver does. */
static CUresult launched(const char *sym, const void *f, unsigned smem)
{
	char line[64];

	record(sym);
	if (!strict())
		return CUDA_SUCCESS;
	snprintf(line, sizeof(line), "smem %u", smem);
	record(line);
	return (int)smem > *dynamic_of(f) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

#define LAUNCH(sym)                                                                          \
	EXPORT CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,  \
			    unsigned by, unsigned bz, unsigned smem, CUstream s, void **p, void **e) \
	{                                                                                    \
		(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;                   \
		(void)s; (void)p; (void)e;                                                    \
		return launched(#sym, f, smem);                                               \
	}
LAUNCH(cuLaunchKernel)
LAUNCH(cuLaunchKernel_ptsz)

#define LAUNCH_EX(sym)                                                                       \
	EXPORT CUresult sym(const CUlaunchConfig *c, CUfunction f, void **p, void **e)        \
	{                                                                                    \
		(void)p; (void)e;                                                             \
		return launched(#sym, f, c ? c->sharedMemBytes : 0);                          \
	}
LAUNCH_EX(cuLaunchKernelEx)
LAUNCH_EX(cuLaunchKernelEx_ptsz)

/* Cooperative: the grid must be co-resident on the 132 SMs. */
#define LAUNCH_COOP(sym)                                                                     \
	EXPORT CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,  \
			    unsigned by, unsigned bz, unsigned smem, CUstream s, void **p)     \
	{                                                                                    \
		CUresult rc = launched(#sym, f, smem);                                        \
		(void)s; (void)p;                                                             \
		if (rc == CUDA_SUCCESS && strict() &&                                         \
		    (unsigned long)gx * gy * gz >                                             \
			    (unsigned long)h200_blocks((int)(bx * by * bz), smem) * 132)      \
			rc = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;                         \
		return rc;                                                                   \
	}
LAUNCH_COOP(cuLaunchCooperativeKernel)
LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz)

EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
	(void)s;
	*st = getenv("FAKECUDA_CAPTURING") ? CU_STREAM_CAPTURE_STATUS_ACTIVE :
					     CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *img)
{
	(void)img;
	record("cuModuleLoadData");
	*m = (CUmodule)&handles[1];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	(void)m;
	(void)name;
	record("cuModuleGetFunction");
	*f = (CUfunction)&handles[2];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *jo, void **jv,
				  unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl)
{
	(void)code; (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
	record("cuLibraryLoadData");
	*l = (CUlibrary)&handles[3];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name)
{
	(void)l;
	(void)name;
	record("cuLibraryGetKernel");
	*k = (CUkernel)&handles[4];
	return CUDA_SUCCESS;
}

/*
 * Like the driver: more dynamic shared memory than the device's opt-in is
 * refused.  With $FAKECUDA_VALUES set, the value the driver was given is
 * recorded too ("MAX_DYNAMIC_SHARED_SIZE_BYTES <v>").
 */
static CUresult set_attr(const void *h, CUfunction_attribute a, int v)
{
	char line[64];

	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && getenv("FAKECUDA_VALUES")) {
		snprintf(line, sizeof(line), "MAX_DYNAMIC_SHARED_SIZE_BYTES %d", v);
		record(line);
	}
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v > device_optin(0))
		return CUDA_ERROR_INVALID_VALUE;
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v < 0 && strict())
		return CUDA_ERROR_INVALID_VALUE;
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
		*dynamic_of(h) = v;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
	record("cuFuncSetAttribute");
	return set_attr(f, a, v);
}

/* Static smem of every kernel: $FAKECUDA_STATIC (default 0); registers $FAKECUDA_REGS (default
 * 0: unknown; each question recorded as "NUM_REGS" with $FAKECUDA_VALUES set); 1024 threads
 * at most. */
static int func_attr(const void *h, CUfunction_attribute a)
{
	const char *st = getenv("FAKECUDA_STATIC");

	if (a == CU_FUNC_ATTRIBUTE_NUM_REGS && getenv("FAKECUDA_VALUES"))
		record("NUM_REGS");

	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && strict())
		return *dynamic_of(h);
	return a == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES && st ? atoi(st) :
	       a == CU_FUNC_ATTRIBUTE_NUM_REGS && getenv("FAKECUDA_REGS") ? atoi(getenv("FAKECUDA_REGS")) :
	       a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
}

EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
	record("cuFuncGetAttribute");
	*v = func_attr(f, a);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	(void)f;
	record("cuFuncGetName");
	*name = "fake_kernel";
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
	(void)d;
	record("cuKernelSetAttribute");
	return set_attr(k, a, v);
}

EXPORT CUresult cuKernelGetAttribute(int *v, CUfunction_attribute a, CUkernel k, CUdevice d)
{
	(void)d;
	record("cuKernelGetAttribute");
	*v = func_attr(k, a);
	return CUDA_SUCCESS;
}

/* Three parameters: a pointer, an int, a pointer (as CUDA >= 12.4 reports them). */
EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
	static const size_t offs[] = { 0, 8, 16 }, sizes[] = { 8, 4, 8 };

	(void)f;
	record("cuFuncGetParamInfo");
	if (i >= 3)
		return CUDA_ERROR_INVALID_VALUE;
	*off = offs[i];
	*size = sizes[i];
	return CUDA_SUCCESS;
}

static int static_smem(void)
{
	return func_attr(NULL, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
}

/* h200_blocks - resident blocks per SM of @size threads using @dyn dynamic bytes. */
static int h200_blocks(int size, size_t dyn)
{
	const char *optin = getenv("FAKECUDA_OPTIN");
	size_t per_sm = (size_t)(optin ? atoi(optin) : 232448) + 1024;
	size_t smem = dyn + (size_t)static_smem() + 1024;
	int by_threads = size > 0 && size <= 1024 ? 2048 / size : 0;
	int by_smem = (int)(per_sm / smem);

	if (strict())
		by_smem = (int)(per_sm / ((smem + 127) / 128 * 128));
	by_threads = by_threads < 32 ? by_threads : 32;
	return by_threads < by_smem ? by_threads : by_smem;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int size, size_t dyn)
{
	record("cuOccupancyMaxActiveBlocksPerMultiprocessor");
	*n = strict() && dyn > (size_t)*dynamic_of(f) ? 0 : h200_blocks(size, dyn);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction f, int size, size_t dyn, unsigned int flags)
{
	(void)f; (void)flags;
	record("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
	*n = h200_blocks(size, dyn);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dyn, CUfunction f, int blocks, int size)
{
	const char *optin = getenv("FAKECUDA_OPTIN");
	size_t per_sm = (size_t)(optin ? atoi(optin) : 232448) + 1024;
	size_t per_block = per_sm / (size_t)(blocks > 0 ? blocks : 1) - 1024 - (size_t)static_smem();

	(void)f; (void)size;
	record("cuOccupancyAvailableDynamicSMemPerBlock");
	*dyn = per_block < per_sm - 2048 ? per_block : per_sm - 2048;
	return CUDA_SUCCESS;
}

/* The most resident threads per SM over block sizes 32..1024 (ties: the larger). */
EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *size, CUfunction f, CUoccupancyB2DSize smem_of, size_t dyn, int limit)
{
	int s, best = 0;

	(void)f;
	record("cuOccupancyMaxPotentialBlockSize");
	*size = 0;
	*grid = 0;
	for (s = (limit > 0 && limit < 1024 ? limit : 1024) / 32 * 32; s > 0; s -= 32) {
		int b = h200_blocks(s, smem_of ? smem_of(s) : dyn);

		if (b * s > best) {
			best = b * s;
			*size = s;
			*grid = b * 132;
		}
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *grid, int *size, CUfunction f, CUoccupancyB2DSize smem_of, size_t dyn, int limit, unsigned int flags)
{
	(void)flags;
	record("cuOccupancyMaxPotentialBlockSizeWithFlags");
	return cuOccupancyMaxPotentialBlockSize(grid, size, f, smem_of, dyn, limit);
}

/* The symbols cuGetProcAddress can hand out. */
static const struct {
	const char *name;
	void *fn;
} table[] = {
	{ "cuInit", (void *)cuInit },
	{ "cuDeviceGet", (void *)cuDeviceGet },
	{ "cuDeviceGetAttribute", (void *)cuDeviceGetAttribute },
	{ "cuLaunchKernel", (void *)cuLaunchKernel },
	{ "cuLaunchKernel_ptsz", (void *)cuLaunchKernel_ptsz },
	{ "cuLaunchKernelEx", (void *)cuLaunchKernelEx },
	{ "cuLaunchKernelEx_ptsz", (void *)cuLaunchKernelEx_ptsz },
	{ "cuModuleLoadData", (void *)cuModuleLoadData },
	{ "cuModuleGetFunction", (void *)cuModuleGetFunction },
	{ "cuLibraryLoadData", (void *)cuLibraryLoadData },
	{ "cuLibraryGetKernel", (void *)cuLibraryGetKernel },
	{ "cuFuncSetAttribute", (void *)cuFuncSetAttribute },
	{ "cuFuncGetAttribute", (void *)cuFuncGetAttribute },
	{ "cuFuncGetName", (void *)cuFuncGetName },
	{ "cuGetProcAddress", NULL }, /* filled below: defined after the table */
	{ "cuGetProcAddress_v2", NULL },
};

static void *lookup(const char *name);

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	char want[128];
	void *p;

	record("cuGetProcAddress_v2");
	if (version > 13000)
		return CUDA_ERROR_INVALID_VALUE;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(want, sizeof(want), "%s", symbol);
	if (strcmp(symbol, "cuGetProcAddress") == 0 && version >= 12000)
		snprintf(want, sizeof(want), "cuGetProcAddress_v2");
	p = NULL;
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		char ptsz[140];

		snprintf(ptsz, sizeof(ptsz), "%s_ptsz", want);
		p = lookup(ptsz);
	}
	if (!p)
		p = lookup(want);
	*pfn = p;
	if (status)
		*status = p ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_SUCCESS;
}

/* The legacy ABI, exported under its own name (cuda.h maps the C name to _v2). */
EXPORT CUresult fake_gpa_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
	__asm__("cuGetProcAddress");
CUresult fake_gpa_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	record("cuGetProcAddress");
	return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

static void *lookup(const char *name)
{
	size_t i;

	if (strcmp(name, "cuGetProcAddress") == 0)
		return (void *)fake_gpa_v1;
	if (strcmp(name, "cuGetProcAddress_v2") == 0)
		return (void *)cuGetProcAddress_v2;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].fn && strcmp(table[i].name, name) == 0)
			return table[i].fn;
	return NULL;
}
