/*
 * test_scan.c - img_scan_path / img_scan_buffer over every kind of input:
 * a host shared library, a host object, a relocatable-device-code object, a
 * bare fatbin, a Triton-cache-shaped directory (dynamic smem from the JSON),
 * and inputs that are not images at all.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../tools/sm120/scan_files.h"
#include "fixture.h"

struct seen {
	int cubins, ptx, errors, triton;
	uint32_t sms[16];
	int64_t fwd_dynamic;     /* dynamic_smem of _fwd_kernel, -2 if not seen */
	int k_params;            /* times k_params was seen */
	char last_error[512];
};

static int on_cubin(void *user, const struct img_origin *o, const struct img_cubin *c)
{
	struct seen *s = user;
	const struct img_kernel *k;

	if (s->cubins < 16)
		s->sms[s->cubins] = (uint32_t)c->sm;
	s->cubins++;
	s->triton += o->triton;
	if ((k = img_cubin_find(c, "_fwd_kernel")))
		s->fwd_dynamic = k->dynamic_smem;
	if ((k = img_cubin_find(c, "k_params"))) {
		assert_int_equal(k->static_smem, 4096);
		s->k_params++;
	}
	return 0;
}

static void on_ptx(void *user, const struct img_origin *o, uint32_t arch)
{
	(void)o;
	(void)arch;
	((struct seen *)user)->ptx++;
}

static void on_error(void *user, const struct sm_err *err)
{
	struct seen *s = user;

	s->errors++;
	snprintf(s->last_error, sizeof(s->last_error), "%s", err->msg);
}

static int scan(const char *path, uint32_t arch, struct seen *s)
{
	struct img_visitor v = { on_cubin, on_ptx, on_error, arch, s };

	memset(s, 0, sizeof(*s));
	s->fwd_dynamic = -2;
	return img_scan_path(path, &v);
}

static void test_shared_library(void **state)
{
	struct seen s;

	(void)state;
	/* nvcc -shared links a second container (cudart's, no kernels of ours). */
	assert_int_equal(scan(fixture_path("libparams.so"), 0, &s), 0);
	assert_int_equal(s.cubins, 4);
	assert_int_equal(s.k_params, 2);
	assert_int_equal(s.ptx, 1);
	assert_int_equal(s.sms[0] + s.sms[1] + s.sms[2] + s.sms[3], 2 * (90 + 120));
	/* arch filter: only sm_120 entries are inflated and parsed. */
	assert_int_equal(scan(fixture_path("libparams.so"), 120, &s), 0);
	assert_int_equal(s.cubins, 2);
	assert_int_equal(s.k_params, 1);
	assert_int_equal(s.sms[0] + s.sms[1], 240);
}

static void test_host_objects(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(scan(fixture_path("params.o"), 0, &s), 0);
	assert_int_equal(s.k_params, 2);
	/* __nv_relfatbin: a relocatable cubin, whose .nv.shared.k_params is 4096
	 * without the reserved KiB (on_cubin asserts static_smem == 4096). */
	assert_int_equal(scan(fixture_path("params_rdc.o"), 0, &s), 0);
	assert_int_equal(s.k_params, 1);
	assert_int_equal(s.sms[0], 120);
	/* An empty .nv_fatbin section holds nothing; it is not an error. */
	assert_int_equal(scan(fixture_path("empty_section.o"), 0, &s), 0);
	assert_int_equal(s.cubins, 0);
}

static void test_bare_fatbin_and_cubin(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(scan(fixture_path("params.lz4.fatbin"), 0, &s), 0);
	assert_int_equal(s.cubins, 2);
	assert_int_equal(scan(fixture_path("params.sm_120.cubin"), 0, &s), 0);
	assert_int_equal(s.cubins, 1);
	assert_int_equal(s.triton, 0);
	assert_int_equal(s.fwd_dynamic, -2);
}

static void test_triton_cache(void **state)
{
	struct seen s;

	(void)state;
	/* The directory also holds .ptx, .source, __grp__ JSON and a launcher
	 * directory: those are skipped, not errors. */
	assert_int_equal(scan(fixture_path("triton_cache"), 0, &s), 0);
	assert_int_equal(s.cubins, 1);
	assert_int_equal(s.triton, 1);
	assert_int_equal(s.fwd_dynamic, 106496);
	assert_int_equal(s.ptx, 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	unsigned char *buf = fixture_read(from, &len);
	FILE *f = fopen(to, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
	free(buf);
}

/* A broken <name>.json: reported with its path; the cubin is still listed. */
static void test_triton_bad_json(void **state)
{
	char dir[] = "/tmp/sm120-test-XXXXXX", path[256];
	struct seen s;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/_fwd_kernel.cubin", dir);
	copy_file("triton_like.cubin", path);
	snprintf(path, sizeof(path), "%s/_fwd_kernel.json", dir);
	write_file(path, "{\"shared\": 106496,");
	assert_int_equal(scan(dir, 0, &s), 1);
	assert_non_null(strstr(s.last_error, "_fwd_kernel.json: not valid JSON"));
	assert_int_equal(s.cubins, 1);
	assert_int_equal(s.fwd_dynamic, -1);
	write_file(path, "{\"shared\": -5, \"name\": \"_fwd_kernel\"}");
	assert_int_equal(scan(dir, 0, &s), 1);
	assert_non_null(strstr(s.last_error, "no whole, non-negative \"shared\""));
	write_file(path, "{\"shared\": 98304, \"name\": \"_fwd_kernel\"}");
	assert_int_equal(scan(dir, 0, &s), 0);
	assert_int_equal(s.fwd_dynamic, 98304);
	unlink(path);
	snprintf(path, sizeof(path), "%s/_fwd_kernel.cubin", dir);
	unlink(path);
	rmdir(dir);
}

static void test_not_images(void **state)
{
	struct seen s;
	struct img_visitor v = { on_cubin, on_ptx, on_error, 0, &s };
	uint32_t wrapper[6] = { IMG_WRAPPER_MAGIC, 1, 0, 0, 0, 0 };
	char path[] = "/tmp/sm120-test-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello, world\n", 13), 13);
	close(fd);
	assert_int_equal(scan(path, 0, &s), 1);
	assert_non_null(strstr(s.last_error, "not a CUDA image"));
	assert_non_null(strstr(s.last_error, path));
	unlink(path);
	assert_int_equal(scan("/nonexistent/x.cubin", 0, &s), 1);
	assert_non_null(strstr(s.last_error, "/nonexistent/x.cubin"));

	memset(&s, 0, sizeof(s));
	assert_int_equal(img_scan_buffer(wrapper, sizeof(wrapper), "mem", &v), -EINVAL);
	assert_non_null(strstr(s.last_error, "wrapper"));
	assert_int_equal(img_scan_buffer("", 0, "empty", &v), -EINVAL);
}

static void test_classify(void **state)
{
	size_t len;
	unsigned char *cubin = fixture_read("params.sm_90.cubin", &len);
	const char *ptx = "//\n.version 8.7\n.target sm_90\n";
	uint32_t fat = IMG_FATBIN_MAGIC, wrap = IMG_WRAPPER_MAGIC;

	(void)state;
	assert_int_equal(img_classify(cubin, len), IMG_KIND_CUBIN);
	cubin[18] = 62;
	assert_int_equal(img_classify(cubin, len), IMG_KIND_HOST_ELF);
	assert_int_equal(img_classify(&fat, 4), IMG_KIND_FATBIN);
	assert_int_equal(img_classify(&wrap, 4), IMG_KIND_WRAPPER);
	assert_int_equal(img_classify(ptx, strlen(ptx) + 1), IMG_KIND_PTX);
	assert_int_equal(img_classify("\x7f" "EL", 3), IMG_KIND_UNKNOWN);
	assert_int_equal(img_classify("\x01\x02\x03\x04\x05", 5), IMG_KIND_UNKNOWN);
	assert_string_equal(img_kind_name(IMG_KIND_FATBIN), "fatbin");
	free(cubin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared_library),
		cmocka_unit_test(test_host_objects),
		cmocka_unit_test(test_bare_fatbin_and_cubin),
		cmocka_unit_test(test_triton_cache),
		cmocka_unit_test(test_triton_bad_json),
		cmocka_unit_test(test_not_images),
		cmocka_unit_test(test_classify),
	};

	return cmocka_run_group_tests_name("scan", tests, NULL, NULL);
}
