/*
 * bytes.h - bounded little-endian reads from untrusted buffers.
 *
 * Every parser in the project reads foreign bytes (cubins, fatbins, host ELF
 * files handed to us by another process) through these helpers, which never
 * read past @len.  All multi-byte fields in CUDA images are little-endian and
 * may be unaligned, so they are assembled with memcpy.
 */
#ifndef SM120_CORE_COMMON_BYTES_H
#define SM120_CORE_COMMON_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* bytes_fits - true when [off, off + n) lies inside a buffer of @len bytes. */
static inline int bytes_fits(size_t len, size_t off, size_t n)
{
	return off <= len && n <= len - off;
}

static inline uint16_t bytes_u16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t bytes_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t bytes_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#endif
