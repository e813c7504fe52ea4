/* err.c - formatting for struct sm_err (see err.h). */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int sm_err_set(struct sm_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void sm_err_clear(struct sm_err *err)
{
	if (err)
		err->msg[0] = '\0';
}
