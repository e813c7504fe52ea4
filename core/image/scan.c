/*
 * scan.c - find every cubin in a buffer (files and directories: scan_files.c).
 *
 * Dispatch is by content, never by file name: ELF with e_machine EM_CUDA is a
 * cubin, any other ELF is a host object whose .nv_fatbin / __nv_relfatbin
 * sections hold fatbin containers, 0xBA55ED50 is a bare container.
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
#include "scan_walk.h"

#define EM_CUDA_MACHINE 190

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

void scan_cubin(struct scan *s, const struct img_origin *where, const void *buf,
			size_t len, const char *label, int64_t triton_shared,
			const char *triton_name)
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
	if (triton_shared >= 0) {
		uint32_t i;

		for (i = 0; i < c.n_kernels; i++)
			if (!triton_name || strcmp(c.kernels[i].name, triton_name) == 0)
				c.kernels[i].dynamic_smem = triton_shared;
	}
	if (s->v->on_cubin && s->v->on_cubin(s->v->user, where, &c))
		s->stop = 1;
	img_cubin_free(&c);
}

static const char *comp_name(enum img_compression c)
{
	return c == IMG_COMP_ZSTD ? "zstd" : c == IMG_COMP_LZ4 ? "lz4" : "none";
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
		struct img_origin where = { .file = file, .in_fatbin = 1, .container = e.container,
					    .entry = e.index, .compression = e.compression,
					    .variant = e.variant };
		void *img;
		size_t img_len;

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
		scan_cubin(s, &where, img, img_len, label, -1, NULL);
		free(img);
	}
	if (rc < 0)
		scan_report(s, &err);
}

void scan_host_elf(struct scan *s, Elf *elf, const char *file)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	struct sm_err err;

	if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		sm_err_set(&err, -EINVAL, "%s: ELF headers cannot be read: %s", file, elf_errmsg(-1));
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
			sm_err_set(&err, -EINVAL, "%s: section %s lies outside the file (%s)", file,
				   name, elf_errmsg(-1));
			scan_report(s, &err);
			continue;
		}
		if (d->d_size)
			scan_fatbins(s, d->d_buf, d->d_size, file);
	}
}

int scan_buffer(struct scan *s, const void *buf, size_t len, const char *label)
{
	struct img_origin where = { .file = label };
	struct sm_err err;
	enum img_kind kind = img_classify(buf, len);

	switch (kind) {
	case IMG_KIND_CUBIN:
		scan_cubin(s, &where, buf, len, label, -1, NULL);
		break;
	case IMG_KIND_FATBIN:
		scan_fatbins(s, buf, len, label);
		break;
	case IMG_KIND_HOST_ELF: {
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
			scan_host_elf(s, elf, label);
			elf_end(elf);
		} else {
			sm_err_set(&err, -EINVAL, "%s: libelf cannot open it: %s", label,
				   elf_errmsg(-1));
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
			   "%s: not a CUDA image (no ELF, fatbin or PTX signature in its first bytes)",
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

