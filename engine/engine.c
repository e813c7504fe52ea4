/* engine.c - the backend table and greedy generation (see engine.h). */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"

static void *cpu_create(const struct ref_model *m, const struct ref_opts *o, struct sm_err *err)
{
	return ref_cpu_new(m, o->max_seq, o->absorbed, o->threads, &o->routes, err);
}

static int cpu_forward(void *ctx, const int *tokens, int n, float *logits, struct sm_err *err)
{
	return ref_cpu_forward(ctx, tokens, n, logits, err);
}

static void cpu_destroy(void *ctx)
{
	ref_cpu_free(ctx);
}

static void *gpu_create(const struct ref_model *m, const struct ref_opts *o, struct sm_err *err)
{
	return ref_gpu_new(m, o->max_seq, o->absorbed, o->verbose, &o->routes, err);
}

static int gpu_forward(void *ctx, const int *tokens, int n, float *logits, struct sm_err *err)
{
	return ref_gpu_forward(ctx, tokens, n, logits, err);
}

static void gpu_destroy(void *ctx)
{
	ref_gpu_free(ctx);
}

static const struct ref_backend backends[] = {
	{ "cpu", "plain C, fp32, the readable reference", cpu_create, cpu_forward, cpu_destroy },
	{ "gpu", "Driver API, bf16 like the frameworks; MoE and MLA prefill through Hopper-shaped "
		 "stand-ins of SGLang's kernels", gpu_create, gpu_forward, gpu_destroy },
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

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ref_generate(const struct ref_backend *b, void *ctx, int vocab, const int *prompt, int n_prompt,
		 int steps, int *out_tokens, void (*rows)(void *, int, const float *), void *rows_ctx,
		 void (*progress)(int step, int steps), struct ref_timing *t, struct sm_err *err)
{
	float *logits = malloc(sizeof(float) * (size_t)vocab * (size_t)(n_prompt > 1 ? n_prompt : 1));
	double t0 = now(), t1;
	int i, rc, tok;

	memset(t, 0, sizeof(*t));
	if (!logits)
		return sm_err_set(err, -ENOMEM, "out of memory for %d logits rows", n_prompt);
	if (n_prompt <= 0 || steps <= 0) {
		free(logits);
		return sm_err_set(err, -EINVAL, "need a prompt of at least one token and at least one step");
	}
	rc = b->forward(ctx, prompt, n_prompt, logits, err);
	t1 = now();
	t->prefill_s = t1 - t0;
	for (i = 0; !rc && i < n_prompt; i++)
		if (rows)
			rows(rows_ctx, i, logits + (size_t)i * vocab);
	tok = ref_argmax(logits + (size_t)(n_prompt - 1) * vocab, vocab);
	for (i = 0; !rc && i < steps; i++) {
		out_tokens[i] = tok;
		if (progress)
			progress(i + 1, steps);
		if (i + 1 == steps)
			break;
		rc = b->forward(ctx, &tok, 1, logits, err);
		if (!rc && rows)
			rows(rows_ctx, n_prompt + i, logits);
		tok = ref_argmax(logits, vocab);
	}
	t->decode_s = now() - t1;
	free(logits);
	return rc;
}
