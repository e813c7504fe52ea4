/*
 * elf_check.c - an ELF handle's tables and sections against the bytes it
 * was opened on (see elf_check.h for why libelf alone is not enough).
 *
 * Sizes are compared by division, never by adding attacker-chosen offsets:
 * a table of @n entries of @size bytes at @off fits @len bytes when
 * off <= len and n <= (len - off) / size.
 */
#include "elf_check.h"

#include <errno.h>
#include <gelf.h>
#include <stdint.h>
#include <string.h>

#define EM_CUDA_MACHINE 190
#define SHT_CUDA_INFO 0x70000000u
#define SHT_CUDA_COMPAT 0x70000086u

const char *img_elf_why(const char *fallback)
{
	int e = elf_errno();

	return e ? elf_errmsg(e) : fallback;
}

/* table_fits - whether @n entries of @size bytes at byte @off lie inside @len bytes. */
static int table_fits(uint64_t off, uint64_t n, uint64_t size, size_t len)
{
	return off <= len && (size == 0 || n <= (len - off) / size);
}

int img_elf_open_error(const void *buf, size_t len, const char *origin, struct sm_err *err)
{
	const unsigned char *p = buf;
	size_t need = p && len > EI_CLASS && p[EI_CLASS] == ELFCLASS32 ? sizeof(Elf32_Ehdr) :
									 sizeof(Elf64_Ehdr);

	if (!p)
		return sm_err_set(err, -EINVAL, "%s: libelf cannot read it as ELF: %s", origin,
				  img_elf_why("its bytes are not available"));
	if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) != 0)
		return sm_err_set(err, -EINVAL, "%s: not an ELF file (no \\x7fELF signature)",
				  origin);
	if (len < need)
		return sm_err_set(err, -EINVAL,
				  "%s: truncated ELF: %zu bytes, shorter than its %zu-byte ELF header",
				  origin, len, need);
	/* What libelf refuses without recording an error (elf_kind ELF_K_NONE). */
	if (p[EI_CLASS] != ELFCLASS32 && p[EI_CLASS] != ELFCLASS64)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: class %u (e_ident[EI_CLASS]) is neither 1 "
				  "(32-bit) nor 2 (64-bit)", origin, p[EI_CLASS]);
	if (p[EI_DATA] != ELFDATA2LSB && p[EI_DATA] != ELFDATA2MSB)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: byte order %u (e_ident[EI_DATA]) is neither 1 "
				  "(little-endian) nor 2 (big-endian)", origin, p[EI_DATA]);
	if (p[EI_VERSION] != EV_CURRENT)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: version %u (e_ident[EI_VERSION]), expected 1",
				  origin, p[EI_VERSION]);
	return sm_err_set(err, -EINVAL, "%s: libelf cannot read it as ELF: %s", origin,
			  img_elf_why("its ELF header is malformed"));
}

/* check_phdrs - the program header table (PN_XNUM: the count sits in section 0). */
static int check_phdrs(Elf *elf, const GElf_Ehdr *eh, size_t len, const char *origin,
		       struct sm_err *err)
{
	size_t entsize = gelf_fsize(elf, ELF_T_PHDR, 1, EV_CURRENT);
	size_t n = eh->e_phnum;

	if (!eh->e_phnum)
		return 0;
	if (eh->e_phentsize != entsize)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: program headers of %u bytes, expected %zu",
				  origin, eh->e_phentsize, entsize);
	if (eh->e_phnum == PN_XNUM && elf_getphdrnum(elf, &n) != 0)
		return sm_err_set(err, -EINVAL, "%s: malformed ELF: the program header count "
				  "cannot be read: %s", origin, img_elf_why("section 0 is missing"));
	if (!table_fits(eh->e_phoff, n, entsize, len))
		return sm_err_set(err, -EINVAL,
				  "%s: truncated ELF: the program header table (%zu x %zu bytes at "
				  "byte %llu) runs past the end of its %zu bytes",
				  origin, n, entsize, (unsigned long long)eh->e_phoff, len);
	return 0;
}

/*
 * check_shdrs - the section header table and the section name table index.
 * e_shnum 0 with a table present is the extended count (it sits in section
 * 0's sh_size); libelf reports 0 sections when the table runs past the end.
 */
static int check_shdrs(Elf *elf, const GElf_Ehdr *eh, size_t len, size_t *shstrndx,
		       const char *origin, struct sm_err *err)
{
	size_t entsize = gelf_fsize(elf, ELF_T_SHDR, 1, EV_CURRENT);
	size_t claimed = eh->e_shnum ? eh->e_shnum : 1, n;

	*shstrndx = 0;
	if (!eh->e_shoff && !eh->e_shnum)
		return 0; /* no section header table at all */
	if (!eh->e_shoff)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: a section header table (%u x %zu bytes) at byte "
				  "0, over the ELF header",
				  origin, eh->e_shnum, entsize);
	if (eh->e_shentsize != entsize)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: section headers of %u bytes, expected %zu",
				  origin, eh->e_shentsize, entsize);
	if (!table_fits(eh->e_shoff, claimed, entsize, len))
		return sm_err_set(err, -EINVAL,
				  "%s: truncated ELF: the section header table (%zu x %zu bytes at "
				  "byte %llu) runs past the end of its %zu bytes",
				  origin, claimed, entsize, (unsigned long long)eh->e_shoff, len);
	if (elf_getshdrnum(elf, &n) != 0 || n == 0)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: libelf reads no section from the section header "
				  "table at byte %llu (extended count past the end of its %zu bytes?)",
				  origin, (unsigned long long)eh->e_shoff, len);
	if (!table_fits(eh->e_shoff, n, entsize, len))
		return sm_err_set(err, -EINVAL,
				  "%s: truncated ELF: the section header table (%zu x %zu bytes at "
				  "byte %llu) runs past the end of its %zu bytes",
				  origin, n, entsize, (unsigned long long)eh->e_shoff, len);
	if (elf_getshdrstrndx(elf, shstrndx) != 0 || *shstrndx >= n)
		return sm_err_set(err, -EINVAL,
				  "%s: malformed ELF: its section name table index lies past its "
				  "last section (%zu)", origin, n - 1);
	return 0;
}

/*
 * holds_bytes - whether @sh's sh_offset and sh_size describe bytes of the file.
 * CUDA's processor-specific types include some that hold none: .nv.shared.<k>
 * of a relocatable cubin (0x7000000a) has a size with nothing behind it, like
 * SHT_NOBITS.  Of those types only the ones the cubin reader parses are checked.
 */
static int holds_bytes(const GElf_Ehdr *eh, const GElf_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL || !sh->sh_size)
		return 0;
	if (eh->e_machine == EM_CUDA_MACHINE && sh->sh_type >= SHT_LOPROC &&
	    sh->sh_type <= SHT_HIPROC)
		return sh->sh_type == SHT_CUDA_INFO || sh->sh_type == SHT_CUDA_COMPAT;
	return 1;
}

int img_elf_check(Elf *elf, size_t len, const char *origin, struct sm_err *err)
{
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t shstrndx;
	int rc;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		size_t raw_len = 0;
		const char *raw = elf_rawfile(elf, &raw_len);

		return img_elf_open_error(raw, raw ? raw_len : len, origin, err);
	}
	rc = check_phdrs(elf, &eh, len, origin, err);
	if (rc)
		return rc;
	rc = check_shdrs(elf, &eh, len, &shstrndx, origin, err);
	if (rc)
		return rc;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return sm_err_set(err, -EINVAL,
					  "%s: malformed ELF: section header %zu cannot be read: %s",
					  origin, elf_ndxscn(scn), img_elf_why("libelf gave no reason"));
		if (!holds_bytes(&eh, &sh) || table_fits(sh.sh_offset, 1, sh.sh_size, len))
			continue;
		name = shstrndx ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		return sm_err_set(err, -EINVAL,
				  "%s: truncated ELF: section %zu (%s, %llu bytes at byte %llu) runs "
				  "past the end of its %zu bytes",
				  origin, elf_ndxscn(scn), name && *name ? name : "no name",
				  (unsigned long long)sh.sh_size, (unsigned long long)sh.sh_offset,
				  len);
	}
	return 0;
}
