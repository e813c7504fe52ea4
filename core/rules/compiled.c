/* compiled.c - see compiled.h. */
#include "compiled.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int compiled_get(const char *facts, const char *name, char sep, char *out, size_t n)
{
	size_t len = strlen(name);
	const char *p = facts;

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t entry = end ? (size_t)(end - p) : strlen(p);

		if (entry > len && strncmp(p, name, len) == 0 && p[len] == sep) {
			size_t v = entry - len - 1;

			if (v + 1 > n)
				return -ENOSPC;
			memcpy(out, p + len + 1, v);
			out[v] = '\0';
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

int compiled_number(const char *facts, const char *name, double *out)
{
	char v[64], *end;
	int rc = compiled_get(facts, name, '=', v, sizeof(v));

	if (rc)
		return rc == -ENOSPC ? -EINVAL : rc;
	*out = strtod(v, &end);
	return v[0] && !*end ? 0 : -EINVAL;
}

int compiled_int(const char *facts, const char *name, int64_t *out)
{
	double v;
	int rc = compiled_number(facts, name, &v);

	if (rc)
		return rc;
	if (v != floor(v) || fabs(v) > 9.0e15)
		return -EINVAL;
	*out = (int64_t)v;
	return 0;
}
