/*
 * engine.c - the backend table and greedy generation (see engine.h).
 *
 * Every logits row a backend returns must be finite before argmax reads it:
 * a NaN compares false with everything, so argmax would pick token 0 and
 * generation would go on as if nothing happened.  A non-finite row stops
 * ref_generate with an error naming the backend, the position and the token.
 */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/numfmt.h"
#include "cpu/cpu.h"
#include "gpu/gpu.h"

static void *cpu_create(const struct ref_model *m, const struct ref_opts *o, struct sm_err *err)
{
	return ref_cpu_new(m, o->max_seq, o->absorbed, o->threads, &o->routes, err);
}

static int cpu_forward(void *ctx, const int *tokens, int n, int all, float *logits, struct sm_err *err)
{
	return ref_cpu_forward(ctx, tokens, n, all, logits, err);
}

static void cpu_destroy(void *ctx)
{
	ref_cpu_free(ctx);
}

static void *gpu_create(const struct ref_model *m, const struct ref_opts *o, struct sm_err *err)
{
	return ref_gpu_new(m, o->max_seq, o->chunk, o->absorbed, o->verbose, &o->routes, err);
}

static int gpu_forward(void *ctx, const int *tokens, int n, int all, float *logits, struct sm_err *err)
{
	return ref_gpu_forward(ctx, tokens, n, all, logits, err);
}

static void gpu_destroy(void *ctx)
{
	ref_gpu_free(ctx);
}

static const struct ref_backend backends[] = {
	{ "cpu", "plain C, fp32, the readable reference", cpu_create, cpu_forward, cpu_destroy, NULL },
	{ "gpu", "Driver API, bf16 like the frameworks; MoE and MLA prefill through Hopper-shaped "
		 "stand-ins of SGLang's kernels", gpu_create, gpu_forward, gpu_destroy, ref_gpu_attention },
};

#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct ref_backend *ref_backend_find(const char *name)
{
	size_t i;

	for (i = 0; i < NBACKENDS; i++)
		if (strcmp(backends[i].name, name) == 0)
			return &backends[i];
	return NULL;
}

void ref_backend_list(char *out, int len)
{
	size_t i;
	int n = 0;

	out[0] = '\0';
	for (i = 0; i < NBACKENDS && n < len; i++)
		n += snprintf(out + n, (size_t)(len - n), "%s%s", i ? ", " : "", backends[i].name);
}

int ref_argmax(const float *v, int n)
{
	int i, best = 0;

	for (i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

/*
 * take_rows - hand @n logits rows (positions @pos..) to @rows after checking
 * each is finite.  Returns 0, or -ERANGE with @err naming the backend, the
 * position and the token whose logit is not finite.
 */
static int take_rows(const struct ref_backend *b, const float *logits, int n, int vocab, int pos,
		     void (*rows)(void *, int, const float *), void *rows_ctx, struct sm_err *err)
{
	int i, bad;

	for (i = 0; i < n; i++) {
		const float *row = logits + (size_t)i * vocab;

		bad = nf_first_nonfinite(row, vocab);
		if (bad >= 0)
			return sm_err_set(err, -ERANGE, "position %d: the logit of token %d is %s, so no "
					  "next token can be chosen: lm_head.weight or model.norm.weight "
					  "holds NaN or Inf, or the %s backend's values overflow; the "
					  "checkpoint is corrupt (download or export it again)", pos + i,
					  bad, isnan(row[bad]) ? "NaN" : "Inf", b->name);
		if (rows)
			rows(rows_ctx, pos + i, row);
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ref_generate(const struct ref_backend *b, void *ctx, int vocab, const int *prompt, int n_prompt,
		 int prompt_rows, int steps, int *out_tokens, void (*rows)(void *, int, const float *),
		 void *rows_ctx, void (*progress)(int step, int steps), struct ref_timing *t,
		 struct sm_err *err)
{
	const int prefill_rows = prompt_rows && n_prompt > 1 ? n_prompt : 1;
	float *logits = malloc(sizeof(float) * (size_t)vocab * (size_t)prefill_rows);
	double t0 = now(), t1;
	int i, rc, tok;

	memset(t, 0, sizeof(*t));
	if (!logits)
		return sm_err_set(err, -ENOMEM, "out of memory for %d logits rows", n_prompt);
	if (n_prompt <= 0 || steps <= 0) {
		free(logits);
		return sm_err_set(err, -EINVAL, "need a prompt of at least one token and at least one step");
	}
	rc = b->forward(ctx, prompt, n_prompt, prompt_rows, logits, err);
	t1 = now();
	t->prefill_s = t1 - t0;
	if (!rc)
		rc = take_rows(b, logits, prefill_rows, vocab, n_prompt - prefill_rows, rows, rows_ctx, err);
	tok = rc ? 0 : ref_argmax(logits + (size_t)(prefill_rows - 1) * vocab, vocab);
	for (i = 0; !rc && i < steps; i++) {
		out_tokens[i] = tok;
		if (progress)
			progress(i + 1, steps);
		if (i + 1 == steps)
			break;
		rc = b->forward(ctx, &tok, 1, 1, logits, err);
		if (!rc)
			rc = take_rows(b, logits, 1, vocab, n_prompt + i, rows, rows_ctx, err);
		tok = rc ? 0 : ref_argmax(logits, vocab);
	}
	t->decode_s = now() - t1;
	free(logits);
	return rc;
}
