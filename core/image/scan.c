/*
 * scan.c - find every cubin in a buffer (files and directories: scan_files.c).
 *
 * Dispatch is by content, never by file name: ELF with e_machine EM_CUDA is a
 * cubin, any other ELF is a host object whose .nv_fatbin / __nv_relfatbin
 * sections hold fatbin containers, "!<arch>\n" is an archive whose members
 * are dispatched the same way (libelf's archive support), 0xBA55ED50 is a
 * bare container.  Every ELF is checked against its bytes first
 * (elf_check.c): libelf reads a cut file as one without sections.
 * Errors are reported through the visitor and the walk goes on, so one bad
 * entry among thousands does not hide the rest.
 */
#include "image.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/bytes.h"
#include "elf_check.h"
#include "scan_walk.h"

#define EM_CUDA_MACHINE 190
#define AR_MAGIC "!<arch>\n"
#define AR_MAGIC_LEN 8
#define AR_HEADER 60
/* Archives inside archives deeper than this are reported, not walked. */
#define MAX_AR_DEPTH 4

void scan_report(struct scan *s, const struct sm_err *err)
{
	s->errors++;
	if (s->v->on_error)
		s->v->on_error(s->v->user, err);
}

const char *img_kind_name(enum img_kind k)
{
	switch (k) {
	case IMG_KIND_CUBIN:
		return "cubin";
	case IMG_KIND_HOST_ELF:
		return "host ELF";
	case IMG_KIND_FATBIN:
		return "fatbin";
	case IMG_KIND_WRAPPER:
		return "fatbin wrapper";
	case IMG_KIND_PTX:
		return "PTX";
	case IMG_KIND_ARCHIVE:
		return "ar archive";
	default:
		return "unknown";
	}
}

enum img_kind img_classify(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i, n;

	if (!p || len < 4)
		return IMG_KIND_UNKNOWN;
	if (memcmp(p, ELFMAG, SELFMAG) == 0)
		return (len >= 20 && bytes_u16(p + 18) == EM_CUDA_MACHINE) ? IMG_KIND_CUBIN :
									     IMG_KIND_HOST_ELF;
	if (bytes_u32(p) == IMG_FATBIN_MAGIC)
		return IMG_KIND_FATBIN;
	if (bytes_u32(p) == IMG_WRAPPER_MAGIC)
		return IMG_KIND_WRAPPER;
	if (len >= AR_MAGIC_LEN && memcmp(p, AR_MAGIC, AR_MAGIC_LEN) == 0)
		return IMG_KIND_ARCHIVE;
	/* PTX: printable text with a .version directive near the top. */
	n = len < 4096 ? len : 4096;
	for (i = 0; i < n && p[i]; i++)
		if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') || p[i] > 0x7e)
			return IMG_KIND_UNKNOWN;
	n = i; /* the text ends at its NUL */
	for (i = 0; i + 8 <= n; i++)
		if (memcmp(p + i, ".version", 8) == 0)
			return IMG_KIND_PTX;
	return IMG_KIND_UNKNOWN;
}

/* triton_apply - @t's dynamic smem on the kernel it names; report a name @c lacks. */
static void triton_apply(struct scan *s, struct img_cubin *c, const struct scan_triton *t,
			 const char *label)
{
	struct sm_err err;
	uint32_t i, applied = 0;

	for (i = 0; i < c->n_kernels; i++) {
		if (t->name && strcmp(c->kernels[i].name, t->name) != 0)
			continue;
		c->kernels[i].dynamic_smem = t->shared;
		applied++;
	}
	if (applied || !t->name)
		return;
	if (c->n_kernels)
		sm_err_set(&err, -EINVAL,
			   "%s: \"name\" is \"%s\", but %s defines \"%s\"%s: not its Triton "
			   "entry; the kernel's dynamic shared memory stays unknown",
			   t->json, t->name, label, c->kernels[0].name,
			   c->n_kernels > 1 ? " and more" : "");
	else
		sm_err_set(&err, -EINVAL, "%s: \"name\" is \"%s\", but %s defines no kernel",
			   t->json, t->name, label);
	scan_report(s, &err);
}

void scan_cubin(struct scan *s, const struct img_origin *where, const void *buf, size_t len,
		const char *label, const struct scan_triton *triton)
{
	struct img_cubin c;
	struct sm_err err;
	int rc = img_cubin_parse(buf, len, label, &c, &err);

	if (rc) {
		scan_report(s, &err);
		return;
	}
	if (where->variant && !c.variant)
		c.variant = where->variant;
	if (triton)
		triton_apply(s, &c, triton, label);
	if (s->v->on_cubin && s->v->on_cubin(s->v->user, where, &c))
		s->stop = 1;
	img_cubin_free(&c);
}

static const char *comp_name(enum img_compression c)
{
	return c == IMG_COMP_ZSTD ? "zstd" : c == IMG_COMP_LZ4 ? "lz4" : "none";
}

/* origin_of - where something read under @label is, for the visitor. */
static struct img_origin origin_of(const struct scan *s, const char *label)
{
	struct img_origin o = { .file = s->member ? s->ar_file : label, .member = s->member };

	return o;
}

/* scan_fatbins - every entry of the containers in @buf. */
static void scan_fatbins(struct scan *s, const void *buf, size_t len, const char *file)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;
	struct sm_err err;
	char label[512];
	int rc = 0;

	img_fatbin_iter_init(&it, buf, len);
	while (!s->stop && (rc = img_fatbin_iter_next(&it, &e, file, &err)) == 1) {
		struct img_origin where = origin_of(s, file);
		void *img;
		size_t img_len;

		where.in_fatbin = 1;
		where.container = e.container;
		where.entry = e.index;
		where.compression = e.compression;
		where.variant = e.variant;
		if (s->v->arch_filter && e.arch != s->v->arch_filter)
			continue;
		if (e.kind == IMG_ENTRY_PTX) {
			if (s->v->on_ptx)
				s->v->on_ptx(s->v->user, &where, e.arch);
			continue;
		}
		if (e.kind != IMG_ENTRY_ELF)
			continue;
		snprintf(label, sizeof(label), "%s [fatbin container %u, entry %u, sm_%u, %s]", file,
			 e.container, e.index, e.arch, comp_name(e.compression));
		rc = img_fatbin_entry_inflate(&e, &img, &img_len, label, &err);
		if (rc) {
			scan_report(s, &err);
			continue;
		}
		scan_cubin(s, &where, img, img_len, label, NULL);
		free(img);
	}
	if (rc < 0)
		scan_report(s, &err);
}

/* scan_host_elf - the .nv_fatbin / __nv_relfatbin sections of a checked ELF. */
static void scan_host_elf(struct scan *s, Elf *elf, const char *file)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	struct sm_err err;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
		sm_err_set(&err, -EINVAL, "%s: the section name table cannot be found: %s", file,
			   img_elf_why("libelf gave no reason"));
		scan_report(s, &err);
		return;
	}
	while (!s->stop && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strcmp(name, ".nv_fatbin") != 0 && strcmp(name, "__nv_relfatbin") != 0))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || (!d->d_buf && d->d_size)) {
			sm_err_set(&err, -EINVAL, "%s: section %s cannot be read: %s", file, name,
				   img_elf_why("libelf gave no reason"));
			scan_report(s, &err);
			continue;
		}
		if (d->d_size)
			scan_fatbins(s, d->d_buf, d->d_size, file);
	}
}

/* scan_member - one archive member, by content as a file would be. */
static void scan_member(struct scan *s, Elf *m, int fd, const char *label)
{
	struct img_origin where = origin_of(s, label);
	size_t len = 0;
	const char *raw = elf_rawfile(m, &len);

	switch (raw ? img_classify(raw, len) : IMG_KIND_UNKNOWN) {
	case IMG_KIND_CUBIN:
		scan_cubin(s, &where, raw, len, label, NULL);
		break;
	case IMG_KIND_HOST_ELF:
	case IMG_KIND_ARCHIVE:
		scan_elf(s, m, fd, len, label);
		break;
	case IMG_KIND_FATBIN:
		scan_fatbins(s, raw, len, label);
		break;
	default:
		break; /* the symbol index, the long-name table, data: no image */
	}
}

/*
 * ar_stored_size - the size field of the 60-byte header in front of the
 * member at byte @rel of the archive @raw, or -1 when there is no such header
 * (libelf reports the size clipped to what the archive holds).
 */
static long long ar_stored_size(const char *raw, size_t rel)
{
	const char *h = raw + rel - AR_HEADER;
	char field[11], *end;
	long long v;

	if (rel < AR_MAGIC_LEN + AR_HEADER || h[58] != '`' || h[59] != '\n')
		return -1;
	memcpy(field, h + 48, 10);
	field[10] = '\0';
	v = strtoll(field, &end, 10);
	return end == field || v < 0 ? -1 : v;
}

/*
 * scan_archive - every member of @ar, labelled "file(member)" as ar and nm
 * name them.  libelf clips a member that runs past the archive's end to what
 * is there and stops at a header it cannot read, both silently: the sizes in
 * the headers are compared with the archive's bytes here, and bytes after
 * the last member libelf walked are reported.
 */
static void scan_archive(struct scan *s, Elf *ar, int fd, const char *file)
{
	Elf_Cmd cmd = ELF_C_READ_MMAP;
	struct sm_err err;
	size_t ar_len = 0, walked = AR_MAGIC_LEN;
	const char *ar_raw = elf_rawfile(ar, &ar_len);
	int64_t ar_base = elf_getbase(ar);

	const char *outer = s->member; /* the member this archive is, if it is one */
	Elf *m;

	if (s->ar_depth >= MAX_AR_DEPTH) {
		sm_err_set(&err, -ELOOP, "%s: an archive nested %d archives deep; not read", file,
			   s->ar_depth);
		scan_report(s, &err);
		return;
	}
	if (!s->ar_depth++)
		s->ar_file = file;
	while (!s->stop && (m = elf_begin(fd, cmd, ar)) != NULL) {
		Elf_Arhdr *h = elf_getarhdr(m);
		const char *name = h && h->ar_name ? h->ar_name : "?";
		size_t n = strlen(file) + strlen(name) + 3, rel = 0;
		size_t mn = (outer ? strlen(outer) + 2 : 0) + strlen(name) + 1;
		int64_t base = elf_getbase(m);
		long long stored = -1;
		char *label = malloc(n), *member = malloc(mn);

		if (ar_raw && ar_base >= 0 && base >= ar_base && (uint64_t)(base - ar_base) <= ar_len) {
			rel = (size_t)(base - ar_base);
			stored = ar_stored_size(ar_raw, rel);
			if (stored >= 0)
				walked = (unsigned long long)stored > ar_len - rel ?
						 ar_len : rel + (size_t)stored + (stored & 1);
		}
		if (stored >= 0 && (unsigned long long)stored > ar_len - rel) {
			sm_err_set(&err, -EINVAL,
				   "%s: truncated archive: member %s (%lld bytes at byte %zu) runs "
				   "past the end of its %zu bytes",
				   file, name, stored, rel, ar_len);
			scan_report(s, &err);
		} else if (label && member) {
			snprintf(label, n, "%s(%s)", file, name);
			if (outer)
				snprintf(member, mn, "%s(%s)", outer, name);
			else
				snprintf(member, mn, "%s", name);
			s->member = member;
			scan_member(s, m, fd, label);
			s->member = outer;
		} else {
			sm_err_set(&err, -ENOMEM, "%s(%s): out of memory; not scanned", file, name);
			scan_report(s, &err);
		}
		free(label);
		free(member);
		cmd = elf_next(m);
		elf_end(m);
	}
	if (!--s->ar_depth)
		s->ar_file = NULL;
	if (ar_raw && !s->stop && walked < ar_len) {
		sm_err_set(&err, -EINVAL,
			   "%s: truncated or corrupt archive: the %zu bytes from byte %zu are no "
			   "member libelf can read",
			   file, ar_len - walked, walked);
		scan_report(s, &err);
	}
}

void scan_elf(struct scan *s, Elf *elf, int fd, size_t len, const char *file)
{
	struct sm_err err;

	if (elf_kind(elf) == ELF_K_AR) {
		scan_archive(s, elf, fd, file);
		return;
	}
	if (elf_kind(elf) != ELF_K_ELF && img_classify(elf_rawfile(elf, NULL), len) ==
					      IMG_KIND_ARCHIVE) {
		sm_err_set(&err, -EINVAL, "%s: libelf cannot read it as an ar archive: %s", file,
			   img_elf_why("libelf gave no reason"));
		scan_report(s, &err);
		return;
	}
	if (img_elf_check(elf, len, file, &err) != 0) {
		scan_report(s, &err);
		return;
	}
	scan_host_elf(s, elf, file);
}

int scan_buffer(struct scan *s, const void *buf, size_t len, const char *label)
{
	struct img_origin where = { .file = label };
	struct sm_err err;
	enum img_kind kind = img_classify(buf, len);

	switch (kind) {
	case IMG_KIND_CUBIN:
		scan_cubin(s, &where, buf, len, label, NULL);
		break;
	case IMG_KIND_FATBIN:
		scan_fatbins(s, buf, len, label);
		break;
	case IMG_KIND_HOST_ELF:
	case IMG_KIND_ARCHIVE: {
		char *copy = malloc(len);
		Elf *elf;

		if (!copy) {
			sm_err_set(&err, -ENOMEM, "%s: out of memory", label);
			scan_report(s, &err);
			break;
		}
		memcpy(copy, buf, len);
		elf_version(EV_CURRENT);
		elf = elf_memory(copy, len);
		if (elf) {
			scan_elf(s, elf, -1, len, label);
			elf_end(elf);
		} else {
			img_elf_open_error(buf, len, label, &err);
			scan_report(s, &err);
		}
		free(copy);
		break;
	}
	case IMG_KIND_PTX:
		if (s->v->on_ptx)
			s->v->on_ptx(s->v->user, &where, 0);
		break;
	case IMG_KIND_WRAPPER:
		sm_err_set(&err, -EINVAL,
			   "%s: a fatbin wrapper (0x466243B1) points into the process that "
			   "registered it; scan the library that contains it instead", label);
		scan_report(s, &err);
		return -EINVAL;
	default:
		sm_err_set(&err, -EINVAL,
			   "%s: not a CUDA image (no ELF, ar, fatbin or PTX signature in its first "
			   "bytes)",
			   label);
		scan_report(s, &err);
		return -EINVAL;
	}
	return 0;
}

int img_scan_buffer(const void *buf, size_t len, const char *label, const struct img_visitor *v)
{
	struct scan s = { .v = v };
	int rc = scan_buffer(&s, buf, len, label);

	return rc < 0 ? rc : s.errors;
}

