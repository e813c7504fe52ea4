/*
 * trace.h - SM120SHIM_TRACE=1 writes one stderr line per hooked call
 * ("sm120shim: trace cuLaunchKernel_ptsz").  For tests and debugging: it
 * shows which exact entry point a call reached.  Off, it costs one branch.
 */
#ifndef SM120_SHIM_INTERCEPT_TRACE_H
#define SM120_SHIM_INTERCEPT_TRACE_H

#include "../driver/hooks.h"

/* -1 until read (on first use: another library's constructor may call a
 * hook before ours runs), then 0 or 1. */
extern int shim_trace_on;

/* shim_trace_write - the slow path of SHIM_TRACE: reads the setting once. */
void shim_trace_write(enum shim_hook_id id);

#define SHIM_TRACE(sym)                                   \
	do {                                              \
		if (__builtin_expect(shim_trace_on != 0, 0)) \
			shim_trace_write(SHIM_HOOK_##sym); \
	} while (0)

#endif
