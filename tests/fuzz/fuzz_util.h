/*
 * fuzz_util.h - what the fuzz targets of the file readers share
 * (fuzz_safetensors.c, fuzz_config.c, fuzz_jsonl.c).
 *
 * One input can stand for several files: its parts are separated by
 * FUZZ_SEP (a line "--8<--"), and the target writes each part to the file
 * the reader expects, in a private temporary directory (under /dev/shm
 * when it exists, so no disk is touched), made once per process and
 * emptied after every input.  A broken promise of the reader aborts, so
 * that libFuzzer keeps the input; the message goes to stderr first.
 */
#ifndef SM120_TESTS_FUZZ_UTIL_H
#define SM120_TESTS_FUZZ_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/common/err.h"

/* Between the files of one input. */
#define FUZZ_SEP "\n--8<--\n"
#define FUZZ_SEP_LEN (sizeof(FUZZ_SEP) - 1)

/* Folded reads of every field end here, so that no read is optimised away. */
static volatile uint64_t fuzz_sink;

/* fuzz_broken - a promise of the reader does not hold: say which, and crash. */
__attribute__((noreturn))
static inline void fuzz_broken(const char *target, const char *what, const char *msg)
{
	fprintf(stderr, "%s: %s (message \"%s\")\n", target, what, msg ? msg : "");
	abort();
}

/* fuzz_touch - read all of @p[0..len); AddressSanitizer reports a short buffer. */
static inline uint64_t fuzz_touch(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = len;

	for (size_t i = 0; i < len; i++)
		h = h * 31 + b[i];
	return h;
}

/*
 * fuzz_has - whether @s contains @what.  Not strstr or strncmp: libFuzzer
 * would learn each needle (the temporary directory's name) as a word to insert.
 */
static inline int fuzz_has(const char *s, const char *what)
{
	do {
		size_t i = 0;

		while (what[i] && s[i] == what[i])
			i++;
		if (!what[i])
			return 1;
	} while (*s++);
	return 0;
}

/*
 * fuzz_check_err - a failure's message: not empty, naming @what (the file
 * or directory at fault, as the reader was given it).
 */
static inline void fuzz_check_err(const char *target, const char *fn, const struct sm_err *err,
			   const char *what)
{
	char why[160];

	if (!memchr(err->msg, '\0', sizeof(err->msg)) || !err->msg[0])
		snprintf(why, sizeof(why), "%s failed without a message", fn);
	else if (!fuzz_has(err->msg, what))
		snprintf(why, sizeof(why), "%s failed with a message that does not name %s", fn,
			 what);
	else
		return;
	fuzz_broken(target, why, err->msg);
}

/* One part of an input: @len bytes at @p. */
struct fuzz_part {
	const uint8_t *p;
	size_t len;
};

/*
 * fuzz_split - @data cut at each FUZZ_SEP into at most @max parts (the last
 * keeps any further separators); returns the number of parts (>= 1).
 */
static inline size_t fuzz_split(const uint8_t *data, size_t size, struct fuzz_part *parts,
				size_t max)
{
	size_t n = 0;

	while (n + 1 < max) {
		const uint8_t *at = memmem(data, size, FUZZ_SEP, FUZZ_SEP_LEN);

		if (!at)
			break;
		parts[n++] = (struct fuzz_part){ data, (size_t)(at - data) };
		size -= (size_t)(at - data) + FUZZ_SEP_LEN;
		data = at + FUZZ_SEP_LEN;
	}
	parts[n++] = (struct fuzz_part){ data, size };
	return n;
}

/* The private directory and the files written into it for the current input. */
static char fuzz_dir_path[256];
static char fuzz_written[16][64];
static int fuzz_nwritten;

static inline void fuzz_dir_remove(void)
{
	DIR *d = opendir(fuzz_dir_path);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(fuzz_dir_path);
}

/*
 * fuzz_dir - the process's private directory, made on the first call and
 * removed at exit (an input that crashes the process leaves it behind, as
 * /dev/shm/sm120-fuzz_TARGET-XXXXXX).
 */
static inline const char *fuzz_dir(const char *target)
{
	struct stat st;
	const char *base = getenv("TMPDIR");

	if (fuzz_dir_path[0])
		return fuzz_dir_path;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	else if (!base || !*base)
		base = "/tmp";
	snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/sm120-%s-XXXXXX", base, target);
	if (!mkdtemp(fuzz_dir_path)) {
		fprintf(stderr, "%s: cannot make a directory %s: %s\n", target, fuzz_dir_path,
			strerror(errno));
		exit(1);
	}
	atexit(fuzz_dir_remove);
	return fuzz_dir_path;
}

/*
 * fuzz_write - @part as the file @name of the private directory.  A failure
 * is the machine's (a full /dev/shm), not the input's: the process exits.
 */
static inline void fuzz_write(const char *target, const char *name, struct fuzz_part part)
{
	char path[512];
	size_t done = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_dir(target), name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	while (fd >= 0 && done < part.len) {
		ssize_t k = write(fd, part.p + done, part.len - done);

		if (k <= 0)
			break;
		done += (size_t)k;
	}
	if (fd < 0 || done < part.len || close(fd) != 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", target, path, strerror(errno));
		exit(1);
	}
	if (fuzz_nwritten < (int)(sizeof(fuzz_written) / sizeof(fuzz_written[0])))
		snprintf(fuzz_written[fuzz_nwritten++], sizeof(fuzz_written[0]), "%s", name);
}

/* fuzz_clear - remove the files fuzz_write wrote for this input. */
static inline void fuzz_clear(void)
{
	char path[512];

	while (fuzz_nwritten > 0) {
		snprintf(path, sizeof(path), "%s/%s", fuzz_dir_path, fuzz_written[--fuzz_nwritten]);
		unlink(path);
	}
}

#endif
