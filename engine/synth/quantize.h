/*
 * quantize.h - the weight quantizers of the real exporters, from a BF16 master.
 *
 * Each function turns one BF16 matrix [rows, cols] (row-major, the "master")
 * into the on-disk tensors of one format, computing exactly what the
 * exporter computes: DeepSeek's fp8_cast (FP8 block 128x128),
 * compressed-tensors' symmetric minmax group quantizer (INT4, group 32) and
 * ModelOpt's NVFP4 (E2M1 per 16 with an E4M3 block scale and an F32 tensor
 * scale).  Rounding is to nearest, ties to even, with IEEE float arithmetic
 * only (no libm), so the same master gives the same bytes on every machine.
 * Output buffers are the caller's, sized as each contract says.
 */
#ifndef SM120_ENGINE_SYNTH_QUANTIZE_H
#define SM120_ENGINE_SYNTH_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#define SYNTH_FP8_BLOCK 128	/* DeepSeek weight_block_size [128, 128] */
#define SYNTH_INT4_GROUP 32	/* compressed-tensors group_size */
#define SYNTH_NVFP4_BLOCK 16	/* ModelOpt NVFP4 block along the input dimension */

/* synth_amax - the largest |x| over @n BF16 values (0 for n == 0). */
float synth_amax(const uint16_t *w, size_t n);

/*
 * synth_quant_fp8 - DeepSeek FP8 block quantization of @w [rows, cols].
 * Per 128x128 block (edge blocks partial): scale = amax/448 (1 when amax is
 * 0), q = e4m3(w/scale).  Writes @q [rows, cols] F8_E4M3 codes and @scale
 * [ceil(rows/128), ceil(cols/128)] F32 (the checkpoint's weight_scale_inv:
 * W = fp8(q) * scale).
 */
void synth_quant_fp8(const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q, float *scale);

/*
 * synth_quant_int4 - compressed-tensors pack-quantized W4A16, symmetric,
 * group 32 along cols (cols % 32 == 0).  Per group: scale = bf16(amax/7.5)
 * (2^-23 when amax is 0), q = clamp(rne(w/scale), -8, 7).  Writes @packed
 * [rows, cols/8] I32 words (element c in bits 4*(c%8).., stored as q + 8) and
 * @scale [rows, cols/32] BF16.
 */
void synth_quant_int4(const uint16_t *w, int64_t rows, int64_t cols, uint32_t *packed,
		      uint16_t *scale);

/* synth_nvfp4_scale_2 - ModelOpt's weight_scale_2 = @amax / (6*448) (1 when amax is 0). */
float synth_nvfp4_scale_2(float amax);

/*
 * synth_quant_nvfp4 - ModelOpt NVFP4 of @w [rows, cols] (cols % 16 == 0)
 * with tensor scale @scale_2 (synth_nvfp4_scale_2 of the amax the exporter
 * uses; gate and up of one expert share it).  Per 16 elements: sf =
 * e4m3(amax_blk/6/scale_2) (e4m3(1) when amax_blk is 0), q = e2m1(w/(sf*scale_2)).
 * Writes @packed [rows, cols/2] U8 (low nibble = even element) and @sf
 * [rows, cols/16] F8_E4M3 codes.
 */
void synth_quant_nvfp4(const uint16_t *w, int64_t rows, int64_t cols, float scale_2,
		       uint8_t *packed, uint8_t *sf);

#endif
