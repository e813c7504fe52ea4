/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (engine/st/safetensors.c).
 *
 * safetensors.h promises that a malformed checkpoint gives an error naming
 * the file (and tensor), never a read outside the file.  An input is one of:
 *   - a single safetensors file (anything that does not start with '{'):
 *     read with st_open_buffer, so that AddressSanitizer sees the exact end
 *     of the file (a mapping would hide a short read in its last page);
 *   - a sharded checkpoint: model.safetensors.index.json, then each shard,
 *     separated by FUZZ_SEP (fuzz_util.h), written as
 *     model-0000I-of-0000N.safetensors into a private directory and read
 *     with st_open, as the engine reads a checkpoint.
 * A failure must come with a one-line message naming the file (or the
 * directory).  A success must be a set that keeps the header's promises:
 * names unique, sorted and valid UTF-8, sizes that match dtype and shape,
 * data inside the file and not overlapping, st_find and st_expect agreeing
 * with st_at; every byte of every tensor is read.
 *
 * Build and run with `make fuzz-smoke` or `make fuzz` (tests/fuzz/fuzz.mk).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/st/safetensors.h"
#include "fuzz_util.h"

#define TARGET "fuzz_safetensors"
#define FILE_LABEL "fuzz-input.safetensors"
#define MAX_SHARDS 4

static void broken(const char *what, const char *msg)
{
	fuzz_broken(TARGET, what, msg);
}

/* utf8_ok - @s is valid UTF-8 (no overlong forms, no surrogates). */
static int utf8_ok(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, len, cp;

		if (c < 0x80) {
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, cp = c & 0x07;
		else
			return 0;
		for (unsigned k = 1; k < len; k++) {
			if ((s[k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		s += len;
	}
	return 1;
}

static int by_data(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a;
	const struct st_tensor *y = *(const struct st_tensor *const *)b;
	const char *px = x->data, *py = y->data;

	return px < py ? -1 : px > py;
}

/* touch_tensor - read every field and byte of @t and check it against itself. */
static void touch_tensor(const struct st_set *s, const struct st_tensor *t, const uint8_t *lo,
			 const uint8_t *hi)
{
	struct sm_err err;
	int64_t numel = 1, shape[ST_MAX_DIMS + 1];
	const uint8_t *d = t->data;

	if (!t->name || !t->file || !t->file[0])
		broken("a tensor has no name or no file", NULL);
	if (!utf8_ok((const unsigned char *)t->name))
		broken("a tensor name is not valid UTF-8", t->name);
	if (strcmp(t->name, "__metadata__") == 0)
		broken("__metadata__ was read as a tensor", NULL);
	if ((unsigned)t->dtype > ST_OTHER || t->ndim < 0 || t->ndim > ST_MAX_DIMS)
		broken("a tensor has a dtype or a dimension count out of range", t->name);
	for (int i = 0; i < t->ndim; i++) {
		if (t->shape[i] < 0 || __builtin_mul_overflow(numel, t->shape[i], &numel))
			broken("a shape is negative or its element count overflows", t->name);
	}
	if (numel != t->numel)
		broken("numel is not the product of the shape", t->name);
	if (t->dtype != ST_OTHER && (uint64_t)t->nbytes != (uint64_t)numel * st_dtype_size(t->dtype))
		broken("nbytes is not numel times the dtype's size", t->name);
	if (t->nbytes && !d)
		broken("a tensor with bytes has no data", t->name);
	if (lo && t->nbytes && (d < lo || d > hi || t->nbytes > (size_t)(hi - d)))
		broken("a tensor's data lies outside the file", t->name);
	fuzz_sink += fuzz_touch(t->name, strlen(t->name)) + fuzz_touch(t->file, strlen(t->file));
	fuzz_sink += fuzz_touch(d, t->nbytes);

	if (st_find(s, t->name) != t)
		broken("st_find does not find a tensor of st_at", t->name);
	sm_err_clear(&err);
	if (st_expect(s, t->name, t->dtype == ST_OTHER ? -1 : (int)t->dtype, t->ndim, t->shape,
		      &err) != t)
		broken("st_expect refuses a tensor's own dtype and shape", err.msg);
	if (t->ndim < ST_MAX_DIMS) {
		memcpy(shape, t->shape, sizeof(t->shape));
		shape[t->ndim] = 1;
		sm_err_clear(&err);
		if (st_expect(s, t->name, -1, t->ndim + 1, shape, &err))
			broken("st_expect accepts a shape with one more dimension", t->name);
		if (!err.msg[0] || !fuzz_has(err.msg, t->file))
			broken("st_expect's refusal does not name the file", err.msg);
	}
}

/*
 * check_set - every tensor of @s; with @lo, all data must lie in
 * [@lo, @hi).  Tensors of one file never share a byte.
 */
static void check_set(const struct st_set *s, const uint8_t *lo, const uint8_t *hi)
{
	size_t n = st_count(s), k = 0;
	const struct st_tensor **by = malloc((n + 1) * sizeof(*by));
	struct sm_err err;

	if (!by)
		abort();
	if (st_at(s, n))
		broken("st_at answers past the end", NULL);
	for (size_t i = 0; i < n; i++) {
		const struct st_tensor *t = st_at(s, i);

		if (!t)
			broken("st_at has a hole", NULL);
		if (i > 0 && strcmp(st_at(s, i - 1)->name, t->name) >= 0)
			broken("tensor names are not unique and in order", t->name);
		touch_tensor(s, t, lo, hi);
		if (t->nbytes)
			by[k++] = t;
	}
	qsort(by, k, sizeof(*by), by_data);
	for (size_t i = 1; i < k; i++) {
		if (by[i - 1]->file == by[i]->file &&
		    (const uint8_t *)by[i]->data <
		    (const uint8_t *)by[i - 1]->data + by[i - 1]->nbytes)
			broken("two tensors share bytes", by[i]->name);
	}
	free(by);
	if (st_find(s, "__metadata__"))
		broken("st_find finds __metadata__", NULL);
	sm_err_clear(&err);
	if (st_expect(s, "\x01no such tensor", -1, 0, NULL, &err) || !err.msg[0])
		broken("st_expect accepts a missing tensor, or says nothing", err.msg);
}

/* one_file - the whole input is one safetensors file. */
static void one_file(const uint8_t *data, size_t size)
{
	struct sm_err err;
	struct st_set *s;

	sm_err_clear(&err);
	s = st_open_buffer(data, size, FILE_LABEL, &err);
	if (!s) {
		fuzz_check_err(TARGET, "st_open_buffer", &err, FILE_LABEL);
		return;
	}
	check_set(s, data, data + size);
	st_close(s);
}

/* sharded - index, FUZZ_SEP, shard 1, FUZZ_SEP, shard 2 ... as a checkpoint directory. */
static void sharded(const uint8_t *data, size_t size)
{
	struct fuzz_part parts[MAX_SHARDS + 1];
	size_t n = fuzz_split(data, size, parts, MAX_SHARDS + 1);
	const char *dir = fuzz_dir(TARGET);
	struct sm_err err;
	struct st_set *s;
	char name[64];

	fuzz_write(TARGET, "model.safetensors.index.json", parts[0]);
	for (size_t i = 1; i < n; i++) {
		snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i, n - 1);
		fuzz_write(TARGET, name, parts[i]);
	}
	sm_err_clear(&err);
	s = st_open(dir, &err);
	if (!s) {
		fuzz_check_err(TARGET, "st_open", &err, dir);
	} else {
		check_set(s, NULL, NULL);
		st_close(s);
	}
	fuzz_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size && data[0] == '{')
		sharded(data, size);
	else
		one_file(data, size);
	return 0;
}
