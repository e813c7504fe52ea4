/*
 * fuzz_image.c - libFuzzer target for the image readers (core/image).
 *
 * image.h promises that every reader treats its input as hostile: it never
 * reads outside the buffer it was given, it reports each defect as -errno
 * plus a struct sm_err, and it frees what it allocated.  This target gives
 * one input to each layer:
 *   - img_classify and img_scan_buffer, the whole dispatch (cubin, fatbin,
 *     host ELF, PTX), with a visitor that reads every field of every kernel
 *     and parameter, so that AddressSanitizer sees short or stale buffers;
 *   - img_cubin_parse directly, also on bytes img_classify calls no cubin;
 *   - the fatbin iterator and img_fatbin_entry_inflate directly, on every
 *     entry whatever its kind, and img_cubin_parse on what they inflate
 *     (the iterator also walks inputs that start with zero padding, which
 *     img_classify calls unknown).
 * It also checks what the API promises beyond memory safety: known error
 * codes, a message with each error, an empty img_cubin after a failure,
 * unique ascending parameter ordinals, payloads inside the buffer.  A broken
 * promise aborts, so that libFuzzer keeps the input.
 *
 * Build and run with `make fuzz-smoke` or `make fuzz` (tests/fuzz/fuzz.mk).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/image/image.h"

#define LABEL "fuzz-input"

/* Folded reads of every field end here, so that no read is optimised away. */
static volatile uint64_t sink;

/* broken - a promise of image.h does not hold: say which, and crash. */
static void broken(const char *what, int rc, const struct sm_err *err)
{
	fprintf(stderr, "fuzz_image: %s (rc %d, message \"%s\")\n", what, rc,
		err ? err->msg : "");
	abort();
}

/* check_err - a failure carries a known code and a message. */
static void check_err(const char *fn, int rc, const struct sm_err *err)
{
	char what[128];

	if (rc != -EINVAL && rc != -ENOMEM && rc != -ENOTSUP) {
		snprintf(what, sizeof(what), "%s returned an unexpected code", fn);
		broken(what, rc, err);
	}
	if (!memchr(err->msg, '\0', sizeof(err->msg)) || !err->msg[0]) {
		snprintf(what, sizeof(what), "%s failed without a message", fn);
		broken(what, rc, err);
	}
}

/* touch_bytes - read all of @p[0..len); ASan reports a short buffer. */
static uint64_t touch_bytes(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = len;
	size_t i;

	for (i = 0; i < len; i++)
		h = h * 31 + b[i];
	return h;
}

/* touch_cubin - read every field of @c and check its invariants. */
static void touch_cubin(const struct img_cubin *c)
{
	uint64_t h = 0;
	uint32_t i, j;

	h += (uint64_t)c->abi + (uint64_t)c->sm + (uint8_t)c->variant + c->reserved_smem;
	h += (uint64_t)c->relocatable + c->cuda_api + c->n_kernels;
	if (c->n_kernels && !c->kernels)
		broken("img_cubin has kernels but no array", 0, NULL);
	for (i = 0; i < c->n_kernels; i++) {
		const struct img_kernel *k = &c->kernels[i];
		const struct img_kernel *found;

		if (!k->name || !k->name[0])
			broken("a kernel has no name", 0, NULL);
		h += touch_bytes(k->name, strlen(k->name) + 1);
		h += k->static_smem + k->static_smem_section + (uint64_t)k->dynamic_smem;
		h += (uint64_t)k->regs + k->frame_size + k->param_bytes + k->n_params;
		h += (uint64_t)k->params_v2;
		for (j = 0; j < 3; j++)
			h += k->max_threads[j] + k->reqntid[j];
		if (k->n_params && !k->params)
			broken("a kernel has parameters but no array", 0, NULL);
		for (j = 0; j < k->n_params; j++) {
			const struct img_param *p = &k->params[j];

			h += p->ordinal + p->offset + p->size;
			if (j > 0 && p->ordinal <= k->params[j - 1].ordinal)
				broken("parameter ordinals are not unique and ascending", 0, NULL);
			if (k->param_bytes && (uint64_t)p->offset + p->size > k->param_bytes)
				broken("a parameter ends past the parameter block", 0, NULL);
		}
		found = img_cubin_find(c, k->name);
		if (!found || strcmp(found->name, k->name) != 0)
			broken("img_cubin_find misses a kernel of its own cubin", 0, NULL);
	}
	sink += h;
}

/* check_empty - after a failure the img_cubin holds nothing. */
static void check_empty(const struct img_cubin *c, int rc, const struct sm_err *err)
{
	static const struct img_cubin zero;

	if (memcmp(c, &zero, sizeof(zero)) != 0)
		broken("img_cubin_parse failed but left the img_cubin filled", rc, err);
}

/* parse_cubin - img_cubin_parse on @buf, touch the result, free it. */
static void parse_cubin(const void *buf, size_t len, const char *origin)
{
	struct img_cubin c;
	struct sm_err err;
	int rc;

	sm_err_clear(&err);
	rc = img_cubin_parse(buf, len, origin, &c, &err);
	if (rc) {
		check_err("img_cubin_parse", rc, &err);
		check_empty(&c, rc, &err);
		return;
	}
	touch_cubin(&c);
	img_cubin_free(&c);
	check_empty(&c, 0, NULL);
}

/* ---------------------------------------------------------------- scan */

struct visit {
	const char *label;
	int errors;     /* on_error calls */
};

static void touch_origin(struct visit *v, const struct img_origin *w)
{
	if (!w || w->file != v->label)
		broken("an origin does not name the scanned buffer", 0, NULL);
	if (!w->in_fatbin && (w->container || w->entry || w->compression || w->variant))
		broken("an origin outside a fatbin carries fatbin fields", 0, NULL);
	if (w->triton)
		broken("a memory scan claims a Triton origin", 0, NULL);
	sink += (uint64_t)w->in_fatbin + w->container + w->entry + (uint64_t)w->compression +
		(uint8_t)w->variant;
}

static int on_cubin(void *user, const struct img_origin *where, const struct img_cubin *cubin)
{
	touch_origin(user, where);
	touch_cubin(cubin);
	return 0;
}

static void on_ptx(void *user, const struct img_origin *where, uint32_t arch)
{
	touch_origin(user, where);
	sink += arch;
}

static void on_error(void *user, const struct sm_err *err)
{
	struct visit *v = user;

	if (!memchr(err->msg, '\0', sizeof(err->msg)) || !err->msg[0])
		broken("img_scan_buffer reported an error without a message", 0, err);
	sink += touch_bytes(err->msg, strlen(err->msg));
	v->errors++;
}

static void scan(const uint8_t *data, size_t size)
{
	struct visit v = { .label = LABEL };
	struct img_visitor vis = { .on_cubin = on_cubin, .on_ptx = on_ptx, .on_error = on_error,
				   .user = &v };
	enum img_kind kind = img_classify(data, size);
	int rc;

	sink += touch_bytes(img_kind_name(kind), strlen(img_kind_name(kind)));
	rc = img_scan_buffer(data, size, LABEL, &vis);
	if (kind == IMG_KIND_UNKNOWN || kind == IMG_KIND_WRAPPER) {
		if (rc != -EINVAL || v.errors != 1)
			broken("img_scan_buffer accepted what is no image", rc, NULL);
	} else if (rc != v.errors) {
		broken("img_scan_buffer's count differs from its on_error calls", rc, NULL);
	}
}

/* ---------------------------------------------------------------- fatbin */

/* inflate - img_fatbin_entry_inflate on @e; parse what comes out. */
static void inflate(const struct img_fatbin_entry *e)
{
	struct sm_err err;
	void *img = (void *)1;
	size_t img_len = 1;
	int rc;

	sm_err_clear(&err);
	rc = img_fatbin_entry_inflate(e, &img, &img_len, "fuzz-entry", &err);
	if (rc) {
		check_err("img_fatbin_entry_inflate", rc, &err);
		if (img || img_len)
			broken("img_fatbin_entry_inflate failed but set its outputs", rc, &err);
		return;
	}
	if (!img)
		broken("img_fatbin_entry_inflate succeeded without a buffer", 0, NULL);
	if (img_len != (e->compression == IMG_COMP_NONE ? e->payload_len : e->uncompressed_len))
		broken("the inflated size is not the size the entry claims", 0, NULL);
	sink += touch_bytes(img, img_len);
	if (e->kind != IMG_ENTRY_PTX)
		parse_cubin(img, img_len, "fuzz-entry");
	free(img);
}

static void walk_fatbin(const uint8_t *data, size_t size)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;
	struct sm_err err;
	uint32_t last_container = 0;
	int rc, n = 0;

	if (size >= 16)
		sink += img_fatbin_size(data);
	img_fatbin_iter_init(&it, data, size);
	for (;;) {
		sm_err_clear(&err);
		rc = img_fatbin_iter_next(&it, &e, "fuzz-fatbin", &err);
		if (rc != 1)
			break;
		if (e.payload < data || e.payload_len > size ||
		    (size_t)(e.payload - data) > size - e.payload_len)
			broken("a fatbin payload lies outside the buffer", rc, NULL);
		if (e.offset >= size || data + e.offset >= e.payload)
			broken("a fatbin entry header lies outside the buffer", rc, NULL);
		if (n > 0 && e.container < last_container)
			broken("fatbin container indices go backwards", rc, NULL);
		last_container = e.container;
		sink += e.kind + e.arch + (uint8_t)e.variant + (uint64_t)e.compression + e.flags +
			e.uncompressed_len + e.index;
		sink += touch_bytes(e.payload, e.payload_len);
		inflate(&e);
		n++;
	}
	if (rc < 0)
		check_err("img_fatbin_iter_next", rc, &err);
	else if (rc != 0)
		broken("img_fatbin_iter_next returned an unexpected code", rc, &err);
	if (img_fatbin_iter_next(&it, &e, "fuzz-fatbin", &err) != 0)
		broken("the fatbin iterator does not stay at its end", rc, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	scan(data, size);
	parse_cubin(data, size, "fuzz-cubin");
	walk_fatbin(data, size);
	return 0;
}
