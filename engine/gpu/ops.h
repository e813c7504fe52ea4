/*
 * ops.h - the launch limits of ops.cu's kernels that gpu.c chooses by,
 * shared by the kernels and the engine that launches them.
 */
#ifndef SM120_ENGINE_GPU_OPS_H
#define SM120_ENGINE_GPU_OPS_H

/* eng_router_rows: the tokens a warp takes (their sums live in registers); a block row of the grid each group. */
#define ENG_ROUTER_ROWS 8
/* eng_attention: split each (token, head)'s keys over a block's 8 warps below this many pairs
 * (decode: Kimi K2's 64 heads, GLM-4.7's 12 at TP8); one warp per pair from it. */
#define ENG_ATTN_SPLIT_BELOW 1024

#endif
