/*
 * next_a.c - defines next_target() and asks dlsym(RTLD_NEXT) for the next
 * one, which lives in next_b.so (a dependency loaded after it).  Through the
 * shim's dlsym the answer must still be next_b's, not this library's own.
 */
#include <dlfcn.h>

const char *next_target(void)
{
	return "next_a";
}

const char *next_a_asks(void)
{
	const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "next_target");

	return next ? next() : "none";
}
