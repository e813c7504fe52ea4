/*
 * engine.h - the reference engine's front: backends behind one table, and
 * greedy generation over any of them.
 *
 * A backend turns token ids into next-token logits with its own KV cache.
 * ref_generate runs prefill on the prompt, then greedy decode, and hands
 * every logits row to the caller (or, for speed, the prompt's last row and
 * the generated ones), so that `sm120 ref run` prints, checks and dumps the
 * same rows whichever backend made them.
 */
#ifndef SM120_ENGINE_ENGINE_H
#define SM120_ENGINE_ENGINE_H

#include "model/model.h"

struct ref_opts {
	int max_seq;		/* KV cache positions */
	int chunk;		/* gpu: prompt tokens a prefill step takes (0: REF_GPU_CHUNK) */
	int absorbed;		/* MLA: absorbed (1) or naive (0) */
	int threads;		/* CPU worker threads */
	int verbose;		/* progress lines on stderr (gpu: each layer's weights to the device) */
	struct ref_route_sink routes;	/* fn NULL: none */
};

struct ref_backend {
	const char *name;
	const char *summary;
	/* create - a context for @m, or NULL with @err (e.g. no GPU: the message says so) */
	void *(*create)(const struct ref_model *m, const struct ref_opts *o, struct sm_err *err);
	/* forward - @n tokens at the next positions; logits [n][vocab], or with @all 0 the last
	 * position's only ([1][vocab]) */
	int (*forward)(void *ctx, const int *tokens, int n, int all, float *logits, struct sm_err *err);
	void (*destroy)(void *ctx);
	/* attention - the kernels that attend a prefill (@decode 0) or decode (@decode 1) step of
	 * config @c, for the "backend:" lines (static); NULL where the backend has none to name */
	const char *(*attention)(const struct ref_config *c, int decode);
};

/* ref_backend_find - the backend called @name, or NULL (ref_backend_list names them). */
const struct ref_backend *ref_backend_find(const char *name);

/* ref_backend_list - "cpu, gpu" into @out. */
void ref_backend_list(char *out, int len);

struct ref_timing {
	double prefill_s, decode_s;
};

/*
 * ref_generate - prefill @prompt[@n_prompt], then @steps greedy tokens into
 * @out_tokens.  @rows(ctx, i, logits) sees every logits row in order: rows
 * 0..n_prompt-1 of the prompt, then one per generated token fed back (the
 * last generated token is not fed back: n_prompt + steps - 1 rows); with
 * @prompt_rows 0 the prompt's last row only (row n_prompt - 1: prefill then
 * forms no logits for the other positions, what a server does).  Ties in
 * argmax pick the lower id.  @progress (may be NULL) is called after each
 * step.  Returns 0 or -errno with @err.
 */
int ref_generate(const struct ref_backend *b, void *ctx, int vocab, const int *prompt, int n_prompt,
		 int prompt_rows, int steps, int *out_tokens, void (*rows)(void *, int, const float *),
		 void *rows_ctx, void (*progress)(int step, int steps), struct ref_timing *t,
		 struct sm_err *err);

/* ref_argmax - index of the largest of @n values, the lower on ties. */
int ref_argmax(const float *v, int n);

#endif
