/*
 * scan_files.h - the image reader over files and directories (the tool's
 * half: it links cJSON for Triton caches and walks the file system, which the
 * shim never does).  Buffers: core/image/image.h.
 */
#ifndef SM120_TOOLS_SCAN_FILES_H
#define SM120_TOOLS_SCAN_FILES_H

#include "../../core/image/image.h"

/*
 * img_scan_path - scan a file (any kind, .a archives member by member) or a
 * directory, recursively.  A <name>.cubin with a Triton <name>.json beside it
 * takes its dynamic shared memory from the JSON's "shared"; a JSON that is
 * unusable or names another kernel is an error.  In a directory, files that
 * are no image (no ELF, ar or fatbin signature, or PTX text), symbolic links
 * below @path (not followed) and special files are passed to v->on_skip;
 * anything with an image's signature that cannot be read (a truncated ELF)
 * is an error there as on the command line.  Returns the number of errors
 * reported through on_error (a path that cannot be read is one).
 */
int img_scan_path(const char *path, const struct img_visitor *v);

#endif
