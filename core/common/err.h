/*
 * err.h - error messages that name the thing and the fix.
 *
 * Library code in shim/ and tools/ returns 0 or -errno and, on failure, fills a
 * struct sm_err with one line of text that names the object (file, kernel,
 * section) and what is wrong with it.  Callers print or log it; nothing in the
 * library prints by itself.
 */
#ifndef SM120_CORE_COMMON_ERR_H
#define SM120_CORE_COMMON_ERR_H

#include <stddef.h>

struct sm_err {
	char msg[512];
};

/*
 * sm_err_set - format a message into @err (may be NULL) and return @code.
 * Returns @code unchanged so that callers can write `return sm_err_set(...)`.
 */
int sm_err_set(struct sm_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* sm_err_clear - make @err (may be NULL) hold the empty message. */
void sm_err_clear(struct sm_err *err);

#endif
