/* file.c - whole small files (see file.h). */
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

char *sm_read_small(const char *path, size_t max, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	errno = 0;
	n = fread(buf, 1, max + 1, f);
	if (ferror(f) || n > max) {
		int e = n > max ? EFBIG : errno ? errno : EIO;

		free(buf);
		fclose(f);
		errno = e;
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}
