/*
 * file.h - reading a whole small file (configs, indexes, Triton JSON).
 */
#ifndef SM120_CORE_COMMON_FILE_H
#define SM120_CORE_COMMON_FILE_H

#include <stddef.h>

/*
 * sm_read_small - the whole file at @path in a malloc'd, NUL-terminated
 * buffer of *@len bytes (not counting the NUL), opened close-on-exec.
 * Returns NULL with errno set: the open's errno, EFBIG over @max bytes,
 * ENOMEM, or the read error (never a silently short buffer).
 */
char *sm_read_small(const char *path, size_t max, size_t *len);

#endif
