/*
 * quantize.c - FP8 block, INT4 pack-quantized and NVFP4 quantizers (see
 * quantize.h), in the exporters' own order of operations: the same divisions,
 * the same scale roundings, so a synthetic checkpoint is bit-for-bit what the
 * exporter would write from the same BF16 master.
 */
#include "quantize.h"

#include "../common/numfmt.h"

#define E4M3_MAX 448.0f
#define E2M1_MAX 6.0f
#define INT4_HALF_RANGE 7.5f	/* (qmax - qmin) / 2 for [-8, 7] */

/*
 * The loops below avoid data-dependent branches: random weights would
 * mispredict every other element (a sign, a rounding direction), which
 * costs more than the arithmetic.  Magnitudes are compared as bit patterns
 * (for non-negative IEEE values the integer order is the numeric order).
 */
static float absf(float x)
{
	return nf_bits_f32(nf_f32_bits(x) & 0x7fffffffu);
}

float synth_amax(const uint16_t *w, size_t n)
{
	uint16_t m = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint16_t a = w[i] & 0x7fff;

		m = a > m ? a : m;
	}
	return nf_bf16_to_f32(m);
}

void synth_quant_fp8(const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q, float *scale)
{
	const int64_t B = SYNTH_FP8_BLOCK, nbc = (cols + B - 1) / B;
	int64_t rb, cb, r, c;

	for (rb = 0; rb < rows; rb += B) {
		int64_t r1 = rb + B < rows ? rb + B : rows;

		for (cb = 0; cb < cols; cb += B) {
			int64_t c1 = cb + B < cols ? cb + B : cols;
			float amax = 0.0f, s;

			for (r = rb; r < r1; r++) {
				float a = synth_amax(w + r * cols + cb, (size_t)(c1 - cb));

				amax = a > amax ? a : amax;
			}
			s = amax > 0.0f ? amax / E4M3_MAX : 1.0f;
			scale[(rb / B) * nbc + cb / B] = s;
			for (r = rb; r < r1; r++)
				for (c = cb; c < c1; c++) {
					float x = nf_bf16_to_f32(w[r * cols + c]);

					q[r * cols + c] = nf_f32_to_e4m3(x / s);
				}
		}
	}
}

/* rne_clamp_int4 - @x rounded to nearest (ties even), clamped to [-8, 7]. */
static int rne_clamp_int4(float x)
{
	float a = absf(x), f;
	int n, q;

	a = a < 8.0f ? a : 8.0f;
	n = (int)a;
	f = a - (float)n;
	n += (f > 0.5f) | ((f == 0.5f) & n);	/* ties to even: & n tests the low bit */
	q = x < 0 ? -n : n;
	return q > 7 ? 7 : q;
}

void synth_quant_int4(const uint16_t *w, int64_t rows, int64_t cols, uint32_t *packed,
		      uint16_t *scale)
{
	const int64_t G = SYNTH_INT4_GROUP, ng = cols / G;
	int64_t r, g, c;

	for (r = 0; r < rows; r++) {
		const uint16_t *row = w + r * cols;

		for (g = 0; g < ng; g++) {
			float amax = synth_amax(row + g * G, (size_t)G), s;
			uint16_t sb;

			/* compressed-tensors clamps a zero scale to float32 eps (2^-23) */
			sb = nf_f32_to_bf16(amax > 0.0f ? amax / INT4_HALF_RANGE : 0x1p-23f);
			scale[r * ng + g] = sb;
			s = nf_bf16_to_f32(sb);
			for (c = g * G; c < (g + 1) * G; c += 8) {
				uint32_t word = 0;
				int i;

				for (i = 0; i < 8; i++) {
					int qv = rne_clamp_int4(nf_bf16_to_f32(row[c + i]) / s);

					word |= (uint32_t)(qv + 8) << (4 * i);
				}
				packed[r * (cols / 8) + c / 8] = word;
			}
		}
	}
}

/*
 * e2m1 - nf_f32_to_e2m1 for finite @x (checked equal on every finite float),
 * without its search loop: the code of |x| counts the midpoints 0.25, 0.75,
 * 1.25, 1.75, 2.5, 3.5, 5 that |x| has passed.  A tie goes to the even code,
 * so a midpoint above an even code counts when exceeded (>), one above an
 * odd code when reached (>=).
 */
static uint8_t e2m1(float x)
{
	float a = absf(x);
	int c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
		(a >= 3.5f) + (a > 5.0f);

	return (uint8_t)((x < 0 ? 8 : 0) | c);
}

float synth_nvfp4_scale_2(float amax)
{
	return amax > 0.0f ? amax / (E2M1_MAX * E4M3_MAX) : 1.0f;
}

void synth_quant_nvfp4(const uint16_t *w, int64_t rows, int64_t cols, float scale_2,
		       uint8_t *packed, uint8_t *sf)
{
	const int64_t K = SYNTH_NVFP4_BLOCK, nb = cols / K;
	int64_t r, b, c;

	for (r = 0; r < rows; r++) {
		const uint16_t *row = w + r * cols;

		for (b = 0; b < nb; b++) {
			float amax = synth_amax(row + b * K, (size_t)K), unit;
			uint8_t code;

			/* ModelOpt: (amax/6)/scale_2, a zero block scale replaced by 1 */
			code = nf_f32_to_e4m3(amax > 0.0f ? amax / E2M1_MAX / scale_2 : 1.0f);
			sf[r * nb + b] = code;
			unit = nf_e4m3_to_f32(code) * scale_2;
			for (c = b * K; c < (b + 1) * K; c += 2) {
				uint8_t lo = 0, hi = 0;

				/* a block whose scale underflowed to 0 in e4m3 quantizes to 0 */
				if (unit > 0.0f) {
					lo = e2m1(nf_bf16_to_f32(row[c]) / unit);
					hi = e2m1(nf_bf16_to_f32(row[c + 1]) / unit);
				}
				packed[r * (cols / 2) + c / 2] = (uint8_t)(lo | (hi << 4));
			}
		}
	}
}
