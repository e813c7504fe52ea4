/*
 * section.c - find one named section of a host ELF file from its headers
 * alone, without libelf: the shim asks which code a shared library ships
 * (its .nv_fatbin) and must not read hundreds of megabytes to learn it.
 * Every offset is checked against the buffer before it is read.
 */
#include "image.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

#include "../common/bytes.h"

/* shdr - section header @i of the table at @shoff, or -EINVAL if it lies outside @len. */
static int shdr(const uint8_t *p, size_t len, uint64_t shoff, uint64_t i, Elf64_Shdr *out)
{
	if (shoff > len || i >= (len - shoff) / sizeof(*out))
		return -EINVAL;
	memcpy(out, p + shoff + i * sizeof(*out), sizeof(*out));
	return 0;
}

int img_elf_section(const void *buf, size_t len, const char *name, size_t *off, size_t *size)
{
	const uint8_t *p = buf;
	size_t want = strlen(name);
	Elf64_Ehdr eh;
	Elf64_Shdr strtab, sh;
	uint64_t i;

	*off = *size = 0;
	if (!p || len < sizeof(eh) || memcmp(p, ELFMAG, SELFMAG) != 0 ||
	    p[EI_CLASS] != ELFCLASS64 || p[EI_DATA] != ELFDATA2LSB)
		return -EINVAL;
	memcpy(&eh, p, sizeof(eh));
	if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx == SHN_UNDEF ||
	    eh.e_shstrndx >= eh.e_shnum || shdr(p, len, eh.e_shoff, eh.e_shstrndx, &strtab) != 0 ||
	    !bytes_fits(len, (size_t)strtab.sh_offset, (size_t)strtab.sh_size))
		return -EINVAL;
	for (i = 0; i < eh.e_shnum; i++) {
		if (shdr(p, len, eh.e_shoff, i, &sh) != 0)
			return -EINVAL;
		if (sh.sh_type == SHT_NOBITS || sh.sh_name >= strtab.sh_size ||
		    strtab.sh_size - sh.sh_name <= want ||
		    memcmp(p + strtab.sh_offset + sh.sh_name, name, want + 1) != 0)
			continue;
		if (!bytes_fits(len, (size_t)sh.sh_offset, (size_t)sh.sh_size))
			return -EINVAL;
		*off = (size_t)sh.sh_offset;
		*size = (size_t)sh.sh_size;
		return 0;
	}
	return -ENOENT;
}
