/*
 * test_evidence.c - the library-kernel evidence (core/route/evidence.h) and
 * where the shim gathers it: which code runs on which target, the codes of
 * a fatbin read from its entry headers, formatting and parsing them for the
 * log, runtime-compiler cache paths, every row of the decision, the named
 * section of a host ELF, and the provenance the loaded-image registry keeps
 * (fatbin codes, loader, file, the runtime-compiled flag, the codes of a
 * shared object's own .nv_fatbin).  Fixtures: params.cu built by nvcc for
 * sm_90 and sm_120 (+ compute_120 PTX), as a fatbin and in libparams.so.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../core/route/evidence.h"
#include "../../shim/state/loaded.h"
#include "fixture.h"

static struct target_limits sm120, bytes_target;

/* EV - a struct route_evidence from all of its fields, in order. */
#define EV(dev, img, org, cod, fil, ldr, ldr_codes, rc)                                      \
	{ .device_sm = dev, .image = EVIDENCE_IMAGE_##img, .origin = org, .codes = cod,        \
	  .file = fil, .loader = ldr, .loader_codes = ldr_codes, .runtime_compiled = rc }
static char owners[8]; /* distinct fake handles */

static int setup(void **state)
{
	(void)state;
	return target_parse("sm120", &sm120, NULL) || target_parse("101376", &bytes_target, NULL);
}

static void test_runs_on(void **state)
{
	(void)state;
	assert_true(evidence_runs_on(120, 0, 120));
	assert_true(evidence_runs_on(120, 'a', 120));
	assert_true(evidence_runs_on(120, 0, 121));
	assert_true(evidence_runs_on(120, 'f', 121));
	assert_false(evidence_runs_on(120, 'a', 121)); /* 'a' only on the exact SM */
	assert_false(evidence_runs_on(121, 0, 120));   /* a newer minor */
	assert_false(evidence_runs_on(90, 0, 120));    /* another generation */
	assert_false(evidence_runs_on(100, 0, 120));
	assert_false(evidence_runs_on(0, 0, 120));
	/* the loaded-image registry asks the same rule */
	assert_int_equal(loaded_runs_on(90, 'a', 90), evidence_runs_on(90, 'a', 90));
}

/* codes - a set from @n (arch, variant, ptx) triples. */
static struct evidence_codes codes(int n, const int *v)
{
	struct evidence_codes c = { 0 };
	int i;

	for (i = 0; i < n; i++)
		evidence_codes_add(&c, v[3 * i], (char)v[3 * i + 1], v[3 * i + 2]);
	return c;
}

static void test_codes_format_parse(void **state)
{
	static const int v[] = { 90, 0, 0, 90, 'a', 0, 90, 0, 0, 120, 0, 0, 120, 0, 1, 100, 'f', 0 };
	struct evidence_codes c = codes(6, v), back;
	struct sm_err err;
	char buf[256];
	int i;

	(void)state;
	assert_int_equal(c.n, 5); /* the repeated sm_90 is kept once */
	assert_string_equal(evidence_codes_format(&c, buf, sizeof(buf)),
			    "sm_90 sm_90a sm_120 compute_120 sm_100f");
	assert_int_equal(evidence_codes_parse(buf, &back, &err), 0);
	assert_memory_equal(&back, &c, sizeof(c));
	assert_int_equal(evidence_codes_parse("", &back, &err), 0);
	assert_int_equal(back.n, 0);
	assert_int_equal(evidence_codes_parse("sm_90  compute_90a ", &back, &err), 0);
	assert_int_equal(back.n, 2);
	assert_int_equal(evidence_codes_parse("sm_90 sm90", &back, &err), -EINVAL);
	assert_string_equal(err.msg, "'sm90' is not a code such as sm_90, sm_120a or compute_120");
	assert_int_equal(evidence_codes_parse("sm_", &back, &err), -EINVAL);
	assert_int_equal(evidence_codes_parse("sm_90x", &back, &err), -EINVAL);
	assert_int_equal(evidence_codes_parse("compute_99999999", &back, &err), -EINVAL);
	/* more codes than kept: the format says so, and so does the parse */
	memset(&c, 0, sizeof(c));
	for (i = 0; i < EVIDENCE_MAX_CODES + 3; i++)
		evidence_codes_add(&c, 10 + i, 0, 0);
	assert_int_equal(c.n, EVIDENCE_MAX_CODES);
	assert_true(c.truncated);
	evidence_codes_format(&c, buf, sizeof(buf));
	assert_non_null(strstr(buf, " ..."));
	assert_int_equal(evidence_codes_parse(buf, &back, &err), 0);
	assert_true(back.truncated);
	/* a small buffer is cut, never overrun */
	assert_int_equal(strlen(evidence_codes_format(&c, buf, 8)), 7);
}

/* The codes of nvcc's fatbins, plain and compressed, from their headers. */
static void test_codes_from_fatbin(void **state)
{
	static const char *const files[] = { "params.fatbin", "params.zstd.fatbin",
					     "params.lz4.fatbin" };
	struct evidence_codes c;
	char buf[128];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		unsigned char *img = fixture_read(files[i], &len);

		assert_int_equal(evidence_codes_from_fatbin(img, len, &c), 0);
		evidence_codes_format(&c, buf, sizeof(buf));
		assert_non_null(strstr(buf, "sm_90"));
		assert_non_null(strstr(buf, "sm_120"));
		assert_non_null(strstr(buf, "compute_120"));
		/* a cut container: what was read before the defect, and -EINVAL */
		assert_int_equal(evidence_codes_from_fatbin(img, len - 8, &c), -EINVAL);
		free(img);
	}
	assert_int_equal(evidence_codes_from_fatbin("not a fatbin at all", 19, &c), -EINVAL);
	assert_int_equal(c.n, 0);
}

static void test_runtime_path(void **state)
{
	(void)state;
	assert_true(evidence_runtime_path("/root/.triton/cache/ab12/cuda_utils.so"));
	assert_true(evidence_runtime_path("/tmp/torchinductor_root/triton/0/x/k.cubin"));
	assert_true(evidence_runtime_path("/tmp/torchinductor_alice/fx/k.cubin"));
	assert_true(evidence_runtime_path("/usr/lib/python3/site-packages/triton/backends/x.so"));
	assert_true(evidence_runtime_path("triton/k.cubin"));
	assert_false(evidence_runtime_path("/usr/lib/x86_64-linux-gnu/libcublasLt.so.13"));
	assert_false(evidence_runtime_path("/opt/tritonserver/lib/libfoo.so"));
	assert_false(evidence_runtime_path("/home/triton-user/libnccl.so.2"));
	assert_false(evidence_runtime_path(""));
	assert_false(evidence_runtime_path(NULL));
	assert_string_equal(evidence_image_name(EVIDENCE_IMAGE_FATBIN), "fatbin");
	assert_null(evidence_image_name(EVIDENCE_IMAGE_UNKNOWN));
	assert_int_equal(evidence_image_parse("cubin"), EVIDENCE_IMAGE_CUBIN);
	assert_int_equal(evidence_image_parse("PTX"), EVIDENCE_IMAGE_PTX);
	assert_int_equal(evidence_image_parse("ptx"), EVIDENCE_IMAGE_UNKNOWN);
	assert_int_equal(evidence_image_parse(NULL), EVIDENCE_IMAGE_UNKNOWN);
}

/* Every row of the decision: the evidence, the verdict and what the reason says. */
static void test_decision(void **state)
{
	static const int with120[] = { 90, 0, 0, 120, 0, 0, 120, 0, 1 };
	static const int ptx120[] = { 90, 0, 0, 120, 0, 1 };
	static const int a120[] = { 90, 'a', 0, 120, 'a', 0 };
	static const int only90[] = { 90, 0, 0, 90, 0, 1 };
	static const int a121[] = { 90, 0, 0, 121, 'a', 0 };
	struct evidence_codes c120 = codes(3, with120), cptx = codes(2, ptx120), ca = codes(2, a120);
	struct evidence_codes c90 = codes(2, only90), c121a = codes(2, a121);
	const char *lib = "/usr/lib/libcublasLt.so.13";
	const struct {
		struct route_evidence e;
		const struct target_limits *t;
		int named;
		int library;
		const char *says;   /* a part of the reason; NULL: the reason is empty */
	} rows[] = {
		/* a library fatbin with sm_120 code: a real card runs that */
		{ EV(90, FATBIN, "libnccl.so.2+0x10", &c120, NULL, NULL, NULL, 0), &sm120, 0,
		  1,
		  "library: its image libnccl.so.2+0x10 is a fatbin that also holds sm_120 "
		  "compute_120 (it holds sm_90 sm_120 compute_120): a real sm120 card runs that "
		  "code, not this sm_90 code" },
		/* sm_120 PTX alone is code built for the target too; so is sm_120a */
		{ EV(90, FATBIN, "x", &cptx, NULL, NULL, NULL, 0), &sm120, 0, 1, "holds compute_120" },
		{ EV(90, FATBIN, "x", &ca, NULL, NULL, NULL, 0), &sm120, 0, 1, "holds sm_120a" },
		/* sm_90 and compute_90 only: the card JITs this kernel, or cannot load it */
		{ EV(90, FATBIN, "x", &c90, NULL, NULL, NULL, 0), &sm120, 0, 0,
		  "judged: its image x is a fatbin with no code for sm_120 (it holds sm_90 "
		  "compute_90)" },
		/* sm_121a is not code an sm_120 card runs */
		{ EV(90, FATBIN, "x", &c121a, NULL, NULL, NULL, 0), &sm120, 0, 0, "no code for sm_120" },
		{ EV(90, FATBIN, "x", NULL, NULL, NULL, NULL, 0), &sm120, 0, 0, "(it holds nothing)" },
		/* a rule names it: judged, so that it is rerouted or refused */
		{ EV(90, FATBIN, "x", &c120, NULL, NULL, NULL, 0), &sm120, 1, 0,
		  "judged: a reroute rule names k" },
		/* compiled at run time */
		{ EV(90, FATBIN, "x", &c120, NULL, NULL, NULL, 1), &sm120, 0, 0,
		  "judged: its image was loaded while a runtime compiler (Triton) was loading" },
		{ EV(90, CUBIN, "m", NULL, NULL, lib, &c120, 1), &sm120, 0, 0,
		  "runtime compiler" },
		{ EV(90, CUBIN, "/home/u/.triton/cache/h/k.cubin", NULL,
		     "/home/u/.triton/cache/h/k.cubin", NULL, NULL, 0), &sm120, 0, 0,
		  "judged: its image was loaded from /home/u/.triton/cache/h/k.cubin, in a Triton "
		  "or Inductor cache" },
		{ EV(90, CUBIN, "m", NULL, NULL, "/r/.triton/cache/h/cuda_utils.so", &c120, 0),
		  &sm120, 0, 0, "loaded by /r/.triton/cache/h/cuda_utils.so, in a Triton" },
		/* a raw cubin from a library whose own fatbin has sm_120 code */
		{ EV(90, CUBIN, "m", NULL, NULL, lib, &c120, 0), &sm120, 0, 1,
		  "library: its image is a raw cubin loaded by /usr/lib/libcublasLt.so.13, whose "
		  "own fatbin holds sm_120 compute_120" },
		{ EV(90, CUBIN, "m", NULL, NULL, lib, &c90, 0), &sm120, 0, 0,
		  "whose fatbin holds no code for sm_120 (it holds sm_90 compute_90)" },
		{ EV(90, CUBIN, "m", NULL, NULL, lib, NULL, 0), &sm120, 0, 0,
		  "which has no readable .nv_fatbin section" },
		{ EV(90, CUBIN, "m", NULL, NULL, NULL, NULL, 0), &sm120, 0, 0,
		  "the shared object that loaded it is unknown" },
		/* a cubin from a file is never a library's pick, wherever the file is */
		{ EV(90, CUBIN, "/srv/k.cubin", NULL, "/srv/k.cubin", lib, &c120, 0),
		  &sm120, 0, 0, "a cubin loaded from the file /srv/k.cubin" },
		/* a fatbin from a file still holds its codes */
		{ EV(90, FATBIN, "/srv/k.fatbin", &c120, "/srv/k.fatbin", NULL, NULL, 0), &sm120, 0,
		  1, "library:" },
		{ EV(90, PTX, "p", NULL, NULL, NULL, NULL, 0), &sm120, 0, 0, "its image is PTX" },
		{ EV(90, UNKNOWN, "driver", NULL, NULL, NULL, NULL, 0), &sm120, 0, 0, "was not read" },
		{ EV(0, FATBIN, "x", &c120, NULL, NULL, NULL, 0), &sm120, 0, 0,
		  "the device its image was loaded for is unknown" },
		{ EV(90, FATBIN, "x", &c120, NULL, NULL, NULL, 0), &bytes_target, 0, 0,
		  "the target 101376 B is a byte count" },
		/* on a real SM120 card nothing is emulated: judged, silently */
		{ EV(120, FATBIN, "x", &c120, NULL, NULL, NULL, 0), &sm120, 0, 0, NULL },
		{ EV(120, CUBIN, "m", NULL, NULL, lib, &c120, 0), &sm120, 0, 0, NULL },
	};
	struct sm_err why;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int got = evidence_library(&rows[i].e, rows[i].t, "k", rows[i].named, &why);

		if (got != rows[i].library || (rows[i].says && !strstr(why.msg, rows[i].says)) ||
		    (!rows[i].says && why.msg[0]))
			fail_msg("row %zu: got %d, reason '%s'", i, got, why.msg);
	}
	/* nothing gathered (a log written before the evidence): judged, silently */
	assert_int_equal(evidence_library(NULL, &sm120, "k", 0, &why), 0);
	assert_string_equal(why.msg, "");
	assert_int_equal(evidence_library(&rows[0].e, &sm120, "k", 0, NULL), 1);
}

static void test_elf_section(void **state)
{
	size_t len, off, size;
	unsigned char *so = fixture_read("libparams.so", &len);
	struct evidence_codes c;
	char buf[128];

	(void)state;
	assert_int_equal(img_elf_section(so, len, ".nv_fatbin", &off, &size), 0);
	assert_true(size > 0 && off + size <= len);
	assert_int_equal(evidence_codes_from_fatbin(so + off, size, &c), 0);
	assert_non_null(strstr(evidence_codes_format(&c, buf, sizeof(buf)), "sm_120"));
	assert_int_equal(img_elf_section(so, len, ".no_such_section", &off, &size), -ENOENT);
	assert_int_equal(img_elf_section(so, len, ".nv_fatbi", &off, &size), -ENOENT);
	/* cut inside the section header table, or before it: never read past the bytes */
	assert_int_equal(img_elf_section(so, len - 16, ".nv_fatbin", &off, &size), -EINVAL);
	assert_int_equal(img_elf_section(so, 64, ".nv_fatbin", &off, &size), -EINVAL);
	assert_int_equal(img_elf_section(so, 16, ".nv_fatbin", &off, &size), -EINVAL);
	assert_int_equal(img_elf_section("\177ELF", 4, ".nv_fatbin", &off, &size), -EINVAL);
	free(so);
}

/* The registry keeps each image's provenance: kind, fatbin codes, device, loader, flag. */
static void test_provenance(void **state)
{
	size_t len, clen;
	unsigned char *fat = fixture_read("params.fatbin", &len);
	unsigned char *cubin = fixture_read("params.sm_90.cubin", &clen);
	struct loaded_provenance p;
	struct loaded_facts f;
	struct sm_err err;
	char buf[128], origin[64];

	(void)state;
	/* a fatbin handed over from memory, parsed now */
	assert_int_equal(loaded_add(&owners[0], fat, len, 90, 0, "lib.so+0x10", NULL, &err), 0);
	assert_int_equal(loaded_provenance(&owners[0], &p), 0);
	assert_int_equal(p.image, EVIDENCE_IMAGE_FATBIN);
	assert_int_equal(p.device_sm, 90);
	assert_false(p.from_file);
	assert_null(p.loader);
	assert_string_equal(evidence_codes_format(p.codes, buf, sizeof(buf)),
			    "sm_90 sm_120 compute_120");
	/* the kernel's facts carry it, and equal sets of codes are one interned copy */
	assert_int_equal(loaded_find(&owners[0], "k_params", &f, origin, sizeof(origin), &err), 0);
	assert_ptr_equal(f.prov.codes, p.codes);
	free(f.params);
	/* kept for later (cudart's registered fatbins): the codes come from the headers */
	assert_int_equal(loaded_add(&owners[1], fat, len, 90, 1, "lib.so+0x20", NULL, &err), 0);
	assert_int_equal(loaded_provenance(&owners[1], &p), 0);
	assert_ptr_equal(p.codes, f.prov.codes);
	/* a raw cubin, with the shared object that loaded it and the runtime-compiled flag */
	assert_int_equal(loaded_add(&owners[2], cubin, clen, 90, 0, "memory 0x1", NULL, &err), 0);
	assert_int_equal(loaded_set_loader(&owners[2], fixture_path("libparams.so"), 1), 0);
	assert_int_equal(loaded_provenance(&owners[2], &p), 0);
	assert_int_equal(p.image, EVIDENCE_IMAGE_CUBIN);
	assert_null(p.codes);
	assert_true(p.runtime_compiled);
	assert_string_equal(loaded_library_path(p.loader), fixture_path("libparams.so"));
	assert_non_null(loaded_library_codes(p.loader));
	assert_non_null(strstr(evidence_codes_format(loaded_library_codes(p.loader), buf,
						     sizeof(buf)), "sm_120"));
	/* the same path is one record */
	assert_int_equal(loaded_set_loader(&owners[0], fixture_path("libparams.so"), 0), 0);
	assert_int_equal(loaded_provenance(&owners[0], &p), 0);
	assert_false(p.runtime_compiled);
	assert_non_null(p.loader);
	/* a loader without a .nv_fatbin (a plain object, an empty one), or no file at all */
	assert_int_equal(loaded_set_loader(&owners[2], fixture_path("empty_section.o"), 0), 0);
	assert_int_equal(loaded_provenance(&owners[2], &p), 0);
	assert_null(loaded_library_codes(p.loader));
	assert_int_equal(loaded_set_loader(&owners[2], "/no/such/lib.so", 0), 0);
	assert_int_equal(loaded_provenance(&owners[2], &p), 0);
	assert_null(loaded_library_codes(p.loader));
	assert_int_equal(loaded_set_loader(&owners[2], NULL, 0), 0);
	assert_int_equal(loaded_provenance(&owners[2], &p), 0);
	assert_null(p.loader);
	/* an image from a file */
	assert_int_equal(loaded_add_file(&owners[3], fixture_path("params.sm_120.cubin"), 120,
					 NULL, &err), 0);
	assert_int_equal(loaded_provenance(&owners[3], &p), 0);
	assert_true(p.from_file);
	assert_int_equal(p.image, EVIDENCE_IMAGE_CUBIN);
	/* unknown owners */
	assert_int_equal(loaded_provenance(&owners[4], &p), -ENOENT);
	assert_int_equal(p.image, EVIDENCE_IMAGE_UNKNOWN);
	assert_int_equal(loaded_set_loader(&owners[4], "/x.so", 0), -ENOENT);
	loaded_drop(&owners[2]);
	assert_int_equal(loaded_provenance(&owners[2], &p), -ENOENT);
	loaded_drop(&owners[0]);
	loaded_drop(&owners[1]);
	loaded_drop(&owners[3]);
	free(fat);
	free(cubin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_on),
		cmocka_unit_test(test_codes_format_parse),
		cmocka_unit_test(test_codes_from_fatbin),
		cmocka_unit_test(test_runtime_path),
		cmocka_unit_test(test_decision),
		cmocka_unit_test(test_elf_section),
		cmocka_unit_test(test_provenance),
	};

	return cmocka_run_group_tests_name("evidence", tests, setup, NULL);
}
