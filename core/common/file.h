/*
 * file.h - reading a whole small file (configs, indexes, Triton JSON).
 */
#ifndef SM120_CORE_COMMON_FILE_H
#define SM120_CORE_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * sm_read_small - the whole regular file at @path in a malloc'd,
 * NUL-terminated buffer of *@len bytes (not counting the NUL), as large as
 * the file.  Opened close-on-exec and without blocking, so a FIFO in its
 * place is refused, never waited on.  Returns NULL with errno set: the
 * open's errno, EINVAL not a regular file, EFBIG over @max bytes, ENOMEM, or
 * the read error (never a silently short buffer).
 */
char *sm_read_small(const char *path, size_t max, size_t *len);

#endif
