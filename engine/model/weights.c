/*
 * weights.c - Linear weights in the four checkpoint formats (see weights.h).
 *
 * Binding checks what can be checked cheaply before anything runs: every
 * scale tensor (a small fraction of the weight's bytes) and every vector
 * (norms, biases, the router's correction bias) must hold finite values, so
 * a NaN or Inf there is an error naming the tensor at load.  The weights
 * themselves are checked where they are used: the CPU backend refuses a
 * non-finite router score or hidden state, naming the layer.
 */
#include "weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/numfmt.h"

/* One row of formats: which config methods may store a tensor this way. */
static const struct wfmt_info {
	const char *name;
	enum ref_qmethod method;	/* the config that declares it; REF_Q_NONE: any */
} wfmt_info[] = {
	[REF_W_PLAIN] = { "bf16", REF_Q_NONE },
	[REF_W_FP8_BLOCK] = { "fp8-block", REF_Q_FP8_BLOCK },
	[REF_W_FP8_CHANNEL] = { "fp8-channel", REF_Q_CT_FP8 },
	[REF_W_INT4] = { "int4", REF_Q_CT_INT4 },
	[REF_W_NVFP4] = { "nvfp4", REF_Q_MODELOPT_NVFP4 },
};

const char *ref_wfmt_name(const struct ref_linear *l)
{
	return l->fmt == REF_W_PLAIN ? st_dtype_name(l->w->dtype) : wfmt_info[l->fmt].name;
}

static const struct st_tensor *companion(const struct st_set *s, const char *prefix, const char *suffix)
{
	char name[512];

	snprintf(name, sizeof(name), "%s.%s", prefix, suffix);
	return st_find(s, name);
}

static int cdiv(int a, int b)
{
	return (a + b - 1) / b;
}

static int float_dtype(enum st_dtype t)
{
	return t == ST_BF16 || t == ST_F16 || t == ST_F32;
}

/* read_float - element @i of a BF16/F16/F32 tensor. */
static float read_float(const struct st_tensor *t, int64_t i)
{
	const unsigned char *p = t->data;
	uint16_t h;
	float f;

	switch (t->dtype) {
	case ST_BF16:
		memcpy(&h, p + 2 * i, 2);
		return nf_bf16_to_f32(h);
	case ST_F16:
		memcpy(&h, p + 2 * i, 2);
		return nf_f16_to_f32(h);
	default:
		memcpy(&f, p + 4 * i, 4);
		return f;
	}
}

/*
 * first_nonfinite - the index of the first NaN or Inf in @t (BF16, F16, F32
 * or F8_E4M3, whose only non-finite codes are NaN: 0x7f and 0xff), or -1
 * when every element is finite or the dtype has no such values.
 */
static int64_t first_nonfinite(const struct st_tensor *t)
{
	const unsigned char *p = t->data;
	int64_t i;

	if (t->dtype == ST_F8_E4M3) {
		for (i = 0; i < t->numel; i++)
			if ((p[i] & 0x7f) == 0x7f)
				return i;
		return -1;
	}
	if (!float_dtype(t->dtype))
		return -1;
	for (i = 0; i < t->numel; i++)
		if (!isfinite(read_float(t, i)))
			return i;
	return -1;
}

static int bad(struct sm_err *err, const struct st_tensor *t, const char *what)
{
	char shape[96] = "";
	int i, n = 0;

	for (i = 0; i < t->ndim && n < (int)sizeof(shape) - 16; i++)
		n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", i ? ", " : "",
			      (long long)t->shape[i]);
	return sm_err_set(err, -EINVAL, "tensor %s in %s (%s [%s]): %s", t->name, t->file,
			  st_dtype_name(t->dtype), shape, what);
}

/* check_finite - 0, or -EINVAL with @err naming @t and its first NaN / Inf element. */
static int check_finite(const struct st_tensor *t, struct sm_err *err)
{
	int64_t i = first_nonfinite(t);
	char what[192];

	if (i < 0)
		return 0;
	snprintf(what, sizeof(what), "element %lld is %s, not a finite number: the file is corrupt "
		 "or was exported wrongly (download or export the checkpoint again)", (long long)i,
		 t->dtype == ST_F8_E4M3 || isnan(read_float(t, i)) ? "NaN" : "Inf");
	return bad(err, t, what);
}

/* bind_int4 - compressed-tensors pack-quantized: weight_packed, weight_scale, weight_shape. */
static int bind_int4(struct ref_linear *l, const struct st_set *s, const struct ref_config *c,
		     const char *prefix, const struct st_tensor *packed, struct sm_err *err)
{
	const struct st_tensor *sc = companion(s, prefix, "weight_scale");
	const struct st_tensor *sh = companion(s, prefix, "weight_shape");
	int64_t dims[2];
	int i;

	if (!sc || !sh)
		return bad(err, packed, "pack-quantized needs weight_scale and weight_shape beside it");
	if (packed->dtype != ST_I32 || packed->ndim != 2)
		return bad(err, packed, "weight_packed must be I32 [out, in/8]");
	if ((sh->dtype != ST_I32 && sh->dtype != ST_I64) || sh->numel != 2)
		return bad(err, sh, "weight_shape must be I32 or I64 [2]");
	for (i = 0; i < 2; i++) {
		if (sh->dtype == ST_I32) {
			int32_t v;

			memcpy(&v, (const char *)sh->data + 4 * i, 4);
			dims[i] = v;
		} else {
			memcpy(&dims[i], (const char *)sh->data + 8 * i, 8);
		}
	}
	if (dims[0] <= 0 || dims[1] <= 0 || dims[0] > (1 << 30) || dims[1] > (1 << 30) ||
	    packed->shape[0] != dims[0] || packed->shape[1] != cdiv((int)dims[1], 8))
		return bad(err, packed, "shape does not match weight_shape [out, in] packed 8 per int32");
	l->out = (int)dims[0];
	l->in = (int)dims[1];
	if (!float_dtype(sc->dtype) || sc->ndim != 2 || sc->shape[0] != l->out || sc->shape[1] <= 0 ||
	    l->in % sc->shape[1])
		return bad(err, sc, "weight_scale must be [out, in / group_size] in a float dtype");
	l->bk = l->in / (int)sc->shape[1];
	if (c->quant.method == REF_Q_CT_INT4 && l->bk != c->quant.group_size)
		return bad(err, sc, "group size differs from the config's group_size");
	if (check_finite(sc, err))
		return -EINVAL;
	l->fmt = REF_W_INT4;
	l->w = packed;
	l->scale = sc;
	return 0;
}

/* bind_nvfp4 - ModelOpt: weight U8 [out, in/2], weight_scale E4M3 [out, in/16], weight_scale_2. */
static int bind_nvfp4(struct ref_linear *l, const struct st_set *s, const char *prefix,
		      const struct st_tensor *w, const struct st_tensor *sc, struct sm_err *err)
{
	const struct st_tensor *s2 = companion(s, prefix, "weight_scale_2");

	if (!s2 || s2->dtype != ST_F32 || s2->numel != 1)
		return bad(err, w, "NVFP4 needs an F32 scalar weight_scale_2 beside it");
	if (w->ndim != 2 || sc->ndim != 2 || sc->shape[0] != w->shape[0] ||
	    sc->shape[1] * 8 != w->shape[1])
		return bad(err, sc, "NVFP4 weight_scale must be [out, in/16] for weight [out, in/2]");
	if (check_finite(sc, err) || check_finite(s2, err))
		return -EINVAL;
	l->fmt = REF_W_NVFP4;
	l->w = w;
	l->scale = sc;
	l->out = (int)w->shape[0];
	l->in = (int)w->shape[1] * 2;
	l->bk = 16;
	memcpy(&l->scale2, s2->data, 4);
	return 0;
}

/* bind_fp8 - DeepSeek block (weight_scale_inv) or compressed-tensors per channel / tensor. */
static int bind_fp8(struct ref_linear *l, const struct st_set *s, const struct ref_config *c,
		    const char *prefix, const struct st_tensor *w, struct sm_err *err)
{
	const struct st_tensor *inv = companion(s, prefix, "weight_scale_inv");
	const struct st_tensor *sc = companion(s, prefix, "weight_scale");

	if (w->ndim != 2)
		return bad(err, w, "an FP8 weight must be 2-D");
	l->w = w;
	l->out = (int)w->shape[0];
	l->in = (int)w->shape[1];
	if (inv) {
		l->bn = c->quant.block_n ? c->quant.block_n : 128;
		l->bk = c->quant.block_k ? c->quant.block_k : 128;
		if (inv->dtype != ST_F32 || inv->ndim != 2 || inv->shape[0] != cdiv(l->out, l->bn) ||
		    inv->shape[1] != cdiv(l->in, l->bk))
			return bad(err, inv, "weight_scale_inv must be F32 [ceil(out/block), ceil(in/block)] "
				   "for the config's weight_block_size");
		if (check_finite(inv, err))
			return -EINVAL;
		l->fmt = REF_W_FP8_BLOCK;
		l->scale = inv;
		return 0;
	}
	if (!sc)
		return bad(err, w, "an F8_E4M3 weight needs weight_scale_inv (block) or weight_scale "
			   "(per channel) beside it");
	if (!float_dtype(sc->dtype) || (sc->numel != 1 && sc->numel != l->out))
		return bad(err, sc, "FP8 weight_scale must hold one value or one per output row");
	if (check_finite(sc, err))
		return -EINVAL;
	l->fmt = REF_W_FP8_CHANNEL;
	l->scale = sc;
	return 0;
}

int ref_linear_bind(struct ref_linear *l, const struct st_set *s, const struct ref_config *c,
		    const char *prefix, int out, int in, struct sm_err *err)
{
	const struct st_tensor *w = companion(s, prefix, "weight");
	const struct st_tensor *packed = companion(s, prefix, "weight_packed");
	const struct st_tensor *sc = companion(s, prefix, "weight_scale");
	int rc;

	memset(l, 0, sizeof(*l));
	if (packed)
		rc = bind_int4(l, s, c, prefix, packed, err);
	else if (!w)
		return sm_err_set(err, -ENOENT, "tensor %s.weight (or .weight_packed) is missing from the "
				  "checkpoint", prefix);
	else if (w->dtype == ST_U8 && sc && sc->dtype == ST_F8_E4M3)
		rc = bind_nvfp4(l, s, prefix, w, sc, err);
	else if (w->dtype == ST_F8_E4M3)
		rc = bind_fp8(l, s, c, prefix, w, err);
	else if (float_dtype(w->dtype) && w->ndim == 2) {
		l->fmt = REF_W_PLAIN;
		l->w = w;
		l->out = (int)w->shape[0];
		l->in = (int)w->shape[1];
		rc = 0;
	} else
		rc = bad(err, w, "not a Linear weight in a supported format (BF16/F16/F32, FP8 with "
			 "scales, INT4 pack-quantized, NVFP4)");
	if (rc)
		return rc;
	if (wfmt_info[l->fmt].method != REF_Q_NONE && wfmt_info[l->fmt].method != c->quant.method)
		return bad(err, l->w, "stored quantized, but config.json's quantization config does not "
			   "declare this format");
	if ((out >= 0 && l->out != out) || (in >= 0 && l->in != in)) {
		char want[96];

		snprintf(want, sizeof(want), "the config gives [%d, %d] (out, in)", out, in);
		return bad(err, l->w, want);
	}
	return 0;
}

void ref_linear_row(const struct ref_linear *l, int r, float *dst)
{
	const unsigned char *w = l->w->data;
	int c;

	switch (l->fmt) {
	case REF_W_PLAIN:
		for (c = 0; c < l->in; c++)
			dst[c] = read_float(l->w, (int64_t)r * l->in + c);
		break;
	case REF_W_FP8_BLOCK: {
		const float *inv = l->scale->data;
		int64_t srow = (int64_t)(r / l->bn) * l->scale->shape[1];

		for (c = 0; c < l->in; c++)
			dst[c] = nf_e4m3_to_f32(w[(int64_t)r * l->in + c]) * inv[srow + c / l->bk];
		break;
	}
	case REF_W_FP8_CHANNEL: {
		float s = read_float(l->scale, l->scale->numel == 1 ? 0 : r);

		for (c = 0; c < l->in; c++)
			dst[c] = nf_e4m3_to_f32(w[(int64_t)r * l->in + c]) * s;
		break;
	}
	case REF_W_INT4: {
		int64_t words = l->w->shape[1], groups = l->scale->shape[1];

		for (c = 0; c < l->in; c++) {
			uint32_t word;

			memcpy(&word, w + 4 * ((int64_t)r * words + c / 8), 4);
			dst[c] = (float)((int)((word >> (4 * (c % 8))) & 15) - 8) *
				 read_float(l->scale, (int64_t)r * groups + c / l->bk);
		}
		break;
	}
	case REF_W_NVFP4: {
		const unsigned char *sc = l->scale->data;
		int64_t half = l->in / 2, groups = l->in / 16;

		for (c = 0; c < l->in; c++) {
			uint8_t byte = w[(int64_t)r * half + c / 2];

			dst[c] = nf_e2m1_to_f32((uint8_t)(c % 2 ? byte >> 4 : byte & 15)) *
				 nf_e4m3_to_f32(sc[(int64_t)r * groups + c / 16]) * l->scale2;
		}
		break;
	}
	}
}

int ref_vector(const struct st_set *s, const char *name, int n, float **out, struct sm_err *err)
{
	const struct st_tensor *t = st_find(s, name);
	float *v;
	int i;

	*out = NULL;
	if (!t)
		return sm_err_set(err, -ENOENT, "tensor %s is missing from the checkpoint", name);
	if (!float_dtype(t->dtype) || t->numel != n || t->ndim != 1)
		return bad(err, t, "expected a 1-D float vector of the config's size");
	if (check_finite(t, err))
		return -EINVAL;
	v = malloc(sizeof(float) * (size_t)n);
	if (!v)
		return sm_err_set(err, -ENOMEM, "out of memory for %s", name);
	for (i = 0; i < n; i++)
		v[i] = read_float(t, i);
	*out = v;
	return 0;
}
