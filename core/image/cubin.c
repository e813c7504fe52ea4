/*
 * cubin.c - per-kernel facts from a cubin (CUDA ELF), read with libelf.
 *
 * Layout facts (confirmed on nvcc 13.0 output):
 *   - two ELF ABIs: OSABI 0x33 / ABI version 7 keeps the SM in e_flags bits
 *     0-7 (0x800 = 'a'); OSABI 0x41 / ABI version 8 keeps it in bits 8-15;
 *   - a kernel is an STT_FUNC symbol with st_other bit 0x10 (entry);
 *   - .nv.info.<k> (sh_info = index of .text.<k>) holds per-kernel records,
 *     global .nv.info holds REGCOUNT / FRAME_SIZE keyed by symbol index;
 *   - .nv.shared.<k> (sh_info = index of .text.<k>) is the static shared size,
 *     plus the 1 KiB the driver reserves when the cubin declares
 *     .nv.reservedSmem.* symbols (sm_90 and later) - in linked (ET_EXEC)
 *     cubins only: relocatable ones (-rdc, __nv_relfatbin) hold the static
 *     size alone (measured on nvcc 13.0; the reference states the rule for
 *     linked cubins).
 * Records with unknown attribute ids are skipped by size, never rejected.
 */
#include "image.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/bytes.h"
#include "elf_check.h"

#define EM_CUDA_MACHINE 190
#define SHT_CUDA_INFO 0x70000000u
#define SHT_CUDA_COMPAT 0x70000086u
#define STO_CUDA_ENTRY 0x10
#define CUINFO_NOTE_TYPE 1000
#define DYNAMIC_SMEM_PREFIX "sm120_dynamic_smem__"

/* .nv.info record formats and the attribute ids this reader uses. */
enum { EIFMT_NVAL = 1, EIFMT_BVAL = 2, EIFMT_HVAL = 3, EIFMT_SVAL = 4 };
enum {
	EIATTR_MAX_THREADS = 0x05,
	EIATTR_REQNTID = 0x10,
	EIATTR_FRAME_SIZE = 0x11,
	EIATTR_KPARAM_INFO = 0x17,
	EIATTR_CBANK_PARAM_SIZE = 0x19,
	EIATTR_REGCOUNT = 0x2f,
	EIATTR_KPARAM_INFO_V2 = 0x45,
};
/* .nv.compat record id that is 1 for arch-specific ('a') targets. */
#define COMPAT_ID_ARCH_SPECIFIC 0x09

/* One .nv.info record; @payload/@size only for EIFMT_SVAL. */
struct nvinfo_rec {
	uint8_t fmt;
	uint8_t attr;
	uint16_t value;
	const uint8_t *payload;
	uint16_t size;
};

struct nvinfo_iter {
	const uint8_t *p;
	size_t len;
	size_t pos;
};

/* nvinfo_next - 1 and the next record, 0 at the end, -1 if the stream is cut. */
static int nvinfo_next(struct nvinfo_iter *it, struct nvinfo_rec *r)
{
	if (it->pos == it->len)
		return 0;
	if (!bytes_fits(it->len, it->pos, 4))
		return -1;
	r->fmt = it->p[it->pos];
	r->attr = it->p[it->pos + 1];
	r->value = bytes_u16(it->p + it->pos + 2);
	r->payload = NULL;
	r->size = 0;
	switch (r->fmt) {
	case EIFMT_NVAL:
	case EIFMT_BVAL:
	case EIFMT_HVAL:
		it->pos += 4;
		return 1;
	case EIFMT_SVAL:
		if (!bytes_fits(it->len, it->pos + 4, r->value))
			return -1;
		r->payload = it->p + it->pos + 4;
		r->size = r->value;
		it->pos += 4 + (size_t)r->value;
		return 1;
	default:
		return -1;
	}
}

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static int elf_ok;

static void elf_init(void)
{
	elf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

/* What the section walk learns before kernels are filled in. */
struct cubin_scan {
	Elf *elf;
	const char *origin;
	size_t len;              /* bytes the ELF was opened on */
	size_t shnum;
	size_t shstrndx;
	Elf_Scn *symtab;
	size_t nsyms;
	size_t symstr;           /* string section of the symtab */
	int32_t *kernel_of_sym;  /* symbol index -> kernel index or -1 */
	int32_t *kernel_of_text; /* section index of .text.<k> -> kernel index or -1 */
};

static const char *section_name(struct cubin_scan *s, const GElf_Shdr *sh)
{
	const char *n = elf_strptr(s->elf, s->shstrndx, sh->sh_name);

	return n ? n : "";
}

void img_cubin_free(struct img_cubin *c)
{
	uint32_t i;

	if (!c)
		return;
	for (i = 0; i < c->n_kernels; i++) {
		free(c->kernels[i].name);
		free(c->kernels[i].params);
	}
	free(c->kernels);
	memset(c, 0, sizeof(*c));
}

const struct img_kernel *img_cubin_find(const struct img_cubin *c, const char *name)
{
	uint32_t i;

	for (i = 0; i < c->n_kernels; i++)
		if (strcmp(c->kernels[i].name, name) == 0)
			return &c->kernels[i];
	return NULL;
}

static int param_cmp(const void *a, const void *b)
{
	const struct img_param *x = a, *y = b;

	return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* read_dims - a 12-byte u32 x,y,z payload (MAX_THREADS, REQNTID). */
static void read_dims(const struct nvinfo_rec *r, uint32_t out[3])
{
	if (r->size < 12)
		return;
	out[0] = bytes_u32(r->payload);
	out[1] = bytes_u32(r->payload + 4);
	out[2] = bytes_u32(r->payload + 8);
}

/* kernel_info_parse - the records of .nv.info.<k> into @k. */
static int kernel_info_parse(struct cubin_scan *s, const uint8_t *p, size_t len,
			     struct img_kernel *k, struct sm_err *err)
{
	struct nvinfo_iter it = { p, len, 0 };
	struct nvinfo_rec r;
	uint32_t cap = 0, i;
	int rc;

	while ((rc = nvinfo_next(&it, &r)) == 1) {
		switch (r.attr) {
		case EIATTR_MAX_THREADS:
			read_dims(&r, k->max_threads);
			break;
		case EIATTR_REQNTID:
			read_dims(&r, k->reqntid);
			break;
		case EIATTR_CBANK_PARAM_SIZE:
			k->param_bytes = r.value;
			break;
		case EIATTR_KPARAM_INFO:
		case EIATTR_KPARAM_INFO_V2: {
			struct img_param prm;

			if (r.fmt != EIFMT_SVAL || r.size < 12)
				return sm_err_set(err, -EINVAL,
						  "%s: kernel %s: parameter record of %u bytes, expected 12",
						  s->origin, k->name, r.size);
			prm.ordinal = bytes_u16(r.payload + 4);
			prm.offset = bytes_u16(r.payload + 6);
			if (r.attr == EIATTR_KPARAM_INFO) {
				prm.size = bytes_u32(r.payload + 8) >> 18;
			} else {
				prm.size = bytes_u16(r.payload + 8);
				k->params_v2 = 1;
			}
			if (k->n_params == cap) {
				struct img_param *np;

				cap = cap ? cap * 2 : 8;
				np = realloc(k->params, cap * sizeof(*np));
				if (!np)
					return sm_err_set(err, -ENOMEM, "%s: out of memory", s->origin);
				k->params = np;
			}
			k->params[k->n_params++] = prm;
			break;
		}
		default:
			break;
		}
	}
	if (rc < 0)
		return sm_err_set(err, -EINVAL,
				  "%s: .nv.info.%s is truncated at byte %zu of %zu",
				  s->origin, k->name, it.pos, len);
	if (k->n_params > 1) /* a kernel without parameters has no array: qsort(NULL) is UB */
		qsort(k->params, k->n_params, sizeof(*k->params), param_cmp);
	for (i = 0; i < k->n_params; i++) {
		const struct img_param *q = &k->params[i];

		if (i > 0 && q->ordinal == k->params[i - 1].ordinal)
			return sm_err_set(err, -EINVAL, "%s: kernel %s: parameter %u is described twice",
					  s->origin, k->name, q->ordinal);
		if (k->param_bytes && (uint64_t)q->offset + q->size > k->param_bytes)
			return sm_err_set(err, -EINVAL,
					  "%s: kernel %s: parameter %u (offset %u, %u bytes) ends past "
					  "the %u-byte parameter block",
					  s->origin, k->name, q->ordinal, q->offset, q->size,
					  k->param_bytes);
	}
	return 0;
}

/* global_info_parse - REGCOUNT and FRAME_SIZE records of the global .nv.info. */
static int global_info_parse(struct cubin_scan *s, const uint8_t *p, size_t len,
			     struct img_cubin *c, struct sm_err *err)
{
	struct nvinfo_iter it = { p, len, 0 };
	struct nvinfo_rec r;
	int rc;

	while ((rc = nvinfo_next(&it, &r)) == 1) {
		uint32_t sym, val;
		int32_t ki;

		if ((r.attr != EIATTR_REGCOUNT && r.attr != EIATTR_FRAME_SIZE) ||
		    r.fmt != EIFMT_SVAL || r.size < 8)
			continue;
		sym = bytes_u32(r.payload);
		val = bytes_u32(r.payload + 4);
		if (sym >= s->nsyms || (ki = s->kernel_of_sym[sym]) < 0)
			continue;
		if (r.attr == EIATTR_REGCOUNT)
			c->kernels[ki].regs = (int32_t)val;
		else
			c->kernels[ki].frame_size = val;
	}
	if (rc < 0)
		return sm_err_set(err, -EINVAL, "%s: .nv.info is truncated at byte %zu of %zu",
				  s->origin, it.pos, len);
	return 0;
}

/* compat_parse - 'a' from the .nv.compat arch-specific record. */
static void compat_parse(const uint8_t *p, size_t len, struct img_cubin *c)
{
	struct nvinfo_iter it = { p, len, 0 };
	struct nvinfo_rec r;

	while (nvinfo_next(&it, &r) == 1)
		if (r.attr == COMPAT_ID_ARCH_SPECIFIC && r.fmt == EIFMT_BVAL && r.value == 1)
			c->variant = 'a';
}

/* cuinfo_parse - the CUDA API version from the .note.nv.cuinfo note. */
static void cuinfo_parse(Elf_Data *d, struct img_cubin *c)
{
	GElf_Nhdr nh;
	size_t off = 0, name_off, desc_off;

	while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == CUINFO_NOTE_TYPE && nh.n_descsz >= 8 &&
		    bytes_fits(d->d_size, desc_off, 8))
			c->cuda_api = bytes_u32((const uint8_t *)d->d_buf + desc_off + 4);
	}
}

/* symbols_scan - count kernels, note the reserved-smem symbols, fill names. */
static int symbols_scan(struct cubin_scan *s, struct img_cubin *c, struct sm_err *err)
{
	Elf_Data *d = elf_getdata(s->symtab, NULL);
	GElf_Sym sym;
	size_t i;
	uint32_t n = 0;
	int reserved = 0;
	uint32_t cap_value = 0;

	if (!d)
		return sm_err_set(err, -EINVAL, "%s: symbol table cannot be read: %s", s->origin,
				  img_elf_why("libelf gave no reason"));
	for (i = 0; i < s->nsyms; i++) {
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym))
			return sm_err_set(err, -EINVAL, "%s: symbol %zu cannot be read", s->origin, i);
		name = elf_strptr(s->elf, s->symstr, sym.st_name);
		if (!name)
			return sm_err_set(err, -EINVAL, "%s: symbol %zu names no string", s->origin,
					  i);
		if (strcmp(name, ".nv.reservedSmem.offset0") == 0 ||
		    strcmp(name, "__nv_reservedSMEM_offset_0_alias") == 0)
			reserved = 1;
		if (strcmp(name, ".nv.reservedSmem.cap") == 0) {
			reserved = 1;
			cap_value = (uint32_t)sym.st_value;
		}
		if (GELF_ST_TYPE(sym.st_info) == STT_FUNC && (sym.st_other & STO_CUDA_ENTRY)) {
			if (!*name)
				return sm_err_set(err, -EINVAL, "%s: kernel symbol %zu has no name",
						  s->origin, i);
			n++;
		}
	}
	c->reserved_smem = reserved ? (cap_value ? cap_value : 1024) : 0;
	c->kernels = calloc(n ? n : 1, sizeof(*c->kernels));
	if (!c->kernels)
		return sm_err_set(err, -ENOMEM, "%s: out of memory", s->origin);
	for (i = 0; i < s->nsyms && c->n_kernels < n; i++) {
		struct img_kernel *k;
		const char *name;

		gelf_getsym(d, (int)i, &sym);
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY))
			continue;
		name = elf_strptr(s->elf, s->symstr, sym.st_name);
		if (!name || !*name)
			return sm_err_set(err, -EINVAL, "%s: kernel symbol %zu has no name",
					  s->origin, i);
		k = &c->kernels[c->n_kernels];
		k->name = strdup(name);
		if (!k->name)
			return sm_err_set(err, -ENOMEM, "%s: out of memory", s->origin);
		k->regs = -1;
		k->dynamic_smem = -1;
		s->kernel_of_sym[i] = (int32_t)c->n_kernels;
		if (sym.st_shndx > 0 && sym.st_shndx < s->shnum)
			s->kernel_of_text[sym.st_shndx] = (int32_t)c->n_kernels;
		c->n_kernels++;
	}
	return 0;
}

/*
 * dynamic_markers - our own kernels declare the dynamic shared memory they
 * launch with as `sm120_dynamic_smem__<kernel>` (a u32 in device memory, see
 * kernels/common.cuh), so that a cubin alone says whether it fits.
 */
static void dynamic_markers(struct cubin_scan *s, struct img_cubin *c)
{
	Elf_Data *d = elf_getdata(s->symtab, NULL);
	size_t plen = strlen(DYNAMIC_SMEM_PREFIX), i;
	GElf_Sym sym;
	GElf_Shdr sh;

	for (i = 0; d && i < s->nsyms; i++) {
		const char *name;
		struct img_kernel *k;
		Elf_Scn *scn;
		Elf_Data *sd;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_size != 4)
			continue;
		name = elf_strptr(s->elf, s->symstr, sym.st_name);
		if (!name || strncmp(name, DYNAMIC_SMEM_PREFIX, plen) != 0)
			continue;
		k = (struct img_kernel *)img_cubin_find(c, name + plen);
		scn = elf_getscn(s->elf, sym.st_shndx);
		if (!k || !scn || !gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_NOBITS) { /* zero-initialised: declared 0 */
			k->dynamic_smem = 0;
			continue;
		}
		sd = elf_getdata(scn, NULL);
		if (sd && sd->d_buf && bytes_fits(sd->d_size, sym.st_value, 4))
			k->dynamic_smem = bytes_u32((const uint8_t *)sd->d_buf + sym.st_value);
	}
}

/*
 * header_parse - ABI, SM and the 'a' flag of ABI V1 from the ELF header, once
 * img_elf_check has found every table and section inside the buffer.
 */
static int header_parse(struct cubin_scan *s, struct img_cubin *c, struct sm_err *err)
{
	GElf_Ehdr eh;
	int rc;

	if (elf_kind(s->elf) != ELF_K_ELF || !gelf_getehdr(s->elf, &eh))
		return img_elf_check(s->elf, s->len, s->origin, err); /* says why */
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return sm_err_set(err, -EINVAL, "%s: cubins are 64-bit little-endian ELF; this is not",
				  s->origin);
	if (eh.e_machine != EM_CUDA_MACHINE)
		return sm_err_set(err, -EINVAL, "%s: ELF machine %u is not EM_CUDA (190)", s->origin,
				  eh.e_machine);
	/* A cut cubin would otherwise read as one without sections or symbols. */
	rc = img_elf_check(s->elf, s->len, s->origin, err);
	if (rc)
		return rc;
	c->relocatable = eh.e_type == ET_REL;
	if (eh.e_ident[EI_OSABI] == 0x33 && eh.e_ident[EI_ABIVERSION] == 7) {
		c->abi = 1;
		c->sm = (int)(eh.e_flags & 0xff);
		if (eh.e_flags & 0x800)
			c->variant = 'a';
	} else if (eh.e_ident[EI_OSABI] == 0x41 && eh.e_ident[EI_ABIVERSION] == 8) {
		c->abi = 2;
		c->sm = (int)((eh.e_flags >> 8) & 0xff);
	} else {
		return sm_err_set(err, -ENOTSUP,
				  "%s: unknown cubin ABI (OSABI 0x%x, ABI version %u); known: "
				  "0x33/7 and 0x41/8 - a newer CUDA toolkit? please report it",
				  s->origin, eh.e_ident[EI_OSABI], eh.e_ident[EI_ABIVERSION]);
	}
	if (elf_getshdrnum(s->elf, &s->shnum) != 0 || elf_getshdrstrndx(s->elf, &s->shstrndx) != 0)
		return sm_err_set(err, -EINVAL, "%s: section headers cannot be read: %s", s->origin,
				  img_elf_why("libelf gave no reason"));
	return 0;
}

/* sections_parse - .nv.info.<k>, .nv.shared.<k>, global info, compat, cuinfo. */
static int sections_parse(struct cubin_scan *s, struct img_cubin *c, struct sm_err *err)
{
	Elf_Scn *scn = NULL;
	int rc;

	while ((scn = elf_nextscn(s->elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		int32_t ki = -1;

		if (!gelf_getshdr(scn, &sh))
			return sm_err_set(err, -EINVAL, "%s: a section header cannot be read",
					  s->origin);
		name = section_name(s, &sh);
		if (sh.sh_info < s->shnum)
			ki = s->kernel_of_text[sh.sh_info];
		if (strncmp(name, ".nv.shared.", 11) == 0 && ki >= 0 &&
		    strcmp(name + 11, c->kernels[ki].name) == 0) {
			struct img_kernel *k = &c->kernels[ki];

			if (sh.sh_size > UINT32_MAX)
				return sm_err_set(err, -EINVAL, "%s: %s claims %llu bytes", s->origin,
						  name, (unsigned long long)sh.sh_size);
			uint32_t included = c->relocatable ? 0 : c->reserved_smem;

			/* Smaller than the reservation it should include: declares nothing. */
			k->static_smem_section = (uint32_t)sh.sh_size;
			k->static_smem = sh.sh_size > included ? (uint32_t)sh.sh_size - included : 0;
			continue;
		}
		if (sh.sh_type != SHT_CUDA_INFO && sh.sh_type != SHT_CUDA_COMPAT &&
		    sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || (!d->d_buf && d->d_size))
			return sm_err_set(err, -EINVAL, "%s: section %s cannot be read: %s",
					  s->origin, name, img_elf_why("libelf gave no reason"));
		if (sh.sh_type == SHT_CUDA_COMPAT) {
			compat_parse(d->d_buf, d->d_size, c);
		} else if (sh.sh_type == SHT_NOTE) {
			if (strcmp(name, ".note.nv.cuinfo") == 0)
				cuinfo_parse(d, c);
		} else if (strcmp(name, ".nv.info") == 0) {
			rc = global_info_parse(s, d->d_buf, d->d_size, c, err);
			if (rc)
				return rc;
		} else if (strncmp(name, ".nv.info.", 9) == 0 && ki >= 0 &&
			   strcmp(name + 9, c->kernels[ki].name) == 0) {
			rc = kernel_info_parse(s, d->d_buf, d->d_size, &c->kernels[ki], err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/*
 * find_symtab - the SHT_SYMTAB section, its entry count and string table.
 * The count comes from the bytes libelf could read, never from sh_size alone:
 * a lying sh_size would size the per-symbol arrays.
 */
static int find_symtab(struct cubin_scan *s, struct sm_err *err)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(s->elf, scn)) != NULL) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB) {
			Elf_Data *d;

			if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= s->shnum)
				return sm_err_set(err, -EINVAL, "%s: malformed symbol table header",
						  s->origin);
			d = elf_getdata(scn, NULL);
			if (!d || (!d->d_buf && d->d_size))
				return sm_err_set(err, -EINVAL,
						  "%s: symbol table (%llu bytes) cannot be read: %s",
						  s->origin, (unsigned long long)sh.sh_size,
						  img_elf_why("libelf gave no reason"));
			s->symtab = scn;
			s->nsyms = d->d_size / sizeof(Elf64_Sym);
			s->symstr = sh.sh_link;
			return 0;
		}
	}
	return sm_err_set(err, -EINVAL, "%s: cubin has no symbol table", s->origin);
}

int img_cubin_parse(const void *buf, size_t len, const char *origin, struct img_cubin *out,
		    struct sm_err *err)
{
	struct cubin_scan s = { .origin = origin ? origin : "cubin", .len = len };
	char *copy = NULL;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_once(&elf_once, elf_init);
	if (!elf_ok)
		return sm_err_set(err, -ENOTSUP, "libelf refuses EV_CURRENT: libelf is too old");
	if (len < sizeof(Elf64_Ehdr))
		return img_elf_open_error(buf, len, s.origin, err);
	/* libelf may write into the image it reads; never into the caller's. */
	copy = malloc(len);
	if (!copy)
		return sm_err_set(err, -ENOMEM, "%s: out of memory (%zu bytes)", s.origin, len);
	memcpy(copy, buf, len);
	s.elf = elf_memory(copy, len);
	if (!s.elf) {
		rc = img_elf_open_error(buf, len, s.origin, err);
		goto out;
	}
	rc = header_parse(&s, out, err);
	if (rc)
		goto out;
	rc = find_symtab(&s, err);
	if (rc)
		goto out;
	s.kernel_of_sym = malloc((s.nsyms ? s.nsyms : 1) * sizeof(int32_t));
	s.kernel_of_text = malloc((s.shnum ? s.shnum : 1) * sizeof(int32_t));
	if (!s.kernel_of_sym || !s.kernel_of_text) {
		rc = sm_err_set(err, -ENOMEM, "%s: out of memory", s.origin);
		goto out;
	}
	for (i = 0; i < s.nsyms; i++)
		s.kernel_of_sym[i] = -1;
	for (i = 0; i < s.shnum; i++)
		s.kernel_of_text[i] = -1;
	rc = symbols_scan(&s, out, err);
	if (rc)
		goto out;
	rc = sections_parse(&s, out, err);
	if (rc)
		goto out;
	dynamic_markers(&s, out);
	/* sm_75..sm_89 also keep the register count in .text.<k> sh_info bits 24-31. */
	for (i = 0; out->sm < 90 && i < s.shnum; i++) {
		Elf_Scn *scn;
		GElf_Shdr sh;
		int32_t ki = s.kernel_of_text[i];

		if (ki < 0 || out->kernels[ki].regs >= 0 || !(scn = elf_getscn(s.elf, i)) ||
		    !gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_info >> 24)
			out->kernels[ki].regs = (int32_t)(sh.sh_info >> 24);
	}
out:
	if (rc)
		img_cubin_free(out);
	if (s.elf)
		elf_end(s.elf);
	free(s.kernel_of_sym);
	free(s.kernel_of_text);
	free(copy);
	return rc;
}
