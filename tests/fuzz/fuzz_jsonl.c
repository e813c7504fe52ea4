/*
 * fuzz_jsonl.c - libFuzzer target for the JSON-lines log reader of
 * `sm120 report` and `sm120 route` (tools/sm120/jsonl.c).
 *
 * jsonl.h promises that every line that is no JSON object with an "event"
 * string is counted and named on stderr as "WHO: PATH:LINE: not a shim log
 * line (why)", blank lines are skipped, and every other line reaches the
 * callback, in order, until the callback returns non-zero.  The input is
 * one log, read by jsonl_read_stream from fmemopen; stderr is captured in
 * a memory stream while it runs.  The callback reads every field of every
 * event, as cmd_report's add_event and cmd_route's on_event do through
 * jsonl_num and jsonl_str, and walks the whole object; it asks to stop at
 * an event called "stop".  The target checks the counts against its own
 * count of the input's lines, and every message against the format.
 *
 * Build and run with `make fuzz-smoke` or `make fuzz` (tests/fuzz/fuzz.mk).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/sm120/jsonl.h"
#include "fuzz_util.h"

#define TARGET "fuzz_jsonl"
#define WHO "fuzz"
#define LOG_NAME "fuzz.jsonl"
#define STOPPED 7	/* the callback's answer to an event "stop" */

static void broken(const char *what, const char *msg)
{
	fuzz_broken(TARGET, what, msg);
}

/* The members cmd_report and cmd_route read. */
static const char *const num_keys[] = {
	"pid", "static_smem", "dynamic_smem", "limit", "kernels", "regs", "param_bytes",
};
static const char *const str_keys[] = {
	"event", "action", "decision", "kernel", "via", "target", "mode", "origin", "image",
	"arch", "error", "rule", "rerouted_to", "reason",
};

struct seen {
	unsigned long events;
	int stopped;
};

/* walk - every node under @j (cJSON bounds the depth). */
static uint64_t walk(const cJSON *j)
{
	uint64_t h = 0;

	for (; j; j = j->next) {
		h += (uint64_t)j->type + (uint64_t)j->valueint;
		h += (uint64_t)(j->valuedouble == j->valuedouble);
		if (j->string)
			h += fuzz_touch(j->string, strlen(j->string));
		if (cJSON_IsString(j) && j->valuestring)
			h += fuzz_touch(j->valuestring, strlen(j->valuestring));
		h += walk(j->child);
	}
	return h;
}

static int on_event(void *ctx, const cJSON *j, const char *event)
{
	struct seen *s = ctx;
	const cJSON *v;
	size_t i;

	if (s->stopped)
		broken("an event reached the callback after it asked to stop", event);
	if (!cJSON_IsObject(j) || !event || event != jsonl_str(j, "event"))
		broken("the callback got no object, or an event that is not its \"event\"", event);
	for (i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
		int64_t n = jsonl_num(j, num_keys[i]);

		if (n < -1 || n > 9007199254740992LL)
			broken("jsonl_num answered outside -1..2^53", num_keys[i]);
		fuzz_sink += (uint64_t)n;
	}
	for (i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
		const char *str = jsonl_str(j, str_keys[i]);

		if (str)
			fuzz_sink += fuzz_touch(str, strlen(str));
	}
	/* route's arrays: grid, block, param_sizes, args (hex), settings */
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "args")) {
		const char *hex = cJSON_GetStringValue(v);

		if (hex)
			fuzz_sink += fuzz_touch(hex, strlen(hex));
	}
	fuzz_sink += walk(j->child);
	s->events++;
	if (strcmp(event, "stop") == 0) {
		s->stopped = 1;
		return STOPPED;
	}
	return 0;
}

/* count_lines - the lines jsonl_read_stream must not skip: all but the blank ones. */
static unsigned long count_lines(const uint8_t *d, size_t n, unsigned long *total)
{
	unsigned long lines = 0;
	size_t i = 0;

	*total = 0;
	while (i < n) {
		int blank = 1;

		for (; i < n && d[i] != '\n'; i++)
			if (d[i] != ' ' && d[i] != '\t' && d[i] != '\r')
				blank = 0;
		i += i < n;	/* the newline */
		(*total)++;
		lines += !blank;
	}
	return lines;
}

/* check_messages - one message per bad line, in the promised form, by ascending line. */
static void check_messages(const char *msgs, size_t len, unsigned long bad, unsigned long total)
{
	const char *p = msgs, *end = msgs + len;
	static const char head[] = WHO ": " LOG_NAME ":";
	unsigned long n = 0, last = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		unsigned long lineno;
		char *after;

		if (!nl)
			broken("a message does not end its line", p);
		if (strncmp(p, head, sizeof(head) - 1) != 0)
			broken("a message does not start with \"WHO: PATH:\"", p);
		lineno = strtoul(p + sizeof(head) - 1, &after, 10);
		if (lineno <= last || lineno > total ||
		    strncmp(after, ": not a shim log line (", 23) != 0 || nl[-1] != ')')
			broken("a message does not name its line as \"LINE: not a shim log line "
			       "(why)\"", p);
		last = lineno;
		n++;
		p = nl + 1;
	}
	if (n != bad)
		broken("the messages are not one per bad line", msgs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jsonl_counts c = { 0 };
	struct seen s = { 0 };
	unsigned long total, lines = count_lines(data, size, &total);
	char *msgs = NULL;
	size_t mlen = 0;
	FILE *in, *m, *saved;
	int rc;

	/* fmemopen refuses an empty buffer: /dev/null reads as the empty log. */
	in = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
	m = open_memstream(&msgs, &mlen);
	if (!in || !m)
		abort();
	saved = stderr;
	stderr = m;
	rc = jsonl_read_stream(in, LOG_NAME, WHO, on_event, &s, &c);
	stderr = saved;
	fclose(in);
	if (fclose(m) != 0)
		abort();
	if (rc != (s.stopped ? STOPPED : 0))
		broken("jsonl_read_stream did not return the callback's answer", NULL);
	if (c.files != 1 || c.bad_files != 0)
		broken("a stream in memory was counted as a bad file", msgs);
	if (s.stopped ? s.events + c.bad_lines > lines : s.events + c.bad_lines != lines)
		broken("the events and bad lines are not the lines that are not blank", msgs);
	check_messages(msgs, mlen, c.bad_lines, total);
	free(msgs);
	return 0;
}
