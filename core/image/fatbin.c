/*
 * fatbin.c - walk fatbin containers and inflate their entries.
 *
 * Container: u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 fat_size
 * (bytes after the header).  Containers are concatenated (libtorch_cuda.so has
 * 444 in one .nv_fatbin); zero padding may sit between them.
 * Entry header (64 bytes or more; header_size says):
 *   +0 u16 kind (1 PTX, 2 ELF)  +4 u32 header_size  +8 u64 payload_size
 *   +16 u32 compressed_size  +24 u16 minor  +26 u16 major  +28 u32 arch
 *   +40 u64 flags (0x2000 LZ4 block, 0x8000 zstd, 0x100000 'a', 0x200000 'f')
 *   +56 u64 uncompressed_size
 * Verified on nvcc 13.0 output with --compress-mode=size|speed|none and
 * -Xfatbin=-compress-all (tests/fixtures).
 */
#include "image.h"

#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
/* ZSTD_decompressBound: experimental API, safe as libzstd is linked statically. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "../common/bytes.h"

#define CONTAINER_HEADER 16
#define ENTRY_HEADER_MIN 64
#define FLAG_LZ4 0x2000ull
#define FLAG_ZSTD 0x8000ull
#define FLAG_ARCH_SPECIFIC 0x100000ull
#define FLAG_FAMILY 0x200000ull
/* An inflated entry larger than this is a lie, not a cubin. */
#define MAX_INFLATED (1ull << 31)

void img_fatbin_iter_init(struct img_fatbin_iter *it, const void *buf, size_t len)
{
	memset(it, 0, sizeof(*it));
	it->buf = buf;
	it->len = len;
}

size_t img_fatbin_size(const void *buf)
{
	const uint8_t *p = buf;
	uint64_t fat;

	if (!p || bytes_u32(p) != IMG_FATBIN_MAGIC || bytes_u16(p + 6) < CONTAINER_HEADER)
		return 0;
	fat = bytes_u64(p + 8);
	if (fat > MAX_INFLATED)
		return 0;
	return bytes_u16(p + 6) + (size_t)fat;
}

/* next_container - move to the container at it->pos, skipping zero padding. */
static int next_container(struct img_fatbin_iter *it, const char *origin, struct sm_err *err)
{
	uint16_t hsize;
	uint64_t fat;

	while (bytes_fits(it->len, it->pos, 8) && bytes_u64(it->buf + it->pos) == 0)
		it->pos += 8;
	if (it->pos >= it->len || (it->started && it->len - it->pos < 8))
		return 0;
	if (!bytes_fits(it->len, it->pos, CONTAINER_HEADER))
		return sm_err_set(err, -EINVAL,
				  "%s: fatbin container at byte %zu is cut short: only %zu bytes of "
				  "its %d-byte header remain",
				  origin, it->pos, it->len - it->pos, CONTAINER_HEADER);
	if (bytes_u32(it->buf + it->pos) != IMG_FATBIN_MAGIC)
		return sm_err_set(err, -EINVAL,
				  "%s: bytes at offset %zu are not a fatbin container (magic 0x%08x, "
				  "expected 0x%08x)",
				  origin, it->pos, bytes_u32(it->buf + it->pos), IMG_FATBIN_MAGIC);
	hsize = bytes_u16(it->buf + it->pos + 6);
	fat = bytes_u64(it->buf + it->pos + 8);
	if (hsize < CONTAINER_HEADER)
		return sm_err_set(err, -EINVAL,
				  "%s: fatbin container %u at byte %zu has a %u-byte header; at least "
				  "%d expected",
				  origin, it->container + it->started, it->pos, hsize, CONTAINER_HEADER);
	/* Both counts from the container's first byte: header and contents together. */
	if (!bytes_fits(it->len, it->pos, hsize) || fat > it->len - it->pos - hsize)
		return sm_err_set(err, -EINVAL,
				  "%s: fatbin container %u at byte %zu is cut short: it spans %llu "
				  "bytes (%u of header, %llu of entries) but only %zu remain",
				  origin, it->container + it->started, it->pos,
				  fat > UINT64_MAX - hsize ? (unsigned long long)UINT64_MAX :
							     (unsigned long long)(hsize + fat),
				  hsize, (unsigned long long)fat, it->len - it->pos);
	if (it->started)
		it->container++;
	it->started = 1;
	it->end = it->pos + hsize + (size_t)fat;
	it->pos += hsize;
	it->index = 0;
	return 1;
}

int img_fatbin_iter_next(struct img_fatbin_iter *it, struct img_fatbin_entry *e,
			 const char *origin, struct sm_err *err)
{
	const uint8_t *h;
	uint32_t hsize;
	uint64_t psize;
	int rc;

	while (!it->started || it->pos >= it->end) {
		if (it->started)
			it->pos = it->end;
		rc = next_container(it, origin, err);
		if (rc <= 0) {
			it->pos = it->end = it->len;
			return rc;
		}
	}
	h = it->buf + it->pos;
	if (!bytes_fits(it->end, it->pos, ENTRY_HEADER_MIN))
		goto bad;
	hsize = bytes_u32(h + 4);
	psize = bytes_u64(h + 8);
	if (hsize < ENTRY_HEADER_MIN || !bytes_fits(it->end, it->pos, hsize) ||
	    psize > it->end - it->pos - hsize)
		goto bad;
	memset(e, 0, sizeof(*e));
	e->kind = bytes_u16(h);
	e->arch = bytes_u32(h + 28);
	e->flags = bytes_u64(h + 40);
	e->uncompressed_len = bytes_u64(h + 56);
	e->payload = h + hsize;
	e->payload_len = (size_t)psize;
	e->container = it->container;
	e->index = it->index++;
	e->offset = it->pos;
	if (e->flags & FLAG_ZSTD)
		e->compression = IMG_COMP_ZSTD;
	else if (e->flags & FLAG_LZ4)
		e->compression = IMG_COMP_LZ4;
	if (e->compression != IMG_COMP_NONE) {
		uint32_t csize = bytes_u32(h + 16);

		/* The stored payload is padded; the compressed stream is csize bytes. */
		if (csize > e->payload_len) {
			it->pos = it->end = it->len;
			return sm_err_set(err, -EINVAL,
					  "%s: fatbin container %u entry %u claims %u compressed bytes "
					  "in a %zu-byte payload",
					  origin, e->container, e->index, csize, e->payload_len);
		}
		if (csize)
			e->payload_len = csize;
	}
	e->variant = (e->flags & FLAG_ARCH_SPECIFIC) ? 'a' : (e->flags & FLAG_FAMILY) ? 'f' : 0;
	it->pos += hsize + (size_t)psize;
	return 1;
bad:
	rc = sm_err_set(err, -EINVAL,
			"%s: fatbin container %u entry %u at byte %zu has a header or payload size "
			"that runs past its container",
			origin, it->container, it->index, it->pos);
	it->pos = it->end = it->len;
	return rc;
}

/*
 * inflate_check - refuse an uncompressed size that @e's payload cannot
 * produce, before that much memory is allocated: an LZ4 block expands less
 * than 255 times, and the block headers of zstd frames bound their output.
 */
static int inflate_check(const struct img_fatbin_entry *e, const char *origin,
			 struct sm_err *err)
{
	unsigned long long bound;

	if (e->compression == IMG_COMP_LZ4) {
		bound = (unsigned long long)e->payload_len * 255;
	} else if (e->compression == IMG_COMP_ZSTD) {
		bound = ZSTD_decompressBound(e->payload, e->payload_len);
		if (bound == ZSTD_CONTENTSIZE_ERROR)
			return sm_err_set(err, -EINVAL,
					  "%s: fatbin container %u entry %u: zstd payload is corrupt "
					  "(its frames cannot be walked)",
					  origin, e->container, e->index);
	} else {
		return 0;
	}
	if (e->uncompressed_len > bound)
		return sm_err_set(err, -EINVAL,
				  "%s: fatbin container %u entry %u: %zu compressed bytes cannot "
				  "inflate to the %llu bytes it claims",
				  origin, e->container, e->index, e->payload_len,
				  (unsigned long long)e->uncompressed_len);
	return 0;
}

int img_fatbin_entry_inflate(const struct img_fatbin_entry *e, void **out, size_t *out_len,
			     const char *origin, struct sm_err *err)
{
	size_t want = e->compression == IMG_COMP_NONE ? e->payload_len : (size_t)e->uncompressed_len;
	void *dst;
	size_t got;
	int rc;

	*out = NULL;
	*out_len = 0;
	if (e->compression != IMG_COMP_NONE && (e->uncompressed_len == 0 ||
						e->uncompressed_len > MAX_INFLATED))
		return sm_err_set(err, -EINVAL,
				  "%s: fatbin container %u entry %u: compressed, but claims %llu "
				  "bytes uncompressed",
				  origin, e->container, e->index,
				  (unsigned long long)e->uncompressed_len);
	rc = inflate_check(e, origin, err);
	if (rc)
		return rc;
	dst = malloc(want ? want : 1);
	if (!dst)
		return sm_err_set(err, -ENOMEM, "%s: out of memory (%zu bytes)", origin, want);
	switch (e->compression) {
	case IMG_COMP_NONE:
		memcpy(dst, e->payload, want);
		got = want;
		break;
	case IMG_COMP_ZSTD:
		got = ZSTD_decompress(dst, want, e->payload, e->payload_len);
		if (ZSTD_isError(got) || got != want) {
			free(dst);
			return sm_err_set(err, -EINVAL,
					  "%s: fatbin container %u entry %u: zstd payload is corrupt "
					  "(%s)",
					  origin, e->container, e->index,
					  ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size differs");
		}
		break;
	case IMG_COMP_LZ4: {
		int n;

		if (e->payload_len > INT32_MAX || want > INT32_MAX) {
			free(dst);
			return sm_err_set(err, -EINVAL, "%s: LZ4 entry too large", origin);
		}
		n = LZ4_decompress_safe((const char *)e->payload, dst, (int)e->payload_len,
					(int)want);
		if (n < 0 || (size_t)n != want) {
			free(dst);
			return sm_err_set(err, -EINVAL,
					  "%s: fatbin container %u entry %u: LZ4 payload is corrupt",
					  origin, e->container, e->index);
		}
		got = (size_t)n;
		break;
	}
	default:
		free(dst);
		return sm_err_set(err, -ENOTSUP, "%s: unknown compression", origin);
	}
	*out = dst;
	*out_len = got;
	return 0;
}
