/*
 * extent.c - size of an image known only by its address (see image.h,
 * "in-process images").  Used where the driver API hands over a pointer and
 * no length: cuModuleLoadData, cuModuleLoadFatBinary, cuLibraryLoadData.
 */
#include "image.h"

#include <elf.h>
#include <string.h>

#include "../common/bytes.h"

#define MAX_IMAGE (1ull << 31)

const void *img_wrapper_fatbin(const void *wrapper, size_t *len)
{
	const uint8_t *w = wrapper;
	const void *data;

	*len = 0;
	if (!w || bytes_u32(w) != IMG_WRAPPER_MAGIC)
		return NULL;
	memcpy(&data, w + 8, sizeof(data));
	*len = img_fatbin_size(data);
	return *len ? data : NULL;
}

/* elf_extent - furthest byte of the header tables and PROGBITS-like sections. */
static size_t elf_extent(const uint8_t *p)
{
	Elf64_Ehdr eh;
	uint64_t end, i;

	if (p[EI_CLASS] != ELFCLASS64 || p[EI_DATA] != ELFDATA2LSB)
		return 0;
	memcpy(&eh, p, sizeof(eh));
	if (eh.e_shnum && eh.e_shentsize != sizeof(Elf64_Shdr))
		return 0;
	end = sizeof(eh);
	if (eh.e_phnum && eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize > end)
		end = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
	if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > end)
		end = eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr);
	if (end > MAX_IMAGE)
		return 0;
	for (i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;

		memcpy(&sh, p + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
			continue;
		if (sh.sh_offset + sh.sh_size > end)
			end = sh.sh_offset + sh.sh_size;
	}
	return end > MAX_IMAGE ? 0 : (size_t)end;
}

size_t img_image_size(const void *buf)
{
	const uint8_t *p = buf;

	if (!p)
		return 0;
	if (memcmp(p, ELFMAG, SELFMAG) == 0)
		return elf_extent(p);
	if (bytes_u32(p) == IMG_FATBIN_MAGIC)
		return img_fatbin_size(p);
	if (bytes_u32(p) == IMG_WRAPPER_MAGIC)
		return 0;
	if (img_classify(p, strnlen((const char *)p, 4096)) == IMG_KIND_PTX)
		return strlen((const char *)p) + 1;
	return 0;
}
