/*
 * scan_files.c - find every cubin in a file or a directory (see scan.c for
 * buffers).  A file is mapped and dispatched by content, never by name; in a
 * directory, a <name>.cubin with a <name>.json beside it is a Triton cache
 * entry whose JSON "shared" is the kernel's dynamic shared memory.
 * Symbolic links below the starting path are not followed.
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
		scan_report(s, &err);
		goto out;
	}
	if (st.st_size == 0) {
		if (!in_dir) {
			sm_err_set(&err, -EINVAL, "%s: empty file, not a CUDA image", path);
			scan_report(s, &err);
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
			scan_report(s, &err);
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
		scan_cubin(s, &where, map, (size_t)st.st_size, path, shared, name);
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
		scan_report(s, &err);
		return;
	}
	if (S_ISLNK(st.st_mode) && depth > 0)
		return; /* never follow links inside a tree: no cycles */
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
