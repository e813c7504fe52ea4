/*
 * scan_walk.h - the scan in progress that scan.c (buffers) exposes to a file
 * walker (tools/sm120/scan_files.c: files, directories, Triton caches), so
 * that a program that only reads memory - the shim - links neither the file
 * walker nor cJSON.
 */
#ifndef SM120_CORE_IMAGE_SCAN_WALK_H
#define SM120_CORE_IMAGE_SCAN_WALK_H

#include <libelf.h>

#include "image.h"

/* One scan in progress. */
struct scan {
	const struct img_visitor *v;
	int errors;
	int stop;
	int ar_depth;           /* archives inside archives being walked */
	const char *ar_file;    /* the outermost archive being walked (origins' file) */
	const char *member;     /* the member being read (origins' member), or NULL */
};

/* What a Triton <name>.json beside a cubin says about it. */
struct scan_triton {
	const char *json;       /* its path, for messages */
	int64_t shared;         /* "shared": dynamic shared memory bytes, >= 0 */
	const char *name;       /* "name": the kernel it describes; NULL: every kernel */
};

/* scan_report - count @err and pass it to the visitor. */
void scan_report(struct scan *s, const struct sm_err *err);

/*
 * scan_cubin - parse one cubin and visit it; @triton (may be NULL) sets the
 * dynamic smem of the kernel it names, and a name the cubin lacks is reported.
 */
void scan_cubin(struct scan *s, const struct img_origin *where, const void *buf, size_t len,
		const char *label, const struct scan_triton *triton);

/*
 * scan_elf - a libelf handle over @len bytes: the fatbin sections of a host
 * object, library or executable, or every member of an ar archive (members
 * are opened through @fd, the descriptor @elf was opened on; -1 for
 * elf_memory).  A handle whose tables or sections run past @len is reported
 * as truncated, never read as empty.
 */
void scan_elf(struct scan *s, Elf *elf, int fd, size_t len, const char *file);

/* scan_buffer - img_scan_buffer inside a running scan; -EINVAL if no image. */
int scan_buffer(struct scan *s, const void *buf, size_t len, const char *label);

#endif
