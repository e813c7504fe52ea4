/*
 * paths.c - reach the driver every way a real process does, against the fake
 * libcuda.so.1; run with and without the shim (tests/scripts/test_intercept.sh
 * compares what the fake recorded and what the shim traced).
 *
 *   paths     direct link, dlsym(handle), cuGetProcAddress_v2 flags 0 and 2,
 *             the legacy cuGetProcAddress, and its edge cases
 *   threads   32 threads x 1000 launches through a cuGetProcAddress pointer
 *   fork      a launch in a forked child
 *   library   cuLibraryLoadData, cuLibraryGetKernel, launch by CUkernel
 *   standin   as Nsight Compute's injection: dlopen a tool's libcuda-injection.so
 *             (a copy of the fake) and launch through its dlsym'd entry points
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef CUresult launch_fn(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, CUstream, void **, void **);
typedef CUresult launch_ex_fn(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult gpa2_fn(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult gpa1_fn(const char *, void **, int, cuuint64_t);

static int fails;

#define EXPECT(cond)                                                          \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			fails++;                                              \
		}                                                             \
	} while (0)

static CUresult launch(launch_fn *fn)
{
	return fn((CUfunction)0x1, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}

static gpa2_fn *get_gpa(void)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st;

	/* As cudart does: ask cuGetProcAddress for itself. */
	EXPECT(cuGetProcAddress_v2("cuGetProcAddress", &p, 12000, 0, &st) == CUDA_SUCCESS);
	EXPECT(p != NULL);
	return (gpa2_fn *)p;
}

static void paths(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUlaunchConfig cfg = { 0 };
	gpa2_fn *gpa = get_gpa();
	gpa1_fn *gpa1;
	CUdriverProcAddressQueryResult st;
	void *p;

	printf("direct\n");
	EXPECT(launch(cuLaunchKernel) == CUDA_SUCCESS);
	printf("dlsym\n");
	EXPECT(h != NULL);
	p = dlsym(h, "cuLaunchKernelEx");
	EXPECT(p && ((launch_ex_fn *)p)(&cfg, (CUfunction)0x1, NULL, NULL) == CUDA_SUCCESS);
	p = dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");
	EXPECT(p && launch((launch_fn *)p) == CUDA_SUCCESS);
	printf("gpa flags 0, 2\n");
	EXPECT(gpa("cuLaunchKernel", &p, 4000, 0, &st) == CUDA_SUCCESS && p);
	EXPECT(launch((launch_fn *)p) == CUDA_SUCCESS);
	EXPECT(gpa("cuLaunchKernel", &p, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
	       CUDA_SUCCESS && p);
	EXPECT(launch((launch_fn *)p) == CUDA_SUCCESS);
	EXPECT(gpa("cuLaunchKernelEx", &p, 11060, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		   &st) == CUDA_SUCCESS && p);
	EXPECT(((launch_ex_fn *)p)(&cfg, (CUfunction)0x1, NULL, NULL) == CUDA_SUCCESS);
	printf("gpa legacy\n");
	gpa1 = (gpa1_fn *)dlsym(h, "cuGetProcAddress");
	EXPECT(gpa1 && gpa1("cuLaunchKernelEx", &p, 11060, 0) == CUDA_SUCCESS && p);
	EXPECT(((launch_ex_fn *)p)(&cfg, (CUfunction)0x1, NULL, NULL) == CUDA_SUCCESS);
	printf("gpa edge cases\n");
	p = (void *)0x1;
	EXPECT(gpa("", &p, 0, 0, NULL) == CUDA_SUCCESS && p == NULL);
	EXPECT(gpa("cuLaunchKernel", &p, 99000, 0, &st) == CUDA_ERROR_INVALID_VALUE);
	EXPECT(gpa("cuNope", &p, 12000, 0, &st) == CUDA_SUCCESS && p == NULL &&
	       st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	/* A symbol the shim does not hook comes back as the driver's own. */
	EXPECT(gpa("cuInit", &p, 2000, 0, &st) == CUDA_SUCCESS && p == dlsym(h, "cuInit"));
}

static gpa2_fn *thread_gpa;

static void *thread_main(void *arg)
{
	void *p = NULL;
	int i;

	(void)arg;
	if (thread_gpa("cuLaunchKernel", &p, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		       NULL) != CUDA_SUCCESS || !p)
		return (void *)1;
	for (i = 0; i < 1000; i++)
		if (launch((launch_fn *)p) != CUDA_SUCCESS)
			return (void *)1;
	return NULL;
}

static void threads(void)
{
	pthread_t t[32];
	void *r;
	int i;

	thread_gpa = get_gpa();
	for (i = 0; i < 32; i++)
		EXPECT(pthread_create(&t[i], NULL, thread_main, NULL) == 0);
	for (i = 0; i < 32; i++) {
		pthread_join(t[i], &r);
		EXPECT(r == NULL);
	}
}

static void forked(void)
{
	int status;
	pid_t pid;

	EXPECT(launch(cuLaunchKernel) == CUDA_SUCCESS);
	pid = fork();
	if (pid == 0)
		_exit(launch(cuLaunchKernel) == CUDA_SUCCESS ? 0 : 1);
	EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0);
}

static void library(void)
{
	static const char image[64] = "\x7f" "ELF";
	CUlibrary lib;
	CUkernel k;

	EXPECT(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS);
	EXPECT(cuLibraryGetKernel(&k, lib, "_Z6kernelv") == CUDA_SUCCESS);
	/* cudart passes the CUkernel itself as the CUfunction. */
	EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
}

static void standin(void)
{
	void *h = dlopen("libcuda-injection.so", RTLD_NOW);
	CUlaunchConfig cfg = { 0 };
	void *p;

	EXPECT(h != NULL);
	p = h ? dlsym(h, "cuLaunchKernelEx") : NULL;
	EXPECT(p && ((launch_ex_fn *)p)(&cfg, (CUfunction)0x1, NULL, NULL) == CUDA_SUCCESS);
	p = h ? dlsym(h, "cuLaunchKernel") : NULL;
	EXPECT(p && launch((launch_fn *)p) == CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "paths";

	if (strcmp(mode, "paths") == 0)
		paths();
	else if (strcmp(mode, "threads") == 0)
		threads();
	else if (strcmp(mode, "fork") == 0)
		forked();
	else if (strcmp(mode, "library") == 0)
		library();
	else if (strcmp(mode, "standin") == 0)
		standin();
	else
		return 2;
	return fails ? 1 : 0;
}
