/*
 * safetensors.h - Hugging Face safetensors checkpoints: read (mmap) and write.
 *
 * A checkpoint is a directory holding either model.safetensors or a
 * model.safetensors.index.json whose weight_map names the shard of every
 * tensor.  st_open() maps each shard read-only, checks every header against
 * the format (u64 LE length, JSON object, offsets inside the data buffer,
 * end - begin == numel * dtype size, no overlaps, no duplicate names) and
 * builds one name-sorted index over all shards, so a tensor is found by name
 * whichever shard holds it.  Errors name the file and the tensor.
 *
 * st_writer writes one file in the reference writer's layout (header padded
 * with spaces to a multiple of 8, header keys in the order added, data by
 * descending element size so that every tensor is aligned); st_write_index
 * writes model.safetensors.index.json for a set of shards.
 */
#ifndef SM120_ENGINE_ST_SAFETENSORS_H
#define SM120_ENGINE_ST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../../core/common/err.h"

/* The dtypes the engine reads; ST_OTHER is any other valid string (kept, never read). */
enum st_dtype {
	ST_BF16, ST_F16, ST_F32, ST_F64, ST_F8_E4M3, ST_I8, ST_U8, ST_I16, ST_I32, ST_I64,
	ST_BOOL, ST_OTHER,
};

#define ST_MAX_DIMS 8

struct st_tensor {
	const char *name;	/* owned by the st_set */
	enum st_dtype dtype;
	int ndim;		/* 0 for a scalar */
	int64_t shape[ST_MAX_DIMS];
	int64_t numel;
	const void *data;	/* inside the shard's mapping; numel * st_dtype_size bytes */
	size_t nbytes;
	const char *file;	/* the shard's path, for messages */
};

struct st_set;			/* opaque: the mapped shards and the index */

/* st_dtype_size - bytes per element (0 for ST_OTHER). */
size_t st_dtype_size(enum st_dtype t);

/* st_dtype_name - "BF16", "F8_E4M3", ... ("?" for ST_OTHER). */
const char *st_dtype_name(enum st_dtype t);

/* st_dtype_parse - the enum for a safetensors dtype string; -1 when not a known string. */
int st_dtype_parse(const char *s);

/*
 * st_open - map the checkpoint in directory @dir (index file, else
 * model.safetensors).  Returns the set, or NULL with @err naming the file (and
 * tensor) at fault.  Tensors of shards the index does not reference are not
 * read; a name the index maps to a shard that lacks it is an error.
 */
struct st_set *st_open(const char *dir, struct sm_err *err);

/* st_open_file - map one safetensors file by path (no index). */
struct st_set *st_open_file(const char *path, struct sm_err *err);

/*
 * st_open_buffer - read one safetensors file already in memory: the @len
 * bytes at @buf, named @name in messages.  The same checks as st_open_file,
 * with the buffer's exact bounds (the fuzzer's entry point).  The set
 * borrows @buf, which must outlive it.
 */
struct st_set *st_open_buffer(const void *buf, size_t len, const char *name, struct sm_err *err);

/* st_close - unmap and free; NULL is allowed. */
void st_close(struct st_set *s);

/* st_find - the tensor called @name, or NULL. O(log n). */
const struct st_tensor *st_find(const struct st_set *s, const char *name);

/* st_count / st_at - iterate over all tensors in name order. */
size_t st_count(const struct st_set *s);
const struct st_tensor *st_at(const struct st_set *s, size_t i);

/*
 * st_expect - @name must exist with dtype @dtype (or any when < 0) and the
 * @ndim dimensions in @shape (a dimension < 0 matches any size).  Returns the
 * tensor, or NULL with @err naming the tensor, its file, what was found and
 * what was expected.
 */
const struct st_tensor *st_expect(const struct st_set *s, const char *name, int dtype,
				  int ndim, const int64_t *shape, struct sm_err *err);

/* ---- writing ---- */

struct st_writer;

/* st_writer_new - start a file at @path (created or truncated on st_writer_finish). */
struct st_writer *st_writer_new(const char *path);

/*
 * st_writer_add - append a tensor; @data (numel * dtype size bytes) is copied.
 * Returns 0, or -errno (duplicate name, bad shape, out of memory) with @err.
 */
int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
		  const int64_t *shape, const void *data, struct sm_err *err);

/* st_writer_bytes - bytes of tensor data added so far. */
size_t st_writer_bytes(const struct st_writer *w);

/*
 * st_writer_finish - write the file ("__metadata__": {"format": "pt"}) and free
 * @w (always, also on error).  Returns 0 or -errno with @err naming the path.
 */
int st_writer_finish(struct st_writer *w, struct sm_err *err);

/*
 * st_write_index - write @dir/model.safetensors.index.json: metadata.total_size
 * @total_bytes and a weight_map of @n (tensor name, shard file name) pairs.
 */
int st_write_index(const char *dir, size_t n, const char *const *names,
		   const char *const *files, uint64_t total_bytes, struct sm_err *err);

#endif
