/*
 * gpu.c - the GPU backend (see gpu.h): the driver table, the embedded
 * kernel images, weights on the device, and the forward pass as a sequence
 * of launches.
 */
#include "gpu.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/attention/decode.h"
#include "../../kernels/attention/decode_merge.h"
#include "../../kernels/attention/extend.h"
#include "../../kernels/moe/moe_gemm.h"
#include "../common/numfmt.h"
#include "ops.h"
#include "standin.h"

/* ---- the driver ------------------------------------------------------------ */

/* Every driver entry the backend uses, looked up with dlsym (the shim, when
 * preloaded, hands out its hooks for the launch and module calls). */
#define CU_FUNCS(X)                                                                             \
	X(cuInit, (unsigned int))                                                               \
	X(cuDeviceGet, (CUdevice *, int))                                                       \
	X(cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice))                          \
	X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                    \
	X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                             \
	X(cuCtxSetCurrent, (CUcontext))                                                         \
	X(cuCtxSynchronize, (void))                                                             \
	X(cuModuleLoadData, (CUmodule *, const void *))                                         \
	X(cuModuleUnload, (CUmodule))                                                           \
	X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                          \
	X(cuModuleGetGlobal_v2, (CUdeviceptr *, size_t *, CUmodule, const char *))              \
	X(cuFuncSetAttribute, (CUfunction, CUfunction_attribute, int))                          \
	X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                               \
	X(cuMemFree_v2, (CUdeviceptr))                                                          \
	X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                                 \
	X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                       \
	X(cuMemsetD8_v2, (CUdeviceptr, unsigned char, size_t))                                  \
	X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
			   unsigned, CUstream, void **, void **))                               \
	X(cuGetErrorString, (CUresult, const char **))

struct cu {
#define CU_FIELD(name, args) CUresult (*name) args;
	CU_FUNCS(CU_FIELD)
#undef CU_FIELD
};

/* The embedded images (images.S); weak, so that a program linked without
 * them (the unit tests) gets a clear error instead of a link failure. */
#define ENGINE_IMAGES(X)                                                                \
	X(IMG_OPS, engine_img_ops)                                                      \
	X(IMG_BUNDLE, engine_img_bundle)                                                \
	X(IMG_MOE_BF16, engine_img_standin_moe_bf16)                                    \
	X(IMG_MOE_FP8, engine_img_standin_moe_fp8)                                      \
	X(IMG_MOE_GPTQ, engine_img_standin_moe_gptq)                                    \
	X(IMG_EXTEND, engine_img_standin_extend)
#define IMG_ENUM(id, sym) id,
enum { ENGINE_IMAGES(IMG_ENUM) NIMAGES };
#define IMG_DECL(id, sym) \
	extern const char sym##_start[] __attribute__((weak)), sym##_end[] __attribute__((weak));
ENGINE_IMAGES(IMG_DECL)
#define IMG_ROW(id, sym) [id] = { #sym, sym##_start, sym##_end },
static const struct {
	const char *name;
	const char *start, *end;
} images[NIMAGES] = { ENGINE_IMAGES(IMG_ROW) };

/* The kernels of ops.cu, by name. */
#define OPS(X)                                                                            \
	X(embed) X(add_rmsnorm) X(rmsnorm_bf16) X(mla_latent) X(mla_qpe) X(gqa_prep)           \
	X(attention) X(bgemm_bf16) X(bgemm_f32) X(router_rows) X(route) X(moe_align)       \
	X(silu_mul) X(quant_fp8) X(moe_sum) X(fill_iota)
#define OP_ENUM(n) OP_##n,
enum { OPS(OP_ENUM) NOPS };
#define OP_NAME(n) "eng_" #n,
static const char *const op_names[NOPS] = { OPS(OP_NAME) };

/* The bundle's attention kernels the backend launches itself: X(id, name, dynamic shared memory). */
#define BUNDLED_ATTN(X)                                                               \
	X(BA_EXTEND_128, ATTN_EXTEND_128_BF16, ATTN_EXTEND_SMEM_128)                  \
	X(BA_DECODE_GQA128, ATTN_DECODE_GQA128_BF16, ATTN_DECODE_GQA128_BF16_SMEM)    \
	X(BA_DECODE_MLA, ATTN_DECODE_MLA_BF16, ATTN_DECODE_MLA_BF16_SMEM)             \
	X(BA_MERGE, ATTN_MERGE_KERNEL, 0)
#define BA_ENUM(id, name, smem) id,
enum { BUNDLED_ATTN(BA_ENUM) NATTN };
#define BA_ROW(id, name, smem) { name, smem },
static const struct {
	const char *name;
	int smem;
} bundled_attn[NATTN] = { BUNDLED_ATTN(BA_ROW) };

/* The bundle's decode kernels (moe_gemm.h), which linear() takes where the plan picks one. */
#define DECODE_NAME(quant, tn, rows, name) #name,
#define STAGED_NAME(quant, tn, rows, staging, name) #name,
static const char *const decode_names[] = { MOE_DECODE_KERNELS(DECODE_NAME) MOE_DECODE_STAGED_KERNELS(STAGED_NAME) };
#undef DECODE_NAME
#undef STAGED_NAME
enum { NDECODE = sizeof(decode_names) / sizeof(decode_names[0]) };

/* ---- weights on the device ------------------------------------------------- */

/* One weight as moe_gemm reads it: @experts matrices of n x k. */
struct dmat {
	int quant, scale;          /* enum moe_quant; enum moe_scale for FP8 */
	int n, k, experts, group;  /* group: INT4 group size */
	CUdeviceptr w, s, global;  /* weights, scales, NVFP4 global scale per expert */
	int64_t w_e, w_n;          /* strides of w (elements of bf16, bytes otherwise) */
	int64_t s_e, s_n, s_k;     /* strides of s (elements) */
};

struct glayer {
	CUdeviceptr in_norm, post_norm;
	struct dmat q_a, q_b, q, kv_a, o;           /* MLA (o shared with GQA) */
	CUdeviceptr q_a_norm, kv_a_norm, wuk_t, wuv;
	struct dmat qp, kp, vp;                     /* GQA */
	CUdeviceptr qb, kb, vb, qn, kn;
	int moe;
	struct dmat gate, up, down;                 /* dense MLP, or the shared expert */
	CUdeviceptr router, router_bias;            /* fp32 [E][H], [E] */
	struct dmat w13, w2;                        /* routed experts: [gate; up], down */
	CUdeviceptr kc, vc;                         /* caches: MLA latent [slot][kvl + R]; GQA [slot][hkv][hd] */
};

/*
 * The step's indices on the device (s.indptr, int32), written once a step
 * by step_indices: the extend attention's qo_indptr {0, n} and kv_indptr
 * {0, pos} (the prefix: the cache's slots before the step), the decode
 * attention's kv_indptr {0, pos + n} and num_splits {splits}.
 */
enum { IX_QO, IX_KV = 2, IX_DECODE_KV = 4, IX_SPLITS = 6, IX_N = 8 };

/* Scratch for one chunk of at most @chunk tokens. */
struct scratch {
	CUdeviceptr tok, x, hb, a, q, cq, kv, qf, olat, o, k, v, g, u, act;
	CUdeviceptr rlogits, ids, wts, sorted, eids, ntpp, c1, act2, c2, sh;
	CUdeviceptr aq, as, logits, iota, zeros, indptr, kv_indices, part_o, part_lse;
};

struct ref_gpu {
	const struct ref_model *m;
	const struct ref_config *c;
	struct cu cu;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod[NIMAGES];
	CUmodule moe_spec[2];                       /* the stand-in copy for gate/up [0] and down [1] */
	CUfunction op[NOPS];
	CUfunction gemm[MOE_GEMM_NKERNELS];         /* moe_gemm_<quant>_m<tm>, as moe_gemm_kernels */
	CUfunction decode[NDECODE];                 /* the decode kernels, as decode_names */
	CUfunction moe_fn[2], extend_fn;
	CUfunction attn[NATTN];                     /* the bundle's attention kernels (BUNDLED_ATTN) */
	int moe_img, moe_smem, sms, splits;         /* splits: the decode attention's at this step */
	struct glayer *L;
	CUdeviceptr embed, final_norm, inv_freq;
	struct dmat lm_head;
	struct scratch s;
	CUdeviceptr *allocs;
	int nallocs, cap_allocs;
	int max_seq, pos, chunk, verbose;
	uint16_t *logits_host;
	struct ref_route_sink routes;
	int *routes_host;                           /* [chunk][top_k] when routes.fn is set */
};

/* ---- driver helpers ---------------------------------------------------------- */

static int cu_fail(struct ref_gpu *g, CUresult r, const char *what, struct sm_err *err)
{
	const char *s = NULL;

	if (g->cu.cuGetErrorString)
		g->cu.cuGetErrorString(r, &s);
	return sm_err_set(err, -EIO, "GPU backend: %s failed: CUDA error %d (%s)", what, (int)r,
			  s ? s : "unknown");
}

#define CU(g, call, what, err)                                          \
	do {                                                            \
		CUresult cu_r_ = (g)->cu.call;                          \
		if (cu_r_ != CUDA_SUCCESS)                              \
			return cu_fail((g), cu_r_, (what), (err));      \
	} while (0)

static int load_driver(struct cu *cu, struct sm_err *err)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!lib)
		return sm_err_set(err, -ENODEV, "--backend gpu: the NVIDIA driver (libcuda.so.1) is not "
				  "installed or not on the library path; use --backend cpu");
#define CU_LOOKUP(name, args)                                                                   \
	cu->name = (CUresult(*) args)dlsym(lib, #name);                                         \
	if (!cu->name)                                                                          \
		return sm_err_set(err, -ENODEV, "--backend gpu: libcuda.so.1 has no %s; a driver " \
				  "for CUDA 12.8 or newer is needed", #name);
	CU_FUNCS(CU_LOOKUP)
#undef CU_LOOKUP
	/* the driver stays loaded: unloading libcuda after cuInit is not supported */
	return 0;
}

static int dalloc(struct ref_gpu *g, size_t bytes, CUdeviceptr *out, struct sm_err *err)
{
	CUdeviceptr p;
	CUresult r;

	if (g->nallocs == g->cap_allocs) {
		int cap = g->cap_allocs ? 2 * g->cap_allocs : 256;
		CUdeviceptr *na = realloc(g->allocs, sizeof(*na) * (size_t)cap);

		if (!na)
			return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		g->allocs = na, g->cap_allocs = cap;
	}
	r = g->cu.cuMemAlloc_v2(&p, bytes ? bytes : 16);
	if (r != CUDA_SUCCESS) {
		char what[96];

		snprintf(what, sizeof(what), "allocating %.1f MiB of GPU memory", bytes / 1048576.0);
		return cu_fail(g, r, what, err);
	}
	CU(g, cuMemsetD8_v2(p, 0, bytes ? bytes : 16), "clearing GPU memory", err);
	g->allocs[g->nallocs++] = p;
	*out = p;
	return 0;
}

/* upload - a new device copy of @bytes at @src. */
static int upload(struct ref_gpu *g, const void *src, size_t bytes, CUdeviceptr *out, struct sm_err *err)
{
	int rc = dalloc(g, bytes, out, err);

	if (rc == 0 && bytes)
		CU(g, cuMemcpyHtoD_v2(*out, src, bytes), "copying weights to the GPU", err);
	return rc;
}

/* launch - @f on the default stream with @params (pointers to the arguments). */
static int launch(struct ref_gpu *g, CUfunction f, const char *name, unsigned gx, unsigned gy, unsigned gz,
		  unsigned block, unsigned smem, void **params, struct sm_err *err)
{
	CUresult r;

	if (!gx || !gy || !gz)
		return 0;
	r = g->cu.cuLaunchKernel(f, gx, gy, gz, block, 1, 1, smem, NULL, params, NULL);
	if (r != CUDA_SUCCESS) {
		char what[160];

		snprintf(what, sizeof(what), "launching %s (grid %u x %u x %u, %u threads, %u B shared)",
			 name, gx, gy, gz, block, smem);
		return cu_fail(g, r, what, err);
	}
	return 0;
}

#define ARGS(...) ((void *[]){ __VA_ARGS__ })

/* ---- weights --------------------------------------------------------------- */

/* tensor_f32 - element @i of a float tensor (F32, BF16, F16) as float. */
static float tensor_f32(const struct st_tensor *t, int64_t i)
{
	const unsigned char *p = t->data;
	uint16_t h;
	float f;

	switch (t->dtype) {
	case ST_F32:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case ST_BF16:
		memcpy(&h, p + 2 * i, 2);
		return nf_bf16_to_f32(h);
	default:
		memcpy(&h, p + 2 * i, 2);
		return nf_f16_to_f32(h);
	}
}

/* vec_f32 - a host fp32 vector to the device (NULL stays 0). */
static int vec_f32(struct ref_gpu *g, const float *v, int n, CUdeviceptr *out, struct sm_err *err)
{
	*out = 0;
	return v ? upload(g, v, sizeof(float) * (size_t)n, out, err) : 0;
}

static int cdiv(int a, int b)
{
	return (a + b - 1) / b;
}

/* wfmt_quant - the moe_gemm variant that reads format @f. */
static int wfmt_quant(enum ref_wfmt f, int *scale)
{
	*scale = f == REF_W_FP8_BLOCK ? MOE_SCALE_BLOCK : f == REF_W_FP8_CHANNEL ? MOE_SCALE_CHANNEL
									       : MOE_SCALE_NONE;
	return f == REF_W_PLAIN ? MOE_BF16 : f == REF_W_INT4 ? MOE_W4A16 : f == REF_W_NVFP4 ? MOE_NVFP4 : MOE_FP8;
}

/* stage - a host buffer of @bytes for put_part's conversions (grown, kept in *@buf). */
static void *stage(unsigned char **buf, size_t *cap, size_t bytes)
{
	if (bytes > *cap) {
		unsigned char *nb = realloc(*buf, bytes);

		if (!nb)
			return NULL;
		*buf = nb, *cap = bytes;
	}
	return *buf;
}

/*
 * put_part - rows [r0, r0 + l->out) of matrix @e of @d, from @l in its
 * stored format: bytes the kernels read as stored go straight from the
 * mapping, converted ones through the host buffer *@buf.
 */
static int put_part(struct ref_gpu *g, struct dmat *d, const struct ref_linear *l, int e, int r0,
		    unsigned char **buf, size_t *cap, struct sm_err *err)
{
	const int64_t rows = l->out, k = l->in, ns = l->scale ? l->scale->numel : 0;
	const int esz = d->quant == MOE_BF16 ? 2 : 1;
	const CUdeviceptr wdst = d->w + (CUdeviceptr)(esz * (e * d->w_e + r0 * d->w_n));
	const size_t wbytes = (size_t)(d->quant == MOE_BF16 ? rows * k * 2 : d->quant == MOE_FP8 ? rows * k : rows * k / 2);
	unsigned char *st;
	CUdeviceptr sdst;
	int64_t i, j;

	if (d->quant != MOE_BF16 || l->w->dtype == ST_BF16) {
		CU(g, cuMemcpyHtoD_v2(wdst, l->w->data, wbytes), "copying weights to the GPU", err);
	} else {
		float *row = malloc(sizeof(float) * (size_t)k);

		if (!row || !(st = stage(buf, cap, wbytes))) {
			free(row);
			return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		}
		for (i = 0; i < rows; i++) {
			ref_linear_row(l, (int)i, row);
			for (j = 0; j < k; j++) {
				uint16_t h = nf_f32_to_bf16(row[j]);

				memcpy(st + 2 * (i * k + j), &h, 2);
			}
		}
		free(row);
		CU(g, cuMemcpyHtoD_v2(wdst, st, wbytes), "copying weights to the GPU", err);
	}
	switch (d->quant) {
	case MOE_FP8:	/* fp32 scales: per row, or per 128 x 128 block */
		if (!(st = stage(buf, cap, 4 * (size_t)ns)))
			return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		for (i = 0; i < ns; i++) {
			float f = tensor_f32(l->scale, i);

			memcpy(st + 4 * i, &f, 4);
		}
		sdst = d->s + (CUdeviceptr)(4 * (e * d->s_e + (d->scale == MOE_SCALE_CHANNEL ? r0 : (r0 / 128) * d->s_n)));
		CU(g, cuMemcpyHtoD_v2(sdst, st, 4 * (size_t)ns), "copying scales to the GPU", err);
		return 0;
	case MOE_W4A16:	/* bf16 group scales */
		if (!(st = stage(buf, cap, 2 * (size_t)ns)))
			return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		for (i = 0; i < ns; i++) {
			uint16_t h = nf_f32_to_bf16(tensor_f32(l->scale, i));

			memcpy(st + 2 * i, &h, 2);
		}
		sdst = d->s + (CUdeviceptr)(2 * (e * d->s_e + r0 * d->s_n));
		CU(g, cuMemcpyHtoD_v2(sdst, st, 2 * (size_t)ns), "copying scales to the GPU", err);
		return 0;
	case MOE_NVFP4:	/* E4M3 scales as stored */
		sdst = d->s + (CUdeviceptr)(e * d->s_e + r0 * d->s_n);
		CU(g, cuMemcpyHtoD_v2(sdst, l->scale->data, (size_t)ns), "copying scales to the GPU", err);
		return 0;
	default:
		return 0;
	}
}

/*
 * put_mat - @d from @experts x @nparts linears (parts[e * nparts + p]):
 * the parts of an expert stacked along N (gate then up), the experts along
 * the first dimension, as the frameworks' w13 / w2.
 */
static int put_mat(struct ref_gpu *g, struct dmat *d, const struct ref_linear *const *parts, int nparts,
		   int experts, struct sm_err *err)
{
	const struct ref_linear *l0 = parts[0];
	int n = 0, p, e, rc = 0;
	size_t wbytes, sbytes, cap = 0;
	unsigned char *buf = NULL;

	memset(d, 0, sizeof(*d));
	d->quant = wfmt_quant(l0->fmt, &d->scale);
	for (p = 0; p < nparts; p++) {
		const struct ref_linear *l = parts[p];

		if (l->fmt != l0->fmt || l->in != l0->in)
			return sm_err_set(err, -EINVAL, "GPU backend: %s and %s are stored differently; the "
					  "fused kernel needs one format", l0->w->name, l->w->name);
		if (l0->fmt == REF_W_FP8_BLOCK && (l->bn != 128 || l->bk != 128 ||
						   (p + 1 < nparts && l->out % 128)))
			return sm_err_set(err, -EINVAL, "GPU backend: %s: FP8 block scales must be 128 x 128 "
					  "and a stacked part a multiple of 128 rows (%d)", l->w->name, l->out);
		if (l0->fmt == REF_W_NVFP4 && l->scale2 != l0->scale2)
			return sm_err_set(err, -EINVAL, "GPU backend: %s and %s have different weight_scale_2; "
					  "the fused kernel takes one global scale per expert", l0->w->name,
					  l->w->name);
		n += l->out;
	}
	d->n = n, d->k = l0->in, d->experts = experts, d->group = l0->bk;
	if (d->quant != MOE_BF16 && d->quant != MOE_FP8 && d->k % 64)
		return sm_err_set(err, -EINVAL, "GPU backend: %s: K %d of a 4-bit weight must be a multiple "
				  "of 64", l0->w->name, d->k);
	if (d->k % 16)
		return sm_err_set(err, -EINVAL, "GPU backend: %s: K %d must be a multiple of 16",
				  l0->w->name, d->k);
	switch (d->quant) {
	case MOE_BF16:
		d->w_n = d->k, d->w_e = (int64_t)n * d->k;
		wbytes = 2 * (size_t)d->w_e * experts, sbytes = 0;
		break;
	case MOE_FP8:
		d->w_n = d->k, d->w_e = (int64_t)n * d->k;
		wbytes = (size_t)d->w_e * experts;
		if (d->scale == MOE_SCALE_CHANNEL) {
			d->s_e = n, d->s_n = 1;
		} else {
			d->s_k = 1, d->s_n = cdiv(d->k, 128), d->s_e = (int64_t)cdiv(n, 128) * d->s_n;
		}
		sbytes = 4 * (size_t)d->s_e * experts;
		break;
	case MOE_W4A16:
		d->w_n = d->k / 2, d->w_e = (int64_t)n * d->w_n;
		d->s_k = 1, d->s_n = d->k / d->group, d->s_e = (int64_t)n * d->s_n;
		wbytes = (size_t)d->w_e * experts, sbytes = 2 * (size_t)d->s_e * experts;
		break;
	default:
		d->w_n = d->k / 2, d->w_e = (int64_t)n * d->w_n;
		d->s_k = 1, d->s_n = d->k / 16, d->s_e = (int64_t)n * d->s_n;
		wbytes = (size_t)d->w_e * experts, sbytes = (size_t)d->s_e * experts;
		break;
	}
	if ((rc = dalloc(g, wbytes, &d->w, err)) || (sbytes && (rc = dalloc(g, sbytes, &d->s, err))))
		return rc;
	for (e = 0; !rc && e < experts; e++) {
		int r0 = 0;

		for (p = 0; !rc && p < nparts; p++) {
			rc = put_part(g, d, parts[e * nparts + p], e, r0, &buf, &cap, err);
			r0 += parts[e * nparts + p]->out;
		}
	}
	if (!rc && d->quant == MOE_NVFP4) {
		float *gs = stage(&buf, &cap, sizeof(float) * (size_t)experts);

		if (!gs)
			rc = sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		for (e = 0; !rc && e < experts; e++)
			gs[e] = parts[e * nparts]->scale2;
		if (!rc)
			rc = upload(g, gs, sizeof(float) * (size_t)experts, &d->global, err);
	}
	free(buf);
	return rc;
}

static int put_linear(struct ref_gpu *g, struct dmat *d, const struct ref_linear *l, struct sm_err *err)
{
	return put_mat(g, d, &l, 1, 1, err);
}

/* put_absorbed - W_UK^T [h][kvl][P] and W_UV [h][V][kvl] in bf16 from kv_b_proj [h (P + V)][kvl]. */
static int put_absorbed(struct ref_gpu *g, struct glayer *gl, const struct ref_linear *kvb, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	int nh = c->n_heads, P = c->qk_nope, V = c->v_head, kvl = c->kv_lora_rank, h, i, j, rc;
	uint16_t *uk = malloc(sizeof(uint16_t) * (size_t)nh * kvl * P);
	uint16_t *uv = malloc(sizeof(uint16_t) * (size_t)nh * V * kvl);
	float *row = malloc(sizeof(float) * (size_t)kvl);

	rc = uk && uv && row ? 0 : sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
	for (h = 0; !rc && h < nh; h++) {
		for (i = 0; i < P + V; i++) {
			ref_linear_row(kvb, h * (P + V) + i, row);
			for (j = 0; j < kvl; j++) {
				if (i < P)
					uk[((size_t)h * kvl + j) * P + i] = nf_f32_to_bf16(row[j]);
				else
					uv[((size_t)h * V + (i - P)) * kvl + j] = nf_f32_to_bf16(row[j]);
			}
		}
	}
	if (!rc)
		rc = upload(g, uk, sizeof(uint16_t) * (size_t)nh * kvl * P, &gl->wuk_t, err);
	if (!rc)
		rc = upload(g, uv, sizeof(uint16_t) * (size_t)nh * V * kvl, &gl->wuv, err);
	free(uk);
	free(uv);
	free(row);
	return rc;
}

/* put_router - the router's weight in fp32 [E][H] (transformers runs it in fp32). */
static int put_router(struct ref_gpu *g, struct glayer *gl, const struct ref_layer *L, struct sm_err *err)
{
	const struct ref_linear *r = &L->router;
	float *w = malloc(sizeof(float) * (size_t)r->out * r->in);
	int e, rc;

	if (!w)
		return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
	for (e = 0; e < r->out; e++)
		ref_linear_row(r, e, w + (size_t)e * r->in);
	rc = upload(g, w, sizeof(float) * (size_t)r->out * r->in, &gl->router, err);
	free(w);
	return rc ? rc : vec_f32(g, L->router_bias, r->out, &gl->router_bias, err);
}

static int put_mlp(struct ref_gpu *g, struct glayer *gl, const struct ref_mlp *p, struct sm_err *err)
{
	int rc = put_linear(g, &gl->gate, &p->gate, err);

	if (!rc)
		rc = put_linear(g, &gl->up, &p->up, err);
	return rc ? rc : put_linear(g, &gl->down, &p->down, err);
}

static int put_experts(struct ref_gpu *g, struct glayer *gl, const struct ref_layer *L, struct sm_err *err)
{
	int E = g->c->n_routed, e, rc;
	const struct ref_linear **p13 = malloc(sizeof(*p13) * 2 * (size_t)E);
	const struct ref_linear **p2 = malloc(sizeof(*p2) * (size_t)E);

	if (!p13 || !p2) {
		free(p13);
		free(p2);
		return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
	}
	for (e = 0; e < E; e++) {
		p13[2 * e] = &L->experts[e].gate;
		p13[2 * e + 1] = &L->experts[e].up;
		p2[e] = &L->experts[e].down;
	}
	rc = put_mat(g, &gl->w13, p13, 2, E, err);
	if (!rc)
		rc = put_mat(g, &gl->w2, p2, 1, E, err);
	free(p13);
	free(p2);
	return rc;
}

static int put_layer(struct ref_gpu *g, int l, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	const struct ref_layer *L = &g->m->layers[l];
	struct glayer *gl = &g->L[l];
	int H = c->hidden, rc;

	rc = vec_f32(g, L->in_norm, H, &gl->in_norm, err);
	if (!rc)
		rc = vec_f32(g, L->post_norm, H, &gl->post_norm, err);
	if (!rc)
		rc = put_linear(g, &gl->o, &L->o, err);
	if (!rc && c->attn == REF_ATTN_MLA) {
		if (c->q_lora_rank) {
			rc = put_linear(g, &gl->q_a, &L->q_a, err);
			if (!rc)
				rc = put_linear(g, &gl->q_b, &L->q_b, err);
			if (!rc)
				rc = vec_f32(g, L->q_a_norm, c->q_lora_rank, &gl->q_a_norm, err);
		} else {
			rc = put_linear(g, &gl->q, &L->q, err);
		}
		if (!rc)
			rc = put_linear(g, &gl->kv_a, &L->kv_a, err);
		if (!rc)
			rc = vec_f32(g, L->kv_a_norm, c->kv_lora_rank, &gl->kv_a_norm, err);
		if (!rc)
			rc = put_absorbed(g, gl, &L->kv_b, err);
	} else if (!rc) {
		int qw = c->n_heads * c->head_dim, kw = c->n_kv_heads * c->head_dim;

		rc = put_linear(g, &gl->qp, &L->qp, err);
		if (!rc)
			rc = put_linear(g, &gl->kp, &L->kp, err);
		if (!rc)
			rc = put_linear(g, &gl->vp, &L->vp, err);
		if (!rc)
			rc = vec_f32(g, L->q_bias, qw, &gl->qb, err);
		if (!rc)
			rc = vec_f32(g, L->k_bias, kw, &gl->kb, err);
		if (!rc)
			rc = vec_f32(g, L->v_bias, kw, &gl->vb, err);
		if (!rc)
			rc = vec_f32(g, L->q_norm, c->head_dim, &gl->qn, err);
		if (!rc)
			rc = vec_f32(g, L->k_norm, c->head_dim, &gl->kn, err);
	}
	gl->moe = L->moe;
	if (!rc && L->moe) {
		rc = put_router(g, gl, L, err);
		if (!rc)
			rc = put_experts(g, gl, L, err);
		if (!rc && c->n_shared)
			rc = put_mlp(g, gl, &L->shared, err);
	} else if (!rc) {
		rc = put_mlp(g, gl, &L->dense, err);
	}
	if (!rc && c->attn == REF_ATTN_MLA)
		rc = dalloc(g, 2 * (size_t)g->max_seq * (c->kv_lora_rank + c->qk_rope), &gl->kc, err);
	else if (!rc) {
		size_t b = 2 * (size_t)g->max_seq * c->n_kv_heads * c->head_dim;

		rc = dalloc(g, b, &gl->kc, err);
		if (!rc)
			rc = dalloc(g, b, &gl->vc, err);
	}
	return rc;
}

/* ---- kernels and the stand-ins' specializations ------------------------------ */

static int load_modules(struct ref_gpu *g, struct sm_err *err)
{
	int i;

	for (i = 0; i < NIMAGES; i++) {
		if (!images[i].start || images[i].end <= images[i].start)
			return sm_err_set(err, -ENOENT, "--backend gpu: this sm120 was built without its GPU "
					  "kernels (%s); build it with make on a machine with the CUDA "
					  "toolkit", images[i].name);
		CU(g, cuModuleLoadData(&g->mod[i], images[i].start), images[i].name, err);
	}
	for (i = 0; i < NOPS; i++)
		CU(g, cuModuleGetFunction(&g->op[i], g->mod[IMG_OPS], op_names[i]), op_names[i], err);
	for (i = 0; i < NATTN; i++) {
		CU(g, cuModuleGetFunction(&g->attn[i], g->mod[IMG_BUNDLE], bundled_attn[i].name), bundled_attn[i].name,
		   err);
		CU(g, cuFuncSetAttribute(g->attn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bundled_attn[i].smem),
		   bundled_attn[i].name, err);
	}
	for (i = 0; i < MOE_GEMM_NKERNELS; i++) {
		const char *name = moe_gemm_kernels[i].name;

		CU(g, cuModuleGetFunction(&g->gemm[i], g->mod[IMG_BUNDLE], name), name, err);
		CU(g, cuFuncSetAttribute(g->gemm[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					 moe_gemm_smem(moe_gemm_kernels[i].quant, moe_gemm_kernels[i].tm)),
		   name, err);
	}
	for (i = 0; i < NDECODE; i++)
		CU(g, cuModuleGetFunction(&g->decode[i], g->mod[IMG_BUNDLE], decode_names[i]), decode_names[i], err);
	return 0;
}

/* decode_fn - the loaded decode kernel @name; NULL (the launch then fails, naming it) for
 * another name. */
static CUfunction decode_fn(const struct ref_gpu *g, const char *name)
{
	size_t i;

	for (i = 0; name && i < NDECODE; i++)
		if (!strcmp(decode_names[i], name))
			return g->decode[i];
	return NULL;
}

/* gemm_fn - the loaded moe_gemm_<@quant>_m<@tm>; NULL (the launch then fails, naming it) for a
 * pair the bundle does not have. */
static CUfunction gemm_fn(const struct ref_gpu *g, int quant, int tm)
{
	const int i = moe_gemm_kernel_index(quant, tm);

	return i < 0 ? NULL : g->gemm[i];
}

/*
 * hopper_kernel - @name of module @mod made ready for @smem bytes of dynamic
 * shared memory, as Triton does: refused when the device offers less
 * (Triton raises OutOfResources there), else the attribute is raised.
 */
static int hopper_kernel(struct ref_gpu *g, CUmodule mod, const char *name, int smem, CUfunction *f,
			 struct sm_err *err)
{
	int optin = 0;

	CU(g, cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g->dev),
	   "reading the shared-memory limit", err);
	if (smem > optin)
		return sm_err_set(err, -ENOSPC, "GPU backend: %s needs %d B of shared memory and the device "
				  "offers %d B (Triton: OutOfResources, as SGLang on SM120); run under "
				  "`sm120 run --mode reroute` so that the shim reroutes it", name, smem, optin);
	CU(g, cuModuleGetFunction(f, mod, name), name, err);
	CU(g, cuFuncSetAttribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), name, err);
	return 0;
}

/* moe_standins - the fused-MoE stand-in for the experts' format, one copy per half. */
static int moe_standins(struct ref_gpu *g, const struct dmat *w13, const struct dmat *w2, struct sm_err *err)
{
	const int img = w13->quant == MOE_BF16 ? IMG_MOE_BF16 : w13->quant == MOE_FP8 ? IMG_MOE_FP8 : IMG_MOE_GPTQ;
	const char *name = img == IMG_MOE_GPTQ ? "fused_moe_kernel_gptq_awq" : "fused_moe_kernel";
	int h;

	g->moe_img = img;
	g->moe_smem = w13->quant == MOE_FP8 && w13->scale == MOE_SCALE_BLOCK ? STANDIN_MOE_SMEM_HOPPER_BLOCK
									      : STANDIN_MOE_SMEM_HOPPER;
	for (h = 0; h < 2; h++) {
		const struct dmat *d = h ? w2 : w13;
		struct standin_spec spec = { h ? 1 : g->c->top_k, h, d->scale, d->n, d->k, d->group };
		CUdeviceptr p;
		size_t sz;
		int rc;

		CU(g, cuModuleLoadData(&g->moe_spec[h], images[img].start), name, err);
		CU(g, cuModuleGetGlobal_v2(&p, &sz, g->moe_spec[h], "standin_spec"), "standin_spec", err);
		if (sz != sizeof(spec))
			return sm_err_set(err, -EINVAL, "GPU backend: %s's standin_spec is %zu bytes, not %zu",
					  name, sz, sizeof(spec));
		CU(g, cuMemcpyHtoD_v2(p, &spec, sizeof(spec)), "setting standin_spec", err);
		if ((rc = hopper_kernel(g, g->moe_spec[h], name, g->moe_smem, &g->moe_fn[h], err)))
			return rc;
	}
	return 0;
}

/* ---- scratch ------------------------------------------------------------------ */

static size_t max3(size_t a, size_t b, size_t c)
{
	return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static int alloc_scratch(struct ref_gpu *g, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	const size_t C = (size_t)g->chunk, H = (size_t)c->hidden, K = (size_t)(c->top_k > 0 ? c->top_k : 1);
	const size_t E = (size_t)(c->n_routed > 0 ? c->n_routed : 1), I = (size_t)c->moe_intermediate;
	const size_t nh = (size_t)c->n_heads, R = (size_t)c->qk_rope, kvl = (size_t)c->kv_lora_rank;
	const size_t qw = c->attn == REF_ATTN_MLA ? nh * (c->qk_nope + R) : nh * c->head_dim;
	const size_t ow = c->attn == REF_ATTN_MLA ? nh * c->v_head : nh * c->head_dim;
	const size_t kvw = (size_t)c->n_kv_heads * c->head_dim;
	const size_t mlp = max3((size_t)c->intermediate, I * (size_t)c->n_shared, 1);
	const size_t em = C * K + E * STANDIN_MOE_BM + 256;
	const size_t maxk = max3(H, mlp, max3(I, ow, (size_t)c->q_lora_rank));
	int rc = 0;

#define S(field, bytes) \
	if (!rc)        \
		rc = dalloc(g, (bytes), &s->field, err)
	S(tok, 4 * C);
	S(x, 4 * C * H);
	S(hb, 2 * C * H);
	S(a, 2 * C * H);
	S(q, 2 * C * max3(qw, 1, 1));
	S(cq, 2 * C * max3((size_t)c->q_lora_rank, 1, 1));
	S(kv, 2 * C * (kvl + R + 1));
	S(qf, 2 * C * max3(nh * (kvl + R), qw, 1));
	S(olat, 2 * C * nh * (kvl + 1));
	S(o, 2 * C * ow);
	S(k, 2 * C * kvw + 16);
	S(v, 2 * C * kvw + 16);
	S(g, 2 * C * mlp);
	S(u, 2 * C * mlp);
	S(act, 2 * C * mlp);
	S(rlogits, 4 * C * E);
	S(ids, 4 * C * K);
	S(wts, 4 * C * K);
	S(sorted, 4 * em);
	S(eids, 4 * (em / 16 + 1));
	S(ntpp, 16);
	S(c1, 2 * C * K * 2 * I + 16);
	S(act2, 2 * C * K * I + 16);
	S(c2, 2 * C * K * H);
	S(sh, 2 * C * H);
	S(aq, C * K * maxk);
	S(as, 4 * C * K * (maxk / 16 + 1));
	S(logits, 2 * C * (size_t)c->vocab);
	S(iota, 4 * (em + 256));
	S(zeros, 4 * (em / 16 + 1));
	S(indptr, 4 * IX_N);
	S(kv_indices, 8 * (size_t)g->max_seq);
	S(part_o, 4 * nh * ATTN_MERGE_MAX_SPLITS * max3(kvl, (size_t)c->head_dim, 1));
	S(part_lse, 4 * nh * ATTN_MERGE_MAX_SPLITS);
#undef S
	if (!rc) {
		int n = (int)(em + 256);
		void **p = ARGS(&s->iota, &n);

		rc = launch(g, g->op[OP_fill_iota], "eng_fill_iota", (unsigned)cdiv(n, 256), 1, 1, 256, 0, p, err);
	}
	if (!rc) {
		int64_t *ix = malloc(8 * (size_t)g->max_seq);
		int i;

		if (!ix)
			return sm_err_set(err, -ENOMEM, "GPU backend: out of host memory");
		for (i = 0; i < g->max_seq; i++)
			ix[i] = i;
		CU(g, cuMemcpyHtoD_v2(s->kv_indices, ix, 8 * (size_t)g->max_seq), "kv_indices", err);
		free(ix);
	}
	if (!rc) {
		g->logits_host = malloc(2 * C * (size_t)c->vocab);
		if (g->routes.fn)
			g->routes_host = malloc(sizeof(int) * C * K);
		if (!g->logits_host || (g->routes.fn && !g->routes_host))
			rc = sm_err_set(err, -ENOMEM, "GPU backend: out of host memory for logits and routes");
	}
	return rc;
}

/* ---- the forward pass ----------------------------------------------------------- */

/* choose - moe_gemm's choice (its row tile and pipeline depth) for @rows routed rows of @quant
 * (FP8: scale layout @scale) with N @n and K @k over @experts on @g's GPU: the shim's own
 * (moe_gemm_choose), on the align step's EM bound at 128. */
static struct moe_gemm_choice choose(const struct ref_gpu *g, int quant, int scale, int rows, int n, int k,
				     int experts)
{
	return moe_gemm_choose(quant, scale, 128, rows, rows + experts * 127, n, k, 0, g->sms);
}

/*
 * quant_act - FP8 activations of @rows rows of @k (bf16, contiguous) into
 * s.aq / s.as when @d is FP8: 128-groups for block scales, per token for
 * channel scales.  Sets @a's activation pointer and scale strides.
 */
static int quant_act(struct ref_gpu *g, const struct dmat *d, CUdeviceptr x, int rows, int k,
		     struct moe_gemm_args *a, struct sm_err *err)
{
	int group = d->scale == MOE_SCALE_BLOCK ? 128 : k;

	a->a = (const void *)(uintptr_t)x;
	if (d->quant != MOE_FP8)
		return 0;
	a->a = (const void *)(uintptr_t)g->s.aq;
	a->a_scale = (const float *)(uintptr_t)g->s.as;
	a->as_stride_m = cdiv(k, group), a->as_stride_k = 1;
	a->group_n = a->group_k = 128;
	a->scale = d->scale;
	return launch(g, g->op[OP_quant_fp8], "eng_quant_fp8", (unsigned)rows, (unsigned)cdiv(k, group), 1, 32, 0,
		      ARGS(&g->s.aq, &g->s.as, &x, &k, &group), err);
}

/* weight_args - @d's pointers and strides into @a (expert stride included). */
static void weight_args(const struct dmat *d, struct moe_gemm_args *a)
{
	a->b = (const void *)(uintptr_t)d->w;
	a->b_scale = (const void *)(uintptr_t)d->s;
	a->b_global = (const float *)(uintptr_t)d->global;
	a->b_stride_e = d->w_e, a->b_stride_n = d->w_n;
	a->bs_stride_e = d->s_e, a->bs_stride_n = d->s_n, a->bs_stride_k = d->s_k;
	a->N = d->n, a->K = d->k;
	a->group_size = d->group;
}

/*
 * linear - y[rows][n] (bf16, row stride @ldy) = x[rows][k] (bf16, contiguous)
 * times @d^T, as a one-expert grouped GEMM: sorted rows 0..rows-1 (iota),
 * padding past them, expert 0 for every block; on the kernel the plan
 * picks (moe_gemm_choose): a decode kernel for a few rows (a decode step's
 * one), else its row tile.
 */
static int linear(struct ref_gpu *g, const struct dmat *d, CUdeviceptr x, int rows, CUdeviceptr y, int ldy,
		  struct sm_err *err)
{
	struct moe_gemm_args a = { 0 };
	const struct moe_gemm_choice c = choose(g, d->quant, d->scale, rows, d->n, d->k, 1);
	int tm = c.tm, em = cdiv(rows, tm) * tm, rc;

	if ((rc = quant_act(g, d, x, rows, d->k, &a, err)))
		return rc;
	weight_args(d, &a);
	a.c = (void *)(uintptr_t)y;
	a.topk_weights = NULL;
	a.sorted_ids = (const int32_t *)(uintptr_t)g->s.iota;
	a.expert_ids = (const int32_t *)(uintptr_t)g->s.zeros;
	a.num_tokens_post_padded = (const int32_t *)(uintptr_t)(g->s.iota + 4 * (size_t)em);
	a.a_stride_m = d->k, a.c_stride_m = ldy;
	a.EM = em, a.num_valid = rows, a.top_k = 1, a.block_m = tm;
	a.stages = c.stages;
	if (c.tn) {
		const char *name = moe_gemm_decode_kernel(d->quant, c.tn, c.rows, d->k);

		return launch(g, decode_fn(g, name), name,
			      (unsigned)moe_gemm_decode_cols(d->quant, d->n, d->k, c.tn, em, tm, rows),
			      (unsigned)moe_gemm_decode_blocks(em, tm, rows), 1, MOE_GEMM_THREADS, 0, ARGS(&a), err);
	}
	return launch(g, gemm_fn(g, d->quant, tm), moe_gemm_kernel_name(d->quant, tm),
		      (unsigned)moe_gemm_rows_cols(d->quant, tm, d->n, d->k, rows), (unsigned)(em / tm), 1,
		      moe_gemm_threads(d->quant, tm), moe_gemm_launch_smem(d->quant, tm, a.stages), ARGS(&a), err);
}

static int add_norm(struct ref_gpu *g, CUdeviceptr add, int64_t ld, CUdeviceptr w, int n, struct sm_err *err)
{
	int H = g->c->hidden;
	float eps = g->c->rms_eps;

	return launch(g, g->op[OP_add_rmsnorm], "eng_add_rmsnorm", (unsigned)n, 1, 1, 256, 0,
		      ARGS(&g->s.x, &add, &ld, &g->s.hb, &w, &H, &eps), err);
}

/* bgemm - the batched NT product of ops.cu (bf16 out) over @batch matrices. */
static int bgemm(struct ref_gpu *g, CUdeviceptr A, int64_t a_b, int64_t a_m, CUdeviceptr B, int64_t b_b,
		 int64_t b_n, CUdeviceptr C, int64_t c_b, int64_t c_m, int M, int N, int K, int batch, int f32,
		 struct sm_err *err)
{
	return launch(g, g->op[f32 ? OP_bgemm_f32 : OP_bgemm_bf16], f32 ? "eng_bgemm_f32" : "eng_bgemm_bf16",
		      (unsigned)cdiv(N, 64), (unsigned)cdiv(M, 64), (unsigned)batch, 256, 0,
		      ARGS(&A, &a_b, &a_m, &B, &b_b, &b_n, &C, &c_b, &c_m, &M, &N, &K), err);
}

/*
 * How a layer's attention runs, a row each: its enum and the name the
 * backend lines give (ref_gpu_attention).
 */
#define ATTN_PATHS(X)                                                                             \
	X(PATH_OPS, "eng_attention (ops.cu)")                                                     \
	X(PATH_STANDIN, "_fwd_kernel (stand-in of SGLang's extend attention, Hopper tile)")      \
	X(PATH_EXTEND_128, ATTN_EXTEND_128_BF16 " (bundled)")                                     \
	X(PATH_DECODE_GQA128, ATTN_DECODE_GQA128_BF16 " + " ATTN_MERGE_KERNEL " (bundled, split KV)") \
	X(PATH_DECODE_MLA, ATTN_DECODE_MLA_BF16 " + " ATTN_MERGE_KERNEL " (bundled, split KV)")
#define PATH_ENUM(id, name) id,
enum attn_path { ATTN_PATHS(PATH_ENUM) };

/*
 * attn_path - how a step of @n new tokens attends in a layer of config @c.
 * Prefill (@n > 1): MLA absorbed at SGLang's extend tile's head sizes (Lq
 * 576, Lv 512: Kimi K2) goes through the stand-in, as SGLang's launch does,
 * so that the shim sees it; GQA with head size 128 (GLM-4.7) runs the
 * bundled extend attention, an MMA kernel that fits SM120 as it is
 * (eng_attention took 97% of GLM-4.7's prefill at 2048 tokens: H200, INT4,
 * real dimensions, 611 against 16 ms).  Decode (@n 1): the bundled split-KV
 * decode attention at those head sizes (eng_attention, eight warps a head
 * each walking an eighth of the keys one at a time, took 380 us a layer at
 * 1024 tokens of context on the H200, 45% of GLM-4.7's decode step's kernel
 * time).  Other head sizes (the tiny test models) run eng_attention.  Pure.
 */
static enum attn_path attn_path(const struct ref_config *c, int n)
{
	int mla576 = c->attn == REF_ATTN_MLA && c->kv_lora_rank == STANDIN_EXTEND_LV &&
		     c->kv_lora_rank + c->qk_rope == STANDIN_EXTEND_LQ;
	int gqa128 = c->attn == REF_ATTN_GQA && c->head_dim == 128;

	if (n > 1)
		return mla576 ? PATH_STANDIN : gqa128 ? PATH_EXTEND_128 : PATH_OPS;
	return mla576 ? PATH_DECODE_MLA : gqa128 ? PATH_DECODE_GQA128 : PATH_OPS;
}

const char *ref_gpu_attention(const struct ref_config *c, int decode)
{
#define PATH_NAME(id, name) [id] = name,
	static const char *const names[] = { ATTN_PATHS(PATH_NAME) };
#undef PATH_NAME

	return names[attn_path(c, decode ? 1 : 2)];
}

int ref_gpu_decode_splits(int seq, int want)
{
	int len;

	want = want < 1 ? 1 : want > ATTN_MERGE_MAX_SPLITS ? ATTN_MERGE_MAX_SPLITS : want;
	len = cdiv(cdiv(seq, want), 32) * 32;
	return cdiv(seq, len);
}

/* decode_blocks_x - grid x of the decode attention for config @c: kv heads x blocks of 16 q heads. */
static int decode_blocks_x(const struct ref_config *c)
{
	int group = c->attn == REF_ATTN_MLA ? c->n_heads : c->n_heads / c->n_kv_heads;

	return c->n_heads / group * cdiv(group, ATTN_DECODE_HEADS_PER_BLOCK);
}

/* step_indices - s.indptr and g->splits for a step of @n tokens at g->pos (decode: about two
 * blocks an SM). */
static int step_indices(struct ref_gpu *g, int n, struct sm_err *err)
{
	int32_t ix[IX_N] = { [IX_QO + 1] = n, [IX_KV + 1] = g->pos, [IX_DECODE_KV + 1] = g->pos + n };

	g->splits = ix[IX_SPLITS] = ref_gpu_decode_splits(g->pos + n, 2 * g->sms / decode_blocks_x(g->c));
	CU(g, cuMemcpyHtoD_v2(g->s.indptr, ix, sizeof(ix)), "the step's indices", err);
	return 0;
}

/*
 * decode_attention - the bundled split-KV decode attention (decode.h,
 * SGLang's scheme, page size 1) of the one query at g->pos, its keys the
 * cache's slots 0 .. g->pos: stage 1 kernel @ba over q [hq][dk] (head stride
 * @q_head) and the cache @k / @v (slot stride @k_tok, kv head stride
 * @k_head) into s.part_o / s.part_lse, then attn_decode_merge_bf16 into @o
 * [hq][dv].
 */
static int decode_attention(struct ref_gpu *g, int ba, CUdeviceptr o, CUdeviceptr q, int64_t q_head, CUdeviceptr k,
			    CUdeviceptr v, int64_t k_tok, int64_t k_head, int hq, int group, int dv, float scale,
			    struct sm_err *err)
{
	struct scratch *s = &g->s;
	struct attn_decode_args a = { 0 };
	struct attn_merge_args mg = { 0 };
	int splits = g->splits, rc;

	a.q = (const void *)(uintptr_t)q;
	a.k = (const void *)(uintptr_t)k;
	a.v = (const void *)(uintptr_t)v;
	a.out = (float *)(uintptr_t)s->part_o;
	a.lse = (float *)(uintptr_t)s->part_lse;
	a.kv_indptr = (const int32_t *)(uintptr_t)(s->indptr + 4 * IX_DECODE_KV);
	a.kv_indices = (const int64_t *)(uintptr_t)s->kv_indices;
	a.num_splits = (const int32_t *)(uintptr_t)(s->indptr + 4 * IX_SPLITS);
	a.q_stride_b = hq * q_head, a.q_stride_h = q_head;
	a.k_stride_page = a.k_stride_tok = a.v_stride_page = a.v_stride_tok = k_tok;
	a.k_stride_head = a.v_stride_head = k_head;
	a.out_stride_s = dv, a.out_stride_h = (int64_t)splits * dv, a.out_stride_b = hq * a.out_stride_h;
	a.sm_scale = scale;
	a.scheme = ATTN_DECODE_SGLANG, a.batch = 1, a.q_heads = hq, a.kv_group = group, a.page_size = 1;
	if ((rc = launch(g, g->attn[ba], bundled_attn[ba].name, (unsigned)decode_blocks_x(g->c), (unsigned)splits, 1,
			 ATTN_DECODE_THREADS, (unsigned)bundled_attn[ba].smem, ARGS(&a), err)))
		return rc;
	mg.partial_o = a.out, mg.partial_lse = a.lse, mg.num_splits = a.num_splits;
	mg.out = (void *)(uintptr_t)o;
	mg.batch = 1, mg.heads = hq, mg.max_splits = splits, mg.dv = dv;
	return launch(g, g->attn[BA_MERGE], ATTN_MERGE_KERNEL, 1, (unsigned)hq, 1, ATTN_MERGE_THREADS, 0, ARGS(&mg),
		      err);
}

/*
 * attention - eng_attention of @n queries over @hq heads (ops.cu's
 * arguments): split over a block's warps below ENG_ATTN_SPLIT_BELOW
 * (token, head) pairs, one warp per pair from it.
 */
static int attention(struct ref_gpu *g, CUdeviceptr o, int64_t o_tok, int64_t o_head, CUdeviceptr q, int64_t q_tok,
		     int64_t q_head, CUdeviceptr k, int64_t k_tok, int64_t k_head, CUdeviceptr v, int64_t v_tok,
		     int64_t v_head, int n, int hq, int group, int lq, int lv, int pos, float scale,
		     struct sm_err *err)
{
	int split = n * hq < ENG_ATTN_SPLIT_BELOW;

	return launch(g, g->op[OP_attention], "eng_attention", (unsigned)(split ? n * hq : cdiv(n * hq, 8)), 1, 1,
		      256, 0,
		      ARGS(&o, &o_tok, &o_head, &q, &q_tok, &q_head, &k, &k_tok, &k_head, &v, &v_tok, &v_head, &n,
			   &hq, &group, &lq, &lv, &pos, &scale, &split),
		      err);
}

/* mla - absorbed MLA for @n tokens at g->pos: o_proj's input into s.o [n][nh * V]. */
static int mla(struct ref_gpu *g, struct glayer *gl, int n, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	int nh = c->n_heads, P = c->qk_nope, R = c->qk_rope, V = c->v_head, kvl = c->kv_lora_rank;
	int W = kvl + R, pos = g->pos, rc;
	float mul = (float)c->rope_attn_factor, eps = c->rms_eps, scale = (float)c->softmax_scale;
	int64_t ldq = (int64_t)nh * (P + R);

	if (c->q_lora_rank) {
		int64_t ld = c->q_lora_rank;
		int qlr = c->q_lora_rank;

		if ((rc = linear(g, &gl->q_a, s->hb, n, s->cq, c->q_lora_rank, err)) ||
		    (rc = launch(g, g->op[OP_rmsnorm_bf16], "eng_rmsnorm_bf16", (unsigned)n, 1, 1, 256, 0,
				 ARGS(&s->cq, &ld, &s->cq, &ld, &gl->q_a_norm, &qlr, &eps), err)) ||
		    (rc = linear(g, &gl->q_b, s->cq, n, s->q, (int)ldq, err)))
			return rc;
	} else if ((rc = linear(g, &gl->q, s->hb, n, s->q, (int)ldq, err))) {
		return rc;
	}
	if ((rc = linear(g, &gl->kv_a, s->hb, n, s->kv, W, err)) ||
	    (rc = launch(g, g->op[OP_mla_latent], "eng_mla_latent", (unsigned)n, 1, 1, 256, 0,
			 ARGS(&gl->kc, &s->kv, &gl->kv_a_norm, &g->inv_freq, &kvl, &R, &pos, &mul, &eps), err)) ||
	    /* q_lat[t][h] = W_UK[h]^T q_nope[t][h], into qf[t][h][0 .. kvl) */
	    (rc = bgemm(g, s->q, P + R, ldq, gl->wuk_t, (int64_t)kvl * P, P, s->qf, W, (int64_t)nh * W, n, kvl,
			P, nh, 0, err)) ||
	    (rc = launch(g, g->op[OP_mla_qpe], "eng_mla_qpe", (unsigned)n, (unsigned)nh, 1, 32, 0,
			 ARGS(&s->qf, &s->q, &ldq, &g->inv_freq, &P, &R, &kvl, &pos, &mul), err)))
		return rc;
	switch (attn_path(c, n)) {
	case PATH_STANDIN: {
		/* SGLang's extend attention over [prefix | these tokens], one sequence */
		CUdeviceptr qo_ind = s->indptr + 4 * IX_QO, kv_ind = s->indptr + 4 * IX_KV;
		CUdeviceptr kext = gl->kc + 2 * (size_t)pos * W;
		int grp = nh, sq = nh * W, sh = W, so = nh * kvl, soh = kvl, sk = W;

		rc = launch(g, g->extend_fn, "_fwd_kernel (SGLang extend, Hopper tile)", 1, (unsigned)nh,
			    (unsigned)cdiv(n, STANDIN_EXTEND_BM), 32 * STANDIN_EXTEND_WARPS, STANDIN_EXTEND_SMEM,
			    ARGS(&s->qf, &kext, &kext, &s->olat, &gl->kc, &gl->kc, &qo_ind, &kv_ind, &s->kv_indices,
				 &scale, &grp, &sq, &sh, &sk, &sk, &sk, &sk, &so, &soh, &sk, &sk, &sk,
				 &sk, &g->s.zeros, &g->s.zeros),
			    err);
		break;
	}
	case PATH_DECODE_MLA: /* V is the latent's first kvl channels: the cache itself */
		rc = decode_attention(g, BA_DECODE_MLA, s->olat, s->qf, W, gl->kc, gl->kc, W, 0, nh, nh, kvl, scale,
				      err);
		break;
	default: {
		int64_t qt = (int64_t)nh * W, qh = W, kt = W, kh = 0, ot = (int64_t)nh * kvl, oh = kvl;
		int grp = nh;

		rc = attention(g, s->olat, ot, oh, s->qf, qt, qh, gl->kc, kt, kh, gl->kc, kt, kh, n, nh, grp, W, kvl,
			       pos, scale, err);
	}
	}
	if (rc)
		return rc;
	/* o[t][h] = W_UV[h] o_lat[t][h] */
	return bgemm(g, s->olat, kvl, (int64_t)nh * kvl, gl->wuv, (int64_t)V * kvl, kvl, s->o, V, (int64_t)nh * V,
		     n, V, kvl, nh, 0, err);
}

/*
 * gqa_extend - the bundled extend attention (kernels/attention/extend.h) of
 * @n tokens at g->pos, one sequence, causal: queries s.qf [n][hq][hd], keys
 * and values the cache's slots 0 .. g->pos - 1 as the prefix (slot j at
 * kv_indices[j] = j) and g->pos .. g->pos + n - 1 as the extend part
 * (eng_gqa_prep wrote them there), out to s.o [n][hq][hd].  hd must be 128.
 */
static int gqa_extend(struct ref_gpu *g, struct glayer *gl, int n, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	int hkv = c->n_kv_heads, hd = c->head_dim, grp = c->n_heads / hkv;
	int64_t qt = (int64_t)c->n_heads * hd, kt = (int64_t)hkv * hd;
	size_t ext = 2 * (size_t)g->pos * (size_t)kt;
	struct attn_extend_args a = { 0 };

	a.q = (const void *)(uintptr_t)s->qf;
	a.k_ext = (const void *)(uintptr_t)(gl->kc + ext);
	a.v_ext = (const void *)(uintptr_t)(gl->vc + ext);
	a.o = (void *)(uintptr_t)s->o;
	a.k_buf = (const void *)(uintptr_t)gl->kc;
	a.v_buf = (const void *)(uintptr_t)gl->vc;
	a.qo_indptr = (const void *)(uintptr_t)(s->indptr + 4 * IX_QO);
	a.kv_indptr = (const int32_t *)(uintptr_t)(s->indptr + 4 * IX_KV);
	a.kv_indices = (const int64_t *)(uintptr_t)s->kv_indices;
	a.q_tok = a.o_tok = qt;
	a.kx_tok = a.vx_tok = a.kb_slot = a.vb_slot = kt;
	a.q_head = a.o_head = a.kx_head = a.vx_head = a.kb_head = a.vb_head = hd;
	a.sm_scale = (float)c->softmax_scale;
	a.k_scale = a.v_scale = 1.0f;
	a.batch = 1, a.kv_group_num = grp, a.lq = a.lv = hd;
	a.flags = ATTN_EXTEND_CAUSAL;
	return launch(g, g->attn[BA_EXTEND_128], ATTN_EXTEND_128_BF16, (unsigned)cdiv(n * grp, ATTN_EXTEND_ROWS_128),
		      (unsigned)hkv, 1, ATTN_EXTEND_THREADS, ATTN_EXTEND_SMEM_128, ARGS(&a), err);
}

/* gqa - GLM attention for @n tokens: o_proj's input into s.o [n][hq * hd]. */
static int gqa(struct ref_gpu *g, struct glayer *gl, int n, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	int hq = c->n_heads, hkv = c->n_kv_heads, hd = c->head_dim, rot = c->rotary_dim, pos = g->pos;
	int grp = hq / hkv, rc;
	float mul = (float)c->rope_attn_factor, eps = c->rms_eps, scale = (float)c->softmax_scale;
	int64_t qt = (int64_t)hq * hd, kt = (int64_t)hkv * hd, h = hd;

	if ((rc = linear(g, &gl->qp, s->hb, n, s->q, hq * hd, err)) ||
	    (rc = linear(g, &gl->kp, s->hb, n, s->k, hkv * hd, err)) ||
	    (rc = linear(g, &gl->vp, s->hb, n, s->v, hkv * hd, err)) ||
	    (rc = launch(g, g->op[OP_gqa_prep], "eng_gqa_prep", (unsigned)n, (unsigned)(hq + hkv), 1, 128, 0,
			 ARGS(&s->qf, &gl->kc, &gl->vc, &s->q, &s->k, &s->v, &gl->qb, &gl->kb, &gl->vb, &gl->qn,
			      &gl->kn, &g->inv_freq, &hq, &hkv, &hd, &rot, &pos, &mul, &eps),
			 err)))
		return rc;
	switch (attn_path(c, n)) {
	case PATH_EXTEND_128:
		return gqa_extend(g, gl, n, err);
	case PATH_DECODE_GQA128:
		return decode_attention(g, BA_DECODE_GQA128, s->o, s->qf, hd, gl->kc, gl->vc, kt, hd, hq, grp, hd, scale,
					err);
	default:
		break;
	}
	return attention(g, s->o, qt, h, s->qf, qt, h, gl->kc, kt, h, gl->vc, kt, h, n, hq, grp, hd, hd, pos, scale,
			 err);
}

/* swiglu - down(silu(gate x) * up x) of s.hb into @y [n][H] (bf16). */
static int swiglu(struct ref_gpu *g, struct glayer *gl, int n, CUdeviceptr y, struct sm_err *err)
{
	struct scratch *s = &g->s;
	int w = gl->gate.n, rc;
	int64_t ld = w;

	if ((rc = linear(g, &gl->gate, s->hb, n, s->g, w, err)) || (rc = linear(g, &gl->up, s->hb, n, s->u, w, err)) ||
	    (rc = launch(g, g->op[OP_silu_mul], "eng_silu_mul", (unsigned)n, 1, 1, 256, 0,
			 ARGS(&s->act, &s->g, &ld, &s->u, &ld, &w), err)))
		return rc;
	return linear(g, &gl->down, s->act, n, y, g->c->hidden, err);
}

/*
 * experts - one half of the routed experts as the framework launches it:
 * the stand-in fused_moe kernel (1-D grid cdiv(EM, 128) * cdiv(N, 256), 8
 * warps, the Hopper tile's shared memory), or moe_gemm_nvfp4 directly.
 */
static int experts(struct ref_gpu *g, int half, const struct dmat *d, CUdeviceptr x, int rows_in, CUdeviceptr c,
		   int em, int bm, int numel, struct sm_err *err)
{
	struct scratch *s = &g->s;
	struct moe_gemm_args a = { 0 };
	int rc, tm;

	if (d->quant == MOE_NVFP4) {
		(void)rows_in;
		weight_args(d, &a);
		a.a = (const void *)(uintptr_t)x;
		a.c = (void *)(uintptr_t)c;
		a.topk_weights = (const float *)(uintptr_t)s->wts;
		a.sorted_ids = (const int32_t *)(uintptr_t)s->sorted;
		a.expert_ids = (const int32_t *)(uintptr_t)s->eids;
		a.num_tokens_post_padded = (const int32_t *)(uintptr_t)s->ntpp;
		a.a_stride_m = d->k, a.c_stride_m = d->n;
		a.EM = em, a.num_valid = numel, a.block_m = bm;
		a.top_k = half ? 1 : g->c->top_k, a.mul_routed_weight = half;
		tm = bm;
		return launch(g, gemm_fn(g, MOE_NVFP4, tm), moe_gemm_kernel_name(MOE_NVFP4, tm),
			      (unsigned)moe_gemm_rows_cols(MOE_NVFP4, tm, d->n, d->k, numel), (unsigned)cdiv(em, tm), 1,
			      moe_gemm_threads(MOE_NVFP4, tm), moe_gemm_smem(MOE_NVFP4, tm), ARGS(&a), err);
	}
	if ((rc = quant_act(g, d, x, rows_in, d->k, &a, err)))
		return rc;
	{
		CUdeviceptr A = (CUdeviceptr)(uintptr_t)a.a, AS = s->as, W = d->w, WS = d->s, null = 0;
		unsigned grid = (unsigned)(cdiv(em, STANDIN_MOE_BM) * cdiv(d->n, STANDIN_MOE_BN));
		int N = d->n, K = d->k, nv = numel, am = d->k, be = (int)d->w_e, bn = (int)d->w_n, zero = 0;
		int cm = d->n, asm_ = (int)a.as_stride_m, ask = 1, bse = (int)d->s_e, bsk = (int)d->s_k;
		int bsn = (int)d->s_n;
		const char *name = g->moe_img == IMG_MOE_GPTQ ? "fused_moe_kernel_gptq_awq" : "fused_moe_kernel";

		if (d->quant == MOE_FP8 && d->scale == MOE_SCALE_CHANNEL)
			asm_ = 1, bsk = 1, bsn = 1;
		if (g->moe_img == IMG_MOE_BF16)
			return launch(g, g->moe_fn[half], name, grid, 1, 1, 256, (unsigned)g->moe_smem,
				      ARGS(&A, &W, &c, &s->wts, &s->sorted, &s->eids, &s->ntpp, &N, &K, &em, &nv,
					   &am, &be, &bn, &zero, &zero, &cm, &zero, &zero, &zero, &zero, &zero, &null,
					   &null),
				      err);
		if (g->moe_img == IMG_MOE_FP8)
			return launch(g, g->moe_fn[half], name, grid, 1, 1, 256, (unsigned)g->moe_smem,
				      ARGS(&A, &W, &c, &AS, &WS, &s->wts, &s->sorted, &s->eids, &s->ntpp, &N, &K,
					   &em, &nv, &am, &be, &bn, &zero, &zero, &cm, &asm_, &ask, &bse, &bsk, &bsn,
					   &null, &null),
				      err);
		return launch(g, g->moe_fn[half], name, grid, 1, 1, 256, (unsigned)g->moe_smem,
			      ARGS(&A, &W, &c, &WS, &s->wts, &s->sorted, &s->eids, &s->ntpp, &em, &nv, &am, &be,
				   &bn, &cm, &bse, &bsn, &zero, &zero, &zero, &null, &null),
			      err);
	}
}

/* show_routes - hand layer @l's expert ids of the @n tokens at g->pos to the route sink, if any. */
static int show_routes(struct ref_gpu *g, int l, int n, struct sm_err *err)
{
	if (!g->routes.fn)
		return 0;
	CU(g, cuMemcpyDtoH_v2(g->routes_host, g->s.ids, sizeof(int) * (size_t)n * (size_t)g->c->top_k),
	   "copying the router's choices", err);
	g->routes.fn(g->routes.ctx, l, g->pos, n, g->routes_host);
	return 0;
}

/*
 * router - the router's fp32 logits of the @n tokens in s.hb into s.rlogits:
 * eng_router_rows where the hidden size allows its 16-byte loads,
 * eng_bgemm_f32 otherwise.
 */
static int router(struct ref_gpu *g, struct glayer *gl, int n, struct sm_err *err)
{
	struct scratch *s = &g->s;
	int E = g->c->n_routed, H = g->c->hidden;
	int64_t ld = H, ldc = E;

	if (H % 4)
		return bgemm(g, s->hb, 0, H, gl->router, 0, H, s->rlogits, 0, E, n, E, H, 1, 1, err);
	return launch(g, g->op[OP_router_rows], "eng_router_rows", (unsigned)cdiv(E, 8),
		      (unsigned)cdiv(n, ENG_ROUTER_ROWS), 1, 256, 0,
		      ARGS(&s->hb, &ld, &gl->router, &ld, &s->rlogits, &ldc, &n, &E, &H), err);
}

/* moe - router, align, gate/up, SwiGLU, down, and the sum into the residual (with the shared expert). */
static int moe(struct ref_gpu *g, struct glayer *gl, int n, struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	int E = c->n_routed, K = c->top_k, H = c->hidden, I = gl->w2.k, numel = n * K, rc;
	int bm = gl->w13.quant == MOE_NVFP4 ? choose(g, MOE_NVFP4, MOE_SCALE_NONE, numel, gl->w13.n, gl->w13.k, E).tm
					    : STANDIN_MOE_BM;
	int em = numel + E * (bm - 1), norm = c->norm_topk_prob, ng = c->n_group, tg = c->topk_group;
	float scaling = c->routed_scaling;
	int64_t ld2 = 2 * (int64_t)I;
	CUdeviceptr up = s->c1 + 2 * (size_t)I, shared = 0;

	if (numel < E && numel * bm < em)
		em = numel * bm;	/* the frameworks' bound for few tokens */
	if ((rc = router(g, gl, n, err)) ||
	    (rc = launch(g, g->op[OP_route], "eng_route", (unsigned)cdiv(n, 8), 1, 1, 256, 0,
			 ARGS(&s->ids, &s->wts, &s->rlogits, &gl->router_bias, &n, &E, &K, &ng, &tg, &norm, &scaling),
			 err)) ||
	    (rc = show_routes(g, (int)(gl - g->L), n, err)) ||
	    (rc = launch(g, g->op[OP_moe_align], "eng_moe_align", 1, 1, 1, 1024, 0,
			 ARGS(&s->sorted, &s->eids, &s->ntpp, &s->ids, &numel, &E, &bm, &em), err)) ||
	    (rc = experts(g, 0, &gl->w13, s->hb, n, s->c1, em, bm, numel, err)) ||
	    (rc = launch(g, g->op[OP_silu_mul], "eng_silu_mul", (unsigned)numel, 1, 1, 256, 0,
			 ARGS(&s->act2, &s->c1, &ld2, &up, &ld2, &I), err)) ||
	    (rc = experts(g, 1, &gl->w2, s->act2, numel, s->c2, em, bm, numel, err)))
		return rc;
	if (c->n_shared) {
		if ((rc = swiglu(g, gl, n, s->sh, err)))
			return rc;
		shared = s->sh;
	}
	return launch(g, g->op[OP_moe_sum], "eng_moe_sum", (unsigned)n, 1, 1, 256, 0,
		      ARGS(&s->x, &s->c2, &shared, &K, &H), err);
}

/* forward_chunk - @n <= chunk tokens at g->pos; the logits of the last @rows (0 .. @n) of
 * them, [rows][vocab], into @logits. */
static int forward_chunk(struct ref_gpu *g, const int *tokens, int n, int rows, float *logits,
			 struct sm_err *err)
{
	const struct ref_config *c = g->c;
	struct scratch *s = &g->s;
	int H = c->hidden, l, rc, i;
	size_t nl = (size_t)rows * (size_t)c->vocab;
	CUdeviceptr pending = 0;	/* bf16 rows to add to x before the next norm */

	CU(g, cuMemcpyHtoD_v2(s->tok, tokens, sizeof(int) * (size_t)n), "copying tokens", err);
	if ((rc = step_indices(g, n, err)))
		return rc;
	if ((rc = launch(g, g->op[OP_embed], "eng_embed", (unsigned)n, 1, 1, 256, 0,
			 ARGS(&s->x, &g->embed, &s->tok, &H), err)))
		return rc;
	for (l = 0; l < c->n_layers; l++) {
		struct glayer *gl = &g->L[l];

		if ((rc = add_norm(g, pending, H, gl->in_norm, n, err)) ||
		    (rc = c->attn == REF_ATTN_MLA ? mla(g, gl, n, err) : gqa(g, gl, n, err)) ||
		    (rc = linear(g, &gl->o, s->o, n, s->a, H, err)) ||
		    (rc = add_norm(g, s->a, H, gl->post_norm, n, err)))
			return rc;
		if (gl->moe) {
			rc = moe(g, gl, n, err);
			pending = 0;
		} else {
			rc = swiglu(g, gl, n, s->a, err);
			pending = s->a;
		}
		if (rc)
			return rc;
	}
	if ((rc = add_norm(g, pending, H, g->final_norm, n, err)))
		return rc;
	if (rows) {
		if ((rc = linear(g, &g->lm_head, s->hb + 2 * (size_t)(n - rows) * H, rows, s->logits, c->vocab,
				  err)))
			return rc;
		CU(g, cuMemcpyDtoH_v2(g->logits_host, s->logits, 2 * nl), "copying logits", err);
		for (i = 0; i < (int)nl; i++)
			logits[i] = nf_bf16_to_f32(g->logits_host[i]);
	} else {
		CU(g, cuCtxSynchronize(), "the chunk's kernels", err);
	}
	g->pos += n;
	return 0;
}

int ref_gpu_forward(struct ref_gpu *g, const int *tokens, int n, int all, float *logits, struct sm_err *err)
{
	int t, done, rc;

	if (n <= 0 || g->pos + n > g->max_seq)
		return sm_err_set(err, -ENOSPC, "%d tokens after %d do not fit the KV cache of %d positions; "
				  "pass a larger --max-seq", n, g->pos, g->max_seq);
	for (t = 0; t < n; t++)
		if (tokens[t] < 0 || tokens[t] >= g->c->vocab)
			return sm_err_set(err, -EINVAL, "token %d is outside the vocabulary (0..%d)", tokens[t],
					  g->c->vocab - 1);
	for (done = 0; done < n; done += g->chunk) {
		int m = n - done < g->chunk ? n - done : g->chunk;

		/* every row, or the last chunk's last */
		rc = forward_chunk(g, tokens + done, m, all ? m : done + m == n,
				   logits + (all ? (size_t)done * g->c->vocab : 0), err);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- setup ------------------------------------------------------------------------ */

/* servable - why this model cannot run on the GPU backend, or 0. */
static int servable(const struct ref_config *c, int absorbed, struct sm_err *err)
{
	if (c->attn == REF_ATTN_MLA && !absorbed)
		return sm_err_set(err, -EINVAL, "--backend gpu runs MLA absorbed only (as SGLang's MLA "
				  "backends do); drop --mla naive");
	if (c->attn == REF_ATTN_MLA && (c->kv_lora_rank + c->qk_rope > 576 || c->kv_lora_rank > 576))
		return sm_err_set(err, -EINVAL, "--backend gpu: MLA latent %d + %d exceeds the 576 the "
				  "attention kernels hold", c->kv_lora_rank, c->qk_rope);
	if (c->attn == REF_ATTN_GQA && (c->head_dim > 512 || c->n_heads % c->n_kv_heads))
		return sm_err_set(err, -EINVAL, "--backend gpu: head_dim %d above 512 or %d heads not a "
				  "multiple of %d KV heads", c->head_dim, c->n_heads, c->n_kv_heads);
	if (c->n_routed > 1024 || (c->n_routed && (c->n_group > 64 || c->n_routed % c->n_group ||
						   c->topk_group * (c->n_routed / c->n_group) < c->top_k)))
		return sm_err_set(err, -EINVAL, "--backend gpu: %d experts in %d groups (top %d groups, "
				  "top_k %d): at most 1024 experts, 64 groups, enough experts in the "
				  "chosen groups", c->n_routed, c->n_group, c->topk_group, c->top_k);
	return 0;
}

struct ref_gpu *ref_gpu_new(const struct ref_model *m, int max_seq, int chunk, int absorbed, int verbose,
			    const struct ref_route_sink *routes, struct sm_err *err)
{
	const struct ref_config *c = &m->cfg;
	struct ref_gpu *g;
	float *inv;
	int rc, l;

	if (servable(c, absorbed, err) || max_seq <= 0 || chunk < 0) {
		if (max_seq <= 0)
			sm_err_set(err, -EINVAL, "--max-seq must be positive");
		else if (chunk < 0)
			sm_err_set(err, -EINVAL, "--chunk must be positive");
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		sm_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	g->m = m, g->c = c, g->max_seq = max_seq, g->verbose = verbose;
	if (routes)
		g->routes = *routes;
	if (!chunk)
		chunk = REF_GPU_CHUNK;
	g->chunk = max_seq < chunk ? max_seq : chunk;
	g->L = calloc((size_t)c->n_layers, sizeof(*g->L));
	inv = malloc(sizeof(float) * (size_t)(c->rotary_dim / 2 + 1));
	rc = g->L && inv ? load_driver(&g->cu, err) : sm_err_set(err, -ENOMEM, "out of memory");
	if (!rc && (rc = g->cu.cuInit(0)) != CUDA_SUCCESS)
		rc = sm_err_set(err, -ENODEV, "--backend gpu: cuInit failed (CUDA error %d): no usable GPU; "
				"use --backend cpu", rc);
	if (!rc && (rc = g->cu.cuDeviceGet(&g->dev, 0)) != CUDA_SUCCESS)
		rc = sm_err_set(err, -ENODEV, "--backend gpu: no GPU 0 (CUDA error %d)", rc);
	if (!rc && (rc = g->cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) != CUDA_SUCCESS)
		rc = cu_fail(g, rc, "creating a context on GPU 0", err);
	if (!rc && (rc = g->cu.cuCtxSetCurrent(g->ctx)) != CUDA_SUCCESS)
		rc = cu_fail(g, rc, "making the context current", err);
	if (!rc)
		rc = load_modules(g, err);
	if (!rc && attn_path(c, 2) == PATH_STANDIN)
		rc = hopper_kernel(g, g->mod[IMG_EXTEND], "_fwd_kernel", STANDIN_EXTEND_SMEM, &g->extend_fn, err);
	if (!rc && (rc = g->cu.cuDeviceGetAttribute(&g->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)) !=
			   CUDA_SUCCESS)
		rc = cu_fail(g, rc, "reading the SM count", err);
	if (!rc) {
		ref_rope_freqs(c, inv);
		rc = vec_f32(g, inv, c->rotary_dim / 2 + 1, &g->inv_freq, err);
	}
	if (!rc) {
		const struct ref_linear *e = &m->embed;

		rc = put_linear(g, &g->lm_head, &m->lm_head, err);
		if (!rc) {
			struct dmat emb;

			if (e->fmt != REF_W_PLAIN)
				rc = sm_err_set(err, -EINVAL, "GPU backend: the embedding %s is quantized", e->w->name);
			else if (!(rc = put_linear(g, &emb, e, err)))
				g->embed = emb.w;
		}
	}
	if (!rc)
		rc = vec_f32(g, m->final_norm, c->hidden, &g->final_norm, err);
	for (l = 0; !rc && l < c->n_layers; l++) {
		if (verbose)
			fprintf(stderr, "sm120 ref: GPU: layer %d/%d to the device\r", l + 1, c->n_layers);
		rc = put_layer(g, l, err);
	}
	if (verbose)
		fprintf(stderr, "\n");
	for (l = 0; !rc && l < c->n_layers; l++)
		if (g->L[l].moe && g->L[l].w13.quant != MOE_NVFP4) {
			rc = moe_standins(g, &g->L[l].w13, &g->L[l].w2, err);
			break;
		}
	if (!rc)
		rc = alloc_scratch(g, err);
	if (!rc && (rc = g->cu.cuCtxSynchronize()) != CUDA_SUCCESS)
		rc = cu_fail(g, rc, "setting up", err);
	free(inv);
	if (rc) {
		ref_gpu_free(g);
		return NULL;
	}
	return g;
}

void ref_gpu_free(struct ref_gpu *g)
{
	int i;

	if (!g)
		return;
	if (g->cu.cuMemFree_v2)
		for (i = 0; i < g->nallocs; i++)
			g->cu.cuMemFree_v2(g->allocs[i]);
	if (g->cu.cuModuleUnload) {
		for (i = 0; i < NIMAGES; i++)
			if (g->mod[i])
				g->cu.cuModuleUnload(g->mod[i]);
		for (i = 0; i < 2; i++)
			if (g->moe_spec[i])
				g->cu.cuModuleUnload(g->moe_spec[i]);
	}
	if (g->ctx && g->cu.cuDevicePrimaryCtxRelease_v2)
		g->cu.cuDevicePrimaryCtxRelease_v2(g->dev);
	free(g->allocs);
	free(g->L);
	free(g->logits_host);
	free(g->routes_host);
	free(g);
}
