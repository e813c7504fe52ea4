/*
 * elf_error_pic.c - libelf's error-code functions, for linking libelf.a into
 * a shared object.
 *
 * Debian's libelf.a keeps its thread-local error code in elf_error.o with the
 * local-exec TLS model, which the linker refuses in a shared object (the
 * only such object in the archive).  The Makefile builds the shim's copy of
 * the archive without that object and with this one: the same three entry
 * points over a thread-local code (general-dynamic TLS under -fPIC).  Error
 * messages carry the code only; the tool, an executable, keeps libelf's own.
 */
#include <stdio.h>

/* The code libelf's functions set on failure (0: none); per thread. */
static __thread int last_error;
static __thread char message[48];

/* __libelf_seterrno - called inside libelf when an operation fails. */
void __libelf_seterrno(int value)
{
	last_error = value;
}

/* elf_errno - the last error code of this thread, which is then cleared. */
int elf_errno(void)
{
	int e = last_error;

	last_error = 0;
	return e;
}

/* elf_errmsg - text for @error (0: the current error, or NULL if none; -1: the current one). */
const char *elf_errmsg(int error)
{
	int e = error <= 0 ? last_error : error;

	if (error == 0 && e == 0)
		return NULL;
	if (e == 0)
		return "no libelf error";
	snprintf(message, sizeof(message), "libelf error %d", e);
	return message;
}
