/*
 * weights.h - one Linear layer's weight as the checkpoint stores it, and its
 * rows dequantized to float.
 *
 * The format is decided per tensor, from what is on disk (the quantization
 * config lists exceptions by pattern, and every release writes them
 * differently), then checked against the config:
 *   <p>.weight_packed + weight_scale + weight_shape  compressed-tensors INT4
 *   <p>.weight U8 + weight_scale F8_E4M3 + weight_scale_2   ModelOpt NVFP4
 *   <p>.weight F8_E4M3 + weight_scale_inv             DeepSeek FP8 block
 *   <p>.weight F8_E4M3 + weight_scale [out,1] or [1]  compressed-tensors FP8
 *   <p>.weight BF16 / F16 / F32                       plain
 * Dequantization (models-and-formats.md section 6):
 *   FP8 block   w * scale_inv[r / bn][c / bk]
 *   FP8 channel w * scale[r] (or the one scale)
 *   INT4        (nibble c%8 of word c/8, minus 8) * bf16 scale[r][c / group]
 *   NVFP4       e2m1(nibble; low = even c) * e4m3 scale[r][c / 16] * scale_2
 */
#ifndef SM120_ENGINE_WEIGHTS_H
#define SM120_ENGINE_WEIGHTS_H

#include <stdint.h>

#include "../st/safetensors.h"
#include "config.h"

enum ref_wfmt { REF_W_PLAIN, REF_W_FP8_BLOCK, REF_W_FP8_CHANNEL, REF_W_INT4, REF_W_NVFP4 };

struct ref_linear {
	enum ref_wfmt fmt;
	int out, in;
	const struct st_tensor *w;	/* weight, or weight_packed */
	const struct st_tensor *scale;	/* scale_inv / weight_scale, or NULL */
	int bn, bk;			/* FP8 block sizes; INT4 / NVFP4 group in bk */
	float scale2;			/* NVFP4 weight_scale_2 */
};

/*
 * ref_linear_bind - find the weight of Linear @prefix (e.g.
 * "model.layers.3.mlp.experts.7.down_proj") in @s, decide its format, and
 * check its shapes: [@out, @in] (-1: take the file's).  Returns 0, or -errno
 * with @err naming the tensor, its file and what does not fit.
 */
int ref_linear_bind(struct ref_linear *l, const struct st_set *s, const struct ref_config *c,
		    const char *prefix, int out, int in, struct sm_err *err);

/* ref_linear_row - dequantize row @r into @dst[in] (exactly, in fp32). */
void ref_linear_row(const struct ref_linear *l, int r, float *dst);

/* ref_wfmt_name - "bf16", "fp8-block", "fp8-channel", "int4", "nvfp4". */
const char *ref_wfmt_name(const struct ref_linear *l);

/*
 * ref_vector - a 1-D tensor @name (any float dtype) of @n elements, as a
 * malloc'd float array in *@out.  Returns 0 or -errno with @err.
 */
int ref_vector(const struct st_set *s, const char *name, int n, float **out, struct sm_err *err);

#endif
