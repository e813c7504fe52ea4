/*
 * scan.c - find every cubin in a buffer, a file or a directory.
 *
 * Dispatch is by content, never by file name: ELF with e_machine EM_CUDA is a
 * cubin, any other ELF is a host object whose .nv_fatbin / __nv_relfatbin
 * sections hold fatbin containers, 0xBA55ED50 is a bare container.  In a
 * directory a <name>.cubin with a <name>.json beside it is a Triton cache
 * entry: the JSON's "shared" is the kernel's dynamic shared memory.
 * Errors are reported through the visitor and the walk goes on, so one bad
 * entry among thousands does not hide the rest.
 */
#include "image.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/bytes.h"

#define MAX_DEPTH 32
#define MAX_JSON_BYTES (16u << 20)
#define EM_CUDA_MACHINE 190

/* One scan in progress. */
struct scan {
	const struct img_visitor *v;
	int errors;
	int stop;
};

static void report(struct scan *s, const struct sm_err *err)
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

static void visit_cubin(struct scan *s, const struct img_origin *where, const void *buf,
			size_t len, const char *label, int64_t triton_shared,
			const char *triton_name)
{
	struct img_cubin c;
	struct sm_err err;
	int rc = img_cubin_parse(buf, len, label, &c, &err);

	if (rc) {
		report(s, &err);
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
			report(s, &err);
			continue;
		}
		visit_cubin(s, &where, img, img_len, label, -1, NULL);
		free(img);
	}
	if (rc < 0)
		report(s, &err);
}

/* scan_host_elf - the fatbin sections of a host ELF handle. */
static void scan_host_elf(struct scan *s, Elf *elf, const char *file)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	struct sm_err err;

	if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		sm_err_set(&err, -EINVAL, "%s: ELF headers cannot be read: %s", file, elf_errmsg(-1));
		report(s, &err);
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
			report(s, &err);
			continue;
		}
		if (d->d_size)
			scan_fatbins(s, d->d_buf, d->d_size, file);
	}
}

/* scan_buffer - img_scan_buffer inside a running scan; -EINVAL if no image. */
static int scan_buffer(struct scan *s, const void *buf, size_t len, const char *label)
{
	struct img_origin where = { .file = label };
	struct sm_err err;
	enum img_kind kind = img_classify(buf, len);

	switch (kind) {
	case IMG_KIND_CUBIN:
		visit_cubin(s, &where, buf, len, label, -1, NULL);
		break;
	case IMG_KIND_FATBIN:
		scan_fatbins(s, buf, len, label);
		break;
	case IMG_KIND_HOST_ELF: {
		char *copy = malloc(len);
		Elf *elf;

		if (!copy) {
			sm_err_set(&err, -ENOMEM, "%s: out of memory", label);
			report(s, &err);
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
			report(s, &err);
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
		report(s, &err);
		return -EINVAL;
	default:
		sm_err_set(&err, -EINVAL,
			   "%s: not a CUDA image (no ELF, fatbin or PTX signature in its first bytes)",
			   label);
		report(s, &err);
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

/* ---------------------------------------------------------------- files */

/* read_small - a whole small file, NUL-terminated; NULL with errno set. */
static char *read_small(const char *path, size_t max, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, max + 1, f);
	fclose(f);
	if (n > max) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/*
 * triton_json - "shared" and "name" from a Triton <name>.json.  Returns 0 with
 * *shared >= 0, or -EINVAL (reported) when the JSON is there but unusable.
 */
static int triton_json(struct scan *s, const char *path, int64_t *shared, char **name)
{
	struct sm_err err;
	size_t len;
	char *text = read_small(path, MAX_JSON_BYTES, &len);
	cJSON *root, *sh, *nm;
	int rc = -EINVAL;

	*shared = -1;
	*name = NULL;
	if (!text) {
		rc = -errno;
		sm_err_set(&err, rc, "%s: cannot read: %s", path, strerror(-rc));
		report(s, &err);
		return rc;
	}
	root = cJSON_ParseWithLength(text, len);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		sm_err_set(&err, -EINVAL, "%s: not valid JSON (near byte %ld)", path,
			   at && at >= text && at <= text + len ? (long)(at - text) : -1L);
		goto out;
	}
	sh = cJSON_GetObjectItemCaseSensitive(root, "shared");
	nm = cJSON_GetObjectItemCaseSensitive(root, "name");
	if (!cJSON_IsNumber(sh) || sh->valuedouble < 0 || sh->valuedouble > (double)(16u << 20) ||
	    sh->valuedouble != (double)(int64_t)sh->valuedouble) {
		sm_err_set(&err, -EINVAL,
			   "%s: no whole, non-negative \"shared\" byte count: is this a Triton "
			   "cache entry?", path);
		goto out;
	}
	*shared = (int64_t)sh->valuedouble;
	if (cJSON_IsString(nm) && nm->valuestring)
		*name = strdup(nm->valuestring);
	rc = 0;
out:
	if (rc)
		report(s, &err);
	cJSON_Delete(root);
	free(text);
	return rc;
}

/* scan_file - one file; @in_dir skips files that are no image, silently. */
static void scan_file(struct scan *s, const char *path, int in_dir)
{
	struct sm_err err;
	struct stat st;
	void *map = MAP_FAILED;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum img_kind kind;

	if (fd < 0 || fstat(fd, &st) != 0) {
		sm_err_set(&err, -errno, "%s: cannot open: %s", path, strerror(errno));
		report(s, &err);
		goto out;
	}
	if (st.st_size == 0) {
		if (!in_dir) {
			sm_err_set(&err, -EINVAL, "%s: empty file, not a CUDA image", path);
			report(s, &err);
		}
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		sm_err_set(&err, -errno, "%s: cannot map: %s", path, strerror(errno));
		report(s, &err);
		goto out;
	}
	kind = img_classify(map, (size_t)st.st_size);
	if (in_dir && (kind == IMG_KIND_UNKNOWN || kind == IMG_KIND_PTX))
		goto out;
	if (kind == IMG_KIND_HOST_ELF) {
		/* libelf maps the file itself; section data is read in place. */
		Elf *elf;

		elf_version(EV_CURRENT);
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		if (!elf) {
			sm_err_set(&err, -EINVAL, "%s: libelf cannot open it: %s", path,
				   elf_errmsg(-1));
			report(s, &err);
			goto out;
		}
		scan_host_elf(s, elf, path);
		elf_end(elf);
	} else if (kind == IMG_KIND_CUBIN) {
		size_t plen = strlen(path);
		int64_t shared = -1;
		char *name = NULL;
		struct img_origin where = { .file = path };

		if (plen > 6 && strcmp(path + plen - 6, ".cubin") == 0) {
			char *json = malloc(plen);

			if (json) {
				memcpy(json, path, plen - 6);
				strcpy(json + plen - 6, ".json");
				if (access(json, F_OK) == 0 &&
				    triton_json(s, json, &shared, &name) == 0)
					where.triton = 1;
				free(json);
			}
		}
		visit_cubin(s, &where, map, (size_t)st.st_size, path, shared, name);
		free(name);
	} else {
		scan_buffer(s, map, (size_t)st.st_size, path);
	}
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	if (fd >= 0)
		close(fd);
}

static int skip_dots(const struct dirent *d)
{
	return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

static void scan_tree(struct scan *s, const char *path, int depth)
{
	struct sm_err err;
	struct dirent **names;
	struct stat st;
	int n, i;

	if (lstat(path, &st) != 0) {
		sm_err_set(&err, -errno, "%s: %s", path, strerror(errno));
		report(s, &err);
		return;
	}
	if (S_ISLNK(st.st_mode) && depth > 0)
		return; /* never follow links inside a tree: no cycles */
	if (stat(path, &st) != 0) {
		sm_err_set(&err, -errno, "%s: %s", path, strerror(errno));
		report(s, &err);
		return;
	}
	if (S_ISREG(st.st_mode)) {
		scan_file(s, path, depth > 0);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (depth == 0) {
			sm_err_set(&err, -EINVAL, "%s: neither a file nor a directory", path);
			report(s, &err);
		}
		return;
	}
	if (depth >= MAX_DEPTH) {
		sm_err_set(&err, -ELOOP, "%s: more than %d directories deep; not descending", path,
			   MAX_DEPTH);
		report(s, &err);
		return;
	}
	n = scandir(path, &names, skip_dots, alphasort);
	if (n < 0) {
		sm_err_set(&err, -errno, "%s: cannot list: %s", path, strerror(errno));
		report(s, &err);
		return;
	}
	for (i = 0; i < n; i++) {
		size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
		char *child = malloc(len);

		if (!child) {
			sm_err_set(&err, -ENOMEM, "%s/%s: out of memory; not scanned", path,
				   names[i]->d_name);
			report(s, &err);
		} else if (!s->stop) {
			snprintf(child, len, "%s/%s", path, names[i]->d_name);
			scan_tree(s, child, depth + 1);
		}
		free(child);
		free(names[i]);
	}
	free(names);
}

int img_scan_path(const char *path, const struct img_visitor *v)
{
	struct scan s = { .v = v };

	scan_tree(&s, path, 0);
	return s.errors;
}
