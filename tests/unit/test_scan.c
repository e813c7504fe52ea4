/*
 * test_scan.c - img_scan_path / img_scan_buffer over every kind of input:
 * a host shared library, a host object, a relocatable-device-code object, a
 * bare fatbin, an ar archive of objects, a Triton-cache-shaped directory
 * (dynamic smem from the JSON), inputs that are not images at all, and
 * truncated copies of the fixtures: each an error naming the file and the
 * defect, alone or inside a directory.
 */
#include <elf.h>
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
	int skipped[IMG_SKIP_SPECIAL + 1];  /* on_skip calls by enum img_skip */
	uint32_t sms[16];
	int64_t fwd_dynamic;     /* dynamic_smem of _fwd_kernel, -2 if not seen */
	int k_params;            /* times k_params was seen */
	char last_error[512];
	char errors_text[2048];  /* every message, one per line */
	char last_origin[512];   /* "file(member)" of the last cubin */
};

static int on_cubin(void *user, const struct img_origin *o, const struct img_cubin *c)
{
	struct seen *s = user;
	const struct img_kernel *k;

	if (s->cubins < 16)
		s->sms[s->cubins] = (uint32_t)c->sm;
	s->cubins++;
	s->triton += o->triton;
	snprintf(s->last_origin, sizeof(s->last_origin), "%s(%s)", o->file,
		 o->member ? o->member : "-");
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

	size_t used = strlen(s->errors_text);

	s->errors++;
	snprintf(s->last_error, sizeof(s->last_error), "%s", err->msg);
	snprintf(s->errors_text + used, sizeof(s->errors_text) - used, "%s\n", err->msg);
}

static void on_skip(void *user, const char *path, enum img_skip why)
{
	struct seen *s = user;

	(void)path;
	assert_true(why >= IMG_SKIP_NOT_IMAGE && why <= IMG_SKIP_SPECIAL);
	s->skipped[why]++;
}

static int scan(const char *path, uint32_t arch, struct seen *s)
{
	struct img_visitor v = { on_cubin, on_ptx, on_error, arch, s, on_skip };

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
	/* Passed over, and said so: __grp__*.json, .source, the launcher's .c; the
	 * .ptx.  The <name>.json read with its cubin is not counted. */
	assert_int_equal(s.skipped[IMG_SKIP_NOT_IMAGE], 3);
	assert_int_equal(s.skipped[IMG_SKIP_PTX], 1);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* copy_cut - the fixture @from into @to without its last @cut bytes (0: whole). */
static void copy_cut(const char *from, const char *to, size_t cut)
{
	size_t len;
	unsigned char *buf = fixture_read(from, &len);
	FILE *f = fopen(to, "wb");

	assert_true(cut < len);
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len - cut, f), len - cut);
	fclose(f);
	free(buf);
}

static void copy_file(const char *from, const char *to)
{
	copy_cut(from, to, 0);
}

static size_t fixture_size(const char *name)
{
	struct stat st;

	assert_int_equal(stat(fixture_path(name), &st), 0);
	return (size_t)st.st_size;
}

/*
 * write_archive - an ar archive at @path of the fixtures @names (NULL-ended),
 * the last one without its last @cut bytes (its header saying so), as
 * `ar rc` writes it: "!<arch>\n",
 * then per member a 60-byte header ("name/", mtime, uid, gid, mode, size,
 * "`\n") and the bytes, padded to an even offset.
 */
static void write_archive(const char *path, const char *const *names, size_t cut)
{
	FILE *f = fopen(path, "wb");
	size_t i;

	assert_non_null(f);
	fputs("!<arch>\n", f);
	for (i = 0; names[i]; i++) {
		size_t len;
		unsigned char *buf = fixture_read(names[i], &len);
		char name[17], hdr[61];

		if (!names[i + 1])
			len -= cut;
		snprintf(name, sizeof(name), "%s/", names[i]);
		snprintf(hdr, sizeof(hdr), "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0",
			 "644", len);
		assert_int_equal(fwrite(hdr, 1, 60, f), 60);
		assert_int_equal(fwrite(buf, 1, len, f), len);
		if (len % 2 && names[i + 1])
			fputc('\n', f);
		free(buf);
	}
	fclose(f);
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
	/* A "name" the cubin does not define: an error; the cubin is still listed. */
	write_file(path, "{\"shared\": 98304, \"name\": \"_bwd_kernel\"}");
	assert_int_equal(scan(dir, 0, &s), 1);
	assert_non_null(strstr(s.last_error, "_fwd_kernel.json: \"name\" is \"_bwd_kernel\", but "));
	assert_non_null(strstr(s.last_error, "_fwd_kernel.cubin defines \"_fwd_kernel\""));
	assert_int_equal(s.cubins, 1);
	assert_int_equal(s.fwd_dynamic, -1);
	unlink(path);
	snprintf(path, sizeof(path), "%s/_fwd_kernel.cubin", dir);
	unlink(path);
	rmdir(dir);
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* section_header - the Elf64_Shdr of the section named @name in @buf (in place). */
static Elf64_Shdr *section_header(unsigned char *buf, size_t len, const char *name)
{
	Elf64_Ehdr eh;
	Elf64_Shdr strtab;
	uint16_t i;

	memcpy(&eh, buf, sizeof(eh));
	assert_true(eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) <= len);
	memcpy(&strtab, buf + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof(strtab));
	for (i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh.e_shoff + i * sizeof(Elf64_Shdr));
		Elf64_Shdr copy;

		memcpy(&copy, sh, sizeof(copy));
		if (strcmp((const char *)buf + strtab.sh_offset + copy.sh_name, name) == 0)
			return sh;
	}
	fail_msg("no section %s", name);
	return NULL;
}

/*
 * A host library or object cut by one byte: libelf reads it as a file
 * without sections; the scan says it is truncated, naming the file and the
 * section header table, and finds no kernel in it.
 */
static void test_truncated_host_elf(void **state)
{
	static const char *const names[] = { "libparams.so", "params.o", "params_rdc.o" };
	char dir[64], path[256];
	struct seen s;
	size_t i;

	(void)state;
	assert_non_null(tmp_dir(dir, sizeof(dir), "sm120-cut-"));
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		copy_cut(names[i], path, 1);
		assert_int_equal(scan(path, 0, &s), 1);
		assert_int_equal(s.cubins, 0);
		assert_non_null(strstr(s.last_error, path));
		assert_non_null(strstr(s.last_error, "truncated ELF: the section header table"));
		assert_non_null(strstr(s.last_error, "runs past the end"));
		/* Cut in half: the same, never a crash or a silent pass. */
		assert_int_equal(truncate(path, 4096), 0);
		assert_int_equal(scan(path, 0, &s), 1);
		assert_non_null(strstr(s.last_error, "truncated ELF"));
	}
	/* Shorter than an ELF header. */
	write_file(path, "\x7f" "ELF");
	assert_int_equal(scan(path, 0, &s), 1);
	assert_non_null(strstr(s.last_error,
			       "truncated ELF: 4 bytes, shorter than its 64-byte ELF header"));
	assert_int_equal(rm_tree(dir), 0);
}

/* A section whose header says it runs past the end (the tables are intact). */
static void test_section_past_end(void **state)
{
	char dir[64], path[256];
	struct seen s;
	size_t len;
	unsigned char *buf = fixture_read("params.o", &len);
	Elf64_Shdr *sh = section_header(buf, len, ".nv_fatbin");
	uint64_t size;

	(void)state;
	assert_non_null(tmp_dir(dir, sizeof(dir), "sm120-cut-"));
	snprintf(path, sizeof(path), "%s/lying.o", dir);
	memcpy(&size, &sh->sh_size, sizeof(size));
	size += len;
	memcpy(&sh->sh_size, &size, sizeof(size));
	write_bytes(path, buf, len);
	assert_int_equal(scan(path, 0, &s), 1);
	assert_non_null(strstr(s.last_error, path));
	assert_non_null(strstr(s.last_error, "(.nv_fatbin, "));
	assert_non_null(strstr(s.last_error, "runs past the end"));
	assert_int_equal(s.cubins, 0);
	free(buf);
	assert_int_equal(rm_tree(dir), 0);
}

/*
 * ELF identification bytes libelf refuses without recording an error: the
 * message says which byte is wrong, never libelf's "no error".
 */
static void test_elf_ident_errors(void **state)
{
	static const struct {
		int byte, value;
		const char *says;
	} t[] = {
		{ EI_CLASS, 7, "class 7 (e_ident[EI_CLASS])" },
		{ EI_DATA, 9, "byte order 9 (e_ident[EI_DATA])" },
		{ EI_VERSION, 3, "version 3 (e_ident[EI_VERSION])" },
	};
	struct img_visitor v;
	struct seen s;
	size_t len, i;
	unsigned char *buf = fixture_read("params.o", &len);

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		unsigned char *copy = malloc(len);

		memcpy(copy, buf, len);
		copy[t[i].byte] = (unsigned char)t[i].value;
		memset(&s, 0, sizeof(s));
		v = (struct img_visitor){ on_cubin, on_ptx, on_error, 0, &s, on_skip };
		assert_int_equal(img_scan_buffer(copy, len, "bad.o", &v), 1);
		assert_non_null(strstr(s.last_error, "bad.o: malformed ELF"));
		assert_non_null(strstr(s.last_error, t[i].says));
		assert_null(strstr(s.last_error, "no error"));
		free(copy);
	}
	free(buf);
}

/* An ar archive: every object member read through libelf, named "a(member)". */
static void test_archive(void **state)
{
	static const char *const members[] = { "params.o", "params_rdc.o", NULL };
	char dir[64], path[256];
	struct seen s;
	size_t second; /* where the second member's header starts */

	(void)state;
	assert_non_null(tmp_dir(dir, sizeof(dir), "sm120-ar-"));
	snprintf(path, sizeof(path), "%s/libparams.a", dir);
	write_archive(path, members, 0);
	assert_int_equal(scan(path, 0, &s), 0);
	/* params.o: sm_90 and sm_120 cubins; params_rdc.o: one relocatable sm_120. */
	assert_int_equal(s.cubins, 3);
	assert_int_equal(s.k_params, 3);
	/* Origins: the archive's path as file, the member apart. */
	assert_non_null(strstr(s.last_origin, "/libparams.a(params_rdc.o)"));
	assert_null(strstr(s.last_origin, ")("));
	/* The last member an object cut by one byte: named with its archive. */
	write_archive(path, members, 1);
	assert_int_equal(scan(path, 0, &s), 1);
	assert_int_equal(s.cubins, 2);
	assert_non_null(strstr(s.last_error, "libparams.a(params_rdc.o): truncated ELF"));
	/* The archive cut by one byte: its last member's header says more. */
	write_archive(path, members, 0);
	second = 8 + 60 + fixture_size("params.o") + (fixture_size("params.o") & 1);
	assert_int_equal(truncate(path, (off_t)(second + 60 + fixture_size("params_rdc.o") - 1)), 0);
	assert_int_equal(scan(path, 0, &s), 1);
	assert_int_equal(s.cubins, 2);
	assert_non_null(strstr(s.last_error, "libparams.a: truncated archive: member params_rdc.o ("));
	/* Cut inside the last member's header: bytes no member holds. */
	assert_int_equal(truncate(path, (off_t)second + 30), 0);
	assert_int_equal(scan(path, 0, &s), 1);
	assert_non_null(strstr(s.last_error, "libparams.a: truncated or corrupt archive: the 30 bytes"));
	assert_int_equal(rm_tree(dir), 0);
}

/*
 * A directory: what looks like an image and cannot be read is an error there
 * too; what is no image, and links, are passed to on_skip.
 */
static void test_directory_reports(void **state)
{
	static const char *const members[] = { "params.o", NULL };
	char dir[64], path[256], target[256];
	struct seen s;

	(void)state;
	assert_non_null(tmp_dir(dir, sizeof(dir), "sm120-dir-"));
	snprintf(path, sizeof(path), "%s/cut.so", dir);
	copy_cut("libparams.so", path, 1);
	snprintf(path, sizeof(path), "%s/cut.o", dir);
	copy_cut("params.o", path, 1);
	snprintf(path, sizeof(path), "%s/ok.cubin", dir);
	copy_file("params.sm_120.cubin", path);
	snprintf(path, sizeof(path), "%s/libok.a", dir);
	write_archive(path, members, 0);
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	write_file(path, "not an image\n");
	snprintf(path, sizeof(path), "%s/setup.py", dir);
	write_file(path, "print('hello')\n");
	snprintf(path, sizeof(path), "%s/empty", dir);
	write_file(path, "");
	snprintf(path, sizeof(path), "%s/k.ptx", dir);
	write_file(path, "//\n.version 8.7\n.target sm_90\n");
	snprintf(target, sizeof(target), "%s/ok.cubin", dir);
	snprintf(path, sizeof(path), "%s/link.cubin", dir);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(scan(dir, 0, &s), 2);
	assert_int_equal(s.cubins, 1 + 2);
	assert_int_equal(s.skipped[IMG_SKIP_NOT_IMAGE], 3);
	assert_int_equal(s.skipped[IMG_SKIP_PTX], 1);
	assert_int_equal(s.skipped[IMG_SKIP_LINK], 1);
	assert_int_equal(s.skipped[IMG_SKIP_SPECIAL], 0);
	assert_non_null(strstr(s.errors_text, "/cut.o: truncated ELF: the section header table"));
	assert_non_null(strstr(s.errors_text, "/cut.so: truncated ELF: the section header table"));
	assert_int_equal(rm_tree(dir), 0);
}

static void test_not_images(void **state)
{
	struct seen s;
	struct img_visitor v = { on_cubin, on_ptx, on_error, 0, &s, on_skip };
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
	assert_int_equal(img_classify("!<arch>\n", 8), IMG_KIND_ARCHIVE);
	assert_string_equal(img_kind_name(IMG_KIND_ARCHIVE), "ar archive");
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
		cmocka_unit_test(test_truncated_host_elf),
		cmocka_unit_test(test_section_past_end),
		cmocka_unit_test(test_elf_ident_errors),
		cmocka_unit_test(test_archive),
		cmocka_unit_test(test_directory_reports),
		cmocka_unit_test(test_not_images),
		cmocka_unit_test(test_classify),
	};

	return cmocka_run_group_tests_name("scan", tests, NULL, NULL);
}
