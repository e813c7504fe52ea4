/*
 * fixture.h - helpers shared by the unit tests: find and read the fixtures
 * that `make test` builds with nvcc (directory in $SM120_FIXTURES), read a
 * whole file, make and remove a temporary directory tree.
 */
#ifndef SM120_TESTS_FIXTURE_H
#define SM120_TESTS_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* fixture_path - $SM120_FIXTURES/name in a static buffer. */
static inline const char *fixture_path(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("SM120_FIXTURES");

	snprintf(buf, sizeof(buf), "%s/%s", dir ? dir : "build/test/fixtures", name);
	return buf;
}

/* read_file - the whole of @path, its @len bytes followed by a NUL, in a malloc'd
 * buffer; NULL when it cannot be opened or read. */
static inline void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0) {
		rewind(f);
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
			*len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

/* fixture_read - the whole fixture in a malloc'd buffer; aborts the test run if missing. */
static inline unsigned char *fixture_read(const char *name, size_t *len)
{
	const char *path = fixture_path(name);
	unsigned char *buf = read_file(path, len);

	if (!buf || *len == 0) {
		fprintf(stderr, "fixture %s missing or unreadable: run `make test`, which builds it\n",
			path);
		exit(2);
	}
	return buf;
}

/* tmp_dir - a new empty directory "/tmp/@prefixXXXXXX" (mkdtemp); its path in @buf, or NULL. */
static inline char *tmp_dir(char *buf, size_t size, const char *prefix)
{
	snprintf(buf, size, "/tmp/%sXXXXXX", prefix);
	return mkdtemp(buf);
}

/* rm_tree_entry - rm_tree's nftw callback: remove one entry (its contents are gone already). */
static inline int rm_tree_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* rm_tree - remove @dir and everything below it, never following a link; 0, or -1 with errno. */
static inline int rm_tree(const char *dir)
{
	return nftw(dir, rm_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
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
