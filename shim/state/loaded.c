/* loaded.c - see loaded.h. */
#include "loaded.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forklock.h"

enum image_state {
	IMAGE_DEFERRED = 0,   /* bytes kept by pointer, not parsed yet */
	IMAGE_PARSED,         /* kernels copied out of the cubin the device runs */
	IMAGE_NO_FACTS,       /* PTX only, nothing for this device, or malformed */
};

struct kernel_copy {
	char *name;
	struct loaded_facts f;  /* f.params owned */
};

struct image {
	void *owner;
	enum image_state state;
	const void *buf;        /* IMAGE_DEFERRED: the preserved bytes (not owned) */
	size_t len;
	int device_sm;
	int sm;
	char variant;
	uint32_t n_kernels;
	struct kernel_copy *kernels;
	struct loaded_provenance prov;
	char origin[192];
	struct image *next;
};

struct loaded_library {
	struct loaded_library *next;
	atomic_int scanned;                 /* codes below are final */
	const struct evidence_codes *codes; /* interned; NULL: no readable .nv_fatbin */
	char path[];
};

/* An interned set of codes (never freed: kernel facts point at it). */
struct codes_node {
	struct codes_node *next;
	struct evidence_codes c;
};

#define BUCKETS 1024u
/* Interned records are never freed; past these counts new ones are not kept
   (the evidence is then unknown, and the kernels judged). */
#define MAX_LIBRARIES 4096u
#define MAX_CODE_SETS 1024u

static struct image *buckets[BUCKETS];
static struct loaded_library *libraries;
static unsigned int n_libraries;
static struct codes_node *code_sets;
static unsigned int n_code_sets;
FORK_SAFE_MUTEX(table)
FORK_SAFE_MUTEX(libs)
FORK_SAFE_MUTEX(interned)

static unsigned int bucket_of(const void *owner)
{
	return (unsigned int)(((uintptr_t)owner * 0x9e3779b97f4a7c15ull) >> 54) & (BUCKETS - 1);
}

/* find_locked - @owner's record (the table locked), or NULL. */
static struct image *find_locked(const void *owner)
{
	struct image *im;

	for (im = buckets[bucket_of(owner)]; im && im->owner != owner; im = im->next)
		;
	return im;
}

int loaded_runs_on(int arch, char variant, int device_sm)
{
	return evidence_runs_on(arch, variant, device_sm);
}

/* intern_codes - the one shared copy of @c (NULL when @c is empty or the table is full). */
static const struct evidence_codes *intern_codes(const struct evidence_codes *c)
{
	struct codes_node *n;

	if (!c->n)
		return NULL;
	interned_lock();
	for (n = code_sets; n && memcmp(&n->c, c, sizeof(*c)) != 0; n = n->next)
		;
	if (!n && n_code_sets < MAX_CODE_SETS && (n = malloc(sizeof(*n))) != NULL) {
		n->c = *c;
		n->next = code_sets;
		code_sets = n;
		n_code_sets++;
	}
	interned_unlock();
	return n ? &n->c : NULL;
}

/* fatbin_codes - the interned codes of the fatbin @buf[0..len); NULL if malformed or empty. */
static const struct evidence_codes *fatbin_codes(const void *buf, size_t len)
{
	struct evidence_codes c;

	if (evidence_codes_from_fatbin(buf, len, &c) != 0)
		return NULL; /* unsure what it holds: no evidence */
	return intern_codes(&c);
}

/* evidence_kind - the evidence's name for an image of kind @k. */
static enum evidence_image evidence_kind(enum img_kind k)
{
	switch (k) {
	case IMG_KIND_FATBIN:
		return EVIDENCE_IMAGE_FATBIN;
	case IMG_KIND_CUBIN:
		return EVIDENCE_IMAGE_CUBIN;
	case IMG_KIND_PTX:
		return EVIDENCE_IMAGE_PTX;
	default:
		return EVIDENCE_IMAGE_UNKNOWN;
	}
}

/* score - preference among runnable cubins: newest SM, then 'a' over 'f' over plain. */
static int score(int arch, char variant)
{
	return arch * 4 + (variant == 'a' ? 2 : variant == 'f' ? 1 : 0);
}

static void free_kernels(struct kernel_copy *k, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		free(k[i].name);
		free(k[i].f.params);
	}
	free(k);
}

/* own_params - give @f its own copy of @n parameters at @p (f->params replaced). */
static int own_params(struct loaded_facts *f, const struct img_param *p, uint32_t n)
{
	f->params = NULL;
	f->n_params = n;
	if (!n)
		return 0;
	f->params = malloc(n * sizeof(*p));
	if (!f->params)
		return -ENOMEM;
	memcpy(f->params, p, n * sizeof(*p));
	return 0;
}

/* copy_facts - @out = @k's facts with an owned copy of the parameters. */
static int copy_facts(const struct img_kernel *k, int sm, char variant, struct loaded_facts *out)
{
	*out = (struct loaded_facts){ .static_smem = k->static_smem, .dynamic_smem = k->dynamic_smem,
				      .regs = k->regs, .param_bytes = k->param_bytes, .sm = sm,
				      .variant = variant };
	return own_params(out, k->params, k->n_params);
}

/* What a parse collects: the best runnable cubin's kernels, and the first error. */
struct collect {
	int device_sm;
	int want_sm;            /* only this (SM, variant), or 0: any runnable */
	char want_variant;
	int best;               /* score of what is kept, -1 if nothing */
	int sm;
	char variant;
	uint32_t n;
	struct kernel_copy *kernels;
	int errors;
	int rc;                 /* first error code */
	struct sm_err err;
};

static int on_cubin(void *user, const struct img_origin *where, const struct img_cubin *c)
{
	struct collect *col = user;
	char variant = c->variant ? c->variant : where->variant;
	struct kernel_copy *k;
	uint32_t i;

	if (!loaded_runs_on(c->sm, variant, col->device_sm) || score(c->sm, variant) <= col->best)
		return 0;
	if (col->want_sm && (c->sm != col->want_sm || variant != col->want_variant))
		return 0;
	k = calloc(c->n_kernels ? c->n_kernels : 1, sizeof(*k));
	for (i = 0; k && i < c->n_kernels; i++) {
		k[i].name = strdup(c->kernels[i].name);
		if (!k[i].name || copy_facts(&c->kernels[i], c->sm, variant, &k[i].f)) {
			free_kernels(k, i + 1);
			k = NULL;
		}
	}
	if (!k) {
		col->rc = col->rc ? col->rc : -ENOMEM;
		return 1;
	}
	free_kernels(col->kernels, col->n);
	col->kernels = k;
	col->n = c->n_kernels;
	col->best = score(c->sm, variant);
	col->sm = c->sm;
	col->variant = variant;
	return 0;
}

static void on_error(void *user, const struct sm_err *err)
{
	struct collect *col = user;

	if (!col->errors++) {
		col->err = *err;
		col->rc = -EINVAL;
	}
}

/*
 * choose_entry - the (SM, variant) of the fatbin ELF entry the device runs,
 * found from the entry headers alone so that only that entry is inflated.
 */
static void choose_entry(const void *buf, size_t len, struct collect *col)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;
	int best = -1;

	img_fatbin_iter_init(&it, buf, len);
	while (img_fatbin_iter_next(&it, &e, "", NULL) == 1) {
		if (e.kind != IMG_ENTRY_ELF || !loaded_runs_on((int)e.arch, e.variant, col->device_sm) ||
		    score((int)e.arch, e.variant) <= best)
			continue;
		best = score((int)e.arch, e.variant);
		col->want_sm = (int)e.arch;
		col->want_variant = e.variant;
	}
}

/* parse - fill @im from @buf[0..len); returns 0 or -errno with @err. */
static int parse(struct image *im, const void *buf, size_t len, struct sm_err *err)
{
	struct collect col = { .device_sm = im->device_sm, .best = -1 };
	struct img_visitor v = { .on_cubin = on_cubin, .on_error = on_error, .user = &col };

	if (img_classify(buf, len) == IMG_KIND_FATBIN) {
		im->prov.codes = fatbin_codes(buf, len);
		choose_entry(buf, len, &col);
		if (!col.want_sm) /* PTX only, or nothing for this device: the driver JITs */
			goto done;
		v.arch_filter = (uint32_t)col.want_sm;
	}
	if (img_scan_buffer(buf, len, im->origin, &v) < 0 && !col.rc)
		on_error(&col, &(struct sm_err){ "" });
done:
	im->buf = NULL;
	im->state = col.best >= 0 ? IMAGE_PARSED : IMAGE_NO_FACTS;
	im->sm = col.sm;
	im->variant = col.variant;
	im->kernels = col.kernels;
	im->n_kernels = col.n;
	if (col.best >= 0 || !col.rc)
		return 0;
	if (!col.err.msg[0])
		return sm_err_set(err, col.rc, "%s: not a CUDA image the shim can read", im->origin);
	if (err)
		*err = col.err;
	return col.rc;
}

static void free_image(struct image *im)
{
	if (im) {
		free_kernels(im->kernels, im->n_kernels);
		free(im);
	}
}

/* unlink_owner - remove @owner's record from the table (locked); returns it. */
static struct image *unlink_owner(const void *owner)
{
	struct image **p = &buckets[bucket_of(owner)], *im;

	for (; (im = *p); p = &im->next)
		if (im->owner == owner) {
			*p = im->next;
			return im;
		}
	return NULL;
}

static void summarise(const struct image *im, enum img_kind kind, struct loaded_summary *sum)
{
	if (!sum)
		return;
	*sum = (struct loaded_summary){ .kind = kind, .deferred = im->state == IMAGE_DEFERRED,
					.sm = im->sm, .variant = im->variant,
					.n_kernels = im->state == IMAGE_PARSED ? (int64_t)im->n_kernels : -1 };
}

/* add - parse (or keep) and insert @im, replacing a stale record of the same owner. */
static int add(struct image *im, const void *buf, size_t len, int preserved,
	       struct loaded_summary *sum, struct sm_err *err)
{
	int rc = 0;

	im->prov.image = evidence_kind(img_classify(buf, len));
	im->prov.device_sm = im->device_sm;
	if (preserved) {
		im->buf = buf;
		im->len = len;
		im->state = IMAGE_DEFERRED;
	} else {
		rc = parse(im, buf, len, err);
	}
	summarise(im, img_classify(buf, len), sum);
	table_lock();
	free_image(unlink_owner(im->owner));
	im->next = buckets[bucket_of(im->owner)];
	buckets[bucket_of(im->owner)] = im;
	table_unlock();
	return rc;
}

static struct image *new_image(void *owner, int device_sm, const char *origin)
{
	struct image *im = calloc(1, sizeof(*im));

	if (im) {
		im->owner = owner;
		im->device_sm = device_sm;
		snprintf(im->origin, sizeof(im->origin), "%s", origin ? origin : "?");
	}
	return im;
}

/* add_image - loaded_add, for bytes read from a file when @from_file. */
static int add_image(void *owner, const void *image, size_t len, int device_sm, int preserved,
		     const char *origin, int from_file, struct loaded_summary *sum,
		     struct sm_err *err)
{
	struct image *im;

	if (!owner || !image || !len)
		return sm_err_set(err, -EINVAL, "%s: not a cubin, fatbin or PTX image the shim recognises",
				  origin ? origin : "?");
	im = new_image(owner, device_sm, origin);
	if (!im)
		return sm_err_set(err, -ENOMEM, "%s: out of memory", origin ? origin : "?");
	im->prov.from_file = from_file;
	return add(im, image, len, preserved, sum, err);
}

int loaded_add(void *owner, const void *image, size_t len, int device_sm, int preserved,
	       const char *origin, struct loaded_summary *sum, struct sm_err *err)
{
	return add_image(owner, image, len, device_sm, preserved, origin, 0, sum, err);
}

int loaded_add_file(void *owner, const char *path, int device_sm, struct loaded_summary *sum,
		    struct sm_err *err)
{
	struct stat st;
	void *map = MAP_FAILED;
	int fd, rc;

	if (!owner || !path)
		return sm_err_set(err, -EINVAL, "no image file");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0)
		rc = sm_err_set(err, -errno, "%s: cannot read: %s", path, strerror(errno));
	else if (st.st_size == 0)
		rc = sm_err_set(err, -EINVAL, "%s: empty file, not a CUDA image", path);
	else if ((map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
		rc = sm_err_set(err, -errno, "%s: cannot map: %s", path, strerror(errno));
	else
		rc = add_image(owner, map, (size_t)st.st_size, device_sm, 0, path, 1, sum, err);
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	if (fd >= 0)
		close(fd);
	return rc;
}

int loaded_find(const void *owner, const char *name, struct loaded_facts *out, char *origin,
		size_t n, struct sm_err *err)
{
	struct image *im;
	int rc = -ENOENT;
	uint32_t i;

	if (!owner || !name)
		return -ENOENT;
	table_lock();
	im = find_locked(owner);
	if (im && im->state == IMAGE_DEFERRED) {
		rc = parse(im, im->buf, im->len, err);
		if (rc)
			goto out;
		rc = -ENOENT;
	}
	if (origin && n && im)
		snprintf(origin, n, "%s", im->origin);
	for (i = 0; im && i < im->n_kernels; i++) {
		if (strcmp(im->kernels[i].name, name) != 0)
			continue;
		*out = im->kernels[i].f;
		out->prov = im->prov;
		rc = own_params(out, im->kernels[i].f.params, im->kernels[i].f.n_params);
		break;
	}
out:
	table_unlock();
	return rc;
}

void loaded_drop(const void *owner)
{
	struct image *im;

	table_lock();
	im = unlink_owner(owner);
	table_unlock();
	free_image(im);
}

/* intern_library - the record of @path, created on first sight; NULL if none can be kept. */
static struct loaded_library *intern_library(const char *path)
{
	struct loaded_library *lib;
	size_t n = strlen(path) + 1;

	libs_lock();
	for (lib = libraries; lib && strcmp(lib->path, path) != 0; lib = lib->next)
		;
	if (!lib && n_libraries < MAX_LIBRARIES && (lib = calloc(1, sizeof(*lib) + n)) != NULL) {
		memcpy(lib->path, path, n);
		lib->next = libraries;
		libraries = lib;
		n_libraries++;
	}
	libs_unlock();
	return lib;
}

int loaded_set_loader(const void *owner, const char *loader_path, int runtime_compiled)
{
	struct loaded_library *lib = loader_path && loader_path[0] ? intern_library(loader_path) :
								      NULL;
	struct image *im;

	table_lock();
	im = owner ? find_locked(owner) : NULL;
	if (im) {
		im->prov.loader = lib;
		im->prov.runtime_compiled = runtime_compiled;
	}
	table_unlock();
	return im ? 0 : -ENOENT;
}

int loaded_provenance(const void *owner, struct loaded_provenance *out)
{
	struct image *im;

	memset(out, 0, sizeof(*out));
	if (!owner)
		return -ENOENT;
	table_lock();
	im = find_locked(owner);
	if (im && im->state == IMAGE_DEFERRED && im->prov.image == EVIDENCE_IMAGE_FATBIN &&
	    !im->prov.codes)
		im->prov.codes = fatbin_codes(im->buf, im->len);
	if (im)
		*out = im->prov;
	table_unlock();
	return im ? 0 : -ENOENT;
}

const char *loaded_library_path(const struct loaded_library *lib)
{
	return lib ? lib->path : NULL;
}

/*
 * scan_library - the interned codes of the .nv_fatbin section of the shared
 * object @path, from the entry headers of the mapped file; NULL when it is no
 * regular ELF file, has no such section, or the section is malformed.
 */
static const struct evidence_codes *scan_library(const char *path)
{
	const struct evidence_codes *codes = NULL;
	void *map = MAP_FAILED;
	size_t off, size;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map != MAP_FAILED) {
		if (img_elf_section(map, (size_t)st.st_size, ".nv_fatbin", &off, &size) == 0 && size)
			codes = fatbin_codes((const char *)map + off, size);
		munmap(map, (size_t)st.st_size);
	}
	close(fd);
	return codes;
}

const struct evidence_codes *loaded_library_codes(struct loaded_library *lib)
{
	if (!lib)
		return NULL;
	if (atomic_load_explicit(&lib->scanned, memory_order_acquire))
		return lib->codes;
	libs_lock();
	if (!atomic_load_explicit(&lib->scanned, memory_order_relaxed)) {
		lib->codes = scan_library(lib->path);
		atomic_store_explicit(&lib->scanned, 1, memory_order_release);
	}
	libs_unlock();
	return lib->codes;
}

const struct evidence_codes *loaded_path_codes(const char *path)
{
	struct loaded_library *lib = path && path[0] ? intern_library(path) : NULL;

	return lib ? loaded_library_codes(lib) : NULL;
}
