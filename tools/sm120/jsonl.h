/*
 * jsonl.h - reading the shim's JSON-lines logs (SM120SHIM_LOG): one object
 * with an "event" string per line, blank lines ignored.  `sm120 report` and
 * `sm120 route` read logs through it, so both accept and reject the same
 * lines, with the same messages.
 */
#ifndef SM120_TOOLS_JSONL_H
#define SM120_TOOLS_JSONL_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* What one read found besides the events it handed on. */
struct jsonl_counts {
	unsigned long files;      /* read to the end */
	unsigned long bad_files;  /* could not be opened or read */
	unsigned long bad_lines;  /* not a shim log line (each said on stderr) */
};

/*
 * jsonl_read - hand every event line of @path ("-": stdin) to @on_event, in
 * order; a line that is no JSON object with an "event" string is counted in
 * @c and named on stderr as "@who: PATH:LINE: not a shim log line (why)".
 * Returns 0, or the first non-zero value @on_event returned (reading stops).
 */
int jsonl_read(const char *path, const char *who,
	       int (*on_event)(void *ctx, const cJSON *j, const char *event), void *ctx,
	       struct jsonl_counts *c);

/*
 * jsonl_read_stream - jsonl_read on the open stream @f (read to its end, not
 * closed), named @path in messages: what jsonl_read does once it has opened
 * the file.  The fuzzer feeds it with fmemopen.
 */
int jsonl_read_stream(FILE *f, const char *path, const char *who,
		      int (*on_event)(void *ctx, const cJSON *j, const char *event), void *ctx,
		      struct jsonl_counts *c);

/* jsonl_print - @j as one line of JSON on stdout; frees @j. */
void jsonl_print(cJSON *j);

/* jsonl_num - a non-negative integer member of @j, or -1 when absent or not one. */
int64_t jsonl_num(const cJSON *j, const char *key);

/* jsonl_str - a string member of @j, or NULL. */
const char *jsonl_str(const cJSON *j, const char *key);

#endif
