/*
 * fakecuda.c - a test-only libcuda.so.1.
 *
 * It exports the entry points the shim hooks (base and _ptsz twins, both
 * cuGetProcAddress ABIs) plus cuInit/cuDeviceGet/cuGetErrorString, records
 * every call as one line "<exact symbol>" in $FAKECUDA_LOG, and reports the
 * device limits it is given ($FAKECUDA_OPTIN, default the H200's 232448).
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

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	const char *optin = getenv("FAKECUDA_OPTIN");
	int o = optin ? atoi(optin) : 232448;

	(void)d;
	record("cuDeviceGetAttribute");
	switch ((int)a) {
	case 97: *v = o; break;
	case 81: *v = o + 1024; break;
	case 111: *v = 1024; break;
	case 8: *v = 49152; break;
	case 75: *v = 9; break;
	case 76: *v = 0; break;
	default: *v = 1; break;
	}
	return CUDA_SUCCESS;
}

#define LAUNCH(sym)                                                                          \
	EXPORT CUresult sym(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,  \
			    unsigned by, unsigned bz, unsigned smem, CUstream s, void **p, void **e) \
	{                                                                                    \
		(void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;          \
		(void)smem; (void)s; (void)p; (void)e;                                        \
		record(#sym);                                                                \
		return CUDA_SUCCESS;                                                         \
	}
LAUNCH(cuLaunchKernel)
LAUNCH(cuLaunchKernel_ptsz)

#define LAUNCH_EX(sym)                                                                       \
	EXPORT CUresult sym(const CUlaunchConfig *c, CUfunction f, void **p, void **e)        \
	{                                                                                    \
		(void)c; (void)f; (void)p; (void)e;                                           \
		record(#sym);                                                                \
		return CUDA_SUCCESS;                                                         \
	}
LAUNCH_EX(cuLaunchKernelEx)
LAUNCH_EX(cuLaunchKernelEx_ptsz)

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

EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
	(void)f; (void)a; (void)v;
	record("cuFuncSetAttribute");
	return CUDA_SUCCESS;
}

/* Static smem of every function: $FAKECUDA_STATIC (default 0). */
EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
	const char *st = getenv("FAKECUDA_STATIC");

	(void)f;
	record("cuFuncGetAttribute");
	*v = a == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES && st ? atoi(st) : 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	(void)f;
	record("cuFuncGetName");
	*name = "fake_kernel";
	return CUDA_SUCCESS;
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
