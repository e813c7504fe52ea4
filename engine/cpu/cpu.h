/*
 * cpu.h - the CPU backend: the readable reference forward pass in plain C.
 *
 * fp32 activations, every dot product accumulated in double, weights
 * dequantized row by row from their stored format (exact in fp32).  The
 * math is the models' as models-and-formats.md section 2 writes it:
 * RMSNorm, MLA (naive: per-head K and V cached; absorbed: the latent c_kv
 * and k_pe cached and W_UK / W_UV folded into q and the output), GQA with
 * qk-norm, biases and partial NeoX RoPE, interleaved RoPE with YaRN for
 * MLA, the noaux_tc router (sigmoid, correction bias for selection only,
 * group limit with -inf, normalise, scaling factor), routed + shared
 * SwiGLU experts, dense first layers, final norm, lm_head.
 */
#ifndef SM120_ENGINE_CPU_H
#define SM120_ENGINE_CPU_H

#include "../model/model.h"

struct ref_cpu;

/* The most worker threads the CPU backend starts for one loop. */
#define REF_CPU_MAX_THREADS 64

/*
 * ref_cpu_new - a forward-pass context for @m with a KV cache of @max_seq
 * positions; @absorbed picks MLA's absorbed form (ignored for GQA); @threads
 * worker threads (1..REF_CPU_MAX_THREADS; outside, the nearest); @routes
 * (may be NULL) sees every routing decision.  Returns NULL with @err on
 * failure.
 */
struct ref_cpu *ref_cpu_new(const struct ref_model *m, int max_seq, int absorbed, int threads,
			    const struct ref_route_sink *routes, struct sm_err *err);

/*
 * ref_cpu_forward - run @n tokens at the next @n positions (after those
 * already in the cache) and write the next-token logits of each position to
 * @logits[n][vocab], or with @all 0 of the last position only to
 * @logits[vocab] (the same bits as its row of the whole).  Returns 0, or
 * -ENOSPC with @err when the cache is full,
 * -EINVAL for a token outside the vocabulary, -ERANGE when a router score or
 * the hidden state after a norm is not finite (the message names the layer
 * and the position).  On an error the cache position does not advance.
 */
int ref_cpu_forward(struct ref_cpu *r, const int *tokens, int n, int all, float *logits, struct sm_err *err);

/* ref_cpu_free - NULL is allowed. */
void ref_cpu_free(struct ref_cpu *r);

#endif
