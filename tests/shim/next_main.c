/*
 * next_main.c - links libnext_a.so (which needs libnext_b.so), so the global
 * search order is main, next_a, ..., next_b: dlsym(RTLD_NEXT, "next_target")
 * from next_a must answer next_b's, with or without the shim's dlsym.
 */
#include <stdio.h>

const char *next_a_asks(void);

int main(void)
{
	printf("next: %s\n", next_a_asks());
	return 0;
}
