/*
 * test_safetensors.c - the safetensors reader and writer: a round trip over
 * every dtype the engine reads (with a 0-d scalar, a zero-size tensor and a
 * tensor larger than the copy buffer), the writer's layout (padded header,
 * keys in the order added, aligned data, no leftover temporary files), a
 * sharded checkpoint whose companion tensor sits in another shard, index and
 * directory errors, malformed headers written byte by byte (each must give
 * an error that names the file, never a crash), every truncation and many
 * byte changes of a valid file, st_expect's messages, and files that are
 * not regular files (a FIFO as a shard, as the index, a device) refused by
 * name without blocking.  All files are written into a mkdtemp directory
 * under /tmp.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../../engine/st/safetensors.h"
#include "fixture.h"

static char root[64];

/* ---------------------------------------------------------------- helpers */

/* subdir - a fresh directory @name under the test root, in @out. */
static const char *subdir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", root, name);
	assert_int_equal(mkdir(out, 0755), 0);
	return out;
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
	write_bytes(path, text, strlen(text));
}

/* write_st - a file of the 8-byte length of @header, @header, @data_len bytes. */
static void write_st(const char *path, const char *header, size_t data_len)
{
	size_t hlen = strlen(header);
	unsigned char *buf = malloc(8 + hlen + data_len + 1);

	assert_non_null(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	memcpy(buf + 8, header, hlen);
	for (size_t i = 0; i < data_len; i++)
		buf[8 + hlen + i] = (unsigned char)(i * 7 + 1);
	write_bytes(path, buf, 8 + hlen + data_len);
	free(buf);
}

/* write_raw_len - @len8 as the header length, then @rest. */
static void write_raw_len(const char *path, uint64_t len8, const char *rest)
{
	unsigned char buf[256];
	size_t n = strlen(rest);

	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(len8 >> (8 * i));
	memcpy(buf + 8, rest, n);
	write_bytes(path, buf, 8 + n);
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* count_entries - files in @dir other than . and .. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void fill(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 131 + seed * 17 + (i >> 8));
}

/* ---------------------------------------------------------------- round trip */

#define BIG_ELEMS (3 * 524289)	/* 6 MiB of F32: more than the writer's copy buffer */

struct rt {
	const char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	size_t nbytes;
	void *data;
};

static struct rt rt_tensors[] = {
	{"b.weight", ST_BF16, 2, {2, 3}, 12, NULL},
	{"u8.odd", ST_U8, 1, {5}, 5, NULL},
	{"a.f32", ST_F32, 1, {3}, 12, NULL},
	{"scale", ST_F32, 0, {0}, 4, NULL},
	{"empty", ST_BF16, 2, {0, 4}, 0, NULL},
	{"ids", ST_I64, 1, {2}, 16, NULL},
	{"i32", ST_I32, 3, {1, 1, 2}, 8, NULL},
	{"f8", ST_F8_E4M3, 1, {7}, 7, NULL},
	{"mask", ST_BOOL, 1, {3}, 3, NULL},
	{"f64", ST_F64, 1, {2}, 16, NULL},
	{"f16", ST_F16, 1, {3}, 6, NULL},
	{"i16", ST_I16, 1, {1}, 2, NULL},
	{"i8", ST_I8, 8, {1, 1, 1, 1, 1, 1, 1, 2}, 2, NULL},
	{"odd \"name\"\\ \xc3\xa9", ST_F16, 1, {1}, 2, NULL},
	{"big", ST_F32, 2, {3, 524289}, BIG_ELEMS * 4, NULL},
};
#define N_RT (sizeof(rt_tensors) / sizeof(rt_tensors[0]))

/* write_round_trip - rt_tensors into @dir/model.safetensors. */
static void write_round_trip(const char *dir)
{
	char path[512];
	struct sm_err err = {{0}};
	struct st_writer *w;
	size_t total = 0;

	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	w = st_writer_new(path);
	assert_non_null(w);
	for (size_t i = 0; i < N_RT; i++) {
		struct rt *t = &rt_tensors[i];

		if (!t->data) {
			t->data = malloc(t->nbytes + 1);
			assert_non_null(t->data);
			fill(t->data, t->nbytes, (unsigned)i + 1);
		}
		assert_int_equal(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
					       t->nbytes ? t->data : NULL, &err), 0);
		total += t->nbytes;
		assert_int_equal(st_writer_bytes(w), total);
	}
	assert_int_equal(st_writer_finish(w, &err), 0);
}

static void test_round_trip(void **state)
{
	char dir[256];
	struct sm_err err = {{0}};
	struct st_set *s;
	const struct st_tensor *prev = NULL;

	(void)state;
	write_round_trip(subdir(dir, sizeof(dir), "round_trip"));
	assert_int_equal(count_entries(dir), 1);
	s = st_open(dir, &err);
	if (!s)
		fail_msg("st_open: %s", err.msg);
	assert_int_equal(st_count(s), N_RT);
	for (size_t i = 0; i < N_RT; i++) {
		const struct rt *r = &rt_tensors[i];
		const struct st_tensor *t = st_find(s, r->name);

		assert_non_null(t);
		assert_string_equal(t->name, r->name);
		assert_int_equal(t->dtype, r->dtype);
		assert_int_equal(t->ndim, r->ndim);
		for (int d = 0; d < r->ndim; d++)
			assert_int_equal(t->shape[d], r->shape[d]);
		assert_int_equal(t->nbytes, r->nbytes);
		assert_int_equal(t->nbytes, (size_t)t->numel * st_dtype_size(t->dtype));
		if (r->nbytes)
			assert_memory_equal(t->data, r->data, r->nbytes);
		assert_int_equal((uintptr_t)t->data % st_dtype_size(t->dtype), 0);
		assert_non_null(strstr(t->file, "round_trip/model.safetensors"));
	}
	assert_int_equal(st_find(s, "scale")->numel, 1);
	assert_int_equal(st_find(s, "scale")->ndim, 0);
	assert_int_equal(st_find(s, "empty")->numel, 0);
	assert_int_equal(st_find(s, "big")->numel, BIG_ELEMS);
	assert_null(st_find(s, "missing"));
	assert_null(st_find(s, "b.weigh"));
	assert_null(st_at(s, N_RT));
	for (size_t i = 0; i < st_count(s); i++) {
		const struct st_tensor *t = st_at(s, i);

		assert_non_null(t);
		if (prev)
			assert_true(strcmp(prev->name, t->name) < 0);
		prev = t;
	}
	st_close(s);
	st_close(NULL);
}

/* The header is padded to 8 with spaces, keys follow the order added, no gaps. */
static void test_writer_layout(void **state)
{
	char dir[256], path[512];
	unsigned char *buf;
	size_t len, i = 0, data = 0;
	uint64_t n;
	cJSON *hdr, *e;

	(void)state;
	write_round_trip(subdir(dir, sizeof(dir), "layout"));
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	buf = read_file(path, &len);
	assert_non_null(buf);
	n = le64(buf);
	assert_int_equal(n % 8, 0);
	assert_true(8 + n <= len);
	assert_memory_equal(buf + 8, "{\"__metadata__\":{\"format\":\"pt\"},", 32);
	assert_true(buf[8 + n - 1] == ' ' || buf[8 + n - 1] == '}');
	hdr = cJSON_ParseWithLength((const char *)buf + 8, n);
	assert_non_null(hdr);
	cJSON_ArrayForEach(e, hdr) {
		const cJSON *off = cJSON_GetObjectItem(e, "data_offsets");

		if (i == 0) {
			assert_string_equal(e->string, "__metadata__");
			assert_string_equal(cJSON_GetObjectItem(e, "format")->valuestring, "pt");
			i++;
			continue;
		}
		assert_true(i - 1 < N_RT);
		assert_string_equal(e->string, rt_tensors[i - 1].name);
		data += (size_t)(cJSON_GetArrayItem(off, 1)->valuedouble -
				 cJSON_GetArrayItem(off, 0)->valuedouble);
		i++;
	}
	assert_int_equal(i, N_RT + 1);
	assert_int_equal(data, len - 8 - n);
	cJSON_Delete(hdr);
	free(buf);
}

static void test_writer_errors(void **state)
{
	char dir[256], path[512], missing[512];
	struct sm_err err = {{0}};
	struct st_writer *w;
	struct st_set *s;
	int64_t shape[ST_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	int64_t neg[2] = {2, -1};
	float v[2] = {1.5f, -2.0f};

	(void)state;
	snprintf(path, sizeof(path), "%s/model.safetensors", subdir(dir, sizeof(dir), "werr"));
	w = st_writer_new(path);
	assert_non_null(w);
	assert_int_equal(st_writer_add(w, "x", ST_F32, 1, (int64_t[]){2}, v, &err), 0);
	assert_int_equal(st_writer_add(w, "x", ST_F32, 1, (int64_t[]){2}, v, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "'x' added twice"));
	assert_int_equal(st_writer_add(w, "n", ST_F32, 2, neg, v, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "tensor 'n'"));
	assert_non_null(strstr(err.msg, "negative"));
	assert_int_equal(st_writer_add(w, "d", ST_F32, ST_MAX_DIMS + 1, shape, v, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "9 dimensions"));
	assert_int_equal(st_writer_add(w, "o", ST_OTHER, 1, (int64_t[]){2}, v, &err), -EINVAL);
	assert_int_equal(st_writer_add(w, "__metadata__", ST_F32, 0, NULL, v, &err), -EINVAL);
	assert_int_equal(st_writer_add(w, "", ST_F32, 0, NULL, v, &err), -EINVAL);
	assert_int_equal(st_writer_add(w, "nodata", ST_F32, 0, NULL, NULL, &err), -EINVAL);
	assert_int_equal(st_writer_bytes(w), 8);
	assert_int_equal(st_writer_finish(w, &err), 0);
	s = st_open_file(path, &err);
	assert_non_null(s);
	assert_int_equal(st_count(s), 1);
	assert_memory_equal(st_find(s, "x")->data, v, sizeof(v));
	st_close(s);
	assert_int_equal(count_entries(dir), 1);

	snprintf(missing, sizeof(missing), "%s/no/such/dir/model.safetensors", root);
	w = st_writer_new(missing);
	assert_non_null(w);
	assert_int_equal(st_writer_add(w, "x", ST_F32, 1, (int64_t[]){2}, v, &err), -ENOENT);
	assert_non_null(strstr(err.msg, missing));
	assert_int_equal(st_writer_finish(w, &err), -ENOENT);
	assert_non_null(strstr(err.msg, missing));
}

/* ---------------------------------------------------------------- shards */

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

/* write_shards - layer.weight in shard 1, its scale and an unlisted tensor in shard 2. */
static void write_shards(const char *dir)
{
	char path[512];
	struct sm_err err = {{0}};
	struct st_writer *w;
	unsigned char w8[12];
	float sc[3] = {0.5f, 0.25f, 2.0f}, other[2] = {7, 8};

	fill(w8, sizeof(w8), 3);
	snprintf(path, sizeof(path), "%s/" SHARD1, dir);
	w = st_writer_new(path);
	assert_int_equal(st_writer_add(w, "layer.weight", ST_F8_E4M3, 2, (int64_t[]){3, 4}, w8,
				       &err), 0);
	assert_int_equal(st_writer_add(w, "norm", ST_F32, 1, (int64_t[]){2}, other, &err), 0);
	assert_int_equal(st_writer_finish(w, &err), 0);
	snprintf(path, sizeof(path), "%s/" SHARD2, dir);
	w = st_writer_new(path);
	assert_int_equal(st_writer_add(w, "layer.weight_scale_inv", ST_F32, 1, (int64_t[]){3}, sc,
				       &err), 0);
	assert_int_equal(st_writer_add(w, "unlisted", ST_F32, 1, (int64_t[]){2}, other, &err), 0);
	assert_int_equal(st_writer_finish(w, &err), 0);
}

static void test_sharded(void **state)
{
	static const char *const names[] = {"norm", "layer.weight_scale_inv", "layer.weight"};
	static const char *const files[] = {SHARD1, SHARD2, SHARD1};
	char dir[256], path[512];
	struct sm_err err = {{0}};
	const struct st_tensor *w, *sc;
	struct st_set *s;
	unsigned char *text;
	size_t len;

	(void)state;
	write_shards(subdir(dir, sizeof(dir), "sharded"));
	assert_int_equal(st_write_index(dir, 3, names, files, 32, &err), 0);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	text = read_file(path, &len);
	assert_non_null(text);
	assert_non_null(strstr((char *)text, "\"total_size\": 32"));
	assert_true(strstr((char *)text, "\"norm\"") < strstr((char *)text, "\"layer.weight\""));
	free(text);
	/* A broken model.safetensors beside the index is never read. */
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	write_bytes(path, "junk", 4);
	s = st_open(dir, &err);
	if (!s)
		fail_msg("st_open: %s", err.msg);
	assert_int_equal(st_count(s), 3);
	assert_string_equal(st_at(s, 0)->name, "layer.weight");
	assert_string_equal(st_at(s, 1)->name, "layer.weight_scale_inv");
	assert_string_equal(st_at(s, 2)->name, "norm");
	w = st_find(s, "layer.weight");
	sc = st_find(s, "layer.weight_scale_inv");
	assert_non_null(w);
	assert_non_null(sc);
	assert_non_null(strstr(w->file, SHARD1));
	assert_non_null(strstr(sc->file, SHARD2));
	assert_int_equal(w->dtype, ST_F8_E4M3);
	assert_int_equal(sc->numel, 3);
	assert_true(((const float *)sc->data)[2] == 2.0f);
	assert_null(st_find(s, "unlisted"));
	assert_non_null(st_expect(s, "norm", ST_F32, 1, (int64_t[]){2}, &err));
	st_close(s);
}

static void test_index_errors(void **state)
{
	static const char *const ghost_names[] = {"layer.weight", "ghost"};
	static const char *const ghost_files[] = {SHARD1, SHARD1};
	static const char *const names[] = {"x"};
	static const char *const evil[] = {"../evil.safetensors"};
	static const char *const gone[] = {"model-00009-of-00009.safetensors"};
	static const char *const dup_names[] = {"a", "a"};
	static const char *const dup_files[] = {SHARD1, SHARD2};
	char dir[256], path[512];
	struct sm_err err = {{0}};

	(void)state;
	write_shards(subdir(dir, sizeof(dir), "index_errors"));
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);

	assert_int_equal(st_write_index(dir, 2, ghost_names, ghost_files, 0, &err), 0);
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "'ghost'"));
	assert_non_null(strstr(err.msg, SHARD1));

	assert_int_equal(st_write_index(dir, 1, names, evil, 0, &err), -EINVAL);
	write_text(path, "{\"weight_map\": {\"x\": \"../evil.safetensors\"}}");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "weight_map entry 'x'"));
	write_text(path, "{\"weight_map\": {\"x\": \"sub/dir.safetensors\"}}");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "plain file name"));

	assert_int_equal(st_write_index(dir, 1, names, gone, 0, &err), 0);
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "model-00009-of-00009.safetensors: missing"));

	assert_int_equal(st_write_index(dir, 2, dup_names, dup_files, 0, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "'a'"));
	write_text(path, "{\"weight_map\": {\"a\": \"" SHARD1 "\", \"a\": \"" SHARD2 "\"}}");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "tensor 'a' twice"));

	write_text(path, "{\"metadata\": {}}");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "no \"weight_map\""));
	write_text(path, "{\"weight_map\": ");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, "model.safetensors.index.json: not a valid JSON"));
}

static void test_missing(void **state)
{
	char dir[256], path[512];
	struct sm_err err = {{0}};

	(void)state;
	snprintf(path, sizeof(path), "%s/does-not-exist", root);
	assert_null(st_open(path, &err));
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "No such file or directory"));

	subdir(dir, sizeof(dir), "empty_dir");
	assert_null(st_open(dir, &err));
	assert_non_null(strstr(err.msg, dir));
	assert_non_null(strstr(err.msg, "neither model.safetensors nor "
				"model.safetensors.index.json"));

	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	assert_null(st_open_file(path, &err));
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "cannot open"));

	write_st(path, "{}", 0);
	assert_null(st_open(path, &err));
	assert_non_null(strstr(err.msg, "not a directory"));
	assert_null(st_open_file(dir, &err));
	assert_non_null(strstr(err.msg, "not a regular file"));
}

/* ---------------------------------------------------------------- not regular files */

/* on_alarm - st_open blocked on a FIFO: end the program (no cmocka verdict: a failure). */
static void on_alarm(int sig)
{
	static const char msg[] = "a FIFO blocked st_open\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	_exit(3);
}

/* expect_refused - st_open(@dir) fails at once, naming @path as @kind. */
static void expect_refused(const char *dir, const char *path, const char *kind)
{
	struct sm_err err = {{0}};

	signal(SIGALRM, on_alarm);
	alarm(20);
	assert_null(st_open(dir, &err));
	alarm(0);
	if (!strstr(err.msg, path) || !strstr(err.msg, "not a regular file") || !strstr(err.msg, kind))
		fail_msg("message \"%s\" does not name %s as %s", err.msg, path, kind);
}

/* A FIFO (which would block the open) or a device in place of a file is refused by name. */
static void test_not_regular(void **state)
{
	static const char *const names[] = {"layer.weight", "layer.weight_scale_inv"};
	static const char *const files[] = {SHARD1, SHARD2};
	char dir[256], path[512];
	struct sm_err err = {{0}};

	(void)state;
	/* model.safetensors */
	subdir(dir, sizeof(dir), "fifo_single");
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(dir, path, "FIFO");
	/* a shard the index names */
	write_shards(subdir(dir, sizeof(dir), "fifo_shard"));
	assert_int_equal(st_write_index(dir, 2, names, files, 0, &err), 0);
	snprintf(path, sizeof(path), "%s/" SHARD2, dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(dir, path, "FIFO");
	/* the index */
	write_shards(subdir(dir, sizeof(dir), "fifo_index"));
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(dir, path, "FIFO");
	/* a directory as the index, a character device as one file */
	subdir(dir, sizeof(dir), "dir_index");
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	expect_refused(dir, path, "directory");
	assert_null(st_open_file("/dev/null", &err));
	assert_non_null(strstr(err.msg, "/dev/null: not a regular file but a character device"));
}

/* ---------------------------------------------------------------- malformed */

#define E(dt, shape, off) "{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}"

static const struct bad_header {
	const char *header;
	size_t data_len;
	const char *expect;	/* in the message, after the file name */
} bad_headers[] = {
	{"[1, 2]", 0, "does not start with '{'"},
	{" {}", 0, "does not start with '{'"},
	{"{\"a\": ", 0, "not a valid JSON object"},
	{"{\"a\": 1,}", 0, "not a valid JSON object"},
	{"{}  x", 0, "only space padding"},
	{"{} {}", 0, "only space padding"},
	{"{\"\xff\": 1}", 0, "not valid UTF-8"},
	{"{\"a\": 5}", 0, "tensor 'a': entry is not an object"},
	{"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': no \"dtype\""},
	{"{\"a\":" E("F12", "[1]", "[0,4]") "}", 4, "tensor 'a': unknown dtype 'F12'"},
	{"{\"a\":" E("f32", "[1]", "[0,4]") "}", 4, "tensor 'a': unknown dtype 'f32'"},
	{"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': no \"shape\""},
	{"{\"a\":" E("F32", "4", "[0,16]") "}", 16, "tensor 'a': no \"shape\""},
	{"{\"w\":" E("F32", "[4]", "[0,16]") "}", 8, "tensor 'w': data_offsets [0, 16] run past"},
	{"{\"w\":" E("F32", "[2]", "[8,0]") "}", 8, "tensor 'w': data_offsets [8, 0] end before"},
	{"{\"w\":" E("F32", "[1]", "[0]") "}", 8, "tensor 'w': \"data_offsets\" is not"},
	{"{\"w\":" E("F32", "[1]", "[0,4,8]") "}", 8, "tensor 'w': \"data_offsets\" is not"},
	{"{\"w\":" E("F32", "[1]", "[-4,0]") "}", 8, "tensor 'w': \"data_offsets\" is not"},
	{"{\"w\":" E("F32", "[1]", "[0,1e300]") "}", 8, "tensor 'w': \"data_offsets\" is not"},
	{"{\"w\":" E("BF16", "[4]", "[0,16]") "}", 16,
	 "tensor 'w': BF16 [4] is 8 bytes, but data_offsets [0, 16] span 16"},
	{"{\"s\":" E("F32", "[]", "[0,8]") "}", 8, "tensor 's': F32 [] is 4 bytes"},
	{"{\"u\":" E("U16", "[3]", "[0,4]") "}", 8, "tensor 'u': U16 [3] is 6 bytes"},
	{"{\"f\":" E("F4", "[3]", "[0,2]") "}", 8, "tensor 'f': F4 [3] does not fill whole bytes"},
	{"{\"a\":" E("F32", "[2]", "[0,8]") ",\"b\":" E("F32", "[2]", "[4,12]") "}", 12,
	 "tensors 'a' (data_offsets [0, 8]) and 'b' ([4, 12]) overlap"},
	{"{\"a\":" E("F32", "[2]", "[0,8]") ",\"z\":" E("F32", "[0]", "[4,4]") "}", 8,
	 "tensors 'a' (data_offsets [0, 8]) and 'z' ([4, 4]) overlap"},
	{"{\"a\":" E("F32", "[1]", "[0,4]") ",\"a\":" E("F32", "[1]", "[4,8]") "}", 8,
	 "tensor 'a' appears twice"},
	{"{\"n\":" E("F32", "[2,-3]", "[0,8]") "}", 8, "tensor 'n': shape[1] is -3"},
	{"{\"n\":" E("F32", "[1.5]", "[0,8]") "}", 8, "tensor 'n': shape[0] is 1.5"},
	{"{\"n\":" E("F32", "[\"2\"]", "[0,8]") "}", 8, "tensor 'n': shape[0] is the string"},
	{"{\"d\":" E("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4,
	 "tensor 'd': shape has 9 dimensions; at most 8"},
	{"{\"o\":" E("F32", "[4294967296,1073741824,16]", "[0,4]") "}", 4,
	 "tensor 'o': the element count of shape [4294967296, 1073741824, 16] overflows"},
	{"{\"o\":" E("F32", "[4503599627370496,512]", "[0,4]") "}", 4,
	 "tensor 'o': F32 [4503599627370496, 512] is too large"},
	{"{\"__metadata__\": 3}", 0, "\"__metadata__\" is not an object"},
	{"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "\"__metadata__\" is there twice"},
};
#define N_BAD (sizeof(bad_headers) / sizeof(bad_headers[0]))

static void test_malformed_headers(void **state)
{
	char dir[256], path[512];
	struct sm_err err;

	(void)state;
	subdir(dir, sizeof(dir), "malformed");
	for (size_t i = 0; i < N_BAD; i++) {
		const struct bad_header *b = &bad_headers[i];
		struct st_set *s;

		snprintf(path, sizeof(path), "%s/bad%02zu.safetensors", dir, i);
		write_st(path, b->header, b->data_len);
		err.msg[0] = '\0';
		s = st_open_file(path, &err);
		if (s) {
			st_close(s);
			fail_msg("case %zu (%s) was accepted", i, b->header);
		}
		if (strncmp(err.msg, path, strlen(path)) != 0 || !strstr(err.msg, b->expect))
			fail_msg("case %zu: message '%s' lacks the path or '%s'", i, err.msg,
				 b->expect);
	}
}

static void test_malformed_lengths(void **state)
{
	static const struct {
		uint64_t len8;		/* UINT64_MAX: write only 5 bytes */
		const char *rest;
		const char *expect;
	} cases[] = {
		{UINT64_MAX, "", "too short for the 8-byte header length"},
		{1000, "{}", "header length 1000 runs past the end of the 10-byte file"},
		{200000000, "{}", "header length 200000000 is over the format's limit"},
		{100000001, "{}", "is over the format's limit"},
		{UINT64_MAX - 1, "{}", "is over the format's limit"},
		{0, "{}", "does not start with '{'"},
		{1, "{}", "not a valid JSON object"},
	};
	char dir[256], path[512];
	struct sm_err err;

	(void)state;
	subdir(dir, sizeof(dir), "lengths");
	snprintf(path, sizeof(path), "%s/empty.safetensors", dir);
	write_bytes(path, "", 0);
	assert_null(st_open_file(path, &err));
	assert_non_null(strstr(err.msg, "0 bytes, too short"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), "%s/len%zu.safetensors", dir, i);
		if (cases[i].len8 == UINT64_MAX)
			write_bytes(path, "\x02\0\0\0\0", 5);
		else
			write_raw_len(path, cases[i].len8, cases[i].rest);
		err.msg[0] = '\0';
		assert_null(st_open_file(path, &err));
		if (!strstr(err.msg, path) || !strstr(err.msg, cases[i].expect))
			fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].expect);
	}
}

/* Valid files the strict checks must not refuse. */
static void test_accepted_headers(void **state)
{
	char dir[256], path[512];
	struct sm_err err = {{0}};
	const struct st_tensor *t;
	struct st_set *s;

	(void)state;
	subdir(dir, sizeof(dir), "accepted");
	snprintf(path, sizeof(path), "%s/ok.safetensors", dir);
	write_st(path, "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
		 "\"e5\":" E("F8_E5M2", "[4]", "[0,4]") ",\"u16\":" E("U16", "[2]", "[4,8]")
		 ",\"f4\":" E("F4", "[4]", "[8,10]") ",\"c\":" E("C64", "[1]", "[10,18]")
		 ",\"s\":" E("I32", "[]", "[20,24]") ",\"z\":" E("BF16", "[0,3]", "[24,24]")
		 ",\"z2\":" E("F32", "[5,0]", "[24,24]") "}    \n  ", 24);
	s = st_open_file(path, &err);
	if (!s)
		fail_msg("st_open_file: %s", err.msg);
	assert_int_equal(st_count(s), 7);
	t = st_find(s, "f4");
	assert_int_equal(t->dtype, ST_OTHER);
	assert_int_equal(t->nbytes, 2);
	assert_int_equal(t->numel, 4);
	assert_int_equal(st_find(s, "c")->nbytes, 8);
	assert_int_equal(st_find(s, "e5")->dtype, ST_OTHER);
	t = st_find(s, "s");
	assert_int_equal(t->ndim, 0);
	assert_int_equal(t->numel, 1);
	assert_int_equal(t->nbytes, 4);
	assert_int_equal(*(const unsigned char *)t->data, (unsigned char)(20 * 7 + 1));
	assert_int_equal(st_find(s, "z")->numel, 0);
	assert_int_equal(st_find(s, "z2")->nbytes, 0);
	st_close(s);

	assert_int_equal(st_dtype_parse("BF16"), ST_BF16);
	assert_int_equal(st_dtype_parse("F8_E4M3"), ST_F8_E4M3);
	assert_int_equal(st_dtype_parse("BOOL"), ST_BOOL);
	assert_int_equal(st_dtype_parse("F8_E5M2FNUZ"), ST_OTHER);
	assert_int_equal(st_dtype_parse("F6_E3M2"), ST_OTHER);
	assert_int_equal(st_dtype_parse("F12"), -1);
	assert_int_equal(st_dtype_parse("bf16"), -1);
	assert_string_equal(st_dtype_name(ST_F8_E4M3), "F8_E4M3");
	assert_string_equal(st_dtype_name(ST_OTHER), "?");
	assert_int_equal(st_dtype_size(ST_BF16), 2);
	assert_int_equal(st_dtype_size(ST_I64), 8);
	assert_int_equal(st_dtype_size(ST_BOOL), 1);
	assert_int_equal(st_dtype_size(ST_OTHER), 0);
}

/* Every truncation of a valid file fails; no byte change crashes the reader. */
static void test_truncations_and_changes(void **state)
{
	static const unsigned char subst[] = {'}', '{', '"', '9', '0', ' ', '-', '[', ']', ',',
					      0, 0xff, 'e'};
	char dir[256], src[512], path[512];
	struct sm_err err = {{0}};
	struct st_writer *w;
	struct st_set *s;
	unsigned char *buf;
	float f[6] = {1, 2, 3, 4, 5, 6};
	uint16_t h[3] = {1, 2, 3};
	size_t len, hlen, opened = 0;

	(void)state;
	subdir(dir, sizeof(dir), "mutate");
	snprintf(src, sizeof(src), "%s/src.safetensors", dir);
	w = st_writer_new(src);
	assert_int_equal(st_writer_add(w, "a", ST_F32, 2, (int64_t[]){2, 3}, f, &err), 0);
	assert_int_equal(st_writer_add(w, "b", ST_BF16, 1, (int64_t[]){3}, h, &err), 0);
	assert_int_equal(st_writer_add(w, "c", ST_F32, 0, NULL, f, &err), 0);
	assert_int_equal(st_writer_finish(w, &err), 0);
	buf = read_file(src, &len);
	assert_non_null(buf);
	hlen = (size_t)le64(buf);
	snprintf(path, sizeof(path), "%s/cut.safetensors", dir);
	for (size_t cut = 0; cut < len; cut++) {
		write_bytes(path, buf, cut);
		err.msg[0] = '\0';
		s = st_open_file(path, &err);
		if (s) {
			st_close(s);
			fail_msg("a file cut to %zu of %zu bytes was accepted", cut, len);
		}
		assert_non_null(strstr(err.msg, path));
	}
	for (size_t at = 0; at < 8 + hlen; at++) {
		unsigned char keep = buf[at];

		for (size_t k = 0; k < sizeof(subst); k++) {
			unsigned sum = 0;

			buf[at] = subst[k];
			write_bytes(path, buf, len);
			s = st_open_file(path, &err);
			for (size_t i = 0; s && i < st_count(s); i++) {
				const struct st_tensor *t = st_at(s, i);

				for (size_t j = 0; j < t->nbytes; j++)
					sum += ((const unsigned char *)t->data)[j];
			}
			opened += s != NULL;
			assert_true(s || err.msg[0]);
			st_close(s);
			(void)sum;
		}
		buf[at] = keep;
	}
	assert_true(opened > 0);
	free(buf);
}

/* ---------------------------------------------------------------- st_expect */

static void test_expect(void **state)
{
	char dir[256];
	struct sm_err err = {{0}};
	struct st_set *s;

	(void)state;
	write_round_trip(subdir(dir, sizeof(dir), "expect"));
	s = st_open(dir, &err);
	assert_non_null(s);
	assert_non_null(st_expect(s, "b.weight", ST_BF16, 2, (int64_t[]){2, 3}, &err));
	assert_non_null(st_expect(s, "b.weight", -1, 2, (int64_t[]){-1, 3}, &err));
	assert_non_null(st_expect(s, "scale", ST_F32, 0, NULL, &err));

	assert_null(st_expect(s, "b.weight", ST_F32, 2, (int64_t[]){2, 3}, &err));
	assert_non_null(strstr(err.msg, "tensor 'b.weight' is BF16 [2, 3], expected F32"));
	assert_non_null(strstr(err.msg, "model.safetensors"));

	assert_null(st_expect(s, "b.weight", ST_BF16, 3, (int64_t[]){2, 3, 1}, &err));
	assert_non_null(strstr(err.msg, "tensor 'b.weight' has shape [2, 3] (2 dimensions), "
				"expected [2, 3, 1] (3)"));

	assert_null(st_expect(s, "b.weight", ST_BF16, 2, (int64_t[]){-1, 4}, &err));
	assert_non_null(strstr(err.msg, "tensor 'b.weight' has shape [2, 3], expected [*, 4] "
				"(dimension 1 is 3, not 4)"));

	assert_null(st_expect(s, "scale", ST_F32, 1, (int64_t[]){1}, &err));
	assert_non_null(strstr(err.msg, "tensor 'scale' has shape [] (0 dimensions)"));

	assert_null(st_expect(s, "model.layers.0.mlp", -1, 0, NULL, &err));
	assert_non_null(strstr(err.msg, "no tensor 'model.layers.0.mlp'"));
	st_close(s);
}

/* ---------------------------------------------------------------- main */

static int setup(void **state)
{
	(void)state;
	return tmp_dir(root, sizeof(root), "test_safetensors.") ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_RT; i++)
		free(rt_tensors[i].data);
	return rm_tree(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_writer_layout),
		cmocka_unit_test(test_writer_errors),
		cmocka_unit_test(test_sharded),
		cmocka_unit_test(test_index_errors),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_malformed_headers),
		cmocka_unit_test(test_malformed_lengths),
		cmocka_unit_test(test_accepted_headers),
		cmocka_unit_test(test_truncations_and_changes),
		cmocka_unit_test(test_expect),
	};

	return cmocka_run_group_tests_name("safetensors", tests, setup, teardown);
}
