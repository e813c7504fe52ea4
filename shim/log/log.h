/*
 * log.h - everything the shim says.
 *
 *  - stderr: one line per distinct problem (per kernel, not per launch), and
 *    a summary at exit when anything was over the limit;
 *  - SM120SHIM_LOG: one JSON object per line per event, for programs
 *    (`sm120 report` reads several processes' logs).
 * Every line is one write(2) on a descriptor opened with O_APPEND, so lines
 * from threads and processes never interleave; the file is created without
 * following symlinks.  Nothing here allocates after the first call, and
 * nothing ever exits or aborts.
 */
#ifndef SM120_LOG_H
#define SM120_LOG_H

#include <stddef.h>
#include <stdint.h>

/* shim_log_warn - "sm120shim: <message>" on stderr, always. */
void shim_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One event for the JSON log.  Strings may be NULL; numbers < 0 are omitted. */
struct shim_event {
	const char *event;       /* "launch", "set_attribute", "load" */
	const char *action;      /* "log", "refuse", "pass", "accept" */
	const char *kernel;      /* kernel name, or NULL */
	const char *via;         /* the entry point: "cuLaunchKernelEx_ptsz" */
	const char *target;      /* "sm120" */
	const char *mode;        /* "enforce" */
	int64_t static_smem;
	int64_t dynamic_smem;
	int64_t limit;           /* the target's opt-in bytes per block */
	unsigned int grid[3];
	unsigned int block[3];
};

/* shim_log_event - append @e to the JSON log (no-op without SM120SHIM_LOG). */
void shim_log_event(const struct shim_event *e);

/*
 * shim_log_json_string - write @s as a JSON string literal (quotes included)
 * into @out of @n bytes; returns the length written, truncating safely.
 */
size_t shim_log_json_string(char *out, size_t n, const char *s);

/* shim_log_count - count one over-limit event for the exit summary. */
void shim_log_count(int refused);

#endif
