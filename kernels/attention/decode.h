/*
 * decode.h - stage 1 of split-KV decode attention, in the partial-output
 * format of SGLang's and vLLM's own stage-2 kernels.
 *
 * One query token per sequence attends to that sequence's cached keys and
 * values.  The sequence's tokens are cut into splits; for every (sequence,
 * q head, split) whose token range is not empty the kernel writes
 *   out[d] = sum_n p_n v_n[d] / sum_n p_n     (d < dv, fp32)
 *   lse    = ln(sum_n exp(s_n))               (natural log, fp32)
 * with s_n = the scaled, optionally soft-capped score of token n and
 * p_n = exp(s_n - max s).  Empty splits are not written at all: both
 * frameworks' stage 2 skip them with the same split formula, and SGLang's
 * context-parallel path pre-fills the lse with -inf and relies on that.
 *
 * The two schemes, as the frameworks define them (ATTN_DECODE_*):
 *   SGLANG: sequence b owns kv_indices[kv_indptr[b] .. kv_indptr[b+1]) (token
 *     slots), uses num_splits[b] splits of
 *       len = cdiv(cdiv(seq_len, num_splits[b]), 32) * 32
 *     tokens (split s = [s*len, min((s+1)*len, seq_len))), and stores the lse
 *     in its own buffer at index (b*out_stride_b + h*out_stride_h +
 *     s*out_stride_s) / dv, the exact expression of SGLang's kernels.
 *     k_scale is folded into sm_scale and v_scale is applied by SGLang's
 *     stage 2: k_scale / v_scale pointers stay NULL.
 *   VLLM: token pos of sequence b lies in page block_table[b][pos / page_size]
 *     at row pos % page_size, seq_len = seq_lens[b]; every sequence uses
 *     gridDim.y splits of len = cdiv(seq_len, gridDim.y); the lse is stored
 *     in out itself, at channel dv (out rows are dv + 1 floats).  With an FP8
 *     cache, k_scale and v_scale point at vLLM's device scalars; stage 2
 *     applies no scale.
 *
 * Plain C: the shim's adapters and the reference engine fill this struct and
 * pass it by value as the kernel's only parameter.
 */
#ifndef SM120_KERNELS_DECODE_H
#define SM120_KERNELS_DECODE_H

#include <stdint.h>

/* Kernels: K/V element type x head sizes (dk/dv). */
#define ATTN_DECODE_GQA128_BF16 "attn_decode_gqa128_bf16" /* dk = dv = 128, bf16 cache */
#define ATTN_DECODE_GQA128_FP8 "attn_decode_gqa128_fp8"   /* dk = dv = 128, e4m3 cache */
#define ATTN_DECODE_MLA_BF16 "attn_decode_mla_bf16"       /* dk 576, dv 512, V = K[..., :512] */
#define ATTN_DECODE_MLA_FP8 "attn_decode_mla_fp8"

#define ATTN_DECODE_THREADS 256        /* 8 warps (two groups of 4); was 128 */
#define ATTN_DECODE_HEADS_PER_BLOCK 16 /* q heads of one kv head per block */

/* Dynamic shared memory of each kernel (bytes; all over 48 KiB need
 * cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)).
 * MLA FP8 is exactly SM120's per-block opt-in limit less the driver's
 * reserved 1 KiB (101376 - 1024). */
#define ATTN_DECODE_GQA128_BF16_SMEM 81920
#define ATTN_DECODE_GQA128_FP8_SMEM 49152
#define ATTN_DECODE_MLA_BF16_SMEM 97280
#define ATTN_DECODE_MLA_FP8_SMEM 100352

/*
 * The variant table: X(name, dk, dv, fp8, mla, smem) for every kernel, with
 * its (unquoted) name, head sizes, cache element type (fp8 1: e4m3, 0:
 * bf16), whether V is K's head (mla 1) and its dynamic shared memory.
 * decode.cu defines the kernels from it; C code can build tables from it,
 * the name as #name.
 */
#define ATTN_DECODE_KERNELS(X)                                                  \
	X(attn_decode_gqa128_bf16, 128, 128, 0, 0, ATTN_DECODE_GQA128_BF16_SMEM) \
	X(attn_decode_gqa128_fp8, 128, 128, 1, 0, ATTN_DECODE_GQA128_FP8_SMEM)   \
	X(attn_decode_mla_bf16, 576, 512, 0, 1, ATTN_DECODE_MLA_BF16_SMEM)       \
	X(attn_decode_mla_fp8, 576, 512, 1, 1, ATTN_DECODE_MLA_FP8_SMEM)

enum attn_decode_scheme {
	ATTN_DECODE_SGLANG = 0,
	ATTN_DECODE_VLLM = 1,
};

/*
 * Element strides (int64, in elements of the tensor's own type).  Token t of
 * kv head kvh starts at K + page*k_stride_page + row*k_stride_tok +
 * kvh*k_stride_head, with (page, row) = (slot / page_size, slot % page_size)
 * for SGLANG (page_size 1: k_stride_page = SGLang's stride_buf_kbs) and
 * (block_table[b][pos / page_size], pos % page_size) for VLLM (vLLM >= 2026-06
 * passes stride_buf_kpbs as the page stride; before, pages were contiguous:
 * k_stride_page = page_size * stride_buf_kbs).
 *
 * Contracts (a launch that breaks the ones marked NaN writes NaN into every
 * slot its blocks own, instead of plausible numbers):
 *   - q: bf16, last dimension contiguous, dk elements per head.
 *   - k, v: 16-byte aligned; every stride * element size a multiple of 16 (NaN).
 *     The MLA kernels read V from K's first 512 channels: v must equal k and
 *     the v strides the k strides (NaN), as SGLang and vLLM pass them.
 *   - out: fp32, last dimension contiguous; lse: SGLANG only, NULL for VLLM (NaN).
 *   - kv_group = q_heads / kv_heads >= 1, q_heads a multiple of it (NaN).
 *   - SGLANG: 1 <= num_splits[b] <= gridDim.y when the sequence is not empty
 *     (NaN for that sequence; SGLang gives empty sequences 0 splits);
 *     kv_indptr non-decreasing.  VLLM: seq_lens[b] >= 0 (NaN), every page of
 *     the first seq_len tokens present in block_table.
 *   - k_scale, v_scale: read by the FP8 kernels only (the bf16 kernels ignore
 *     them, as vLLM does for a bf16 cache); NULL means 1.  vLLM's MLA path
 *     dequantises V with k_scale (V is K's memory): pass k_scale for both.
 */
struct attn_decode_args {
	const void *q;                /* (batch, q_heads, dk) bf16 */
	const void *k;                /* key cache, bf16 or e4m3 (by kernel) */
	const void *v;                /* value cache; MLA: == k */
	float *out;                   /* (batch, q_heads, splits, dv [+1 for VLLM]) fp32 */
	float *lse;                   /* SGLANG: partial lse (see above); VLLM: NULL */
	const int32_t *kv_indptr;     /* SGLANG: (batch + 1) */
	const int64_t *kv_indices;    /* SGLANG: token slots */
	const int32_t *num_splits;    /* SGLANG: (batch) splits per sequence */
	const int32_t *block_table;   /* VLLM: (batch, block_table_stride) page numbers */
	const int32_t *seq_lens;      /* VLLM: (batch) */
	const float *k_scale;         /* FP8 kernels: device scalar multiplying K, or NULL */
	const float *v_scale;         /* FP8 kernels: device scalar multiplying V, or NULL */
	int64_t q_stride_b, q_stride_h;
	int64_t k_stride_page, k_stride_tok, k_stride_head;
	int64_t v_stride_page, v_stride_tok, v_stride_head;
	int64_t out_stride_b, out_stride_h, out_stride_s;
	int64_t block_table_stride;
	float sm_scale;               /* score = (q . k) * sm_scale [* *k_scale] */
	float logit_cap;              /* > 0: score = cap * tanh(score / cap); 0: off */
	int32_t xai_temperature_len;  /* SGLANG (Grok): > 0 scales scores by
				       * log2(seq_len - 1) / log2(len) when seq_len - 1 > len; <= 0: off */
	int32_t scheme;               /* enum attn_decode_scheme */
	int32_t batch;
	int32_t q_heads;
	int32_t kv_group;             /* q heads per kv head (MLA: q_heads) */
	int32_t page_size;            /* tokens per page, >= 1 (SGLang: usually 1) */
};

/*
 * Launch (every kernel): block (ATTN_DECODE_THREADS, 1, 1) = 256 threads,
 *   grid (kv_heads * cdiv(kv_group, ATTN_DECODE_HEADS_PER_BLOCK), splits, batch)
 * with kv_heads = q_heads / kv_group (1 for MLA) and splits = SGLang's
 * max_kv_splits or vLLM's NUM_KV_SPLITS, dynamic shared memory the kernel's
 * ATTN_DECODE_*_SMEM.  Block x handles q heads kvh*kv_group + c*16 ...
 * (c = x % cdiv(kv_group, 16)), so the blocks of one kv head that share K/V
 * are adjacent and hit L2 for each other.  Only the block size changed from
 * the 128-thread version (grid, arguments and shared memory macros are used
 * as before); a launch with another block size is an impossible launch
 * (NaN, as in the contracts above).
 */

#endif
