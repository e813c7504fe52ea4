/* evidence.c - see evidence.h: the library-kernel evidence and its decision; pure. */
#include "evidence.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../image/image.h"

int evidence_runs_on(int arch, char variant, int sm)
{
	if (arch <= 0 || sm <= 0 || arch / 10 != sm / 10 || arch > sm)
		return 0;
	return variant != 'a' || arch == sm;
}

void evidence_codes_add(struct evidence_codes *c, int arch, char variant, int ptx)
{
	uint32_t i;

	if (arch <= 0 || arch > UINT16_MAX)
		return;
	for (i = 0; i < c->n; i++)
		if (c->c[i].arch == arch && c->c[i].variant == variant && c->c[i].ptx == !!ptx)
			return;
	if (c->n == EVIDENCE_MAX_CODES) {
		c->truncated = 1;
		return;
	}
	c->c[c->n++] = (struct evidence_code){ (uint16_t)arch, variant, (uint8_t)!!ptx };
}

int evidence_codes_from_fatbin(const void *buf, size_t len, struct evidence_codes *out)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;
	int rc;

	memset(out, 0, sizeof(*out));
	img_fatbin_iter_init(&it, buf, len);
	while ((rc = img_fatbin_iter_next(&it, &e, "", NULL)) == 1)
		if (e.kind == IMG_ENTRY_ELF || e.kind == IMG_ENTRY_PTX)
			evidence_codes_add(out, (int)e.arch, e.variant, e.kind == IMG_ENTRY_PTX);
	return rc < 0 ? -EINVAL : 0;
}

/* code_name - "sm_120a" or "compute_90" into @out (at least 24 bytes). */
static void code_name(const struct evidence_code *c, char *out, size_t n)
{
	snprintf(out, n, "%s_%u%s", c->ptx ? "compute" : "sm", (unsigned)c->arch,
		 c->variant == 'a' ? "a" : c->variant == 'f' ? "f" : "");
}

char *evidence_codes_format(const struct evidence_codes *c, char *out, size_t n)
{
	size_t o = 0;
	uint32_t i;
	char name[24];

	if (!n)
		return out;
	out[0] = '\0';
	for (i = 0; c && i < c->n && o < n; i++) {
		code_name(&c->c[i], name, sizeof(name));
		o += (size_t)snprintf(out + o, n - o, "%s%s", o ? " " : "", name);
	}
	if (c && c->truncated && o < n)
		snprintf(out + o, n - o, "%s...", o ? " " : "");
	return out;
}

/* parse_code - one token of evidence_codes_format into @out; 0 or -EINVAL. */
static int parse_code(const char *tok, size_t len, struct evidence_code *out)
{
	char buf[32], *end;
	const char *digits;
	long arch;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	if (strncmp(buf, "sm_", 3) == 0)
		digits = buf + 3, out->ptx = 0;
	else if (strncmp(buf, "compute_", 8) == 0)
		digits = buf + 8, out->ptx = 1;
	else
		return -EINVAL;
	if (*digits < '0' || *digits > '9')
		return -EINVAL;
	arch = strtol(digits, &end, 10);
	out->variant = 0;
	if (*end == 'a' || *end == 'f')
		out->variant = *end++;
	if (*end || arch <= 0 || arch > UINT16_MAX)
		return -EINVAL;
	out->arch = (uint16_t)arch;
	return 0;
}

int evidence_codes_parse(const char *s, struct evidence_codes *out, struct sm_err *err)
{
	memset(out, 0, sizeof(*out));
	while (s && *s) {
		size_t len = strcspn(s, " ");
		struct evidence_code c;

		if (len == 3 && strncmp(s, "...", 3) == 0)
			out->truncated = 1;
		else if (len && parse_code(s, len, &c) != 0)
			return sm_err_set(err, -EINVAL, "'%.*s' is not a code such as sm_90, sm_120a or "
					  "compute_120", (int)(len < 40 ? len : 40), s);
		else if (len)
			evidence_codes_add(out, c.arch, c.variant, c.ptx);
		s += len;
		s += strspn(s, " ");
	}
	return 0;
}

static const char *const image_names[] = {
	[EVIDENCE_IMAGE_FATBIN] = "fatbin",
	[EVIDENCE_IMAGE_CUBIN] = "cubin",
	[EVIDENCE_IMAGE_PTX] = "PTX",
};

const char *evidence_image_name(enum evidence_image k)
{
	return (unsigned)k < sizeof(image_names) / sizeof(image_names[0]) ? image_names[k] : NULL;
}

enum evidence_image evidence_image_parse(const char *s)
{
	unsigned int i;

	for (i = 0; s && i < sizeof(image_names) / sizeof(image_names[0]); i++)
		if (image_names[i] && strcmp(s, image_names[i]) == 0)
			return (enum evidence_image)i;
	return EVIDENCE_IMAGE_UNKNOWN;
}

int evidence_runtime_path(const char *path)
{
	const char *p = path;

	while (p && *p) {
		size_t len = strcspn(p, "/");

		if ((len == 6 && strncmp(p, "triton", 6) == 0) ||
		    (len == 7 && strncmp(p, ".triton", 7) == 0) ||
		    (len >= 14 && strncmp(p, "torchinductor_", 14) == 0))
			return 1;
		p += len;
		p += strspn(p, "/");
	}
	return 0;
}

/* target_codes - the codes of @c that an sm_@sm card runs, formatted into @out; their count. */
static int target_codes(const struct evidence_codes *c, int sm, char *out, size_t n)
{
	struct evidence_codes runs = { 0 };
	uint32_t i;

	for (i = 0; c && i < c->n; i++)
		if (evidence_runs_on(c->c[i].arch, c->c[i].variant, sm))
			evidence_codes_add(&runs, c->c[i].arch, c->c[i].variant, c->c[i].ptx);
	evidence_codes_format(&runs, out, n);
	return (int)runs.n;
}

/* judged - fill @why with "judged: <why>" and return 0. */
static int judged(struct sm_err *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int judged(struct sm_err *why, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!why)
		return 0;
	n = snprintf(why->msg, sizeof(why->msg), "judged: ");
	va_start(ap, fmt);
	vsnprintf(why->msg + n, sizeof(why->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return 0;
}

/* fatbin_decision - rule 4a: the image is a fatbin; does it hold code @t runs? */
static int fatbin_decision(const struct route_evidence *e, const struct target_limits *t,
			   struct sm_err *why)
{
	char runs[160], all[200];

	evidence_codes_format(e->codes, all, sizeof(all));
	if (target_codes(e->codes, t->sm, runs, sizeof(runs)) == 0)
		return judged(why, "its image %s is a fatbin with no code for sm_%d (it holds %s): "
			      "on %s this library would fail to load, or JIT-compile this same "
			      "kernel", e->origin ? e->origin : "?", t->sm, all[0] ? all : "nothing",
			      t->name);
	sm_err_set(why, 1, "library: its image %s is a fatbin that also holds %s (it holds %s): "
		   "a real %s card runs that code, not this sm_%d code", e->origin ? e->origin : "?",
		   runs, all, t->name, e->device_sm);
	return 1;
}

/* cubin_decision - rule 4b: a raw cubin; was it picked by a library built for @t? */
static int cubin_decision(const struct route_evidence *e, const struct target_limits *t,
			  struct sm_err *why)
{
	char runs[160], all[200];

	if (e->file)
		return judged(why, "its image is a cubin loaded from the file %s, not one a library "
			      "picked out of its own fatbin", e->file);
	if (!e->loader)
		return judged(why, "its image is a raw cubin, and the shared object that loaded it "
			      "is unknown");
	if (!e->loader_codes || !e->loader_codes->n)
		return judged(why, "its image is a raw cubin loaded by %s, which has no readable "
			      ".nv_fatbin section: no sign it ships code for sm_%d", e->loader, t->sm);
	evidence_codes_format(e->loader_codes, all, sizeof(all));
	if (target_codes(e->loader_codes, t->sm, runs, sizeof(runs)) == 0)
		return judged(why, "its image is a raw cubin loaded by %s, whose fatbin holds no "
			      "code for sm_%d (it holds %s)", e->loader, t->sm, all);
	sm_err_set(why, 1, "library: its image is a raw cubin loaded by %s, whose own fatbin "
		   "holds %s (of %s): the library picks its cubins by architecture, and a real "
		   "%s card gets that code, not this sm_%d code", e->loader, runs, all, t->name,
		   e->device_sm);
	return 1;
}

int evidence_library(const struct route_evidence *e, const struct target_limits *t,
		     const char *kernel, int rule_named, struct sm_err *why)
{
	sm_err_clear(why);
	if (!t || !e || (e->device_sm && e->device_sm == t->sm))
		return 0; /* nothing gathered, or the device is the target: nothing to decide */
	if (!t->sm)
		return judged(why, "the target %s is a byte count, not a GPU: which code a library "
			      "would choose on it is unknown", t->name);
	if (!e->device_sm)
		return judged(why, "the device its image was loaded for is unknown, so whether a "
			      "library chose it for that device cannot be told");
	if (rule_named)
		return judged(why, "a reroute rule names %s", kernel ? kernel : "it");
	if (e->runtime_compiled)
		return judged(why, "its image was loaded while a runtime compiler (Triton) was "
			      "loading: compiled for this device at run time, as it would be for %s",
			      t->name);
	if (e->file && evidence_runtime_path(e->file))
		return judged(why, "its image was loaded from %s, in a Triton or Inductor cache: "
			      "compiled at run time", e->file);
	if (e->loader && evidence_runtime_path(e->loader))
		return judged(why, "its image was loaded by %s, in a Triton or Inductor cache: "
			      "compiled at run time", e->loader);
	switch (e->image) {
	case EVIDENCE_IMAGE_FATBIN:
		return fatbin_decision(e, t, why);
	case EVIDENCE_IMAGE_CUBIN:
		return cubin_decision(e, t, why);
	case EVIDENCE_IMAGE_PTX:
		return judged(why, "its image is PTX, JIT-compiled for the device at load: %s would "
			      "compile the same kernel", t->name);
	default:
		return judged(why, "its image was not read (the kernel is known from the driver "
			      "alone), so nothing shows a library chose it");
	}
}
