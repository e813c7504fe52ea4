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
};

/* scan_report - count @err and pass it to the visitor. */
void scan_report(struct scan *s, const struct sm_err *err);

/*
 * scan_cubin - parse one cubin and visit it; @triton_shared >= 0 sets the
 * dynamic smem of @triton_name (or of every kernel if NULL).
 */
void scan_cubin(struct scan *s, const struct img_origin *where, const void *buf, size_t len,
		const char *label, int64_t triton_shared, const char *triton_name);

/* scan_host_elf - the fatbin sections of a host ELF handle. */
void scan_host_elf(struct scan *s, Elf *elf, const char *file);

/* scan_buffer - img_scan_buffer inside a running scan; -EINVAL if no image. */
int scan_buffer(struct scan *s, const void *buf, size_t len, const char *label);

#endif
