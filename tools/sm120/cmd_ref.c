/*
 * cmd_ref.c - `sm120 ref`: the reference engine.
 *
 *   sm120 ref make-model --arch kimi-k2|glm4-moe --quant bf16|fp8|int4|nvfp4
 *                        [--layers N] [--tiny|--real-dims] [--seed S] [--shards N]
 *                        [--experts N] [--k25] [--legacy-quant-config] OUT
 *   sm120 ref run [--backend B] [--mla naive|absorbed] [--prompt IDS] [--steps N]
 *                 [--threads N] [--max-seq N] [--json FILE] [--check-cpu] DIR
 *   sm120 ref info DIR
 *
 * run prints the generated tokens, a checksum of every logits row and the
 * speed of prefill and decode; --json dumps the rows, the tokens and each
 * MoE layer's expert choice per position ("routes"); --check-cpu runs the
 * CPU backend too and prints the largest difference of the logits.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "../../engine/synth/synth.h"
#include "commands.h"

static const char *usage_text =
	"usage: sm120 ref make-model --arch kimi-k2|glm4-moe --quant bf16|fp8|int4|nvfp4\n"
	"                            [--layers N] [--tiny|--real-dims] [--seed S] [--shards N]\n"
	"                            [--experts N] [--k25] [--legacy-quant-config] OUT\n"
	"       sm120 ref run [--backend cpu|gpu] [--mla naive|absorbed] [--prompt 1,2,3]\n"
	"                     [--steps N] [--threads N] [--max-seq N] [--json FILE] [--check-cpu] DIR\n"
	"       sm120 ref info DIR\n";

static void make_progress(const char *what, double fraction)
{
	fprintf(stderr, "\r  writing %-48.48s %5.1f%%", what, 100.0 * fraction);
	if (fraction >= 1.0)
		fputc('\n', stderr);
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
	struct synth_opts o = { .arch = NULL, .quant = "bf16" };
	struct sm_err err = { "" };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a': o.arch = optarg; break;
		case 'q': o.quant = optarg; break;
		case 'l': o.layers = atoi(optarg); break;
		case 't': o.real_dims = 0; break;
		case 'r': o.real_dims = 1; break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'S': o.shards = atoi(optarg); break;
		case 'e': o.experts = atoi(optarg); break;
		case 'k': o.k25_layout = 1; break;
		case 'L': o.legacy_quant_config = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (!o.arch || optind != argc - 1) {
		fprintf(stderr, "sm120 ref make-model: give --arch and one output directory\n%s", usage_text);
		return 2;
	}
	if (isatty(2))
		o.progress = make_progress;
	if (synth_make_model(&o, argv[optind], &err)) {
		fprintf(stderr, "sm120 ref make-model: %s\n", err.msg);
		return 1;
	}
	printf("wrote %s (%s, %s%s)\n", argv[optind], o.arch, o.quant, o.real_dims ? ", real dims" : ", tiny");
	return 0;
}

/* parse_ids - "1,2,3" into @ids (at most @max); returns the count or -1. */
static int parse_ids(const char *s, int *ids, int max)
{
	int n = 0;

	while (*s && n < max) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v > 1 << 30)
			return -1;
		ids[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return *s ? -1 : n;
}

struct row_sink {
	FILE *json;
	int vocab, rows;
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
		       const int *prompt, int n, int steps, int *tokens, struct row_sink *sink,
		       struct ref_timing *t, struct sm_err *err)
{
	void *ctx = b->create(m, o, err);
	int rc;

	if (!ctx)
		return -EINVAL;
	rc = ref_generate(b, ctx, m->cfg.vocab, prompt, n, steps, tokens, on_row, sink, on_step, t, err);
	b->destroy(ctx);
	return rc;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/*
 * compare_rows - --check-cpu's report: the largest and the median per-row
 * |logit difference| against the CPU backend, and whether the greedy
 * tokens agree; where they first differ, the CPU's own top-2 margin at that
 * step (a margin below the rows' differences is a near-tie that the other
 * backend's rounding may break either way, not a wrong result).
 */
static void compare_rows(const float *ours, const float *cpu, int rows, int vocab, int n_prompt,
			 const int *tokens, const int *cpu_tokens, int steps)
{
	float maxd = 0, maxv = 0, *rowd = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
	int r, i, first = -1;

	for (r = 0; r < rows; r++) {
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
	for (i = 0; i < steps && first < 0; i++)
		if (tokens[i] != cpu_tokens[i])
			first = i;
	if (rowd)
		qsort(rowd, (size_t)rows, sizeof(float), cmp_float);
	printf("against the cpu backend: max |logit difference| %.4g, median row %.4g (largest logit %.4g); "
	       "tokens %s", maxd, rowd && rows ? rowd[rows / 2] : 0.0f, maxv, first < 0 ? "equal" : "differ");
	if (first >= 0) {
		/* step i's token is the argmax of row n_prompt - 1 + i */
		const float *row = cpu + (size_t)(n_prompt - 1 + first) * vocab;
		int best = ref_argmax(row, vocab);
		float second = -INFINITY;

		for (i = 0; i < vocab; i++)
			if (i != best && row[i] > second)
				second = row[i];
		printf(" from step %d (cpu top-2 margin there %.4g)", first + 1, row[best] - second);
	}
	printf("\n");
	free(rowd);
}

static int cmd_run_model(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "backend", required_argument, NULL, 'b' }, { "mla", required_argument, NULL, 'm' },
		{ "prompt", required_argument, NULL, 'p' }, { "steps", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' }, { "max-seq", required_argument, NULL, 'M' },
		{ "json", required_argument, NULL, 'j' }, { "check-cpu", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	const char *backend = "cpu", *json_path = NULL;
	struct ref_opts o = { .max_seq = 0, .absorbed = 1, .threads = 0 };
	int prompt[4096] = { 1, 2, 3, 5, 8, 13, 21 }, n_prompt = 7, steps = 16, check = 0;
	struct row_sink sink = { 0 };
	struct route_log routes = { 0 };
	struct ref_timing t;
	struct sm_err err = { "" };
	const struct ref_backend *b;
	struct ref_model *m;
	char desc[256];
	int *tokens = NULL, c, i, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': backend = optarg; break;
		case 'm':
			if (strcmp(optarg, "naive") && strcmp(optarg, "absorbed")) {
				fprintf(stderr, "sm120 ref run: --mla takes naive or absorbed\n");
				return 2;
			}
			o.absorbed = strcmp(optarg, "absorbed") == 0;
			break;
		case 'p':
			n_prompt = parse_ids(optarg, prompt, 4096);
			if (n_prompt <= 0) {
				fprintf(stderr, "sm120 ref run: --prompt takes token ids like 1,2,3\n");
				return 2;
			}
			break;
		case 's': steps = atoi(optarg); break;
		case 't': o.threads = atoi(optarg); break;
		case 'M': o.max_seq = atoi(optarg); break;
		case 'j': json_path = optarg; break;
		case 'c': check = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (optind != argc - 1 || steps <= 0) {
		fprintf(stderr, "sm120 ref run: give one model directory and --steps >= 1\n%s", usage_text);
		return 2;
	}
	b = ref_backend_find(backend);
	if (!b) {
		ref_backend_list(desc, sizeof(desc));
		fprintf(stderr, "sm120 ref run: no backend '%s' (built: %s)\n", backend, desc);
		return 2;
	}
	if (o.threads <= 0)
		o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN) > 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
	if (o.max_seq <= 0)
		o.max_seq = n_prompt + steps;
	show_progress = isatty(2);
	m = ref_model_load(argv[optind], &err);
	if (!m) {
		fprintf(stderr, "sm120 ref run: %s\n", err.msg);
		return 1;
	}
	ref_config_describe(&m->cfg, desc, sizeof(desc));
	printf("model: %s\n  %s\n  stored: %s\n", argv[optind], desc, m->formats);
	printf("backend: %s (%s%s)\n", b->name, b->summary,
	       m->cfg.attn == REF_ATTN_MLA ? (o.absorbed ? ", MLA absorbed" : ", MLA naive") : "");
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
	if (run_backend(b, m, &o, prompt, n_prompt, steps, tokens, &sink, &t, &err)) {
		fprintf(stderr, "sm120 ref run: %s backend: %s\n", b->name, err.msg);
		goto out;
	}
	printf("prompt: %d tokens; generated:", n_prompt);
	for (i = 0; i < steps; i++)
		printf(" %d", tokens[i]);
	printf("\nlogits checksum: %.6e over %d rows\n", sink.checksum, sink.rows);
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
		    run_backend(cb, m, &co, prompt, n_prompt, steps, cpu_tokens, &cpu, &t, &err)) {
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

static int cmd_info(int argc, char **argv)
{
	struct sm_err err = { "" };
	struct ref_model *m;
	char desc[256];

	if (argc != 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	m = ref_model_load(argv[1], &err);
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
