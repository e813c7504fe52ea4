/*
 * numfmt.h - the number formats of the checkpoints: bf16, fp16, FP8 E4M3
 * (float8_e4m3fn), E2M1 (FP4), each to float and (round to nearest even)
 * from float; and the finite check the engine applies at its boundaries.  Integer and IEEE basic arithmetic only, so the same input
 * gives the same bits on every machine.
 */
#ifndef SM120_ENGINE_NUMFMT_H
#define SM120_ENGINE_NUMFMT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* nf_first_nonfinite - index of the first NaN or Inf among @n values, or -1. */
static inline int nf_first_nonfinite(const float *v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return i;
	return -1;
}

static inline float nf_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t nf_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* nf_bf16_to_f32 - exact. */
static inline float nf_bf16_to_f32(uint16_t h)
{
	return nf_bits_f32((uint32_t)h << 16);
}

/* nf_f32_to_bf16 - round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t nf_f32_to_bf16(float f)
{
	uint32_t u = nf_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* nf_f16_to_f32 - exact (IEEE binary16). */
static inline float nf_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return nf_bits_f32(s | 0x7f800000u | (m << 13));
	if (e == 0) {
		float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
		return s ? -v : v;
	}
	return nf_bits_f32(s | ((e + 112) << 23) | (m << 13));
}

/* nf_e4m3_to_f32 - float8_e4m3fn: bias 7, no infinities, 0x7f/0xff NaN, max 448. */
static inline float nf_e4m3_to_f32(uint8_t b)
{
	uint32_t e = (b >> 3) & 0xf, m = b & 7;
	float v;

	if ((b & 0x7f) == 0x7f)
		return nf_bits_f32(0x7fc00000u);
	if (e == 0)
		v = (float)m * (1.0f / 512.0f);	/* m/8 * 2^-6 */
	else
		v = nf_bits_f32(((e + 120) << 23) | (m << 20));
	return (b & 0x80) ? -v : v;
}

/* nf_round_even - @x (>= 0, < 2^23) rounded to the nearest integer, ties to even. */
static inline uint32_t nf_round_even(float x)
{
	uint32_t n = (uint32_t)x;
	float frac = x - (float)n;

	return n + (frac > 0.5f || (frac == 0.5f && (n & 1)));
}

/*
 * nf_f32_to_e4m3 - round to nearest even, saturating at +-448 (as torch's
 * .to(float8_e4m3fn) after the clamp every exporter applies); NaN -> 0x7f.
 */
static inline uint8_t nf_f32_to_e4m3(float f)
{
	uint32_t u = nf_f32_bits(f);
	uint8_t sign = (uint8_t)((u >> 24) & 0x80);
	float a = nf_bits_f32(u & 0x7fffffffu);

	if (a != a)
		return 0x7f;
	if (a >= 448.0f)
		return sign | 0x7e;
	if (a < 0.015625f)	/* below 2^-6: subnormal steps of 2^-9 (8 = the first normal) */
		return sign | (uint8_t)nf_round_even(a * 512.0f);
	u = nf_f32_bits(a);
	u += 0x7ffffu + ((u >> 20) & 1);	/* keep 3 mantissa bits, ties to even */
	return sign | (uint8_t)((((u >> 23) - 120) << 3) | ((u >> 20) & 7));
}

/* nf_e2m1_to_f32 - FP4 E2M1 code (bit 3 sign): 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
static inline float nf_e2m1_to_f32(uint8_t code)
{
	static const float mag[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
	float v = mag[code & 7];

	return (code & 8) ? -v : v;
}

/* nf_f32_to_e2m1 - nearest code, ties to the even code, saturating at 6. */
static inline uint8_t nf_f32_to_e2m1(float f)
{
	uint8_t sign = f < 0 ? 8 : 0;
	float a = f < 0 ? -f : f;
	uint8_t c;

	for (c = 1; c < 8; c++) {
		float lo = nf_e2m1_to_f32((uint8_t)(c - 1)), hi = nf_e2m1_to_f32(c);

		if (a < hi) {
			float mid = (lo + hi) * 0.5f;

			return sign | (a < mid ? c - 1 : a > mid ? c : ((c - 1) % 2 == 0 ? c - 1 : c));
		}
	}
	return sign | 7;
}

#endif
