/* jsonl.c - see jsonl.h. */
#include "jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

void jsonl_print(cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);

	if (s)
		puts(s);
	free(s);
	cJSON_Delete(j);
}

int64_t jsonl_num(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0)
		return -1;
	return (int64_t)v->valuedouble;
}

const char *jsonl_str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/*
 * Parse @line (@len bytes, no newline) into a JSON object with an "event"
 * string; NULL with @why filled when it is not one.
 */
static cJSON *parse_line(const char *line, size_t len, char *why, size_t n)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, 0);

	if (!j) {
		snprintf(why, n, "invalid JSON at byte %zu", end ? (size_t)(end - line) + 1 : len);
		return NULL;
	}
	while (end && end < line + len && (*end == ' ' || *end == '\t' || *end == '\r'))
		end++;
	if (end && end < line + len && *end)
		snprintf(why, n, "text after the JSON at byte %zu", (size_t)(end - line) + 1);
	else if (!cJSON_IsObject(j))
		snprintf(why, n, "not a JSON object");
	else if (!jsonl_str(j, "event"))
		snprintf(why, n, "no \"event\" string");
	else
		return j;
	cJSON_Delete(j);
	return NULL;
}

static int blank(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

int jsonl_read_stream(FILE *f, const char *path, const char *who,
		      int (*on_event)(void *ctx, const cJSON *j, const char *event), void *ctx,
		      struct jsonl_counts *c)
{
	char *line = NULL, why[96];
	size_t cap = 0, lineno = 0;
	ssize_t got;
	int rc = 0;

	while (rc == 0 && (got = getline(&line, &cap, f)) >= 0) {
		size_t len = (size_t)got;
		cJSON *j;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (blank(line, len))
			continue;
		j = parse_line(line, len, why, sizeof(why));
		if (!j) {
			fprintf(stderr, "%s: %s:%zu: not a shim log line (%s)\n", who, path, lineno,
				why);
			c->bad_lines++;
			continue;
		}
		rc = on_event(ctx, j, jsonl_str(j, "event"));
		cJSON_Delete(j);
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "%s: cannot read %s: %s\n", who, path, strerror(errno));
		c->bad_files++;
	} else {
		c->files++;
	}
	free(line);
	return rc;
}

int jsonl_read(const char *path, const char *who,
	       int (*on_event)(void *ctx, const cJSON *j, const char *event), void *ctx,
	       struct jsonl_counts *c)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	int rc;

	if (!f) {
		fprintf(stderr, "%s: cannot read %s: %s\n", who, path, strerror(errno));
		c->bad_files++;
		return 0;
	}
	rc = jsonl_read_stream(f, path, who, on_event, ctx, c);
	if (f != stdin)
		fclose(f);
	return rc;
}
