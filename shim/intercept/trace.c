/* trace.c - see trace.h. */
#include "trace.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../settings/config.h"

int shim_trace_on = -1;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

static void trace_init(void)
{
	/* Parsed with the other settings: one rule for every boolean, one warning. */
	shim_trace_on = shim_config()->trace;
}

void shim_trace_write(enum shim_hook_id id)
{
	char line[160];
	int n;

	pthread_once(&trace_once, trace_init);
	if (!shim_trace_on)
		return;
	n = snprintf(line, sizeof(line), "sm120shim: trace %s\n", shim_hook_table[id].name);

	/* One write: lines from several threads never interleave. */
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
