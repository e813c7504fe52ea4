/*
 * decode_merge.h - stage 2 of split-KV decode attention: merge the splits.
 *
 * Stage 1 splits each sequence's KV range into up to max_splits parts and
 * writes, per (sequence, head, split), the softmax-normalised partial output
 * and the log-sum-exp of that split's scaled scores.  This kernel combines
 * them exactly:  out = sum_s exp(lse_s - m) * o_s / sum_s exp(lse_s - m),
 * with m = max_s lse_s, over the splits the sequence used.
 *
 * Plain C: the shim's adapters and the reference engine fill this struct and
 * pass it by value as the kernel's only parameter.
 */
#ifndef SM120_KERNELS_DECODE_MERGE_H
#define SM120_KERNELS_DECODE_MERGE_H

#include <stdint.h>

#define ATTN_MERGE_KERNEL "attn_decode_merge_bf16"
#define ATTN_MERGE_THREADS 128
#define ATTN_MERGE_MAX_SPLITS 64 /* callers check; beyond it the kernel writes NaN */

struct attn_merge_args {
	const float *partial_o;     /* (batch, heads, max_splits, dv) fp32 */
	const float *partial_lse;   /* (batch, heads, max_splits) fp32, natural log; -inf: empty */
	const int32_t *num_splits;  /* (batch) splits used by each sequence, 0..max_splits */
	void *out;                  /* (batch, heads, dv) bf16 */
	float *out_lse;             /* (batch, heads) fp32 merged log-sum-exp, or NULL */
	int32_t batch;
	int32_t heads;
	int32_t max_splits;
	int32_t dv;                 /* value head size: 128 (GQA), 512 (MLA absorbed) */
};

/* Launch: grid (batch, heads, 1), block (ATTN_MERGE_THREADS, 1, 1), no dynamic smem. */

#endif
