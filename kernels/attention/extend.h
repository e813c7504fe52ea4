/*
 * extend.h - extend attention (prefill with a cached prefix): the semantics
 * of SGLang's Triton `_fwd_kernel` (extend_attention.py), on tiles that fit
 * SM120's 101376 bytes of shared memory per block.
 *
 * Per sequence b the new ("extend") tokens are rows qo_indptr[b] ..
 * qo_indptr[b+1]-1 of q, k_ext, v_ext and o (with ATTN_EXTEND_START_LEN,
 * qo_indptr[b] .. qo_indptr[b]+qo_len[b]-1: SGLang's context_attention_fwd,
 * an extend without a prefix, is ATTN_EXTEND_START_LEN | SKIP_PREFIX); the
 * cached prefix is the kv_indptr[b+1]-kv_indptr[b] token slots
 * kv_indices[kv_indptr[b] + j] of k_buf and v_buf (page size 1).  Query i
 * of sequence b, q head h, attends to every prefix key and to extend keys
 * 0..i (ATTN_EXTEND_CAUSAL) or to all of them, through kv head h /
 * kv_group_num:
 *
 *   s_j = sm_scale * k_scale * (q . kbuf_j)     prefix keys
 *   s_j = sm_scale * (q . kext_j)               extend keys
 *   s_j = logit_cap * tanh(s_j / logit_cap)     only if logit_cap > 0
 *   o   = sum_j e^(s_j - m) w_j / sum_j e^(s_j - m),  w_j = v_scale * vbuf_j (prefix)
 *                                                     w_j = vext_j (extend)
 *   lse = m + log(sum_j e^(s_j - m))            natural log, if lse != NULL
 *
 * exactly as the 2026-03 and later kernels apply k_scale and v_scale (after
 * the dot products, prefix part only).  The prefix may be bf16 or FP8 E4M3
 * (per-tensor scales); q, k_ext, v_ext and o are bf16.
 *
 * Precision: scores and sums in fp32, p rounded to bf16 for P.V like
 * SGLang's p.to(v.dtype) with a bf16 cache.  With an FP8 cache SGLang also
 * rounds q and p to E4M3 for the prefix dot products; these kernels convert
 * the cache to bf16 (exactly) and keep q and p in bf16, so their results are
 * closer to exact than SGLang's and differ from them by SGLang's FP8 error.
 *
 * Not supported (an adapter must refuse launches that use them): custom masks
 * (USE_CUSTOM_MASK, spec-decode verify), sliding windows, attention sinks,
 * xai_temperature_len > 0, SCORE_MOD / aux tensors, PAGE_SIZE > 1, the HIP
 * options (STORE_TRANSPOSE, compact tile grid), and the deterministic-mode
 * kernel `_fwd_kernel_unified`.  Supported beyond the minimum: non-causal,
 * logit_cap, the LSE output and SKIP_PREFIX / SKIP_EXTEND of SGLang main.
 *
 * Plain C: the shim's adapters and the tests fill this struct and pass it by
 * value as the kernel's only parameter.  Strides are in elements.
 */
#ifndef SM120_KERNELS_EXTEND_H
#define SM120_KERNELS_EXTEND_H

#include <stdint.h>

/* One kernel per head-size pair and prefix dtype. */
#define ATTN_EXTEND_MLA576_BF16 "attn_extend_mla576_bf16" /* lq 576, lv 512: MLA absorbed */
#define ATTN_EXTEND_MLA576_FP8 "attn_extend_mla576_fp8"
#define ATTN_EXTEND_192_BF16 "attn_extend_192_bf16"       /* lq 192, lv 128: MLA without absorption */
#define ATTN_EXTEND_192_FP8 "attn_extend_192_fp8"
#define ATTN_EXTEND_128_BF16 "attn_extend_128_bf16"       /* lq 128, lv 128: GQA / MHA */
#define ATTN_EXTEND_128_FP8 "attn_extend_128_fp8"
#define ATTN_EXTEND_256_BF16 "attn_extend_256_bf16"       /* lq 256, lv 256: SGLang context_attention_fwd */

/*
 * Launch (every kernel): block (ATTN_EXTEND_THREADS, 1, 1), grid
 *   (ceil(max_extend_len * kv_group_num / ROWS), kv_heads, batch)
 * and the dynamic shared memory below.  A block computes ROWS consecutive
 * "packed rows" of one sequence and kv head; packed row r is extend token
 * r / kv_group_num of q head kv_head * kv_group_num + r % kv_group_num, so
 * all q heads of a kv head share one pass over the keys.  max_extend_len may
 * be any upper bound (Triton's grid z * BLOCK_M): blocks past a sequence's
 * rows return at once.  A grid too small for some sequence writes NaN to the
 * rows no block covers.
 */
#define ATTN_EXTEND_THREADS 256
#define ATTN_EXTEND_ROWS_MLA576 64
#define ATTN_EXTEND_ROWS_192 128
#define ATTN_EXTEND_ROWS_128 128
#define ATTN_EXTEND_ROWS_256 64
#define ATTN_EXTEND_SMEM_MLA576 100096 /* both dtypes; static shared memory is 0 */
#define ATTN_EXTEND_SMEM_192 66560
#define ATTN_EXTEND_SMEM_128 50176
#define ATTN_EXTEND_SMEM_256 59136 /* the mla kernel's layout with a 64 x 256 q tile */

/*
 * The variant table: X(name, lq, lv, fp8, rows, smem) for every kernel, with
 * its (unquoted) name, head sizes, prefix cache element type (fp8 1: e4m3,
 * 0: bf16), packed rows per block and dynamic shared memory.  extend.cu
 * defines the kernels from it; C code can build tables from it, the name as
 * #name.
 */
#define ATTN_EXTEND_KERNELS(X)                                                                  \
	X(attn_extend_mla576_bf16, 576, 512, 0, ATTN_EXTEND_ROWS_MLA576, ATTN_EXTEND_SMEM_MLA576) \
	X(attn_extend_mla576_fp8, 576, 512, 1, ATTN_EXTEND_ROWS_MLA576, ATTN_EXTEND_SMEM_MLA576)  \
	X(attn_extend_192_bf16, 192, 128, 0, ATTN_EXTEND_ROWS_192, ATTN_EXTEND_SMEM_192)          \
	X(attn_extend_192_fp8, 192, 128, 1, ATTN_EXTEND_ROWS_192, ATTN_EXTEND_SMEM_192)           \
	X(attn_extend_128_bf16, 128, 128, 0, ATTN_EXTEND_ROWS_128, ATTN_EXTEND_SMEM_128)          \
	X(attn_extend_128_fp8, 128, 128, 1, ATTN_EXTEND_ROWS_128, ATTN_EXTEND_SMEM_128)          \
	X(attn_extend_256_bf16, 256, 256, 0, ATTN_EXTEND_ROWS_256, ATTN_EXTEND_SMEM_256)

/* flags */
#define ATTN_EXTEND_CAUSAL 1u      /* IS_CAUSAL: query i sees extend keys 0..i */
#define ATTN_EXTEND_SKIP_PREFIX 2u /* SKIP_PREFIX (SGLang main): ignore the prefix; kv_indptr,
				      kv_indices, k_buf and v_buf are not read (may be NULL) */
#define ATTN_EXTEND_SKIP_EXTEND 4u /* SKIP_EXTEND (SGLang main): ignore the extend keys */
#define ATTN_EXTEND_START_LEN 8u   /* rows of sequence b: qo_indptr[b] .. qo_indptr[b] +
				      qo_len[b] - 1 (SGLang context_attention_fwd's b_start_loc,
				      b_seq_len); none when qo_len[b] <= 0 */
#define ATTN_EXTEND_QO_I64 16u    /* qo_indptr holds int64 (SGLang's Triton backend from 0.5.10 on
				      builds it so), else int32 */
#define ATTN_EXTEND_FLAGS 31u      /* every flag above */

/*
 * Contracts, checked by the kernel; a violation makes the block write NaN to
 * o (and lse) for its rows instead of plausible numbers:
 *  - lq, lv equal the kernel's head sizes; kv_group_num >= 1; flags known;
 *    qo_len not NULL with ATTN_EXTEND_START_LEN (else the launch writes nothing);
 *  - q, k_ext, v_ext, o, k_buf, v_buf 16-byte aligned, their token and head
 *    strides multiples of 8 elements (k_buf, v_buf: 16 elements for FP8);
 *  - lse NULL or 4-byte aligned;
 *  - sm_scale, k_scale, v_scale finite; logit_cap finite and >= 0;
 *  - 0 <= qo_indptr[b] <= qo_indptr[b+1] (with ATTN_EXTEND_START_LEN:
 *    qo_indptr[b] >= 0 and qo_indptr[b] + qo_len[b] < 2^31), same for
 *    kv_indptr, and a sequence's extend tokens * kv_group_num < 2^31.
 * Not checkable, the caller's duty: grid.z == batch, grid.y == kv heads,
 * kv_indices[j] a valid slot of k_buf/v_buf.
 * v_buf may alias k_buf (MLA: v_buf = k_buf[..., :512]); o must not overlap
 * any input.  Rows of o outside the batch's tokens are never written.
 */
struct attn_extend_args {
	const void *q;              /* (tokens, q_heads, lq) bf16 */
	const void *k_ext;          /* (tokens, kv_heads, lq) bf16: keys of the extend tokens */
	const void *v_ext;          /* (tokens, kv_heads, lv) bf16 */
	void *o;                    /* (tokens, q_heads, lv) bf16 */
	float *lse;                 /* (tokens, q_heads) fp32, natural log, or NULL */
	const void *k_buf;          /* (slots, kv_heads, lq) bf16 or FP8 E4M3: prefix keys */
	const void *v_buf;          /* (slots, kv_heads, lv) same dtype as k_buf */
	const void *qo_indptr;      /* (batch + 1) first extend row of each sequence: int32, or
				       int64 with ATTN_EXTEND_QO_I64 */
	const int32_t *kv_indptr;   /* (batch + 1) first kv_indices entry of each sequence */
	const int64_t *kv_indices;  /* prefix token slots, page size 1 */
	int64_t q_tok, q_head;      /* strides of q (stride_qbs, stride_qh) */
	int64_t kx_tok, kx_head;    /* k_ext (stride_kbs, stride_kh) */
	int64_t vx_tok, vx_head;    /* v_ext (stride_vbs, stride_vh) */
	int64_t o_tok, o_head;      /* o (stride_obs, stride_oh) */
	int64_t kb_slot, kb_head;   /* k_buf (stride_buf_kbs, stride_buf_kh) */
	int64_t vb_slot, vb_head;   /* v_buf (stride_buf_vbs, stride_buf_vh) */
	int64_t lse_tok, lse_head;  /* lse (stride_lse_bs, stride_lse_h); unused if lse is NULL */
	float sm_scale;
	float k_scale;              /* prefix keys only; 1.0 without a quantized cache */
	float v_scale;              /* prefix values only */
	float logit_cap;            /* 0: off */
	int32_t batch;              /* sequences; blocks with blockIdx.z >= batch return */
	int32_t kv_group_num;       /* q_heads / kv_heads */
	int32_t lq, lv;             /* head sizes, must match the kernel */
	uint32_t flags;             /* ATTN_EXTEND_* */
	int32_t reserved;           /* 0 */
	const int32_t *qo_len;      /* (batch) extend tokens per sequence with ATTN_EXTEND_START_LEN,
				       else unused */
};

#endif
