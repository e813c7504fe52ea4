/*
 * log.h - everything the shim says.
 *
 *  - stderr: one line per distinct problem (per kernel, not per launch), and
 *    a summary at exit when anything was over the limit, which points at the
 *    log only if the log could be written (else it says it could not);
 *  - SM120SHIM_LOG: one JSON object per line per event, for programs
 *    (`sm120 report` reads several processes' logs).
 * Every line is one write(2) on a descriptor opened with O_APPEND, so lines
 * from threads and processes never interleave; the file is created without
 * following symlinks.  Nothing here allocates after the first call, and
 * nothing ever exits or aborts.
 */
#ifndef SM120_SHIM_LOG_LOG_H
#define SM120_SHIM_LOG_LOG_H

#include <stddef.h>
#include <stdint.h>

/* shim_log_warn - "sm120shim: <message>" on stderr, always. */
void shim_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#include "../../core/image/image.h"

/* An occupancy padding (SM120SHIM_EMULATE_OCCUPANCY, shim/gate/occupancy.h). */
struct shim_event_pad {
	int64_t from, to;          /* the launch's dynamic bytes, and what it ran with */
	uint32_t blocks;           /* resident blocks per SM on the device with @to */
	uint32_t target_blocks;    /* ... on the target */
	uint32_t device_blocks;    /* ... on the device with @from */
};

/*
 * One event for the JSON log.  Strings may be NULL and numbers < 0: those
 * keys are omitted.  A zero-initialised event is empty, so set the numbers
 * that do not apply to -1.
 */
struct shim_event {
	const char *event;       /* "launch", "set_attribute", "load", "occupancy" */
	const char *level;       /* "info" for an event that reports no problem; NULL: none */
	const char *action;      /* "log", "refuse", "accept", "reroute", "library"; loads:
				    "parsed", "deferred", "unreadable" */
	const char *decision;    /* launches and attribute sets: route_decide's action; differs
				    from action only when a planned reroute could not launch */
	const char *kernel;      /* kernel name */
	const char *via;         /* the entry point: "cuLaunchKernelEx_ptsz" */
	const char *target;      /* "sm120" */
	const char *mode;        /* "enforce" */
	const char *origin;      /* the image: "libtorch_cuda.so+0x4a2000", a path, "driver" */
	const char *image;       /* loads: "cubin", "fatbin", "PTX", ... */
	const char *arch;        /* the cubin the device runs: "sm_90a" */
	const char *error;       /* loads: why the image could not be read */
	const char *reason;      /* why an over-limit launch was not rerouted */
	const char *rule;        /* the rule that rerouted it */
	const char *rerouted_to; /* the bundled kernel that ran instead */
	/* Launches and attribute sets under an emulated target: the evidence route_decide
	   weighed (core/route/evidence.h), enough for `sm120 route` to weigh it again. */
	const char *evidence;    /* what it found: "library: ..." or "judged: ..." */
	const char *device;      /* the device the image was loaded for: "sm_90" */
	const char *image_codes; /* a fatbin image's codes: "sm_90 sm_120 compute_120" */
	const char *image_file;  /* the file the image was loaded from */
	const char *loader;      /* the shared object that loaded the image */
	const char *loader_codes; /* the codes of the loader's own .nv_fatbin */
	int runtime_compiled;    /* 1: loaded while the runtime-compiled flag was set */
	int64_t static_smem;
	int64_t dynamic_smem;
	int64_t limit;           /* the target's opt-in bytes per block */
	int64_t kernels;         /* loads: kernels in the image */
	int64_t regs;
	int64_t param_bytes;
	int64_t sms;             /* launches: the device's multiprocessors, which a plan may weigh
				    (adapter_input), so `sm120 route` replays with them; 0: none */
	uint32_t n_params;       /* "param_sizes" when non-zero */
	const struct img_param *params;
	void *const *args;       /* launches: kernelParams, written as "args" (each parameter's
				    bytes in hex, memory order) so `sm120 route` can replay the
				    decision; NULL: none */
	const char *const *settings; /* launches: the rule settings by RULE_SETTINGS row, NULL
					or "" when unset ("settings" object); NULL: none */
	const char *compiled;    /* launches: what Triton compiled into the kernel (the Python
				    hook's text, core/rules/compiled.h), written whole or not
				    at all so `sm120 route` replays with the same facts; NULL:
				    none known */
	const struct shim_event_pad *pad; /* occupancy: written as "occupancy_pad"; NULL: none */
	unsigned int grid[3];
	unsigned int block[3];
};

/*
 * shim_log_setup - where the JSON log goes (@path, "" for none) and what the
 * exit summary names: the limit (@limit: "sm120", "device's") and the mode.
 * The settings call it once, before any event; the strings must outlive the
 * process's last event.
 */
void shim_log_setup(const char *path, const char *limit, const char *mode);

/* shim_log_event - append @e to the JSON log (no-op without SM120SHIM_LOG). */
void shim_log_event(const struct shim_event *e);

/*
 * shim_log_json_string - write @s as a JSON string literal (quotes included)
 * into @out of @n bytes; returns the length written, truncating safely.
 */
size_t shim_log_json_string(char *out, size_t n, const char *s);

/*
 * shim_log_first - 1 the first time @key (a problem: kernel name and what
 * happened) is seen in this process, 0 afterwards: the stderr line of a
 * problem is written once, however many handles, modules or launches the
 * kernel has.  Lock-free; when its table
 * is full it answers 1 (repeating a line rather than losing one).
 */
int shim_log_first(const char *key);

/* What happened to one over-limit call, for the exit summary. */
enum shim_outcome {
	SHIM_OUTCOME_LOGGED = 0,   /* diagnose: passed on unchanged */
	SHIM_OUTCOME_REFUSED,
	SHIM_OUTCOME_REROUTED,
	SHIM_OUTCOME_ACCEPTED,     /* an attribute set accepted for rerouting */
	SHIM_OUTCOME_LIBRARY,      /* a library's kernel under an emulated target: passed */
	SHIM_OUTCOMES
};

/* shim_log_count - count one over-limit call for the exit summary. */
void shim_log_count(enum shim_outcome outcome);

#endif
