/*
 * safetensors.c - read (mmap) and write Hugging Face safetensors files and
 * sharded checkpoints (see safetensors.h).
 *
 * Reading trusts nothing in a file: the header length, the JSON, every
 * dtype, shape and offset and every name are checked before a pointer into
 * the mapping is formed, so a malformed or truncated file gives an error that
 * names the file and the tensor, never a read outside the mapping.  Only
 * regular files are opened, without blocking: a FIFO or a device in place of
 * a shard or of the index is refused by name, never waited on.  cJSON
 * reads numbers as doubles, so an offset or a dimension above 2^53 is refused
 * rather than rounded.  Gaps between tensors are accepted (the reference
 * reader refuses them; nothing here depends on a fully covered buffer).
 *
 * Writing spools tensor data, as it is added, to an unlinked temporary file
 * beside the destination (a checkpoint is never held in memory), then writes
 * header and data to a second temporary file that is renamed onto the path,
 * so no reader sees a half-written file.  Header keys keep the order of the
 * st_writer_add calls; the data is laid out by descending element size (in
 * the order added within one size, as the reference writer does by
 * alignment) so that every tensor starts aligned to its element size in a
 * page-aligned mapping without holes between tensors.
 */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/common/file.h"

#define ST_MAX_HEADER 100000000u	/* the format's limit on the header length */
#define ST_MAX_INDEX (256u << 20)	/* an index.json larger than this is not one */
#define ST_MAX_EXACT (1ull << 53)	/* larger JSON numbers do not survive a double */
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_FILE_NAME "model.safetensors"
#define ST_COPY_CHUNK (4u << 20)

/* ---------------------------------------------------------------- dtypes */

/*
 * Every dtype string of the format with its bits per element.  The first
 * ST_OTHER rows are in enum order; the rest are valid strings the engine does
 * not read (ST_OTHER), kept so that their sizes can still be checked.
 */
static const struct {
	const char *name;
	unsigned bits;
} dtypes[] = {
	[ST_BF16] = {"BF16", 16},
	[ST_F16] = {"F16", 16},
	[ST_F32] = {"F32", 32},
	[ST_F64] = {"F64", 64},
	[ST_F8_E4M3] = {"F8_E4M3", 8},
	[ST_I8] = {"I8", 8},
	[ST_U8] = {"U8", 8},
	[ST_I16] = {"I16", 16},
	[ST_I32] = {"I32", 32},
	[ST_I64] = {"I64", 64},
	[ST_BOOL] = {"BOOL", 8},
	[ST_OTHER] = {"F8_E5M2", 8},
	{"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"F8_E8M0", 8},
	{"U16", 16}, {"U32", 32}, {"U64", 64}, {"C64", 64},
	{"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6},
};
#define N_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

size_t st_dtype_size(enum st_dtype t)
{
	return (unsigned)t < ST_OTHER ? dtypes[t].bits / 8 : 0;
}

const char *st_dtype_name(enum st_dtype t)
{
	return (unsigned)t < ST_OTHER ? dtypes[t].name : "?";
}

/* dtype_row - the row of dtypes[] for string @s, or -1. */
static int dtype_row(const char *s)
{
	for (size_t i = 0; i < N_DTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return (int)i;
	return -1;
}

int st_dtype_parse(const char *s)
{
	int row = s ? dtype_row(s) : -1;

	return row < ST_OTHER ? row : ST_OTHER;
}

/* ---------------------------------------------------------------- helpers */

/* utf8_bad - offset of the first byte that breaks UTF-8 in @s[0..n), or -1. */
static long utf8_bad(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], len, cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, cp = c & 0x07;
		else
			return (long)i;
		if (n - i < len)
			return (long)i;
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return (long)i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return (long)i;
		i += len;
	}
	return -1;
}

/* path_join - "@dir/@name" in a malloc'd string, or NULL. */
static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *p;

	if (asprintf(&p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

/* plain_name - a file name that stays inside its directory. */
static int plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* json_whole - @j is a whole number in [0, 2^53]; stores it in *v. */
static int json_whole(const cJSON *j, uint64_t *v)
{
	double d;

	if (!cJSON_IsNumber(j))
		return 0;
	d = j->valuedouble;
	if (!(d >= 0 && d <= (double)ST_MAX_EXACT) || d != (double)(uint64_t)d)
		return 0;
	*v = (uint64_t)d;
	return 1;
}

/* json_desc - a short rendering of a bad JSON value for a message. */
static const char *json_desc(const cJSON *j, char *buf, size_t len)
{
	if (cJSON_IsNumber(j))
		snprintf(buf, len, "%.17g", j->valuedouble);
	else if (cJSON_IsString(j))
		snprintf(buf, len, "the string \"%.40s\"", j->valuestring);
	else
		snprintf(buf, len, "%s", j ? "not a number" : "missing");
	return buf;
}

/* shape_str - "[2, 3]" ("*" for a negative, i.e. any, dimension). */
static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
	size_t at = 0;

	snprintf(buf, len, "[");
	for (int i = 0; i < ndim && (at = strlen(buf)) < len; i++) {
		if (shape[i] < 0)
			snprintf(buf + at, len - at, "%s*", i ? ", " : "");
		else
			snprintf(buf + at, len - at, "%s%" PRId64, i ? ", " : "", shape[i]);
	}
	at = strlen(buf);
	snprintf(buf + at, len - at, "]");
	return buf;
}

/* ---------------------------------------------------------------- name set */

/* A set of borrowed strings (open addressing), to find duplicate names in O(1). */
struct name_set {
	const char **slot;
	size_t cap, n;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* name_set_slot - the slot holding @s, or the empty slot where it would go. */
static const char **name_set_slot(const struct name_set *h, const char *s)
{
	size_t i = name_hash(s) & (h->cap - 1);

	while (h->slot[i] && strcmp(h->slot[i], s) != 0)
		i = (i + 1) & (h->cap - 1);
	return &h->slot[i];
}

static int name_set_has(const struct name_set *h, const char *s)
{
	return h->cap && *name_set_slot(h, s);
}

/* name_set_reserve - room for one more string; 0 or -ENOMEM. */
static int name_set_reserve(struct name_set *h)
{
	struct name_set g;

	if ((h->n + 1) * 2 <= h->cap)
		return 0;
	g.cap = h->cap ? h->cap * 2 : 64;
	g.n = h->n;
	g.slot = calloc(g.cap, sizeof(*g.slot));
	if (!g.slot)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++)
		if (h->slot[i])
			*name_set_slot(&g, h->slot[i]) = h->slot[i];
	free(h->slot);
	*h = g;
	return 0;
}

/* name_set_insert - add @s (borrowed, not present); after name_set_reserve. */
static void name_set_insert(struct name_set *h, const char *s)
{
	*name_set_slot(h, s) = s;
	h->n++;
}

/* ---------------------------------------------------------------- reading */

struct shard {
	char *path;
	const unsigned char *map;	/* the whole file, read-only */
	size_t len;
	int borrowed;		/* map is the caller's buffer (st_open_buffer): not unmapped */
	struct st_tensor *t;	/* sorted by name; the names are owned here */
	size_t n;
};

struct st_set {
	struct shard *shards;
	size_t nshards;
	struct st_tensor *t;	/* sorted by name (strcmp); points into shards */
	size_t n;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	const char *px = x->data, *py = y->data;

	if (px != py)
		return px < py ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* tensor_err - "@path: tensor '@name': <what>" in @err; returns -EINVAL. */
static int tensor_err(struct sm_err *err, const char *path, const char *name, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));
static int tensor_err(struct sm_err *err, const char *path, const char *name, const char *fmt,
		      ...)
{
	char what[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sm_err_set(err, -EINVAL, "%s: tensor '%.80s': %s", path, name, what);
}

/*
 * entry_parse - one header entry @e into @t (name not yet set).  @data is
 * the data buffer, @data_len its length.  Returns 0 or -EINVAL with @err.
 */
static int entry_parse(const struct shard *sh, const cJSON *e, const unsigned char *data,
		       uint64_t data_len, struct st_tensor *t, struct sm_err *err)
{
	const char *name = e->string;
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
	const cJSON *d;
	uint64_t begin, end, v, bits;
	char buf[64], sbuf[200];
	int row, i = 0;

	if (!cJSON_IsObject(e))
		return tensor_err(err, sh->path, name,
				  "entry is not an object with dtype, shape and data_offsets");
	if (!cJSON_IsString(dt) || !dt->valuestring)
		return tensor_err(err, sh->path, name, "no \"dtype\" string");
	row = dtype_row(dt->valuestring);
	if (row < 0)
		return tensor_err(err, sh->path, name,
				  "unknown dtype '%.40s' (the format knows BF16, F16, F32, F64, "
				  "F8_E4M3, F8_E5M2, I8..I64, U8..U64, BOOL, C64, F8_E8M0, F4, F6_*)",
				  dt->valuestring);
	if (!cJSON_IsArray(shape))
		return tensor_err(err, sh->path, name, "no \"shape\" array");
	t->ndim = cJSON_GetArraySize(shape);
	if (t->ndim > ST_MAX_DIMS)
		return tensor_err(err, sh->path, name, "shape has %d dimensions; at most %d are supported",
				  t->ndim, ST_MAX_DIMS);
	t->numel = 1;
	cJSON_ArrayForEach(d, shape) {
		if (!json_whole(d, &v))
			return tensor_err(err, sh->path, name,
					  "shape[%d] is %s: dimensions are whole numbers >= 0", i,
					  json_desc(d, buf, sizeof(buf)));
		t->shape[i++] = (int64_t)v;
		if (__builtin_mul_overflow(t->numel, (int64_t)v, &t->numel))
			return tensor_err(err, sh->path, name, "the element count of shape %s overflows",
					  shape_str(i, t->shape, sbuf, sizeof(sbuf)));
	}
	if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
	    !json_whole(cJSON_GetArrayItem(off, 0), &begin) ||
	    !json_whole(cJSON_GetArrayItem(off, 1), &end))
		return tensor_err(err, sh->path, name,
				  "\"data_offsets\" is not a [begin, end] pair of whole numbers >= 0");
	if (end < begin)
		return tensor_err(err, sh->path, name, "data_offsets [%" PRIu64 ", %" PRIu64
				  "] end before they begin", begin, end);
	if (end > data_len)
		return tensor_err(err, sh->path, name, "data_offsets [%" PRIu64 ", %" PRIu64
				  "] run past the end of the %" PRIu64 "-byte data buffer (file of %zu "
				  "bytes): a truncated file?", begin, end, data_len, sh->len);
	shape_str(t->ndim, t->shape, sbuf, sizeof(sbuf));
	if (__builtin_mul_overflow((uint64_t)t->numel, (uint64_t)dtypes[row].bits, &bits))
		return tensor_err(err, sh->path, name, "%s %s is too large", dtypes[row].name, sbuf);
	if (bits % 8)
		return tensor_err(err, sh->path, name, "%s %s does not fill whole bytes",
				  dtypes[row].name, sbuf);
	if (bits / 8 != end - begin)
		return tensor_err(err, sh->path, name, "%s %s is %" PRIu64 " bytes, but data_offsets [%"
				  PRIu64 ", %" PRIu64 "] span %" PRIu64, dtypes[row].name, sbuf,
				  bits / 8, begin, end, end - begin);
	t->dtype = row < ST_OTHER ? (enum st_dtype)row : ST_OTHER;
	t->data = data + begin;
	t->nbytes = (size_t)(end - begin);
	t->file = sh->path;
	return 0;
}

/* shard_check - no two tensors of @sh share bytes or a name; sorts @sh->t by name. */
static int shard_check(struct shard *sh, const unsigned char *data, struct sm_err *err)
{
	qsort(sh->t, sh->n, sizeof(*sh->t), by_offset);
	for (size_t i = 1; i < sh->n; i++) {
		const struct st_tensor *a = &sh->t[i - 1], *b = &sh->t[i];
		size_t ab = (size_t)((const unsigned char *)a->data - data);
		size_t bb = (size_t)((const unsigned char *)b->data - data);

		if (bb < ab + a->nbytes)
			return sm_err_set(err, -EINVAL,
					  "%s: tensors '%.80s' (data_offsets [%zu, %zu]) and '%.80s' "
					  "([%zu, %zu]) overlap: a corrupt header", sh->path, a->name,
					  ab, ab + a->nbytes, b->name, bb, bb + b->nbytes);
	}
	qsort(sh->t, sh->n, sizeof(*sh->t), by_name);
	for (size_t i = 1; i < sh->n; i++)
		if (strcmp(sh->t[i - 1].name, sh->t[i].name) == 0)
			return sm_err_set(err, -EINVAL,
					  "%s: tensor '%.80s' appears twice in the header: names must "
					  "be unique", sh->path, sh->t[i].name);
	return 0;
}

/* shard_parse - check the header of the mapped @sh and fill @sh->t. */
static int shard_parse(struct shard *sh, struct sm_err *err)
{
	const unsigned char *m = sh->map;
	const char *text = (const char *)m + 8, *end = NULL;
	uint64_t hlen = 0;
	cJSON *root = NULL, *e;
	int rc = -EINVAL, nmeta = 0;
	long bad;

	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | m[i];
	if (hlen > ST_MAX_HEADER)
		return sm_err_set(err, -EINVAL, "%s: header length %" PRIu64 " is over the format's "
				  "limit of %u bytes: not a safetensors file, or a corrupt one",
				  sh->path, hlen, ST_MAX_HEADER);
	if (hlen > sh->len - 8)
		return sm_err_set(err, -EINVAL, "%s: header length %" PRIu64 " runs past the end of "
				  "the %zu-byte file: a truncated file (an interrupted download?)",
				  sh->path, hlen, sh->len);
	if (hlen == 0 || text[0] != '{')
		return sm_err_set(err, -EINVAL, "%s: the header does not start with '{': not a "
				  "safetensors file", sh->path);
	bad = utf8_bad((const unsigned char *)text, hlen);
	if (bad >= 0)
		return sm_err_set(err, -EINVAL, "%s: the header is not valid UTF-8 (byte %ld)",
				  sh->path, bad);
	root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
	if (!root || !cJSON_IsObject(root)) {
		sm_err_set(err, -EINVAL, "%s: the header is not a valid JSON object (near byte %ld "
			   "of %" PRIu64 ")", sh->path,
			   end && end >= text && end <= text + hlen ? (long)(end - text) : -1L, hlen);
		goto out;
	}
	for (const char *p = end; p < text + hlen; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			sm_err_set(err, -EINVAL, "%s: bytes after the header's JSON object (at byte "
				   "%ld): only space padding may follow it", sh->path, (long)(p - text));
			goto out;
		}
	}
	sh->t = calloc((size_t)cJSON_GetArraySize(root) + 1, sizeof(*sh->t));
	if (!sh->t) {
		rc = sm_err_set(err, -ENOMEM, "%s: out of memory for the tensor list", sh->path);
		goto out;
	}
	cJSON_ArrayForEach(e, root) {
		if (!e->string) {
			sm_err_set(err, -EINVAL, "%s: a header entry has no name", sh->path);
			goto out;
		}
		if (strcmp(e->string, "__metadata__") == 0) {
			if (!cJSON_IsObject(e) || ++nmeta > 1) {
				sm_err_set(err, -EINVAL, "%s: \"__metadata__\" is %s", sh->path,
					   nmeta > 1 ? "there twice" : "not an object");
				goto out;
			}
			continue;
		}
		rc = entry_parse(sh, e, m + 8 + hlen, sh->len - 8 - hlen, &sh->t[sh->n], err);
		if (rc)
			goto out;
		sh->t[sh->n].name = strdup(e->string);
		if (!sh->t[sh->n].name) {
			rc = sm_err_set(err, -ENOMEM, "%s: out of memory", sh->path);
			goto out;
		}
		sh->n++;
	}
	rc = shard_check(sh, m + 8 + hlen, err);
out:
	cJSON_Delete(root);
	return rc;
}

/* file_kind - what a file of mode @m is, for a message. */
static const char *file_kind(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO (named pipe)";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a plain file";
}

/*
 * open_regular - @path opened read-only, and its stat in @st, if it is a
 * regular file.  The open does not block (O_NONBLOCK: a FIFO without a
 * writer would wait forever); a regular file reads as usual.  Returns the
 * fd, or -errno with @err naming the path (-EINVAL: not a regular file).
 */
static int open_regular(const char *path, struct stat *st, struct sm_err *err)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc;

	if (fd < 0 || fstat(fd, st) != 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return sm_err_set(err, rc, "%s: cannot open: %s", path, strerror(-rc));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return sm_err_set(err, -EINVAL, "%s: not a regular file but %s: the loader reads "
				  "only regular files (a FIFO or a device would block or never end); "
				  "put the checkpoint's own file there", path, file_kind(st->st_mode));
	}
	return fd;
}

/*
 * read_regular - the whole of the regular file @path (at most @max bytes) in
 * a malloc'd, NUL-terminated *@text of *@len bytes.  Returns 0, or -errno
 * with @err naming the path (-ENOENT: it does not exist; -EINVAL: not a
 * regular file; -EFBIG: over @max).
 */
static int read_regular(const char *path, size_t max, char **text, size_t *len, struct sm_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	int fd = open_regular(path, &st, err), rc = 0;

	*text = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max) {
		rc = sm_err_set(err, -EFBIG, "%s: %lld bytes, more than the %zu such a file can "
				"have: not the file it should be", path, (long long)st.st_size, max);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = sm_err_set(err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while (n < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			sm_err_set(err, rc, "%s: cannot read: %s", path, k < 0 ? strerror(-rc) :
				   "the file got shorter while it was read");
			goto out;
		}
		n += (size_t)k;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

/* too_short - the error for a file of @len (< 8) bytes; returns -EINVAL. */
static int too_short(const char *path, uint64_t len, struct sm_err *err)
{
	return sm_err_set(err, -EINVAL, "%s: %" PRIu64 " bytes, too short for the 8-byte header "
			  "length: a truncated or empty file", path, len);
}

/* shard_open - map @sh->path (already set) and read its header. */
static int shard_open(struct shard *sh, struct sm_err *err)
{
	struct stat st;
	void *map;
	int fd = open_regular(sh->path, &st, err), rc;

	if (fd < 0)
		return fd;
	if (st.st_size < 8) {
		rc = too_short(sh->path, (uint64_t)st.st_size, err);
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		sm_err_set(err, rc, "%s: cannot map: %s", sh->path, strerror(-rc));
		goto out;
	}
	sh->map = map;
	sh->len = (size_t)st.st_size;
	rc = shard_parse(sh, err);
out:
	close(fd);
	return rc;
}

static void shard_free(struct shard *sh)
{
	if (sh->map && !sh->borrowed)
		munmap((void *)sh->map, sh->len);
	for (size_t i = 0; i < sh->n; i++)
		free((char *)sh->t[i].name);
	free(sh->t);
	free(sh->path);
}

void st_close(struct st_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nshards; i++)
		shard_free(&s->shards[i]);
	free(s->shards);
	free(s->t);
	free(s);
}

/* set_new - a set with @nshards empty shards; NULL with @err. */
static struct st_set *set_new(size_t nshards, const char *what, struct sm_err *err)
{
	struct st_set *s = calloc(1, sizeof(*s));

	if (s)
		s->shards = calloc(nshards ? nshards : 1, sizeof(*s->shards));
	if (!s || !s->shards) {
		free(s);
		sm_err_set(err, -ENOMEM, "%s: out of memory", what);
		return NULL;
	}
	s->nshards = nshards;
	return s;
}

/*
 * open_one - the set of one file @path: mapped, or when @buf is not NULL the
 * @len bytes there (borrowed).
 */
static struct st_set *open_one(const char *path, const void *buf, size_t len,
			       struct sm_err *err)
{
	struct st_set *s = set_new(1, path, err);
	struct shard *sh;

	if (!s)
		return NULL;
	sh = &s->shards[0];
	sh->path = strdup(path);
	if (!sh->path) {
		sm_err_set(err, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	if (!buf) {
		if (shard_open(sh, err))
			goto fail;
	} else if (len < 8) {
		too_short(path, len, err);
		goto fail;
	} else {
		sh->map = buf;
		sh->len = len;
		sh->borrowed = 1;
		if (shard_parse(sh, err))
			goto fail;
	}
	s->t = malloc((sh->n + 1) * sizeof(*s->t));
	if (!s->t) {
		sm_err_set(err, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	memcpy(s->t, sh->t, sh->n * sizeof(*s->t));
	s->n = sh->n;
	return s;
fail:
	st_close(s);
	return NULL;
}

struct st_set *st_open_file(const char *path, struct sm_err *err)
{
	return open_one(path, NULL, 0, err);
}

struct st_set *st_open_buffer(const void *buf, size_t len, const char *name, struct sm_err *err)
{
	if (!buf) {
		sm_err_set(err, -EINVAL, "%s: no buffer", name);
		return NULL;
	}
	return open_one(name, buf, len, err);
}

/* One weight_map entry; the strings belong to the parsed index. */
struct ientry {
	const char *name;
	const char *shard;
};

static int ientry_by_name(const void *a, const void *b)
{
	return strcmp(((const struct ientry *)a)->name, ((const struct ientry *)b)->name);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * open_indexed - the set named by the weight_map of @ipath (text @text):
 * each distinct shard opened once, exactly the tensors the map names.
 */
static struct st_set *open_indexed(const char *dir, const char *ipath, const char *text,
				   size_t len, struct sm_err *err)
{
	cJSON *root = cJSON_ParseWithLength(text, len), *wm, *e;
	struct ientry *ent = NULL;
	const char **names = NULL;
	struct st_set *s = NULL;
	size_t n = 0, ns = 0;

	if (!root || !cJSON_IsObject(root)) {
		const char *at = cJSON_GetErrorPtr();

		sm_err_set(err, -EINVAL, "%s: not a valid JSON object (near byte %ld)", ipath,
			   root || !at || at < text || at > text + len ? -1L : (long)(at - text));
		goto fail;
	}
	wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		sm_err_set(err, -EINVAL, "%s: no \"weight_map\" object: not a safetensors index",
			   ipath);
		goto fail;
	}
	ent = calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof(*ent));
	names = calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof(*names));
	if (!ent || !names) {
		sm_err_set(err, -ENOMEM, "%s: out of memory", ipath);
		goto fail;
	}
	cJSON_ArrayForEach(e, wm) {
		if (!e->string || !cJSON_IsString(e) || !e->valuestring ||
		    !plain_name(e->valuestring)) {
			sm_err_set(err, -EINVAL, "%s: weight_map entry '%.80s' does not name a file in "
				   "the checkpoint directory (a plain file name is needed)", ipath,
				   e->string ? e->string : "");
			goto fail;
		}
		ent[n].name = e->string;
		ent[n].shard = e->valuestring;
		names[n++] = e->valuestring;
	}
	qsort(ent, n, sizeof(*ent), ientry_by_name);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(ent[i - 1].name, ent[i].name) == 0) {
			sm_err_set(err, -EINVAL, "%s: weight_map names tensor '%.80s' twice", ipath,
				   ent[i].name);
			goto fail;
		}
	}
	qsort(names, n, sizeof(*names), str_cmp);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(names[i], names[ns - 1]) != 0)
			names[ns++] = names[i];
	s = set_new(ns, ipath, err);
	if (!s)
		goto fail;
	s->t = malloc((n + 1) * sizeof(*s->t));
	if (!s->t) {
		sm_err_set(err, -ENOMEM, "%s: out of memory", ipath);
		goto fail;
	}
	for (size_t i = 0; i < ns; i++) {
		struct shard *sh = &s->shards[i];
		int rc;

		sh->path = path_join(dir, names[i]);
		if (!sh->path) {
			sm_err_set(err, -ENOMEM, "%s: out of memory", ipath);
			goto fail;
		}
		rc = shard_open(sh, err);
		if (rc == -ENOENT)
			sm_err_set(err, rc, "%s: missing, but %s maps tensors to it: an incomplete "
				   "download?", sh->path, ipath);
		if (rc)
			goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		const char **at = bsearch(&ent[i].shard, names, ns, sizeof(*names), str_cmp);
		const struct shard *sh = &s->shards[at - names];
		struct st_tensor key = {.name = ent[i].name};
		const struct st_tensor *t = bsearch(&key, sh->t, sh->n, sizeof(key), by_name);

		if (!t) {
			sm_err_set(err, -EINVAL, "%s: has no tensor '%.80s', but %s maps it there: "
				   "the index does not match the shards (regenerate it, or "
				   "download again)", sh->path, ent[i].name, ipath);
			goto fail;
		}
		s->t[i] = *t;
	}
	s->n = n;
	cJSON_Delete(root);
	free(ent);
	free(names);
	return s;
fail:
	st_close(s);
	cJSON_Delete(root);
	free(ent);
	free(names);
	return NULL;
}

struct st_set *st_open(const char *dir, struct sm_err *err)
{
	struct st_set *s = NULL;
	char *ipath = path_join(dir, ST_INDEX_NAME), *fpath = path_join(dir, ST_FILE_NAME);
	char *text = NULL;
	struct stat st;
	size_t len;
	int rc;

	if (!ipath || !fpath) {
		sm_err_set(err, -ENOMEM, "%s: out of memory", dir);
		goto out;
	}
	if (stat(dir, &st) != 0) {
		sm_err_set(err, -errno, "%s: cannot open the checkpoint directory: %s", dir,
			   strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		sm_err_set(err, -ENOTDIR, "%s: not a directory: st_open takes the checkpoint "
			   "directory (st_open_file reads one file)", dir);
		goto out;
	}
	rc = read_regular(ipath, ST_MAX_INDEX, &text, &len, err);
	if (!rc) {
		s = open_indexed(dir, ipath, text, len, err);
	} else if (rc != -ENOENT) {
		goto out;
	} else if (stat(fpath, &st) != 0 && errno == ENOENT) {
		sm_err_set(err, -ENOENT, "%s: neither %s nor %s is there: not a Hugging Face "
			   "checkpoint directory (or a download still in progress)", dir,
			   ST_FILE_NAME, ST_INDEX_NAME);
	} else {
		s = st_open_file(fpath, err);
	}
out:
	free(text);
	free(ipath);
	free(fpath);
	return s;
}

const struct st_tensor *st_find(const struct st_set *s, const char *name)
{
	struct st_tensor key = {.name = name};

	if (!s || !name)
		return NULL;
	return bsearch(&key, s->t, s->n, sizeof(key), by_name);
}

size_t st_count(const struct st_set *s)
{
	return s ? s->n : 0;
}

const struct st_tensor *st_at(const struct st_set *s, size_t i)
{
	return s && i < s->n ? &s->t[i] : NULL;
}

const struct st_tensor *st_expect(const struct st_set *s, const char *name, int dtype,
				  int ndim, const int64_t *shape, struct sm_err *err)
{
	const struct st_tensor *t = st_find(s, name);
	char have[200], want[200];

	if (!t) {
		sm_err_set(err, -ENOENT, "checkpoint has no tensor '%.80s' (%zu tensors): a "
			   "different model or an incomplete download?", name ? name : "",
			   st_count(s));
		return NULL;
	}
	if (ndim < 0 || ndim > ST_MAX_DIMS || (ndim && !shape)) {
		sm_err_set(err, -EINVAL, "%s: tensor '%.80s': expected %d dimensions, which no "
			   "tensor can have", t->file, name, ndim);
		return NULL;
	}
	shape_str(t->ndim, t->shape, have, sizeof(have));
	shape_str(ndim, shape, want, sizeof(want));
	if (dtype >= 0 && (int)t->dtype != dtype) {
		sm_err_set(err, -EINVAL, "%s: tensor '%.80s' is %s %s, expected %s",
			   t->file, name, t->dtype == ST_OTHER ? "of a dtype the engine does not read"
			   : st_dtype_name(t->dtype), have, st_dtype_name((enum st_dtype)dtype));
		return NULL;
	}
	if (t->ndim != ndim) {
		sm_err_set(err, -EINVAL, "%s: tensor '%.80s' has shape %s (%d dimensions), "
			   "expected %s (%d)", t->file, name, have, t->ndim, want, ndim);
		return NULL;
	}
	for (int i = 0; i < ndim; i++) {
		if (shape[i] >= 0 && t->shape[i] != shape[i]) {
			sm_err_set(err, -EINVAL, "%s: tensor '%.80s' has shape %s, expected %s "
				   "(dimension %d is %" PRId64 ", not %" PRId64 ")", t->file, name,
				   have, want, i, t->shape[i], shape[i]);
			return NULL;
		}
	}
	return t;
}

/* ---------------------------------------------------------------- writing */

struct wtensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	uint64_t nbytes;
	uint64_t spool_off;	/* where st_writer_add put the bytes in the spool */
	uint64_t off;		/* begin in the final data buffer */
};

struct st_writer {
	char *path;
	int spool;		/* unlinked temporary file beside path; -1 until needed */
	struct wtensor *t;	/* in the order added */
	size_t n, cap;
	uint64_t bytes;
	struct name_set names;	/* borrows t[i].name */
};

/*
 * io_all - all of @len bytes between @fd and memory: writes @src when it is not
 * NULL, else reads into @dst; at @off, or (writes only) at the file position
 * when @off is -1.  0 or -errno (-EIO when the file ends or takes nothing).
 */
static int io_all(int fd, const void *src, void *dst, size_t len, int64_t off)
{
	size_t done = 0;

	while (done < len) {
		off_t at = (off_t)(off + (int64_t)done);
		ssize_t k;

		if (!src)
			k = pread(fd, (char *)dst + done, len - done, at);
		else if (off < 0)
			k = write(fd, (const char *)src + done, len - done);
		else
			k = pwrite(fd, (const char *)src + done, len - done, at);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		done += (size_t)k;
	}
	return 0;
}

/* temp_beside - create "@path@suffixXXXXXX" (mode 0600); the fd, name in *tmp, or -errno. */
static int temp_beside(const char *path, const char *suffix, char **tmp)
{
	int fd;

	if (asprintf(tmp, "%s%sXXXXXX", path, suffix) < 0) {
		*tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		free(*tmp);
		*tmp = NULL;
	}
	return fd;
}

struct st_writer *st_writer_new(const char *path)
{
	struct st_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->spool = -1;
	w->path = strdup(path);
	if (!w->path) {
		free(w);
		return NULL;
	}
	return w;
}

size_t st_writer_bytes(const struct st_writer *w)
{
	return w ? (size_t)w->bytes : 0;
}

/* writer_spool - create the spool; it is unlinked at once, so it never outlives the writer. */
static int writer_spool(struct st_writer *w, struct sm_err *err)
{
	char *tmp;
	int fd = temp_beside(w->path, ".spool-", &tmp);

	if (fd < 0)
		return sm_err_set(err, fd, "%s: cannot create a spool file beside it: %s (does "
				  "the directory exist, and is it writable?)", w->path,
				  strerror(-fd));
	unlink(tmp);
	free(tmp);
	w->spool = fd;
	return 0;
}

int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
		  const int64_t *shape, const void *data, struct sm_err *err)
{
	struct wtensor *t;
	uint64_t numel = 1, nbytes;
	char sbuf[200];
	int rc;

	if (!w || !name)
		return sm_err_set(err, -EINVAL, "st_writer_add: no writer or no name");
	if (!*name || strcmp(name, "__metadata__") == 0 || utf8_bad((const void *)name,
								   strlen(name)) >= 0)
		return sm_err_set(err, -EINVAL, "%s: tensor name '%.80s' is empty, reserved or not "
				  "UTF-8", w->path, name);
	if ((unsigned)dtype >= ST_OTHER)
		return tensor_err(err, w->path, name, "dtype %d cannot be written (no element size)",
				  (int)dtype);
	if (ndim < 0 || ndim > ST_MAX_DIMS || (ndim && !shape))
		return tensor_err(err, w->path, name, "%d dimensions; 0 to %d are allowed", ndim,
				  ST_MAX_DIMS);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return tensor_err(err, w->path, name, "shape %s has a negative dimension",
					  shape_str(ndim, shape, sbuf, sizeof(sbuf)));
		if (__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel) ||
		    numel > (uint64_t)INT64_MAX)
			return tensor_err(err, w->path, name, "shape %s has too many elements",
					  shape_str(ndim, shape, sbuf, sizeof(sbuf)));
	}
	if (__builtin_mul_overflow(numel, (uint64_t)st_dtype_size(dtype), &nbytes) ||
	    nbytes > ST_MAX_EXACT - w->bytes || nbytes > SIZE_MAX)
		return tensor_err(err, w->path, name, "%s %s is too large for one file",
				  st_dtype_name(dtype), shape_str(ndim, shape, sbuf, sizeof(sbuf)));
	if (nbytes && !data)
		return tensor_err(err, w->path, name, "no data for %" PRIu64 " bytes", nbytes);
	if (name_set_has(&w->names, name))
		return sm_err_set(err, -EEXIST, "%s: tensor '%.80s' added twice: names in one file "
				  "must be unique", w->path, name);
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct wtensor *nt = realloc(w->t, cap * sizeof(*nt));

		if (!nt)
			return sm_err_set(err, -ENOMEM, "%s: out of memory", w->path);
		w->t = nt;
		w->cap = cap;
	}
	if (name_set_reserve(&w->names))
		return sm_err_set(err, -ENOMEM, "%s: out of memory", w->path);
	if (w->spool < 0 && (rc = writer_spool(w, err)))
		return rc;
	t = &w->t[w->n];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return sm_err_set(err, -ENOMEM, "%s: out of memory", w->path);
	rc = io_all(w->spool, data, NULL, (size_t)nbytes, (int64_t)w->bytes);
	if (rc) {
		free(t->name);
		return tensor_err(err, w->path, name, "cannot write to the spool file: %s (disk full?)",
				  strerror(-rc));
	}
	t->dtype = dtype;
	t->ndim = ndim;
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(*shape));
	t->nbytes = nbytes;
	t->spool_off = w->bytes;
	w->bytes += nbytes;
	name_set_insert(&w->names, t->name);
	w->n++;
	return 0;
}

/* json_str - @s as a JSON string (UTF-8 passes through; quotes and controls escaped). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* writer_header - the JSON header, space-padded to a multiple of 8; NULL on ENOMEM. */
static char *writer_header(const struct st_writer *w, size_t *len)
{
	char *hdr = NULL, *padded;
	size_t n = 0, pad;
	FILE *f = open_memstream(&hdr, &n);

	if (!f)
		return NULL;
	fputs("{\"__metadata__\":{\"format\":\"pt\"}", f);
	for (size_t i = 0; i < w->n; i++) {
		const struct wtensor *t = &w->t[i];

		fputc(',', f);
		json_str(f, t->name);
		fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
		for (int d = 0; d < t->ndim; d++)
			fprintf(f, "%s%" PRId64, d ? "," : "", t->shape[d]);
		fprintf(f, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", t->off,
			t->off + t->nbytes);
	}
	fputc('}', f);
	if (ferror(f)) {
		fclose(f);
		free(hdr);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(hdr);
		return NULL;
	}
	pad = (8 - n % 8) % 8;
	padded = realloc(hdr, n + pad + 1);
	if (!padded) {
		free(hdr);
		return NULL;
	}
	memset(padded + n, ' ', pad);
	padded[n + pad] = '\0';
	*len = n + pad;
	return padded;
}

/* One tensor's place in the data order: descending element size, then the order added. */
struct wslot {
	size_t size, idx;
};

static int by_alignment(const void *a, const void *b)
{
	const struct wslot *x = a, *y = b;

	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* writer_emit - header and data into @fd. */
static int writer_emit(const struct st_writer *w, int fd, const struct wslot *order,
		       struct sm_err *err)
{
	unsigned char len8[8];
	char *hdr = NULL, *buf = NULL;
	size_t hlen;
	int rc;

	hdr = writer_header(w, &hlen);
	if (!hdr)
		return sm_err_set(err, -ENOMEM, "%s: out of memory for the header", w->path);
	if (hlen > ST_MAX_HEADER) {
		rc = sm_err_set(err, -EFBIG, "%s: the header would be %zu bytes, over the format's "
				"limit of %u: split the tensors over more shards", w->path, hlen,
				ST_MAX_HEADER);
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	rc = io_all(fd, len8, NULL, 8, -1);
	if (!rc)
		rc = io_all(fd, hdr, NULL, hlen, -1);
	if (rc) {
		sm_err_set(err, rc, "%s: cannot write: %s", w->path, strerror(-rc));
		goto out;
	}
	buf = malloc(ST_COPY_CHUNK);
	if (!buf) {
		rc = sm_err_set(err, -ENOMEM, "%s: out of memory for the copy buffer", w->path);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++) {
		const struct wtensor *t = &w->t[order[i].idx];

		for (uint64_t done = 0; done < t->nbytes;) {
			size_t k = t->nbytes - done < ST_COPY_CHUNK ? (size_t)(t->nbytes - done)
								    : ST_COPY_CHUNK;

			rc = io_all(w->spool, NULL, buf, k, (int64_t)(t->spool_off + done));
			if (rc) {
				tensor_err(err, w->path, t->name, "cannot read back from the spool "
					   "file: %s", strerror(-rc));
				goto out;
			}
			rc = io_all(fd, buf, NULL, k, -1);
			if (rc) {
				sm_err_set(err, rc, "%s: cannot write: %s (disk full?)", w->path,
					   strerror(-rc));
				goto out;
			}
			done += k;
		}
	}
out:
	free(buf);
	free(hdr);
	return rc;
}

static void writer_free(struct st_writer *w)
{
	if (w->spool >= 0)
		close(w->spool);
	for (size_t i = 0; i < w->n; i++)
		free(w->t[i].name);
	free(w->t);
	free(w->names.slot);
	free(w->path);
	free(w);
}

int st_writer_finish(struct st_writer *w, struct sm_err *err)
{
	struct wslot *order = NULL;
	uint64_t off = 0;
	char *tmp = NULL;
	int fd = -1, rc;

	if (!w)
		return sm_err_set(err, -EINVAL, "st_writer_finish: no writer");
	order = malloc((w->n + 1) * sizeof(*order));
	if (!order) {
		rc = sm_err_set(err, -ENOMEM, "%s: out of memory", w->path);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++)
		order[i] = (struct wslot){st_dtype_size(w->t[i].dtype), i};
	qsort(order, w->n, sizeof(*order), by_alignment);
	for (size_t i = 0; i < w->n; i++) {
		w->t[order[i].idx].off = off;
		off += w->t[order[i].idx].nbytes;
	}
	fd = temp_beside(w->path, ".tmp-", &tmp);
	if (fd < 0) {
		rc = sm_err_set(err, fd, "%s: cannot create a temporary file beside it: %s", w->path,
				strerror(-fd));
		goto out;
	}
	rc = writer_emit(w, fd, order, err);
	if (rc)
		goto out;
	if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
		rc = sm_err_set(err, -errno, "%s: cannot finish writing: %s", w->path,
				strerror(errno));
		goto out;
	}
	rc = close(fd);
	fd = -1;
	if (rc != 0 || rename(tmp, w->path) != 0) {
		rc = sm_err_set(err, -errno, "%s: cannot write: %s", w->path, strerror(errno));
		goto out;
	}
out:
	if (fd >= 0)
		close(fd);
	if (rc && tmp)
		unlink(tmp);
	free(tmp);
	free(order);
	writer_free(w);
	return rc;
}

int st_write_index(const char *dir, size_t n, const char *const *names,
		   const char *const *files, uint64_t total_bytes, struct sm_err *err)
{
	struct name_set seen = {0};
	char *path = path_join(dir, ST_INDEX_NAME), *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc = 0;

	if (!path)
		return sm_err_set(err, -ENOMEM, "%s: out of memory", dir);
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || !*names[i] || !files[i] || !plain_name(files[i])) {
			rc = sm_err_set(err, -EINVAL, "%s: entry %zu ('%.80s' -> '%.80s') needs a "
					"tensor name and a plain shard file name", path, i,
					names[i] ? names[i] : "", files[i] ? files[i] : "");
			goto out;
		}
		if (name_set_has(&seen, names[i])) {
			rc = sm_err_set(err, -EEXIST, "%s: tensor '%.80s' is listed twice", path,
					names[i]);
			goto out;
		}
		if (name_set_reserve(&seen)) {
			rc = sm_err_set(err, -ENOMEM, "%s: out of memory", path);
			goto out;
		}
		name_set_insert(&seen, names[i]);
	}
	fd = temp_beside(path, ".tmp-", &tmp);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		rc = fd < 0 ? fd : -errno;
		sm_err_set(err, rc, "%s: cannot create a temporary file beside it: %s", path,
			   strerror(-rc));
		goto out;
	}
	fd = -1;
	fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n"
		"  \"weight_map\": {", total_bytes);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n    " : "\n    ", f);
		json_str(f, names[i]);
		fputs(": ", f);
		json_str(f, files[i]);
	}
	fputs(n ? "\n  }\n}\n" : "}\n}\n", f);
	if (fflush(f) != 0 || ferror(f) || fchmod(fileno(f), 0644) != 0 || fsync(fileno(f)) != 0) {
		rc = sm_err_set(err, -errno, "%s: cannot write: %s", path, strerror(errno));
		goto out;
	}
	rc = fclose(f);
	f = NULL;
	if (rc != 0 || rename(tmp, path) != 0)
		rc = sm_err_set(err, -errno, "%s: cannot write: %s", path, strerror(errno));
out:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (rc && tmp)
		unlink(tmp);
	free(tmp);
	free(seen.slot);
	free(path);
	return rc;
}
