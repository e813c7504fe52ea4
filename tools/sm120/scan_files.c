/*
 * scan_files.c - find every cubin in a file or a directory (see scan.c for
 * buffers).  A file is mapped and dispatched by content, never by name; in a
 * directory, a <name>.cubin with a <name>.json beside it is a Triton cache
 * entry whose JSON "shared" is the kernel's dynamic shared memory.
 *
 * In a directory, what has an image's signature and cannot be read (a cut
 * ELF, a JSON naming another kernel) is an error like anywhere else; what
 * is no image at all (.py, .txt, empty files, PTX), symbolic links below
 * the starting path (never followed) and special files are passed to
 * on_skip, so the caller can say how many it passed over and why.
 */
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

#include "../../core/common/file.h"
#include "../../core/image/elf_check.h"
#include "../../core/image/scan_walk.h"
#include "scan_files.h"

#define MAX_DEPTH 32
#define MAX_JSON_BYTES (16u << 20)

/* ---------------------------------------------------------------- files */

/*
 * triton_json - "shared" and "name" from a Triton <name>.json.  Returns 0 with
 * *shared >= 0, or -EINVAL (reported) when the JSON is there but unusable.
 */
static int triton_json(struct scan *s, const char *path, int64_t *shared, char **name)
{
	struct sm_err err;
	size_t len;
	char *text = sm_read_small(path, MAX_JSON_BYTES, &len);
	cJSON *root, *sh, *nm;
	int rc = -EINVAL;

	*shared = -1;
	*name = NULL;
	if (!text) {
		rc = -errno;
		sm_err_set(&err, rc, "%s: cannot read: %s", path, strerror(-rc));
		scan_report(s, &err);
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
		scan_report(s, &err);
	cJSON_Delete(root);
	free(text);
	return rc;
}

static void skip(struct scan *s, const char *path, enum img_skip why)
{
	if (s->v->on_skip)
		s->v->on_skip(s->v->user, path, why);
}

/* sibling - @path with its @from suffix replaced by @to (malloc'd), or NULL. */
static char *sibling(const char *path, const char *from, const char *to)
{
	size_t plen = strlen(path), flen = strlen(from);
	char *out;

	if (plen <= flen || strcmp(path + plen - flen, from) != 0)
		return NULL;
	out = malloc(plen - flen + strlen(to) + 1);
	if (out) {
		memcpy(out, path, plen - flen);
		strcpy(out + plen - flen, to);
	}
	return out;
}

/* triton_sidecar - whether @path is the <name>.json of a <name>.cubin beside it. */
static int triton_sidecar(const char *path)
{
	char *cubin = sibling(path, ".json", ".cubin");
	int yes = cubin && access(cubin, F_OK) == 0;

	free(cubin);
	return yes;
}

/*
 * scan_file - one file; @in_dir passes files that are no image to on_skip
 * (a Triton <name>.json is read with its cubin, so it is not counted).
 */
static void scan_file(struct scan *s, const char *path, int in_dir)
{
	struct sm_err err;
	struct stat st;
	void *map = MAP_FAILED;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum img_kind kind;

	if (fd < 0 || fstat(fd, &st) != 0) {
		sm_err_set(&err, -errno, "%s: cannot open: %s", path, strerror(errno));
		scan_report(s, &err);
		goto out;
	}
	if (st.st_size == 0) {
		if (!in_dir) {
			sm_err_set(&err, -EINVAL, "%s: empty file, not a CUDA image", path);
			scan_report(s, &err);
		} else {
			skip(s, path, IMG_SKIP_NOT_IMAGE);
		}
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		sm_err_set(&err, -errno, "%s: cannot map: %s", path, strerror(errno));
		scan_report(s, &err);
		goto out;
	}
	kind = img_classify(map, (size_t)st.st_size);
	if (in_dir && (kind == IMG_KIND_UNKNOWN || kind == IMG_KIND_PTX)) {
		if (kind == IMG_KIND_PTX || !triton_sidecar(path))
			skip(s, path, kind == IMG_KIND_PTX ? IMG_SKIP_PTX : IMG_SKIP_NOT_IMAGE);
		goto out;
	}
	if (kind == IMG_KIND_HOST_ELF || kind == IMG_KIND_ARCHIVE) {
		/* libelf maps the file itself; section data is read in place. */
		Elf *elf;

		elf_version(EV_CURRENT);
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		if (!elf) {
			img_elf_open_error(map, (size_t)st.st_size, path, &err);
			scan_report(s, &err);
			goto out;
		}
		scan_elf(s, elf, fd, (size_t)st.st_size, path);
		elf_end(elf);
	} else if (kind == IMG_KIND_CUBIN) {
		struct img_origin where = { .file = path };
		struct scan_triton t = { .shared = -1 };
		char *json = sibling(path, ".cubin", ".json"), *name = NULL;

		if (json && access(json, F_OK) == 0 && triton_json(s, json, &t.shared, &name) == 0) {
			where.triton = 1;
			t.json = json;
			t.name = name;
		}
		scan_cubin(s, &where, map, (size_t)st.st_size, path, where.triton ? &t : NULL);
		free(name);
		free(json);
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
		scan_report(s, &err);
		return;
	}
	if (S_ISLNK(st.st_mode) && depth > 0) {
		skip(s, path, IMG_SKIP_LINK); /* never follow links inside a tree: no cycles */
		return;
	}
	if (stat(path, &st) != 0) {
		sm_err_set(&err, -errno, "%s: %s", path, strerror(errno));
		scan_report(s, &err);
		return;
	}
	if (S_ISREG(st.st_mode)) {
		scan_file(s, path, depth > 0);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (depth == 0) {
			sm_err_set(&err, -EINVAL, "%s: neither a file nor a directory", path);
			scan_report(s, &err);
		} else {
			skip(s, path, IMG_SKIP_SPECIAL);
		}
		return;
	}
	if (depth >= MAX_DEPTH) {
		sm_err_set(&err, -ELOOP, "%s: more than %d directories deep; not descending", path,
			   MAX_DEPTH);
		scan_report(s, &err);
		return;
	}
	n = scandir(path, &names, skip_dots, alphasort);
	if (n < 0) {
		sm_err_set(&err, -errno, "%s: cannot list: %s", path, strerror(errno));
		scan_report(s, &err);
		return;
	}
	for (i = 0; i < n; i++) {
		size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
		char *child = malloc(len);

		if (!child) {
			sm_err_set(&err, -ENOMEM, "%s/%s: out of memory; not scanned", path,
				   names[i]->d_name);
			scan_report(s, &err);
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
