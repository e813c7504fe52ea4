/*
 * cmd_ref.c - `sm120 ref`: the reference engine.
 *
 *   sm120 ref make-model --arch kimi-k2|glm4-moe [--quant Q] [--tiny|--real-dims]
 *                        [--layers N] [--experts N] [--shards N] [--seed S] [--k25]
 *                        [--legacy-quant-config] OUT
 *   sm120 ref run [--backend B] [--mla naive|absorbed] [--prompt IDS] [--steps N]
 *                 [--threads N] [--max-seq N] [--chunk N] [--json FILE] [--check-cpu]
 *                 [--last-logits] DIR
 *   sm120 ref info DIR
 *
 * run prints the generated tokens, a checksum of every logits row and the
 * speed of prefill and decode; --json dumps the rows, the tokens and each
 * MoE layer's expert choice per position ("routes"); --check-cpu runs the
 * CPU backend too and prints the largest difference of the logits;
 * --last-logits has prefill form the prompt's last row only, as a server
 * does (its speed then leaves out the LM head over every position).
 *
 * Every subcommand takes --help, which describes each option and its
 * default.  Every numeric option goes through one parser (opt_number):
 * whole decimal numbers only, range-checked, no trailing characters, no
 * overflow; the message names the option and the accepted range.  Options
 * that exclude each other are listed in one table per subcommand and
 * refused together.  Exit status: 0 done, 1 the model or the run failed,
 * 2 a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/cpu/cpu.h"
#include "../../engine/engine.h"
#include "../../engine/gpu/gpu.h"
#include "../../engine/synth/synth.h"
#include "commands.h"

/* Writes of at least this many bytes show a progress line on stderr. */
#define PROGRESS_MIN_BYTES (1ull << 30)

/* `sm120 ref run`'s limits and defaults. */
#define RUN_MAX_PROMPT 4096
#define RUN_MAX_STEPS 1000000
#define RUN_MAX_THREADS REF_CPU_MAX_THREADS
#define RUN_MAX_SEQ (1 << 24)
#define RUN_STEPS 16
static const int run_prompt[] = { 1, 2, 3, 5, 8, 13, 21 };
#define RUN_NPROMPT ((int)(sizeof(run_prompt) / sizeof(run_prompt[0])))

static const char *usage_text =
	"usage: sm120 ref make-model --arch kimi-k2|glm4-moe [options] OUT\n"
	"       sm120 ref run [options] DIR\n"
	"       sm120 ref info DIR\n"
	"\n"
	"  make-model  write a synthetic checkpoint in the real on-disk layout\n"
	"  run         run a checkpoint: prefill, greedy decode, logits checksum, speed\n"
	"  info        print what the loader finds in a checkpoint\n"
	"\n"
	"'sm120 ref SUBCOMMAND --help' describes its options and their defaults.\n";

/* ---- options ------------------------------------------------------------ */

/*
 * num_parse - @s as a whole decimal number in [@lo, @hi] into *@v: digits
 * only (no sign, space, base prefix or trailing character).  Returns 0,
 * -EINVAL when @s is not such a number, -ERANGE when it lies outside the
 * range (or beyond 64 bits).
 */
static int num_parse(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	uint64_t x = 0;
	const char *p;

	if (!*s)
		return -EINVAL;
	for (p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	for (p = s; *p; p++)
		if (__builtin_mul_overflow(x, 10, &x) ||
		    __builtin_add_overflow(x, (uint64_t)(*p - '0'), &x))
			return -ERANGE;
	if (x < lo || x > hi)
		return -ERANGE;
	*v = x;
	return 0;
}

/*
 * opt_number - option @opt of subcommand @cmd, given @text: a number in
 * [@lo, @hi] into *@v.  Returns 0, or -1 after printing what is wrong and
 * what the option takes.
 */
static int opt_number(const char *cmd, const char *opt, const char *text, uint64_t lo, uint64_t hi,
		      uint64_t *v)
{
	int rc = num_parse(text, lo, hi, v);

	if (rc)
		fprintf(stderr, "sm120 ref %s: %s '%s' is %s: give a whole number in %" PRIu64
			"..%" PRIu64 " (sm120 ref %s --help)\n", cmd, opt, text,
			rc == -ERANGE ? "out of range" : "not a whole number", lo, hi, cmd);
	return rc ? -1 : 0;
}

/* opt_int - opt_number into an int (@hi at most INT_MAX). */
static int opt_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *v)
{
	uint64_t x;

	if (opt_number(cmd, opt, text, (uint64_t)lo, (uint64_t)hi, &x))
		return -1;
	*v = (int)x;
	return 0;
}

/*
 * bad_option - getopt's '?' (opterr is off, so the message is ours): the
 * argument at fault, in @argv before optind, and where the options are described.
 */
static int bad_option(const char *cmd, char **argv)
{
	fprintf(stderr, "sm120 ref %s: '%s' is not an option of %s, or its value is missing "
		"(sm120 ref %s --help)\n", cmd, argv[optind - 1], cmd, cmd);
	return -1;
}

/* Two options that exclude each other, by their getopt values. */
struct exclusive {
	int a, b;
	const char *why;
};

/*
 * exclusive_conflict - the first row of @rows[@n] whose two options were
 * both given (@seen[value] set), or NULL.
 */
static const struct exclusive *exclusive_conflict(const unsigned char *seen,
						  const struct exclusive *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (seen[(unsigned char)rows[i].a] && seen[(unsigned char)rows[i].b])
			return &rows[i];
	return NULL;
}

/* opt_name - "--name" of the option whose getopt value is @val in @longopts. */
static const char *opt_name(const struct option *longopts, int val)
{
	for (; longopts->name; longopts++)
		if (longopts->val == val)
			return longopts->name;
	return "?";
}

/*
 * refuse_conflicts - print and return -1 when two options of @rows were
 * given together; 0 otherwise.
 */
static int refuse_conflicts(const char *cmd, const unsigned char *seen, const struct option *longopts,
			    const struct exclusive *rows, size_t n)
{
	const struct exclusive *x = exclusive_conflict(seen, rows, n);

	if (!x)
		return 0;
	fprintf(stderr, "sm120 ref %s: --%s and --%s exclude each other: %s\n", cmd,
		opt_name(longopts, x->a), opt_name(longopts, x->b), x->why);
	return -1;
}

/* ---- make-model ----------------------------------------------------------- */

/* make_model_help - every option of make-model with its range and default (from synth). */
static void make_model_help(FILE *f)
{
	int tl[2], te[2], rl[2], re[2], a;
	static const char *const archs[2] = { "kimi-k2", "glm4-moe" };

	for (a = 0; a < 2; a++) {
		synth_defaults(archs[a], 0, &tl[a], &te[a]);
		synth_defaults(archs[a], 1, &rl[a], &re[a]);
	}
	fprintf(f,
		"usage: sm120 ref make-model --arch kimi-k2|glm4-moe [options] OUT\n"
		"\n"
		"Write a synthetic checkpoint into directory OUT (created if missing): config.json\n"
		"and safetensors with the real model's tensor names, dtypes, shapes, packing and\n"
		"config fields; the same bytes for the same options on every machine.\n"
		"\n"
		"  --arch kimi-k2|glm4-moe       the model family (required)\n"
		"  --quant bf16|fp8|int4|nvfp4   the weight format (default: bf16)\n"
		"  --tiny                        small dimensions, for tests (the default)\n"
		"  --real-dims                   the real model's dimensions: gigabytes, with a\n"
		"                                progress line on stderr (not with --tiny)\n"
		"  --layers N                    layers, 1..%d (default: kimi-k2 %d tiny, %d real;\n"
		"                                glm4-moe %d tiny, %d real)\n"
		"  --experts N                   routed experts, 1..%d (default: kimi-k2 %d tiny,\n"
		"                                %d real; glm4-moe %d tiny, %d real)\n"
		"  --shards N                    0..%d: 1 one file; N > 1 that many shards and an\n"
		"                                index (default: 0, one file, or one shard per\n"
		"                                layer from 2 GiB)\n"
		"  --seed S                      the weights' seed, 0..%" PRIu64 " (default: 0)\n"
		"  --k25                         Kimi K2.5's layout: text_config and language_model.\n"
		"                                names (kimi-k2 only)\n"
		"  --legacy-quant-config         NVFP4 declared in hf_quant_config.json instead of\n"
		"                                config.json (nvfp4 only)\n"
		"  -h, --help                    this text\n",
		SYNTH_MAX_LAYERS, tl[0], rl[0], tl[1], rl[1], SYNTH_MAX_EXPERTS, te[0], re[0], te[1], re[1],
		SYNTH_MAX_SHARDS, UINT64_MAX);
}

/* What make-model's progress lines need between calls. */
struct write_progress {
	const char *dir;
	int tty;		/* stderr is a terminal: one line, rewritten */
	int shown;		/* not a terminal: the last tenth shown */
};

/* progress_tenth - how many tenths of @total @done is (0..10). */
static int progress_tenth(uint64_t done, uint64_t total)
{
	return total && done < total ? (int)(done * 10 / total) : 10;
}

/*
 * on_write - make-model's progress on stderr (synth calls it only for writes
 * of PROGRESS_MIN_BYTES or more): the total first, then on a terminal one
 * line rewritten per group, elsewhere (a log) one line per tenth.
 */
static void on_write(const struct synth_progress *p, void *ctx)
{
	struct write_progress *w = ctx;
	double gb = 1e-9;
	int tenth = progress_tenth(p->done, p->total);

	if (p->done == 0) {
		fprintf(stderr, "writing %.1f GB of tensors to %s\n", p->total * gb, w->dir);
		w->shown = 0;
	} else if (w->tty) {
		fprintf(stderr, "\r  %5.1f%% %6.1f of %.1f GB  %-48.48s%s", 100.0 * p->done / p->total,
			p->done * gb, p->total * gb, p->what, p->done >= p->total ? "\n" : "");
	} else if (tenth > w->shown) {
		fprintf(stderr, "  %3d%% %6.1f of %.1f GB  (%s)\n", 10 * tenth, p->done * gb,
			p->total * gb, p->what);
		w->shown = tenth;
	}
	fflush(stderr);
}

static int cmd_make_model(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "arch", required_argument, NULL, 'a' }, { "quant", required_argument, NULL, 'q' },
		{ "layers", required_argument, NULL, 'l' }, { "tiny", no_argument, NULL, 't' },
		{ "real-dims", no_argument, NULL, 'r' }, { "seed", required_argument, NULL, 's' },
		{ "shards", required_argument, NULL, 'S' }, { "experts", required_argument, NULL, 'e' },
		{ "k25", no_argument, NULL, 'k' }, { "legacy-quant-config", no_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	static const struct exclusive excl[] = {
		{ 't', 'r', "a model is written at one size" },
	};
	const char *cmd = "make-model";
	struct synth_opts o = { .arch = NULL, .quant = "bf16" };
	struct write_progress wp = { 0 };
	struct sm_err err = { "" };
	unsigned char seen[256] = { 0 };
	int c, bad = 0;

	optind = 1;
	opterr = 0;
	while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		seen[(unsigned char)c] = 1;
		switch (c) {
		case 'a': o.arch = optarg; break;
		case 'q': o.quant = optarg; break;
		case 'l': bad = opt_int(cmd, "--layers", optarg, 1, SYNTH_MAX_LAYERS, &o.layers); break;
		case 't': o.real_dims = 0; break;
		case 'r': o.real_dims = 1; break;
		case 's': bad = opt_number(cmd, "--seed", optarg, 0, UINT64_MAX, &o.seed); break;
		case 'S': bad = opt_int(cmd, "--shards", optarg, 0, SYNTH_MAX_SHARDS, &o.shards); break;
		case 'e': bad = opt_int(cmd, "--experts", optarg, 1, SYNTH_MAX_EXPERTS, &o.experts); break;
		case 'k': o.k25_layout = 1; break;
		case 'L': o.legacy_quant_config = 1; break;
		case 'h': make_model_help(stdout); return 0;
		default: bad = bad_option(cmd, argv); break;
		}
	}
	if (bad || refuse_conflicts(cmd, seen, longopts, excl, sizeof(excl) / sizeof(excl[0])))
		return 2;
	if (!o.arch || optind != argc - 1) {
		fprintf(stderr, "sm120 ref make-model: give --arch and one output directory "
			"(sm120 ref make-model --help)\n");
		return 2;
	}
	wp.dir = argv[optind];
	wp.tty = isatty(2);
	o.progress = on_write;
	o.progress_ctx = &wp;
	o.progress_min = PROGRESS_MIN_BYTES;
	if (synth_make_model(&o, argv[optind], &err)) {
		fprintf(stderr, "sm120 ref make-model: %s\n", err.msg);
		return 1;
	}
	printf("wrote %s (%s, %s%s)\n", argv[optind], o.arch, o.quant, o.real_dims ? ", real dims" : ", tiny");
	return 0;
}

/* ---- run ------------------------------------------------------------------ */

/*
 * parse_ids - "1,2,3" into @ids (at most @max): each id a whole number in
 * 0..2^30 as num_parse reads it.  Returns the count, or -1.
 */
static int parse_ids(const char *s, int *ids, int max)
{
	char piece[32];
	int n = 0;

	for (;;) {
		size_t len = strcspn(s, ",");
		uint64_t v;

		if (n == max || len >= sizeof(piece))
			return -1;
		memcpy(piece, s, len);
		piece[len] = '\0';
		if (num_parse(piece, 0, 1 << 30, &v))
			return -1;
		ids[n++] = (int)v;
		if (!s[len])
			return n;
		s += len + 1;
	}
}

struct row_sink {
	FILE *json;
	int vocab, rows;	/* rows: one past the last position seen */
	int count;		/* rows seen (the checksum's) */
	double checksum;
	float *keep;		/* --check-cpu: every row, [rows][vocab] */
	int keep_cap;
};

static void on_row(void *p, int i, const float *logits)
{
	struct row_sink *s = p;
	int v;

	for (v = 0; v < s->vocab; v++)
		s->checksum += logits[v] * (double)((v % 7) + 1);
	if (s->json) {
		fprintf(s->json, "%s\n  [", i ? "," : "");
		for (v = 0; v < s->vocab; v++)
			fprintf(s->json, "%s%.9g", v ? ", " : "", logits[v]);
		fputc(']', s->json);
	}
	if (s->keep && i < s->keep_cap)
		memcpy(s->keep + (size_t)i * s->vocab, logits, sizeof(float) * (size_t)s->vocab);
	s->rows = i + 1;
	s->count++;
}

/* The router's choices of a --json run: ids [layer][position][top_k]. */
struct route_log {
	int *ids;
	int layers, positions, top_k;
};

static void on_routes(void *p, int layer, int pos, int n, const int *ids)
{
	struct route_log *r = p;

	if (layer >= 0 && layer < r->layers && pos >= 0 && n > 0 && pos + n <= r->positions)
		memcpy(r->ids + ((size_t)layer * r->positions + pos) * r->top_k, ids,
		       sizeof(int) * (size_t)n * r->top_k);
}

/* write_routes - ', "routes": {"<layer>": [[ids of position 0], ...], ...}' over @m's MoE layers' first @rows positions. */
static void write_routes(FILE *f, const struct route_log *r, const struct ref_model *m, int rows)
{
	int l, p, k, first = 1;

	fprintf(f, ", \"routes\": {");
	for (l = 0; l < r->layers; l++) {
		const int *L = r->ids + (size_t)l * r->positions * r->top_k;

		if (!m->layers[l].moe)
			continue;
		fprintf(f, "%s\n  \"%d\": [", first ? "" : ",", l);
		for (p = 0; p < rows; p++) {
			fprintf(f, "%s[", p ? ", " : "");
			for (k = 0; k < r->top_k; k++)
				fprintf(f, "%s%d", k ? ", " : "", L[(size_t)p * r->top_k + k]);
			fputc(']', f);
		}
		fputc(']', f);
		first = 0;
	}
	fprintf(f, "}");
}

static int show_progress;

static void on_step(int step, int steps)
{
	if (show_progress)
		fprintf(stderr, "\r  decode %d/%d%s", step, steps, step == steps ? "\n" : "");
}

/* run_backend - generate with one backend; rows go to @sink. */
static int run_backend(const struct ref_backend *b, const struct ref_model *m, const struct ref_opts *o,
		       const int *prompt, int n, int prompt_rows, int steps, int *tokens, struct row_sink *sink,
		       struct ref_timing *t, struct sm_err *err)
{
	void *ctx = b->create(m, o, err);
	int rc;

	if (!ctx)
		return -EINVAL;
	rc = ref_generate(b, ctx, m->cfg.vocab, prompt, n, prompt_rows, steps, tokens, on_row, sink, on_step, t,
			  err);
	b->destroy(ctx);
	return rc;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/*
 * compare_rows - --check-cpu's report.  Only rows computed on the same
 * tokens are compared: every row up to the one that chose the first token
 * the backends disagree on (after it the two runs decode different text,
 * different computations).  For those rows: the largest and the median
 * per-row |logit difference|; then where the tokens first differ, with the
 * CPU's own top-2 margin there (a margin below the rows' differences is a
 * near tie that the other backend's rounding may break either way, not a
 * wrong result) and how many later rows were left out.
 */
static void compare_rows(const float *ours, const float *cpu, int rows, int vocab, int n_prompt,
			 const int *tokens, const int *cpu_tokens, int steps)
{
	float maxd = 0, maxv = 0, *rowd = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
	int r, i, first = -1, same;

	for (i = 0; i < steps && first < 0; i++)
		if (tokens[i] != cpu_tokens[i])
			first = i;
	/* step i's token is the argmax of row n_prompt - 1 + i */
	same = first < 0 ? rows : n_prompt + first;
	same = same < rows ? same : rows;
	for (r = 0; r < same; r++) {
		float d = 0;

		for (i = 0; i < vocab; i++) {
			float e = fabsf(ours[(size_t)r * vocab + i] - cpu[(size_t)r * vocab + i]);

			d = e > d ? e : d;
			maxv = fabsf(cpu[(size_t)r * vocab + i]) > maxv ? fabsf(cpu[(size_t)r * vocab + i]) : maxv;
		}
		if (rowd)
			rowd[r] = d;
		maxd = d > maxd ? d : maxd;
	}
	if (rowd)
		qsort(rowd, (size_t)same, sizeof(float), cmp_float);
	printf("against the cpu backend, on the %d of %d logits rows computed from the same tokens: "
	       "max |logit difference| %.4g, median row %.4g (largest logit %.4g); tokens %s", same,
	       rows, maxd, rowd && same ? rowd[same / 2] : 0.0f, maxv, first < 0 ? "equal" : "differ");
	if (first >= 0) {
		const float *row = cpu + (size_t)(n_prompt - 1 + first) * vocab;
		int best = ref_argmax(row, vocab);
		float second = -INFINITY;

		for (i = 0; i < vocab; i++)
			if (i != best && row[i] > second)
				second = row[i];
		printf(" from step %d (cpu top-2 margin there %.4g; the %d rows after it follow "
		       "different tokens and are not compared)", first + 1, row[best] - second,
		       rows - same);
	}
	printf("\n");
	free(rowd);
}

/* online_cpus - the CPUs online here, at least 1: --threads' default. */
static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > RUN_MAX_THREADS ? RUN_MAX_THREADS : (int)n;
}

/* run_help - every option of run with its range and default. */
static void run_help(FILE *f)
{
	char backends[128];
	int i;

	ref_backend_list(backends, sizeof(backends));
	fprintf(f,
		"usage: sm120 ref run [options] DIR\n"
		"\n"
		"Load the checkpoint in DIR, run the prompt (prefill), then generate greedily\n"
		"(decode); print the tokens, a checksum of every logits row and the speed.\n"
		"\n"
		"  --backend NAME      one of: %s (default: cpu)\n"
		"  --mla naive|absorbed\n"
		"                      MLA's form (default: absorbed; the gpu backend runs\n"
		"                      absorbed only; ignored for GQA models)\n"
		"  --prompt IDS        1 to %d token ids, comma-separated (default: ",
		backends, RUN_MAX_PROMPT);
	for (i = 0; i < RUN_NPROMPT; i++)
		fprintf(f, "%s%d", i ? "," : "", run_prompt[i]);
	fprintf(f, ")\n"
		"  --steps N           tokens to generate, 1..%d (default: %d)\n"
		"  --threads N         the cpu backend's worker threads, 1..%d (default: the\n"
		"                      online CPUs, %d here)\n"
		"  --max-seq N         KV cache positions, 1..%d, at least prompt + steps - 1\n"
		"                      (default: prompt + steps)\n"
		"  --chunk N           the gpu backend's prefill step, in prompt tokens,\n"
		"                      1..%d (default: %d; a server's chunked prefill takes\n"
		"                      2048 to 16384: more rows for each MoE expert a launch)\n"
		"  --json FILE         write every logits row, the tokens and each MoE layer's\n"
		"                      experts per position (\"routes\") to FILE (default: none)\n"
		"  --check-cpu         also run the cpu backend and compare every logits row\n"
		"                      (default: off)\n"
		"  --last-logits       prefill forms the prompt's last logits row only, as a\n"
		"                      server does: its speed leaves out the LM head over every\n"
		"                      position and their copy to the host, and the checksum\n"
		"                      covers that row and the generated ones (default: off)\n"
		"  -h, --help          this text\n",
		RUN_MAX_STEPS, RUN_STEPS, RUN_MAX_THREADS, online_cpus(), RUN_MAX_SEQ, RUN_MAX_SEQ, REF_GPU_CHUNK);
}

static int cmd_run_model(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "backend", required_argument, NULL, 'b' }, { "mla", required_argument, NULL, 'm' },
		{ "prompt", required_argument, NULL, 'p' }, { "steps", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' }, { "max-seq", required_argument, NULL, 'M' },
		{ "chunk", required_argument, NULL, 'C' }, { "json", required_argument, NULL, 'j' },
		{ "check-cpu", no_argument, NULL, 'c' }, { "last-logits", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	static const struct exclusive excl[] = {
		{ 'l', 'j', "--json writes every prompt row" },
		{ 'l', 'c', "--check-cpu compares every prompt row" },
	};
	const char *backend = "cpu", *json_path = NULL;
	struct ref_opts o = { .max_seq = 0, .chunk = 0, .absorbed = 1, .threads = 0 };
	int prompt[RUN_MAX_PROMPT], n_prompt = RUN_NPROMPT, steps = RUN_STEPS, check = 0, last = 0;
	unsigned char seen[256] = { 0 };
	struct row_sink sink = { 0 };
	struct route_log routes = { 0 };
	struct ref_timing t;
	struct sm_err err = { "" };
	const struct ref_backend *b;
	struct ref_model *m;
	char desc[256];
	int *tokens = NULL, c, i, rc = 1, bad = 0;

	memcpy(prompt, run_prompt, sizeof(run_prompt));
	optind = 1;
	opterr = 0;
	while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		seen[(unsigned char)c] = 1;
		switch (c) {
		case 'b': backend = optarg; break;
		case 'm':
			bad = strcmp(optarg, "naive") && strcmp(optarg, "absorbed");
			if (bad)
				fprintf(stderr, "sm120 ref run: --mla '%s': it takes naive or absorbed\n",
					optarg);
			o.absorbed = strcmp(optarg, "absorbed") == 0;
			break;
		case 'p':
			n_prompt = parse_ids(optarg, prompt, RUN_MAX_PROMPT);
			bad = n_prompt <= 0;
			if (bad)
				fprintf(stderr, "sm120 ref run: --prompt '%s': it takes 1 to %d token ids "
					"(whole numbers) separated by commas, like 1,2,3\n", optarg,
					RUN_MAX_PROMPT);
			break;
		case 's': bad = opt_int("run", "--steps", optarg, 1, RUN_MAX_STEPS, &steps); break;
		case 't': bad = opt_int("run", "--threads", optarg, 1, RUN_MAX_THREADS, &o.threads); break;
		case 'M': bad = opt_int("run", "--max-seq", optarg, 1, RUN_MAX_SEQ, &o.max_seq); break;
		case 'C': bad = opt_int("run", "--chunk", optarg, 1, RUN_MAX_SEQ, &o.chunk); break;
		case 'j': json_path = optarg; break;
		case 'c': check = 1; break;
		case 'l': last = 1; break;
		case 'h': run_help(stdout); return 0;
		default: bad = bad_option("run", argv); break;
		}
	}
	if (bad || refuse_conflicts("run", seen, longopts, excl, sizeof(excl) / sizeof(excl[0])))
		return 2;
	if (optind != argc - 1) {
		fprintf(stderr, "sm120 ref run: give one model directory (sm120 ref run --help)\n");
		return 2;
	}
	if (o.max_seq && o.max_seq < n_prompt + steps - 1) {
		fprintf(stderr, "sm120 ref run: --max-seq %d is too small for a prompt of %d tokens and "
			"%d steps: give --max-seq %d or more, or leave it out\n", o.max_seq, n_prompt,
			steps, n_prompt + steps - 1);
		return 2;
	}
	b = ref_backend_find(backend);
	if (!b) {
		ref_backend_list(desc, sizeof(desc));
		fprintf(stderr, "sm120 ref run: no backend '%s' (built: %s)\n", backend, desc);
		return 2;
	}
	if (!o.threads)
		o.threads = online_cpus();
	if (!o.max_seq)
		o.max_seq = n_prompt + steps;
	show_progress = isatty(2);
	o.verbose = show_progress;
	m = ref_model_load(argv[optind], &err);
	if (!m) {
		fprintf(stderr, "sm120 ref run: %s\n", err.msg);
		return 1;
	}
	ref_config_describe(&m->cfg, desc, sizeof(desc));
	printf("model: %s\n  %s\n  stored: %s\n", argv[optind], desc, m->formats);
	printf("backend: %s (%s%s)\n", b->name, b->summary,
	       m->cfg.attn == REF_ATTN_MLA ? (o.absorbed ? ", MLA absorbed" : ", MLA naive") : "");
	if (b->attention)
		printf("  attention: prefill %s; decode %s\n", b->attention(&m->cfg, 0), b->attention(&m->cfg, 1));
	tokens = calloc((size_t)steps, sizeof(int));
	sink.vocab = m->cfg.vocab;
	if (check) {
		sink.keep_cap = n_prompt + steps - 1;
		sink.keep = malloc(sizeof(float) * (size_t)sink.keep_cap * sink.vocab);
	}
	if (json_path) {
		sink.json = fopen(json_path, "w");
		if (!sink.json) {
			fprintf(stderr, "sm120 ref run: cannot write %s: %s\n", json_path, strerror(errno));
			goto out;
		}
		routes.layers = m->cfg.n_layers;
		routes.positions = o.max_seq;
		routes.top_k = m->cfg.top_k > 0 ? m->cfg.top_k : 1;
		routes.ids = calloc((size_t)routes.layers * routes.positions * routes.top_k, sizeof(int));
		if (!routes.ids) {
			fprintf(stderr, "sm120 ref run: out of memory\n");
			goto out;
		}
		o.routes.fn = on_routes;
		o.routes.ctx = &routes;
		fprintf(sink.json, "{\"backend\": \"%s\", \"prompt\": [", b->name);
		for (i = 0; i < n_prompt; i++)
			fprintf(sink.json, "%s%d", i ? ", " : "", prompt[i]);
		fprintf(sink.json, "], \"logits\": [");
	}
	if (!tokens || (check && !sink.keep)) {
		fprintf(stderr, "sm120 ref run: out of memory\n");
		goto out;
	}
	if (run_backend(b, m, &o, prompt, n_prompt, !last, steps, tokens, &sink, &t, &err)) {
		fprintf(stderr, "sm120 ref run: %s backend: %s\n", b->name, err.msg);
		goto out;
	}
	printf("prompt: %d tokens; generated:", n_prompt);
	for (i = 0; i < steps; i++)
		printf(" %d", tokens[i]);
	printf("\nlogits checksum: %.6e over %d rows\n", sink.checksum, sink.count);
	printf("prefill: %.1f tok/s (%d tokens, %.3f s); decode: %.1f tok/s (%d steps, %.3f s)\n",
	       n_prompt / (t.prefill_s > 0 ? t.prefill_s : 1e-9), n_prompt, t.prefill_s,
	       steps > 1 ? (steps - 1) / (t.decode_s > 0 ? t.decode_s : 1e-9) : 0.0, steps, t.decode_s);
	if (sink.json) {
		fprintf(sink.json, "\n], \"tokens\": [");
		for (i = 0; i < steps; i++)
			fprintf(sink.json, "%s%d", i ? ", " : "", tokens[i]);
		fprintf(sink.json, "]");
		write_routes(sink.json, &routes, m, sink.rows);
		fprintf(sink.json, "}\n");
	}
	rc = 0;
	if (check) {
		struct row_sink cpu = { .vocab = sink.vocab, .keep_cap = 0 };
		int *cpu_tokens = calloc((size_t)steps, sizeof(int));
		float *ours = sink.keep;
		const struct ref_backend *cb = ref_backend_find("cpu");
		struct ref_opts co = o;

		co.routes.fn = NULL;

		cpu.keep_cap = sink.keep_cap;
		cpu.keep = malloc(sizeof(float) * (size_t)cpu.keep_cap * cpu.vocab);
		if (!cpu_tokens || !cpu.keep ||
		    run_backend(cb, m, &co, prompt, n_prompt, 1, steps, cpu_tokens, &cpu, &t, &err)) {
			fprintf(stderr, "sm120 ref run: --check-cpu: %s\n", err.msg[0] ? err.msg : "out of memory");
			rc = 1;
		} else {
			compare_rows(ours, cpu.keep, cpu.rows, cpu.vocab, n_prompt, tokens, cpu_tokens, steps);
		}
		free(cpu_tokens);
		free(cpu.keep);
	}
out:
	if (sink.json)
		fclose(sink.json);
	free(sink.keep);
	free(routes.ids);
	free(tokens);
	ref_model_free(m);
	return rc;
}

/* info_help - what info prints. */
static void info_help(FILE *f)
{
	fprintf(f,
		"usage: sm120 ref info DIR\n"
		"\n"
		"Load the checkpoint in DIR (config.json and its safetensors) and print what the\n"
		"loader found: the family and dimensions, the weight formats stored, where the\n"
		"quantization config came from.  A checkpoint that cannot be loaded is named,\n"
		"with the file or tensor at fault.\n"
		"\n"
		"  -h, --help   this text\n");
}

static int cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	struct sm_err err = { "" };
	struct ref_model *m;
	char desc[256];
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c != 'h') {
			bad_option("info", argv);
			return 2;
		}
		info_help(stdout);
		return 0;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "sm120 ref info: give one model directory (sm120 ref info --help)\n");
		return 2;
	}
	m = ref_model_load(argv[optind], &err);
	if (!m) {
		fprintf(stderr, "sm120 ref info: %s\n", err.msg);
		return 1;
	}
	ref_config_describe(&m->cfg, desc, sizeof(desc));
	printf("%s\n  stored: %s\n  quantization config: %s%s\n", desc, m->formats,
	       m->cfg.quant.source[0] ? m->cfg.quant.source : "none", m->prefix[0] ? "; names prefixed "
	       "language_model." : "");
	ref_model_free(m);
	return 0;
}

int cmd_ref(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int, char **);
	} subs[] = {
		{ "make-model", cmd_make_model }, { "run", cmd_run_model }, { "info", cmd_info },
	};
	size_t i;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].run(argc - 1, argv + 1);
	fprintf(stderr, "sm120 ref: unknown subcommand '%s'\n%s", argv[1], usage_text);
	return 2;
}
