/*
 * fixture.h - helpers shared by the unit tests: find and read the fixtures
 * that `make test` builds with nvcc (directory in $SM120_FIXTURES).
 */
#ifndef SM120_TESTS_FIXTURE_H
#define SM120_TESTS_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fixture_path - $SM120_FIXTURES/name in a static buffer. */
static inline const char *fixture_path(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("SM120_FIXTURES");

	snprintf(buf, sizeof(buf), "%s/%s", dir ? dir : "build/test/fixtures", name);
	return buf;
}

/* fixture_read - the whole fixture in a malloc'd buffer; aborts the test run if missing. */
static inline unsigned char *fixture_read(const char *name, size_t *len)
{
	const char *path = fixture_path(name);
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0) {
		fprintf(stderr, "fixture %s missing: run `make test`, which builds it\n", path);
		exit(2);
	}
	rewind(f);
	buf = malloc((size_t)n);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "fixture %s unreadable\n", path);
		exit(2);
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* memfind - first occurrence of @needle in @hay, or NULL. */
static inline unsigned char *memfind(unsigned char *hay, size_t len, const void *needle, size_t n)
{
	size_t i;

	for (i = 0; n <= len && i <= len - n; i++)
		if (memcmp(hay + i, needle, n) == 0)
			return hay + i;
	return NULL;
}

#endif
