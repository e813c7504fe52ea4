/*
 * cmd_scan.c - `sm120 scan`: every kernel of the given images against a target.
 *
 * One row per kernel (per arch: a fatbin holds one cubin per SM), as a table
 * or as JSON lines.  Exit status: 0 every kernel fits, 1 at least one does
 * not, 2 an input could not be read or parsed (errors go to stderr and the
 * scan goes on).  A truncated ELF, an unreadable archive member or a Triton
 * JSON naming another kernel is such an error, in a directory too; what a
 * directory holds that is no image at all is counted in one summary line.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan_files.h"
#include "commands.h"

struct scan_opts {
	struct target_limits target;
	int json;
	int only_fails;
	uint32_t arch;
	/* totals */
	unsigned long kernels, cubins, ptx, too_large, shown;
	unsigned long skipped[IMG_SKIP_SPECIAL + 1]; /* by enum img_skip */
};

static const char *usage_text =
	"usage: sm120 scan [--target T] [--json] [--arch SM] [--fails] PATH...\n"
	"\n"
	"PATH: a cubin, a fatbin, a host ELF (.so, executable, .o) with embedded fatbins,\n"
	"      an archive (.a) of such objects, or a directory (searched recursively;\n"
	"      Triton caches take the dynamic shared memory from <name>.json).  In a\n"
	"      directory, files that are no image (.py, .txt, PTX) and symbolic links\n"
	"      are passed over and counted in one summary line; a truncated or corrupt\n"
	"      image is an error there too.\n"
	"  --target T  sm120 (default), sm121, sm89, sm86, sm80, sm90, sm100, auto (device 0),\n"
	"              or an opt-in byte count such as 232448\n"
	"  --json      one JSON object per line: kernels, errors, then a summary\n"
	"  --arch SM   only cubins for this SM number (e.g. 120); skips the rest unread\n"
	"  --fails     only the kernels that do not fit\n"
	"exit: 0 all fit, 1 some do not fit, 2 an input could not be read (the rest is scanned)\n";

static void arch_name(char *buf, size_t n, int sm, char variant)
{
	if (variant)
		snprintf(buf, n, "sm_%d%c", sm, variant);
	else
		snprintf(buf, n, "sm_%d", sm);
}

/* origin_name - "file", "lib.a(member)", then "#container.entry" inside a fatbin. */
static void origin_name(char *buf, size_t n, const struct img_origin *o)
{
	int used = o->member ? snprintf(buf, n, "%s(%s)", o->file, o->member) :
			       snprintf(buf, n, "%s", o->file);

	if (o->in_fatbin && used >= 0 && (size_t)used < n)
		snprintf(buf + used, n - (size_t)used, "#%u.%u", o->container, o->entry);
}

static const char *fit_word(enum target_fit f)
{
	return f == TARGET_TOO_LARGE ? "NO" : f == TARGET_FITS_STATIC ? "static" : "yes";
}

static void print_json_kernel(const struct scan_opts *o, const char *arch, const char *origin,
			      const struct img_cubin *c, const struct img_kernel *k,
			      enum target_fit fit)
{
	cJSON *j = cJSON_CreateObject(), *params = cJSON_AddArrayToObject(j, "params");
	uint32_t i;
	char *s;

	cJSON_AddStringToObject(j, "type", "kernel");
	cJSON_AddStringToObject(j, "name", k->name);
	cJSON_AddStringToObject(j, "arch", arch);
	cJSON_AddNumberToObject(j, "cubin_abi", c->abi);
	cJSON_AddStringToObject(j, "origin", origin);
	cJSON_AddNumberToObject(j, "static_smem", k->static_smem);
	cJSON_AddNumberToObject(j, "static_smem_section", k->static_smem_section);
	cJSON_AddNumberToObject(j, "reserved_smem", c->reserved_smem);
	if (k->dynamic_smem >= 0)
		cJSON_AddNumberToObject(j, "dynamic_smem", (double)k->dynamic_smem);
	else
		cJSON_AddNullToObject(j, "dynamic_smem");
	if (k->regs >= 0)
		cJSON_AddNumberToObject(j, "regs", k->regs);
	else
		cJSON_AddNullToObject(j, "regs");
	cJSON_AddNumberToObject(j, "frame_size", k->frame_size);
	cJSON_AddNumberToObject(j, "max_threads", k->max_threads[0]);
	cJSON_AddNumberToObject(j, "reqntid", k->reqntid[0]);
	cJSON_AddNumberToObject(j, "param_bytes", k->param_bytes);
	for (i = 0; i < k->n_params; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddNumberToObject(p, "ordinal", k->params[i].ordinal);
		cJSON_AddNumberToObject(p, "offset", k->params[i].offset);
		cJSON_AddNumberToObject(p, "size", k->params[i].size);
		cJSON_AddItemToArray(params, p);
	}
	cJSON_AddStringToObject(j, "target", o->target.name);
	cJSON_AddNumberToObject(j, "target_optin", o->target.optin_per_block);
	cJSON_AddBoolToObject(j, "fits", fit != TARGET_TOO_LARGE);
	cJSON_AddBoolToObject(j, "dynamic_known", k->dynamic_smem >= 0);
	s = cJSON_PrintUnformatted(j);
	if (s)
		puts(s);
	free(s);
	cJSON_Delete(j);
}

static int on_cubin(void *user, const struct img_origin *where, const struct img_cubin *c)
{
	struct scan_opts *o = user;
	char arch[16], origin[4096], dyn[24], regs[16];
	uint32_t i;

	if (o->arch && (uint32_t)c->sm != o->arch)
		return 0;
	o->cubins++;
	arch_name(arch, sizeof(arch), c->sm, c->variant);
	origin_name(origin, sizeof(origin), where);
	for (i = 0; i < c->n_kernels; i++) {
		const struct img_kernel *k = &c->kernels[i];
		enum target_fit fit = target_fit(&o->target, k->static_smem, k->dynamic_smem);

		o->kernels++;
		if (fit == TARGET_TOO_LARGE)
			o->too_large++;
		if (o->only_fails && fit != TARGET_TOO_LARGE)
			continue;
		o->shown++;
		if (o->json) {
			print_json_kernel(o, arch, origin, c, k, fit);
			continue;
		}
		if (o->shown == 1)
			printf("%-6s %-8s %7s %5s %7s %7s %5s  %-32s %s\n", "FITS", "ARCH", "STATIC",
			       "+RSV", "DYNAMIC", "TOTAL", "REGS", "KERNEL", "ORIGIN");
		if (k->dynamic_smem >= 0)
			snprintf(dyn, sizeof(dyn), "%lld", (long long)k->dynamic_smem);
		else
			snprintf(dyn, sizeof(dyn), "-");
		if (k->regs >= 0)
			snprintf(regs, sizeof(regs), "%d", k->regs);
		else
			snprintf(regs, sizeof(regs), "?");
		printf("%-6s %-8s %7u %5u %7s %7lld %5s  %-32s %s\n", fit_word(fit), arch,
		       k->static_smem, c->reserved_smem, dyn,
		       (long long)k->static_smem + (k->dynamic_smem > 0 ? k->dynamic_smem : 0), regs,
		       k->name, origin);
	}
	return 0;
}

static void on_ptx(void *user, const struct img_origin *where, uint32_t arch)
{
	struct scan_opts *o = user;

	(void)where;
	if (!o->arch || arch == o->arch)
		o->ptx++;
}

static void on_error(void *user, const struct sm_err *err)
{
	struct scan_opts *o = user;

	if (o->json) {
		cJSON *j = cJSON_CreateObject();
		char *s;

		cJSON_AddStringToObject(j, "type", "error");
		cJSON_AddStringToObject(j, "message", err->msg);
		s = cJSON_PrintUnformatted(j);
		if (s)
			puts(s);
		free(s);
		cJSON_Delete(j);
	}
	fprintf(stderr, "sm120 scan: %s\n", err->msg);
}

static void on_skip(void *user, const char *path, enum img_skip why)
{
	struct scan_opts *o = user;

	(void)path;
	if (why >= IMG_SKIP_NOT_IMAGE && why <= IMG_SKIP_SPECIAL)
		o->skipped[why]++;
}

/* print_skipped - one line: what directories held that was not read, and why. */
static void print_skipped(const struct scan_opts *o)
{
	static const struct {
		enum img_skip why;
		const char *one, *many;
	} kinds[] = {
		{ IMG_SKIP_NOT_IMAGE, "file that is no CUDA image", "files that are no CUDA image" },
		{ IMG_SKIP_PTX, "PTX file (compiled at load time)", "PTX files (compiled at load time)" },
		{ IMG_SKIP_LINK, "symbolic link (not followed)", "symbolic links (not followed)" },
		{ IMG_SKIP_SPECIAL, "special file", "special files" },
	};
	const char *sep = "";
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		unsigned long n = o->skipped[kinds[i].why];

		if (!n)
			continue;
		if (!*sep)
			fputs("sm120 scan: passed over in directories: ", stderr);
		fprintf(stderr, "%s%lu %s", sep, n, tool_plural(n, kinds[i].one, kinds[i].many));
		sep = ", ";
	}
	if (*sep)
		fputc('\n', stderr);
}

static void print_summary(const struct scan_opts *o, int errors)
{
	if (o->json) {
		cJSON *j = cJSON_CreateObject(), *sk;
		char *s;

		cJSON_AddStringToObject(j, "type", "summary");
		cJSON_AddStringToObject(j, "target", o->target.name);
		cJSON_AddNumberToObject(j, "target_optin", o->target.optin_per_block);
		cJSON_AddNumberToObject(j, "cubins", (double)o->cubins);
		cJSON_AddNumberToObject(j, "kernels", (double)o->kernels);
		cJSON_AddNumberToObject(j, "too_large", (double)o->too_large);
		cJSON_AddNumberToObject(j, "ptx_entries", (double)o->ptx);
		cJSON_AddNumberToObject(j, "errors", errors);
		sk = cJSON_AddObjectToObject(j, "skipped");
		cJSON_AddNumberToObject(sk, "not_image", (double)o->skipped[IMG_SKIP_NOT_IMAGE]);
		cJSON_AddNumberToObject(sk, "ptx", (double)o->skipped[IMG_SKIP_PTX]);
		cJSON_AddNumberToObject(sk, "links", (double)o->skipped[IMG_SKIP_LINK]);
		cJSON_AddNumberToObject(sk, "special", (double)o->skipped[IMG_SKIP_SPECIAL]);
		s = cJSON_PrintUnformatted(j);
		if (s)
			puts(s);
		free(s);
		cJSON_Delete(j);
	}
	fprintf(stderr,
		"sm120 scan: %lu %s in %lu %s (%lu PTX %s not compiled); %lu %s not fit %s "
		"(%u B opt-in per block); %d %s\n",
		o->kernels, tool_plural(o->kernels, "kernel", "kernels"), o->cubins,
		tool_plural(o->cubins, "cubin", "cubins"), o->ptx,
		tool_plural(o->ptx, "entry", "entries"), o->too_large,
		tool_plural(o->too_large, "does", "do"), o->target.name, o->target.optin_per_block,
		errors, tool_plural((unsigned long)errors, "error", "errors"));
	print_skipped(o);
}

int cmd_scan(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "target", required_argument, NULL, 't' }, { "json", no_argument, NULL, 'j' },
		{ "arch", required_argument, NULL, 'a' },   { "fails", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct scan_opts o = { 0 };
	struct img_visitor v = { on_cubin, on_ptx, on_error, 0, &o, on_skip };
	const char *target = "sm120";
	struct sm_err err;
	int c, i, errors = 0;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:ja:fh", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			target = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'a':
			o.arch = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || o.arch == 0 || o.arch > 255) {
				fprintf(stderr, "sm120 scan: --arch takes an SM number such as 120, "
						"not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'f':
			o.only_fails = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (tool_target(target, &o.target, &err) != 0) {
		fprintf(stderr, "sm120 scan: %s\n", err.msg);
		return 2;
	}
	v.arch_filter = o.arch;
	for (i = optind; i < argc; i++)
		errors += img_scan_path(argv[i], &v);
	print_summary(&o, errors);
	if (errors)
		return 2;
	return o.too_large ? 1 : 0;
}
