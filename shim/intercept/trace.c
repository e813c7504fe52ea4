/* trace.c - see trace.h. */
#include "trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int shim_trace_on = -1;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

static void trace_init(void)
{
	const char *v = getenv("SM120SHIM_TRACE");

	shim_trace_on = v && *v && strcmp(v, "0") != 0;
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
