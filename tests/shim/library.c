/*
 * library.c - one load of each kind the library class weighs, against the
 * fake driver (an H200 unless $FAKECUDA_SM says otherwise), then an
 * attribute set and a launch of its kernel over SM120's limit, as cuBLAS
 * does (213268 B allowed, 163840 B launched).  One case per run:
 *   shim_library wrapper FATBIN [KERNEL]   cudart's way: a __fatBinC_Wrapper_t
 *                                         around FATBIN, cuLibraryLoadData,
 *                                         a CUkernel launched as a CUfunction
 *   shim_library raw CUBIN [KERNEL [LOADER]]  cuModuleLoadData of the ELF
 *                                         bytes, called by this program or
 *                                         by the shared object LOADER (a
 *                                         copy of loader_lib.c)
 * (A cubin loaded from a file, judged too, needs cuModuleLoad, which the
 * fake driver lacks: that case is in tests/unit/test_evidence.c.)
 *   shim_library optin LOADER              the opt-in per block, and the dynamic
 *                                         bytes one block may use, as this
 *                                         program and as the shared object LOADER
 *                                         ask them ("optin program N", "optin
 *                                         loader N", "available program N", ...)
 * KERNEL defaults to k_huge.  Prints "load -> RC", "set 213268 -> RC" and
 * "launch 163840 -> RC"; tests/scripts/test_library.sh reads them with the
 * shim's stderr and log.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* read_all - the file's bytes (malloc'd), or exit 2 naming it. */
static void *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	void *buf = malloc(4 << 20);

	if (!f || !buf || fread(buf, 1, 4 << 20, f) == 0) {
		fprintf(stderr, "shim_library: cannot read %s (run `make test`, which builds it)\n",
			path);
		exit(2);
	}
	fclose(f);
	return buf;
}

/* The wrapper cudart registers: magic, version, the container, a file name. */
struct wrapper {
	unsigned int magic, version;
	const void *data;
	void *filename;
};

typedef CUresult loader_fn(CUmodule *, const void *);

/* load_raw - @image through @loader's loader_load, or directly when @loader is NULL. */
static CUresult load_raw(CUmodule *m, const void *image, const char *loader)
{
	void *so;
	loader_fn *load;

	if (!loader)
		return cuModuleLoadData(m, image);
	so = dlopen(loader, RTLD_NOW);
	load = so ? (loader_fn *)dlsym(so, "loader_load") : NULL;
	if (!load) {
		fprintf(stderr, "shim_library: cannot use %s: %s\n", loader, dlerror());
		exit(2);
	}
	return load(m, image);
}

int main(int argc, char **argv)
{
	const char *kernel = argc > 3 ? argv[3] : "k_huge";
	CUdeviceptr out = 0x1000;
	void *args[27] = { &out };
	CUfunction f = NULL;
	CUresult rc, set;

	if (argc < 3) {
		fprintf(stderr, "usage: shim_library wrapper|raw IMAGE [KERNEL [LOADER]]\n");
		return 2;
	}
	cuInit(0);
	if (strcmp(argv[1], "optin") == 0) {
		void *so = dlopen(argv[2], RTLD_NOW);
		int (*loader_optin)(void) = so ? (int (*)(void))dlsym(so, "loader_optin") : NULL;
		long (*loader_available)(CUfunction) =
			so ? (long (*)(CUfunction))dlsym(so, "loader_available") : NULL;
		CUfunction fn = (CUfunction)0x1;
		size_t avail = 0;
		int v = -1;

		if (!loader_optin || !loader_available) {
			fprintf(stderr, "shim_library: cannot use %s: %s\n", argv[2], dlerror());
			return 2;
		}
		cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0);
		printf("optin program %d\noptin loader %d\n", v, loader_optin());
		cuOccupancyAvailableDynamicSMemPerBlock(&avail, fn, 1, 128);
		printf("available program %zu\navailable loader %ld\n", avail, loader_available(fn));
		return 0;
	}
	if (strcmp(argv[1], "wrapper") == 0) {
		struct wrapper w = { 0x466243B1u, 1, read_all(argv[2]), NULL };
		CUlibrary lib;
		CUkernel k;

		rc = cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0);
		cuLibraryGetKernel(&k, lib, kernel);
		set = cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 213268, k, 0);
		f = (CUfunction)k;
	} else {
		CUmodule m;

		rc = load_raw(&m, read_all(argv[2]), argc > 4 ? argv[4] : NULL);
		cuModuleGetFunction(&f, m, kernel);
		set = cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 213268);
	}
	printf("load -> %d\n", rc);
	printf("set 213268 -> %d\n", set);
	printf("launch 163840 -> %d\n", cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 163840, NULL, args,
						       NULL));
	return 0;
}
