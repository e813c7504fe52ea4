/*
 * cmd_configs.c - `sm120 configs`: what SM120 would do with SGLang's and
 * vLLM's tuned fused-MoE config files, without a GPU.
 *
 * A config file maps batch sizes (M) to a Triton configuration of the
 * fused-MoE kernel (BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps, num_stages);
 * its name says what it was tuned for:
 *   E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json
 * For every bucket the shared memory Triton compiles is computed
 * (core/limits/triton_smem.c) for the architecture Triton compiles for, and
 * judged as the shim judges it when Triton loads the kernel: it fits the
 * target, or it is over and a rule admits it (rerouted, by that rule's id),
 * or it is over and refused with route_admit's reason.  The kernel is
 * described to route_admit by the compiled facts the Python hook would
 * record for it (compiled_text), so the tile-generic rules judge it at its
 * own configuration, and by the architecture it is compiled for.  That is the very
 * decision the shim's Python hook asks for (core/route/admit.h), so this
 * pre-flight and the shim cannot disagree on which kernels load; each launch
 * of an admitted kernel is still checked by its rule's adapter.
 *
 * Exit status: 0 nothing refused, 1 some bucket refused, 2 bad input (a file
 * that cannot be read, is not JSON or not a config, a name that does not
 * parse); errors are reported and the rest is read.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../core/common/file.h"
#include "../../core/limits/triton_smem.h"
#include "../../core/route/admit.h"
#include "commands.h"

#define MAX_FILE_BYTES (8u << 20)  /* config files are a few KiB */
#define MAX_DEPTH 32
/* Triton's defaults for a config that leaves them out (CUDAOptions). */
#define TRITON_DEFAULT_WARPS 4
#define TRITON_DEFAULT_STAGES 3

static const char *usage_text =
	"usage: sm120 configs [--target T] [--arch SM] [--json] PATH...\n"
	"\n"
	"PATH: a tuned fused-MoE config file of SGLang or vLLM, named like\n"
	"      E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json\n"
	"      (SGLang also writes per_channel_quant=True and a _down suffix), or a directory\n"
	"      searched recursively for files named E=*.json (other files are passed over).\n"
	"For each file and batch bucket: the shared memory Triton 3.6 compiles for the\n"
	"architecture, and whether the target runs it: fits, rerouted (by the rule the\n"
	"shim admits it with) or refused (with the shim's reason).\n"
	"  --target T  sm120 (default), sm121, sm89, sm86, sm80, sm90, sm100, auto (device 0),\n"
	"              or an opt-in byte count such as 101376: the limit judged against\n"
	"  --arch SM   the GPU Triton compiles for: 120, 121 or 90 (default: the\n"
	"              target's own); 90 is a Hopper GPU running under the shim with\n"
	"              SM120SHIM_TARGET=sm120, which compiles Hopper's kernels\n"
	"  --json      one JSON object per line: buckets, skipped files, errors, a summary\n"
	"exit: 0 nothing refused, 1 a bucket would be refused, 2 a file could not be read\n"
	"      (the rest is read)\n";

enum framework { FW_EITHER = 0, FW_SGLANG, FW_VLLM };

static const char *const framework_names[] = { "either", "sglang", "vllm" };

/* What a config file's name says. */
struct cfg_name {
	unsigned long experts, n;
	char device[160];
	char dtype[48];              /* "" when the name has no dtype part */
	uint32_t block_n, block_k;   /* 0 0: no block_shape */
	int block_spaced;            /* "[128, 128]": SGLang's spelling (vLLM: "[128,128]") */
	int per_channel;             /* per_channel_quant=True (SGLang) */
	int down;                    /* _down: SGLang's down-projection config */
	char backend[48];            /* backend=...: not a Triton config (vLLM flydsl) */
};

/* One bucket of a file, as Triton will compile it. */
struct bucket {
	unsigned long batch;
	uint32_t block_m, block_n, block_k, group_m, warps, stages;
	int use_tma;
};

/* What a bucket comes to on the target. */
enum verdict { VERDICT_FITS = 0, VERDICT_REROUTED, VERDICT_REFUSED };

static const char *const verdict_names[] = { "fits", "rerouted", "refused" };

/* A refusal reason and how many buckets had it. */
struct reason {
	char *text;
	unsigned long count;
};

struct configs {
	struct target_limits target;
	int sm;                      /* the architecture Triton compiles for */
	int json;
	unsigned long files, buckets, verdicts[3], skipped, passed_over;
	int errors;
	struct reason *reasons;
	size_t n_reasons;
	struct rule *rules[3];       /* the built-in rules, each framework's first */
};

/* ------------------------------------------------------------ output */

static void print_json(cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);

	if (s)
		puts(s);
	free(s);
	cJSON_Delete(j);
}

/* report_error - one bad input: stderr, and a JSON "error" line with --json. */
static void report_error(struct configs *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void report_error(struct configs *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->errors++;
	fprintf(stderr, "sm120 configs: %s\n", msg);
	if (c->json) {
		cJSON *j = cJSON_CreateObject();

		cJSON_AddStringToObject(j, "type", "error");
		cJSON_AddStringToObject(j, "message", msg);
		print_json(j);
	}
}

/* tally_reason - count one refusal under its reason (the summary lists them). */
static void tally_reason(struct configs *c, const char *why)
{
	struct reason *r;
	size_t i;

	for (i = 0; i < c->n_reasons; i++)
		if (strcmp(c->reasons[i].text, why) == 0) {
			c->reasons[i].count++;
			return;
		}
	r = realloc(c->reasons, (c->n_reasons + 1) * sizeof(*r));
	if (!r)
		return;
	c->reasons = r;
	r[c->n_reasons].text = strdup(why);
	r[c->n_reasons].count = 1;
	if (r[c->n_reasons].text)
		c->n_reasons++;
}

/*
 * rules_for - the built-in rules with @fw's own first (ids that start with
 * its name): route_admit names the first rule that admits a kernel, and a
 * vLLM file should name vLLM's.  The order changes which rule is named,
 * never whether one admits.  NULL when out of memory.
 */
static struct rule *rules_for(enum framework fw)
{
	struct rule *r = calloc(rules_builtin_count ? rules_builtin_count : 1, sizeof(*r));
	size_t len = strlen(framework_names[fw]);
	uint32_t i, n = 0, pass;

	if (!r)
		return NULL;
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < rules_builtin_count; i++) {
			int own = fw != FW_EITHER &&
				  strncmp(rules_builtin[i].id, framework_names[fw], len) == 0 &&
				  rules_builtin[i].id[len] == '-';

			if (own == !pass)
				r[n++] = rules_builtin[i];
		}
	return r;
}

/* ------------------------------------------------------------ the file name */

/* number - a decimal number at *@p (advanced past it) into *@out; 0, or -1. */
static int number(const char **p, unsigned long *out)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -1;
	errno = 0;
	*out = strtoul(*p, &end, 10);
	if (errno || end - *p > 9)
		return -1;
	*p = end;
	return 0;
}

/* word - the text at *@p up to the next ',' (or the end) into @out; 0, or -1 too long. */
static int word(const char **p, char *out, size_t n)
{
	size_t len = strcspn(*p, ",");

	if (len >= n)
		return -1;
	memcpy(out, *p, len);
	out[len] = '\0';
	*p += len;
	return 0;
}

/* block_shape - "[N, K]" or "[N,K]" at *@p into @nm; 0, or -1. */
static int block_shape(const char **p, struct cfg_name *nm)
{
	unsigned long bn, bk;

	if (*(*p)++ != '[' || number(p, &bn) != 0 || *(*p)++ != ',')
		return -1;
	nm->block_spaced = **p == ' ';
	if (nm->block_spaced)
		(*p)++;
	if (number(p, &bk) != 0 || *(*p)++ != ']' || !bn || !bk || bn > 65536 || bk > 65536)
		return -1;
	nm->block_n = (uint32_t)bn;
	nm->block_k = (uint32_t)bk;
	return 0;
}

/*
 * cfg_name_parse - @base (a file name, no directory) into @nm: both
 * frameworks' get_config_file_name, E=<experts>,N=<n>,device_name=<GPU>
 * then any of ,dtype=<d> ,block_shape=[<n>, <k>] ,per_channel_quant=True
 * ,backend=<b>, then _down (SGLang) and .json.  Returns 0, or -1 with @why
 * saying what is wrong.
 */
static int cfg_name_parse(const char *base, struct cfg_name *nm, char *why, size_t n)
{
	static const char *const expect =
		"E=<experts>,N=<n>,device_name=<GPU>[,dtype=<dtype>][,block_shape=[<n>, <k>]]"
		"[,per_channel_quant=True][_down].json";
	char stem[512];
	const char *p = stem;
	size_t len = strlen(base);

	memset(nm, 0, sizeof(*nm));
	if (len < 5 || len - 5 >= sizeof(stem) || strcmp(base + len - 5, ".json") != 0) {
		snprintf(why, n, "the name does not end in .json; expected %s", expect);
		return -1;
	}
	memcpy(stem, base, len - 5);
	stem[len - 5] = '\0';
	len -= 5;
	if (len > 5 && strcmp(stem + len - 5, "_down") == 0) {
		nm->down = 1;
		stem[len - 5] = '\0';
	}
	if (strncmp(p, "E=", 2) != 0 || (p += 2, number(&p, &nm->experts)) != 0 ||
	    strncmp(p, ",N=", 3) != 0 || (p += 3, number(&p, &nm->n)) != 0 || !nm->experts ||
	    !nm->n) {
		snprintf(why, n, "the name does not start with E=<experts>,N=<n> (whole numbers "
			 "from 1); expected %s", expect);
		return -1;
	}
	if (strncmp(p, ",device_name=", 13) != 0 || (p += 13, word(&p, nm->device,
							   sizeof(nm->device))) != 0) {
		snprintf(why, n, "no device_name=<GPU> after N=%lu (or one over %zu characters); "
			 "expected %s", nm->n, sizeof(nm->device) - 1, expect);
		return -1;
	}
	while (*p == ',') {
		p++;
		if (strncmp(p, "dtype=", 6) == 0 && !nm->dtype[0]) {
			p += 6;
			if (word(&p, nm->dtype, sizeof(nm->dtype)) != 0 || !nm->dtype[0]) {
				snprintf(why, n, "dtype= is empty or too long; give one of %s",
					 triton_moe_dtype_names());
				return -1;
			}
		} else if (strncmp(p, "block_shape=", 12) == 0 && !nm->block_n) {
			p += 12;
			if (block_shape(&p, nm) != 0) {
				snprintf(why, n, "block_shape= is not [<n>, <k>] with whole numbers "
					 "from 1 (SGLang writes [128, 128], vLLM [128,128])");
				return -1;
			}
		} else if (strncmp(p, "per_channel_quant=True", 22) == 0 && !nm->per_channel) {
			p += 22;
			nm->per_channel = 1;
		} else if (strncmp(p, "backend=", 8) == 0 && !nm->backend[0]) {
			p += 8;
			if (word(&p, nm->backend, sizeof(nm->backend)) != 0 || !nm->backend[0]) {
				snprintf(why, n, "backend= is empty or too long");
				return -1;
			}
		} else {
			snprintf(why, n, "'%.*s' is not a part of a config name (once each: dtype=, "
				 "block_shape=, per_channel_quant=True, backend=); expected %s",
				 (int)strcspn(p, ","), p, expect);
			return -1;
		}
		if (*p && *p != ',') {
			snprintf(why, n, "unexpected '%s' after a part of the name; expected %s", p,
				 expect);
			return -1;
		}
	}
	return 0;
}

/* in_triton_dir - is @path's directory SGLang's configs/triton_<X>_<Y>_<Z>/? */
static int in_triton_dir(const char *path)
{
	const char *slash = strrchr(path, '/'), *dir;
	unsigned a, b, c;
	char tail;

	if (!slash)
		return 0;
	for (dir = slash; dir > path && dir[-1] != '/'; dir--)
		;
	return sscanf(dir, "triton_%u_%u_%u%c", &a, &b, &c, &tail) == 4 && tail == '/';
}

/* in_package - does a directory of @path have the name @pkg ("vllm", "sglang")? */
static int in_package(const char *path, const char *pkg)
{
	size_t len = strlen(pkg);
	const char *p;

	for (p = path; (p = strstr(p, pkg)); p += len)
		if ((p == path || p[-1] == '/') && p[len] == '/')
			return 1;
	return 0;
}

/*
 * framework_of - which framework reads this file.  From the name: SGLang
 * writes "[128, 128]", per_channel_quant and _down, vLLM "[128,128]"; else
 * SGLang's marks in the file (a triton_X_Y_Z directory, USE_TMA in a
 * bucket); else a directory named sglang or vllm on the path (the packages'
 * own trees).  Otherwise the name is valid for both, which compile it alike.
 */
static enum framework framework_of(const struct cfg_name *nm, const char *path, int use_tma)
{
	if (nm->block_n)
		return nm->block_spaced ? FW_SGLANG : FW_VLLM;
	if (nm->per_channel || nm->down || in_triton_dir(path) || use_tma)
		return FW_SGLANG;
	if (in_package(path, "vllm") != in_package(path, "sglang"))
		return in_package(path, "vllm") ? FW_VLLM : FW_SGLANG;
	return FW_EITHER;
}

/* ------------------------------------------------------------ the buckets */

/* field - integer @key of bucket @b into *@out (@def when absent and @def >= 0). */
static int field(const cJSON *b, const char *key, long def, long lo, long hi, int pow2,
		 uint32_t *out, char *why, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, key);
	double d;

	if (!v && def >= 0) {
		*out = (uint32_t)def;
		return 0;
	}
	if (!v) {
		snprintf(why, n, "has no %s (the frameworks index it)", key);
		return -1;
	}
	d = cJSON_IsNumber(v) ? v->valuedouble : -1;
	if (d < lo || d > hi || d != (double)(long)d || (pow2 && ((long)d & ((long)d - 1)))) {
		snprintf(why, n, "%s is not a whole number from %ld to %ld%s", key, lo, hi,
			 pow2 ? " that is a power of two (Triton's tl.arange needs one)" : "");
		return -1;
	}
	*out = (uint32_t)d;
	return 0;
}

/* bucket_parse - one "M": {config} member into @bk; 0, or -1 with @why. */
static int bucket_parse(const cJSON *m, struct bucket *bk, char *why, size_t n)
{
	const cJSON *tma;
	const char *k = m->string;
	char *end;

	memset(bk, 0, sizeof(*bk));
	errno = 0;
	bk->batch = strtoul(k, &end, 10);
	if (!*k || *end || errno || k[0] < '0' || k[0] > '9') {
		snprintf(why, n, "key \"%s\" is not a batch size (a whole number)", k);
		return -1;
	}
	if (!cJSON_IsObject(m)) {
		snprintf(why, n, "is not an object of BLOCK_SIZE_M, BLOCK_SIZE_N, ...");
		return -1;
	}
	if (field(m, "BLOCK_SIZE_M", -1, 1, 4096, 1, &bk->block_m, why, n) ||
	    field(m, "BLOCK_SIZE_N", -1, 1, 4096, 1, &bk->block_n, why, n) ||
	    field(m, "BLOCK_SIZE_K", -1, 1, 4096, 1, &bk->block_k, why, n) ||
	    field(m, "GROUP_SIZE_M", -1, 1, 65536, 0, &bk->group_m, why, n) ||
	    field(m, "num_warps", TRITON_DEFAULT_WARPS, 1, 32, 1, &bk->warps, why, n) ||
	    field(m, "num_stages", TRITON_DEFAULT_STAGES, 1, 32, 0, &bk->stages, why, n))
		return -1;
	tma = cJSON_GetObjectItemCaseSensitive(m, "USE_TMA");
	if (tma && !cJSON_IsBool(tma)) {
		snprintf(why, n, "USE_TMA is not true or false");
		return -1;
	}
	bk->use_tma = cJSON_IsTrue(tma);
	return 0;
}

/*
 * bucket_tile - what Triton compiles for bucket @bk of a file named @nm with
 * dtype @d, read by @fw, on sm_@sm: the frameworks' own adjustments (vLLM
 * clamps BLOCK_SIZE_K to the block-scale shape; SGLang loads through tensor
 * descriptors where a bucket says USE_TMA: A and B in a _down file, B alone
 * in an up-projection one; both swap the dot on sm_90 for small FP8 tiles).
 */
static struct triton_moe_tile bucket_tile(const struct cfg_name *nm, const struct triton_moe_dtype *d,
					  enum framework fw, const struct bucket *bk, int sm)
{
	struct triton_moe_tile t = { 0 };
	int blocked = d->scaled && nm->block_n && nm->block_k;

	t.sm = sm;
	t.kernel = d->kernel;
	t.a_bytes = d->a_bytes;
	t.b_bits = d->b_bits;
	t.block_m = bk->block_m;
	t.block_n = bk->block_n;
	t.block_k = bk->block_k;
	t.num_warps = bk->warps;
	t.num_stages = bk->stages;
	if (blocked) {
		t.group_n = nm->block_n;
		t.group_k = nm->block_k;
		t.b_scale_vector = fw == FW_VLLM || t.block_n > t.group_n;
		if (fw == FW_VLLM) {
			uint32_t least = nm->block_n < nm->block_k ? nm->block_n : nm->block_k;

			if (t.block_k > least)
				t.block_k = least;
		}
	}
	if (fw == FW_SGLANG && bk->use_tma && d->kernel == TRITON_MOE_FUSED) {
		t.tma_b = 1;
		t.tma_a = nm->down;
	}
	t.swap_ab = triton_moe_swap_ab(sm, d, t.block_m, t.block_n);
	return t;
}

/* GPTQ/AWQ checkpoints' scale group: no config file names it (judge()). */
#define GPTQ_GROUP_SIZE 128

/*
 * compiled_text - the compiled facts the Python hook would record for the
 * kernel Triton builds from @t with @group_m for a file of dtype @d, into
 * @out: the configuration, the weight format's constexprs (use_fp8_w8a8,
 * ..., per_channel_quant, group_n, group_k), compute_type (bf16: an fp16
 * model has the same shared memory), the swap flag under both frameworks'
 * names, c_sorted (SGLang's sorted output of a TMA down launch), and
 * SGLang's tensor descriptors as passed arguments.  For the INT4 kernel the
 * checkpoint's group size, which no config file names, is taken as
 * GPTQ_GROUP_SIZE: the rules take 32, 64 and 128 alike.  No argument types
 * otherwise: the facts then say nothing of the signature.
 */
static void compiled_text(const struct triton_moe_tile *t, const struct triton_moe_dtype *d,
			  int per_channel, uint32_t group_m, int c_sorted, char *out, size_t n)
{
	int w8a8 = d->scaled, int8 = strncmp(d->name, "int8_w8a8", 9) == 0;
	int o = snprintf(out, n, "num_warps=%u;num_stages=%u;BLOCK_SIZE_M=%u;BLOCK_SIZE_N=%u;"
			 "BLOCK_SIZE_K=%u;GROUP_SIZE_M=%u;compute_type=%s", t->num_warps,
			 t->num_stages, t->block_m, t->block_n, t->block_k, group_m,
			 t->a_bytes == 4 ? "fp32" : "bf16");

	if (o < 0 || (size_t)o >= n)
		return;
	if (t->kernel == TRITON_MOE_GPTQ_AWQ)
		snprintf(out + o, n - (size_t)o, ";group_size=%d;use_int4_w4a16=%d;use_int8_w8a16=%d",
			 GPTQ_GROUP_SIZE, t->b_bits == 4, t->b_bits == 8);
	else
		snprintf(out + o, n - (size_t)o, ";use_fp8_w8a8=%d;use_int8_w8a8=%d;use_int8_w8a16=%d;"
			 "per_channel_quant=%d;group_n=%u;group_k=%u;swap_ab=%d;SWAP_AB=%d%s%s%s",
			 w8a8 && !int8, w8a8 && int8, !w8a8 && t->b_bits == 8, per_channel,
			 t->group_n, t->group_k, t->swap_ab, t->swap_ab, c_sorted ? ";c_sorted=1" : "",
			 t->tma_a ? ";a_desc:tensordesc" : "", t->tma_b ? ";b_desc:tensordesc" : "");
}

/*
 * judge - the shim's admission (route_admit, in reroute mode) of a kernel
 * of @shared bytes compiled for sm_@c->sm from @t with @group_m (and
 * c_sorted, SGLang's sorted output of a TMA down launch) for a file of
 * dtype @d, read by @fw: fits, rerouted (@rule set) or refused (@why set).
 */
static enum verdict judge(const struct configs *c, enum framework fw,
			  const struct triton_moe_tile *t, const struct triton_moe_dtype *d,
			  int per_channel, uint32_t group_m, uint64_t shared, int c_sorted,
			  const char **rule, char *why, size_t n)
{
	char compiled[512];
	struct route_kernel k = { 0 };
	struct route_admission a;

	compiled_text(t, d, per_channel, group_m, c_sorted, compiled, sizeof(compiled));
	k.name = triton_moe_kernel_name(t->kernel);
	k.shared = shared;
	k.threads = t->num_warps * 32;
	k.compiled = compiled;
	k.sm = c->sm;
	route_admit(&k, &c->target, SHIM_MODE_REROUTE, c->rules[fw], rules_builtin_count, &a);
	*rule = NULL;
	why[0] = '\0';
	if (!a.over)
		return VERDICT_FITS;
	if (a.rule) {
		*rule = a.rule->id;
		return VERDICT_REROUTED;
	}
	snprintf(why, n, "%s", a.why.msg[0] ? a.why.msg : "");
	if (!why[0])
		snprintf(why, n, "no rule reroutes %s at this tile", k.name);
	return VERDICT_REFUSED;
}

static void print_file_head(const struct configs *c, const char *path, const struct cfg_name *nm,
			    enum framework fw, const struct triton_moe_dtype *d)
{
	printf("%s\n  E=%lu N=%lu %s", path, nm->experts, nm->n, d->name[0] ? d->name : "bf16");
	if (nm->block_n)
		printf(" block %ux%u", nm->block_n, nm->block_k);
	if (nm->per_channel)
		printf(" per-channel");
	printf("%s, tuned on %s; %s; %s for sm_%d against %s (%u B)\n", nm->down ? " down" : "",
	       nm->device[0] ? nm->device : "(no device name)",
	       fw == FW_EITHER ? "SGLang or vLLM" : fw == FW_SGLANG ? "SGLang" : "vLLM",
	       triton_moe_kernel_name(d->kernel), c->sm, c->target.name,
	       c->target.optin_per_block);
	printf("  %8s %5s %5s %5s %5s %3s %3s %8s  %s\n", "M", "BM", "BN", "BK", "GM", "W", "S",
	       "SHARED", "VERDICT");
}

static void print_bucket(const struct configs *c, const char *path, const struct cfg_name *nm,
			 enum framework fw, const struct triton_moe_dtype *d, const struct bucket *bk,
			 const struct triton_moe_tile *t, uint64_t shared, enum verdict v,
			 const char *rule, const char *why)
{
	if (c->json) {
		cJSON *j = cJSON_CreateObject();

		cJSON_AddStringToObject(j, "type", "bucket");
		cJSON_AddStringToObject(j, "file", path);
		cJSON_AddNumberToObject(j, "E", (double)nm->experts);
		cJSON_AddNumberToObject(j, "N", (double)nm->n);
		cJSON_AddStringToObject(j, "device_name", nm->device);
		cJSON_AddStringToObject(j, "dtype", d->name[0] ? d->name : "bf16");
		if (nm->block_n) {
			cJSON *bs = cJSON_AddArrayToObject(j, "block_shape");

			cJSON_AddItemToArray(bs, cJSON_CreateNumber(nm->block_n));
			cJSON_AddItemToArray(bs, cJSON_CreateNumber(nm->block_k));
		} else {
			cJSON_AddNullToObject(j, "block_shape");
		}
		cJSON_AddBoolToObject(j, "per_channel_quant", nm->per_channel);
		cJSON_AddBoolToObject(j, "down", nm->down);
		cJSON_AddStringToObject(j, "framework", framework_names[fw]);
		cJSON_AddStringToObject(j, "kernel", triton_moe_kernel_name(t->kernel));
		cJSON_AddNumberToObject(j, "batch", (double)bk->batch);
		cJSON_AddNumberToObject(j, "BLOCK_SIZE_M", t->block_m);
		cJSON_AddNumberToObject(j, "BLOCK_SIZE_N", t->block_n);
		cJSON_AddNumberToObject(j, "BLOCK_SIZE_K", t->block_k);
		cJSON_AddNumberToObject(j, "GROUP_SIZE_M", bk->group_m);
		cJSON_AddNumberToObject(j, "num_warps", t->num_warps);
		cJSON_AddNumberToObject(j, "num_stages", t->num_stages);
		cJSON_AddBoolToObject(j, "tma", t->tma_a || t->tma_b);
		cJSON_AddBoolToObject(j, "swap_ab", t->swap_ab);
		cJSON_AddNumberToObject(j, "arch", c->sm);
		cJSON_AddNumberToObject(j, "shared", (double)shared);
		cJSON_AddStringToObject(j, "target", c->target.name);
		cJSON_AddNumberToObject(j, "target_optin", c->target.optin_per_block);
		cJSON_AddStringToObject(j, "verdict", verdict_names[v]);
		if (rule)
			cJSON_AddStringToObject(j, "rule", rule);
		if (why[0])
			cJSON_AddStringToObject(j, "why", why);
		print_json(j);
		return;
	}
	printf("  %8lu %5u %5u %5u %5u %3u %3u %8llu  %s%s%s%s%s\n", bk->batch, t->block_m,
	       t->block_n, t->block_k, bk->group_m, t->num_warps, t->num_stages,
	       (unsigned long long)shared, verdict_names[v], rule ? " by " : "", rule ? rule : "",
	       why[0] ? ": " : "", why);
}

/* skip_file - a well-named file that no framework reads as a Triton config. */
static void skip_file(struct configs *c, const char *path, const char *why)
{
	c->skipped++;
	if (c->json) {
		cJSON *j = cJSON_CreateObject();

		cJSON_AddStringToObject(j, "type", "skipped");
		cJSON_AddStringToObject(j, "file", path);
		cJSON_AddStringToObject(j, "why", why);
		print_json(j);
		return;
	}
	printf("%s\n  skipped: %s\n", path, why);
}

/* json_line - the line of byte @at of @text, for a parse error. */
static unsigned long json_line(const char *text, const char *at)
{
	unsigned long line = 1;

	for (; text < at && *text; text++)
		line += *text == '\n';
	return line;
}

/* has_tma - does any bucket of @root say "USE_TMA": true? */
static int has_tma(const cJSON *root)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, root)
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "USE_TMA")))
			return 1;
	return 0;
}

static void config_file(struct configs *c, const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	const struct triton_moe_dtype *d;
	struct cfg_name nm;
	cJSON *root = NULL;
	const cJSON *m;
	enum framework fw;
	char why[512], skip[256], *text;
	size_t len;

	if (cfg_name_parse(base, &nm, why, sizeof(why)) != 0) {
		report_error(c, "%s: %s", path, why);
		return;
	}
	if (nm.backend[0] && strcmp(nm.backend, "triton") != 0) {
		snprintf(skip, sizeof(skip), "backend=%s: a config of another MoE backend, not of "
			 "Triton's fused-MoE kernels", nm.backend);
		skip_file(c, path, skip);
		return;
	}
	d = triton_moe_dtype_find(nm.dtype);
	if (!d) {
		snprintf(skip, sizeof(skip), "dtype=%s: neither SGLang nor vLLM looks up a config of "
			 "this dtype (they name %s), so neither reads this file", nm.dtype,
			 triton_moe_dtype_names());
		skip_file(c, path, skip);
		return;
	}
	text = sm_read_small(path, MAX_FILE_BYTES, &len);
	if (!text) {
		report_error(c, "%s: cannot read: %s", path, errno == EFBIG ?
			     "over 8 MiB, no config file is that large" : strerror(errno));
		return;
	}
	root = cJSON_ParseWithLength(text, len);
	if (!root || !cJSON_IsObject(root)) {
		const char *at = cJSON_GetErrorPtr();

		if (!root && at && at >= text && at <= text + len)
			report_error(c, "%s:%lu: not JSON; a config file is one object of batch size "
				     "-> {BLOCK_SIZE_M, ...}", path, json_line(text, at));
		else
			report_error(c, "%s: not a JSON object; a config file is one object of batch "
				     "size -> {BLOCK_SIZE_M, ...}", path);
		goto out;
	}
	c->files++;
	fw = framework_of(&nm, path, has_tma(root));
	if (!c->json)
		print_file_head(c, path, &nm, fw, d);
	cJSON_ArrayForEach(m, root) {
		struct triton_moe_tile t;
		struct bucket bk;
		const char *rule;
		enum verdict v;
		uint64_t shared;

		/* vLLM strips it before reading the buckets; SGLang's files have none. */
		if (strcmp(m->string, "triton_version") == 0 && cJSON_IsString(m))
			continue;
		if (bucket_parse(m, &bk, why, sizeof(why)) != 0) {
			report_error(c, "%s: bucket \"%s\" %s", path, m->string, why);
			continue;
		}
		t = bucket_tile(&nm, d, fw, &bk, c->sm);
		shared = triton_moe_smem(&t);
		v = judge(c, fw, &t, d, nm.per_channel, bk.group_m, shared, t.tma_a, &rule, why,
			  sizeof(why));
		c->buckets++;
		c->verdicts[v]++;
		if (v == VERDICT_REFUSED)
			tally_reason(c, why);
		print_bucket(c, path, &nm, fw, d, &bk, &t, shared, v, rule, why);
	}
out:
	cJSON_Delete(root);
	free(text);
}

/* is_config_name - a directory entry that names a config file (E=...json). */
static int is_config_name(const char *name)
{
	size_t len = strlen(name);

	return strncmp(name, "E=", 2) == 0 && len > 5 && strcmp(name + len - 5, ".json") == 0;
}

static int skip_dots(const struct dirent *d)
{
	return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

/* walk - a file, or a directory searched recursively (links below it not followed). */
static void walk(struct configs *c, const char *path, int depth)
{
	struct dirent **names;
	struct stat st;
	int n, i;

	if ((depth > 0 ? lstat(path, &st) : stat(path, &st)) != 0) {
		report_error(c, "%s: %s", path, strerror(errno));
		return;
	}
	if (S_ISREG(st.st_mode)) {
		if (depth == 0 || is_config_name(strrchr(path, '/') + 1))
			config_file(c, path);
		else
			c->passed_over++;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (depth == 0)
			report_error(c, "%s: neither a file nor a directory; give config files or "
				     "directories of them", path);
		else
			c->passed_over++;
		return;
	}
	if (depth >= MAX_DEPTH) {
		report_error(c, "%s: more than %d directories deep; give a deeper directory", path,
			     MAX_DEPTH);
		return;
	}
	n = scandir(path, &names, skip_dots, alphasort);
	if (n < 0) {
		report_error(c, "%s: cannot list: %s", path, strerror(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
		char *child = malloc(len);

		if (child) {
			snprintf(child, len, "%s/%s", path, names[i]->d_name);
			walk(c, child, depth + 1);
		} else {
			report_error(c, "%s/%s: out of memory; not read", path, names[i]->d_name);
		}
		free(child);
		free(names[i]);
	}
	free(names);
}

static void print_summary(struct configs *c)
{
	unsigned long over = c->verdicts[VERDICT_REROUTED] + c->verdicts[VERDICT_REFUSED];
	size_t i;

	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *why = cJSON_AddObjectToObject(j, "refused_by");

		cJSON_AddStringToObject(j, "type", "summary");
		cJSON_AddStringToObject(j, "target", c->target.name);
		cJSON_AddNumberToObject(j, "target_optin", c->target.optin_per_block);
		cJSON_AddNumberToObject(j, "arch", c->sm);
		cJSON_AddNumberToObject(j, "files", (double)c->files);
		cJSON_AddNumberToObject(j, "buckets", (double)c->buckets);
		cJSON_AddNumberToObject(j, "fits", (double)c->verdicts[VERDICT_FITS]);
		cJSON_AddNumberToObject(j, "over", (double)over);
		cJSON_AddNumberToObject(j, "rerouted", (double)c->verdicts[VERDICT_REROUTED]);
		cJSON_AddNumberToObject(j, "refused", (double)c->verdicts[VERDICT_REFUSED]);
		for (i = 0; i < c->n_reasons; i++)
			cJSON_AddNumberToObject(why, c->reasons[i].text, (double)c->reasons[i].count);
		cJSON_AddNumberToObject(j, "skipped", (double)c->skipped);
		cJSON_AddNumberToObject(j, "passed_over", (double)c->passed_over);
		cJSON_AddNumberToObject(j, "errors", c->errors);
		print_json(j);
	}
	fprintf(stderr, "sm120 configs: %lu %s, %lu %s compiled for sm_%d against %s (%u B): "
		"%lu %s, %lu over (%lu rerouted, %lu refused); %lu %s skipped, %d %s\n",
		c->files, tool_plural(c->files, "file", "files"), c->buckets,
		tool_plural(c->buckets, "bucket", "buckets"), c->sm, c->target.name,
		c->target.optin_per_block, c->verdicts[VERDICT_FITS],
		tool_plural(c->verdicts[VERDICT_FITS], "fits", "fit"), over,
		c->verdicts[VERDICT_REROUTED], c->verdicts[VERDICT_REFUSED], c->skipped,
		tool_plural(c->skipped, "file", "files"), c->errors,
		tool_plural((unsigned long)c->errors, "error", "errors"));
	for (i = 0; i < c->n_reasons; i++)
		fprintf(stderr, "sm120 configs: refused %lu: %s\n", c->reasons[i].count,
			c->reasons[i].text);
	if (c->passed_over)
		fprintf(stderr, "sm120 configs: passed over in directories: %lu %s not named "
			"E=*.json, links or special files\n", c->passed_over,
			tool_plural(c->passed_over, "entry", "entries"));
}

int cmd_configs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "target", required_argument, NULL, 't' }, { "arch", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },         { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct configs c = { 0 };
	const char *target = "sm120", *arch = NULL;
	struct sm_err err;
	int opt, i;
	size_t r;
	char *end;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "t:a:jh", longopts, NULL)) != -1) {
		switch (opt) {
		case 't':
			target = optarg;
			break;
		case 'a':
			arch = optarg;
			break;
		case 'j':
			c.json = 1;
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
	if (tool_target(target, &c.target, &err) != 0) {
		fprintf(stderr, "sm120 configs: %s\n", err.msg);
		return 2;
	}
	c.sm = c.target.sm;
	if (arch) {
		c.sm = (int)strtol(arch, &end, 10);
		if (*end || !triton_moe_sm_supported(c.sm)) {
			fprintf(stderr, "sm120 configs: --arch %s: give 120, 121 or 90, the "
				"architectures the formula models (core/limits/triton_smem.h says "
				"why not the others)\n", arch);
			return 2;
		}
	} else if (!triton_moe_sm_supported(c.sm)) {
		fprintf(stderr, "sm120 configs: target %s names no architecture the formula "
			"models; give the GPU Triton compiles for with --arch 120 or --arch 90\n",
			c.target.name);
		return 2;
	}
	for (r = 0; r < 3; r++)
		if (!(c.rules[r] = rules_for((enum framework)r))) {
			fprintf(stderr, "sm120 configs: out of memory\n");
			return 2;
		}
	for (i = optind; i < argc; i++)
		walk(&c, argv[i], 0);
	print_summary(&c);
	for (r = 0; r < c.n_reasons; r++)
		free(c.reasons[r].text);
	free(c.reasons);
	for (r = 0; r < 3; r++)
		free(c.rules[r]);
	if (c.errors)
		return 2;
	return c.verdicts[VERDICT_REFUSED] ? 1 : 0;
}
