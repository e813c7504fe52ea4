/*
 * moe_gemm.cu - the fused-MoE grouped GEMM of moe_gemm.h on SM120-sized
 * tiles: a cp.async pipeline of A and W k tiles in XOR-swizzled shared
 * memory, ldmatrix fragments and mma.sync (bf16 m16n8k16, or E4M3 m16n8k32
 * for w8a8).  4-bit weights are staged packed and turned into bf16 fragments
 * in registers.  One template serves every variant:
 *   QUANT  what A and W hold (enum moe_quant);
 *   TM     rows of sorted_ids per block; with it TN columns, the warp grid
 *          WARPS_M x WARPS_N and KS, the number of warps that split one k
 *          tile (their partial sums are added in shared memory at the end).
 * Each warp owns a WM x 32 tile of the output (WM = TM / WARPS_M) and a
 * 128-byte slice of every k tile (64 k of bf16, 128 k of FP8).
 */
#include <stdint.h>

#include "../common.cuh"
#include "../primitives.cuh"
#include "moe_gemm.h"

namespace moe_gemm {

using namespace sm120k;

template <int QUANT, int TM>
struct shape {
	static constexpr bool PACKED = MOE_GEMM_PACKED(QUANT);
	static constexpr int TN = MOE_GEMM_TN(TM);
	static constexpr int KS = MOE_GEMM_KSPLIT(TM);
	static constexpr int WARPS_M = KS == 1 ? 2 : 1;
	static constexpr int WARPS_N = 8 / (WARPS_M * KS);
	static constexpr int WM = TM / WARPS_M;
	static constexpr int MI = WM / 16;            /* m16 fragments per warp */
	static constexpr int NI = 4;                  /* n8 fragments per warp (32 columns) */
	static constexpr int KE = QUANT == MOE_FP8 ? 128 : 64; /* k per warp slice */
	static constexpr int ESZ = QUANT == MOE_FP8 ? 1 : 2;   /* bytes of an A element */
	static constexpr int ACH = KS * 8;            /* 16-byte chunks per A row and stage */
	static constexpr int BROW = MOE_GEMM_BROW(QUANT);
	static constexpr int BPITCH = MOE_GEMM_BPITCH(QUANT, TM);
	static constexpr int A_BYTES = TM * KS * MOE_GEMM_KROW;
	static constexpr int STAGE = MOE_GEMM_STAGE_BYTES(QUANT, TM);
	static constexpr int STAGES = MOE_GEMM_STAGES(QUANT, TM);
	static_assert(WARPS_M * WARPS_N * KS * 32 == MOE_GEMM_THREADS, "8 warps");
	static_assert(WARPS_N * 32 == TN, "warps cover the columns");
	static_assert(STAGES >= 2, "a pipeline needs two stages");
};

/* The block's routed ids: -1 for padding. */
template <int TM>
struct rows {
	int tok[TM];
};

/* load_rows - the block's routed ids; returns whether any row is valid. */
template <int TM>
__device__ __forceinline__ bool load_rows(const moe_gemm_args &a, int m0, rows<TM> &r)
{
	bool valid = false;

	if (threadIdx.x < TM) {
		int idx = m0 + (int)threadIdx.x;
		int id = idx < a.EM ? a.sorted_ids[idx] : a.num_valid;

		valid = id >= 0 && id < a.num_valid;
		r.tok[threadIdx.x] = valid ? id : -1;
	}
	return __syncthreads_or(valid);
}

/* write_zeros - valid rows of a block whose expert is on another rank. */
template <int TM, int TN>
__device__ void write_zeros(const moe_gemm_args &a, const rows<TM> &r, int n0)
{
	for (int i = threadIdx.x; i < TM * TN; i += MOE_GEMM_THREADS) {
		int row = i / TN, n = n0 + i % TN;
		int id = r.tok[row];

		if (id >= 0 && n < a.N)
			((__nv_bfloat16 *)a.c)[(int64_t)id * a.c_stride_m + n] = __float2bfloat16(0.0f);
	}
}

/*
 * Per-thread copy plan for one stage: which 16-byte chunks of A and W this
 * thread moves.  Rows and sources are fixed for the whole K loop; only the
 * k offset moves.
 */
template <int QUANT, int TM>
struct loader {
	using S = shape<QUANT, TM>;
	static constexpr int A_PER = TM * S::ACH / MOE_GEMM_THREADS;
	static constexpr int B_CH = S::KS * S::BROW / 16;       /* chunks per W row and stage */
	static constexpr int B_PER = S::TN * B_CH / MOE_GEMM_THREADS;
	static_assert(A_PER >= 1 && B_PER >= 1, "every thread copies");

	const unsigned char *a_src[A_PER];   /* row start, NULL for padding rows */
	const unsigned char *b_src[B_PER];   /* row start, NULL past N */
	uint32_t a_dst[A_PER], b_dst[B_PER]; /* offset in a stage */
	int a_kb[A_PER], b_kb[B_PER];        /* byte of the row at k tile 0 */

	__device__ __forceinline__ void init(const moe_gemm_args &a, const rows<TM> &r, int64_t e, int n0)
	{
		for (int i = 0; i < A_PER; i++) {
			int c = (int)threadIdx.x + i * MOE_GEMM_THREADS;
			int row = c / S::ACH, ch = c % S::ACH;
			int id = r.tok[row];

			a_src[i] = id < 0 ? nullptr
				 : (const unsigned char *)a.a + (int64_t)(id / a.top_k) * a.a_stride_m * S::ESZ;
			a_dst[i] = swz(row, ch, S::ACH);
			a_kb[i] = ch * 16;
		}
		for (int i = 0; i < B_PER; i++) {
			int c = (int)threadIdx.x + i * MOE_GEMM_THREADS;
			int row = c / B_CH, ch = c % B_CH;
			int n = n0 + row;
			int64_t esz = S::PACKED ? 1 : S::ESZ;

			b_src[i] = n >= a.N ? nullptr
				 : (const unsigned char *)a.b + (e * a.b_stride_e + (int64_t)n * a.b_stride_n) * esz;
			b_dst[i] = S::A_BYTES + (S::PACKED ? (uint32_t)(row * S::BPITCH + ch * 16)
							   : swz(row, ch, S::KS * 8));
			b_kb[i] = ch * 16;
		}
	}

	/* issue the copies of k tile @kt into the stage at @stage (zeros past K and for padding) */
	__device__ __forceinline__ void issue(const moe_gemm_args &a, uint32_t stage, int kt)
	{
		const int a_row_bytes = a.K * S::ESZ;
		const int b_row_bytes = S::PACKED ? a.K / 2 : a.K * S::ESZ;
		const int a_k0 = kt * S::KS * MOE_GEMM_KROW;
		const int b_k0 = kt * S::KS * S::BROW;

		for (int i = 0; i < A_PER; i++) {
			int kb = a_k0 + a_kb[i];
			bool ok = a_src[i] && kb < a_row_bytes;

			cp_async16(stage + a_dst[i], ok ? a_src[i] + kb : a.a, ok ? 16 : 0);
		}
		for (int i = 0; i < B_PER; i++) {
			int kb = b_k0 + b_kb[i];
			bool ok = b_src[i] && kb < b_row_bytes;

			cp_async16(stage + b_dst[i], ok ? b_src[i] + kb : a.b, ok ? 16 : 0);
		}
	}
};

/* The scales of the 4-bit weights for one warp slice: one float per n8
 * fragment and k16 step (W4A16 groups are >= 16 wide, NVFP4's are 16). */
template <int QUANT>
__device__ __forceinline__ void load_wscales(const moe_gemm_args &a, int64_t e, const int n[4], int k0,
					     float sc[4][4])
{
	for (int ni = 0; ni < 4; ni++)
		for (int ks = 0; ks < 4; ks++) {
			int k = k0 + ks * 16;
			float v = 0.0f;

			if (n[ni] < a.N && k < a.K) {
				if (QUANT == MOE_W4A16) {
					const uint16_t *s = (const uint16_t *)a.b_scale;

					v = bf16_bits_to_float(__ldg(s + e * a.bs_stride_e + (int64_t)n[ni] * a.bs_stride_n +
								     k / a.group_size));
				} else {
					const unsigned char *s = (const unsigned char *)a.b_scale;

					v = e4m3_to_float(__ldg(s + e * a.bs_stride_e + (int64_t)n[ni] * a.bs_stride_n + k / 16));
				}
			}
			sc[ni][ks] = v;
		}
}

/* Two 4-bit codes (low nibble first) of one byte -> bf16x2 weights. */
template <int QUANT>
__device__ __forceinline__ uint32_t dequant2(uint32_t byte, float scale, float global)
{
	if (QUANT == MOE_W4A16)
		return pack_bf16((float)((int)(byte & 15) - 8) * scale, (float)((int)((byte >> 4) & 15) - 8) * scale);
	return pack_bf16(e2m1_to_float(byte & 15) * scale * global, e2m1_to_float((byte >> 4) & 15) * scale * global);
}

/* The activation scale of FP8 block group @g for row id @id (0 for padding). */
__device__ __forceinline__ float block_ascale(const moe_gemm_args &a, int id, int g)
{
	return id < 0 ? 0.0f : __ldg(a.a_scale + (int64_t)(id / a.top_k) * a.as_stride_m + (int64_t)g * a.as_stride_k);
}

template <int QUANT, int TM>
__device__ void gemm(const moe_gemm_args &a, unsigned char *smem)
{
	using S = shape<QUANT, TM>;
	__shared__ rows<TM> r;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kg = warp / (S::WARPS_M * S::WARPS_N);             /* k slice of this warp */
	const int wm = (warp % (S::WARPS_M * S::WARPS_N)) / S::WARPS_N;
	const int wn = warp % S::WARPS_N;
	const int n0 = blockIdx.x * S::TN, m0 = blockIdx.y * TM;
	const uint32_t base = smem_u32(smem);

	if (m0 >= a.EM || m0 >= __ldg(a.num_tokens_post_padded))
		return;
	if (!load_rows<TM>(a, m0, r))
		return;
	const int64_t e = __ldg(a.expert_ids + m0 / a.block_m);
	if (e < 0) {
		write_zeros<TM, S::TN>(a, r, n0);
		return;
	}

	/* which of this warp's m16 fragments hold a valid row (warp-uniform) */
	bool live[S::MI];
	for (int mi = 0; mi < S::MI; mi++) {
		live[mi] = false;
		for (int j = 0; j < 16; j++)
			live[mi] |= r.tok[wm * S::WM + mi * 16 + j] >= 0;
	}

	loader<QUANT, TM> ld;
	ld.init(a, r, e, n0);
	const int kslice = S::PACKED ? 64 : S::KE;                  /* k per warp slice */
	const int nk = (a.K + S::KS * kslice - 1) / (S::KS * kslice);

	for (int s = 0; s < S::STAGES - 1; s++) {
		if (s < nk)
			ld.issue(a, base + s * S::STAGE, s);
		cp_async_commit();
	}

	float acc[S::MI][S::NI][4] = {};
	int ncol[4];
	for (int ni = 0; ni < 4; ni++)
		ncol[ni] = n0 + wn * 32 + ni * 8 + lane / 4;
	float wsc[4][4], wsc_next[4][4];
	float global = 1.0f;
	if (S::PACKED) {
		if (QUANT == MOE_NVFP4)
			global = __ldg(a.b_global + e);
		load_wscales<QUANT>(a, e, ncol, kg * 64, wsc_next);
	}

	for (int kt = 0; kt < nk; kt++) {
		cp_async_wait<S::STAGES - 2>();
		__syncthreads();
		if (kt + S::STAGES - 1 < nk)
			ld.issue(a, base + ((kt + S::STAGES - 1) % S::STAGES) * S::STAGE, kt + S::STAGES - 1);
		cp_async_commit();

		const uint32_t st = base + (kt % S::STAGES) * S::STAGE;
		const int kslot = kt * S::KS + kg;                          /* k slice index over K */

		if (S::PACKED) {
			for (int ni = 0; ni < 4; ni++)
				for (int ks = 0; ks < 4; ks++)
					wsc[ni][ks] = wsc_next[ni][ks];
			if (kt + 1 < nk)
				load_wscales<QUANT>(a, e, ncol, (kslot + S::KS) * 64, wsc_next);
		}
		if (kslot * kslice >= a.K)
			continue;

		uint32_t bw[4][8];   /* packed: this thread's W row slice (32 bytes) per n8 fragment */
		if (S::PACKED)
			for (int ni = 0; ni < 4; ni++) {
				const uint32_t row = wn * 32 + ni * 8 + lane / 4;
				const uint4 *p = (const uint4 *)(smem + (st - base) + S::A_BYTES + row * S::BPITCH +
								  kg * S::BROW);
				uint4 lo = p[0], hi = p[1];

				bw[ni][0] = lo.x, bw[ni][1] = lo.y, bw[ni][2] = lo.z, bw[ni][3] = lo.w;
				bw[ni][4] = hi.x, bw[ni][5] = hi.y, bw[ni][6] = hi.z, bw[ni][7] = hi.w;
			}

		/* the warp's k slice of this stage, added into @sum */
		auto slice = [&](float (&sum)[S::MI][S::NI][4]) {
			for (int ks = 0; ks < 4; ks++) {               /* 32 bytes of A per step */
				uint32_t af[S::MI][4];
				uint32_t bf[S::NI][2];

				for (int mi = 0; mi < S::MI; mi++)
					if (live[mi])
						ldsm_x4(af[mi], st + swz(wm * S::WM + mi * 16 + (lane & 15),
									 kg * 8 + ks * 2 + (lane >> 4), S::ACH));
				if (S::PACKED) {
					const int sh = (lane & 3) * 8;
					for (int ni = 0; ni < 4; ni++) {
						bf[ni][0] = dequant2<QUANT>((bw[ni][2 * ks] >> sh) & 0xff, wsc[ni][ks], global);
						bf[ni][1] = dequant2<QUANT>((bw[ni][2 * ks + 1] >> sh) & 0xff, wsc[ni][ks],
									    global);
					}
				} else {
					for (int nj = 0; nj < 2; nj++) {
						uint32_t t[4];
						const int row = wn * 32 + nj * 16 + (lane & 7) + ((lane >> 4) << 3);

						ldsm_x4(t, st + S::A_BYTES +
							       swz(row, kg * 8 + ks * 2 + ((lane >> 3) & 1), S::KS * 8));
						bf[2 * nj][0] = t[0], bf[2 * nj][1] = t[1];
						bf[2 * nj + 1][0] = t[2], bf[2 * nj + 1][1] = t[3];
					}
				}
				for (int mi = 0; mi < S::MI; mi++)
					if (live[mi])
						for (int ni = 0; ni < S::NI; ni++) {
							if (QUANT == MOE_FP8)
								mma_e4m3(sum[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
							else
								mma_bf16(sum[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
						}
			}
		};

		if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_BLOCK) {
			/* one k slice is one group: acc += (dot * a_scale) * b_scale */
			float part[S::MI][S::NI][4] = {};
			slice(part);
			const float bs = n0 < a.N ? __ldg((const float *)a.b_scale + e * a.bs_stride_e +
							  (int64_t)(n0 / a.group_n) * a.bs_stride_n +
							  (int64_t)kslot * a.bs_stride_k)
						  : 0.0f;
			for (int mi = 0; mi < S::MI; mi++) {
				const int rr = wm * S::WM + mi * 16 + lane / 4;
				const float as0 = block_ascale(a, r.tok[rr], kslot);
				const float as1 = block_ascale(a, r.tok[rr + 8], kslot);
				for (int ni = 0; ni < S::NI; ni++) {
					acc[mi][ni][0] += part[mi][ni][0] * as0 * bs;
					acc[mi][ni][1] += part[mi][ni][1] * as0 * bs;
					acc[mi][ni][2] += part[mi][ni][2] * as1 * bs;
					acc[mi][ni][3] += part[mi][ni][3] * as1 * bs;
				}
			}
		} else {
			slice(acc);
		}
	}
	cp_async_wait<0>();

	if (S::KS > 1) {
		/* add the k slices' partial sums: slices 1.. park theirs, slice 0 sums */
		float *red = (float *)smem;
		constexpr int PER = S::MI * S::NI * 4;
		__syncthreads();
		if (kg > 0) {
			float *dst = red + ((kg - 1) * (S::WARPS_M * S::WARPS_N) + wm * S::WARPS_N + wn) * 32 * PER;
			for (int i = 0; i < PER; i++)
				dst[i * 32 + lane] = (&acc[0][0][0])[i];
		}
		__syncthreads();
		if (kg > 0)
			return;
		for (int g = 1; g < S::KS; g++) {
			const float *src = red + ((g - 1) * (S::WARPS_M * S::WARPS_N) + wm * S::WARPS_N + wn) * 32 * PER;
			for (int i = 0; i < PER; i++)
				(&acc[0][0][0])[i] += src[i * 32 + lane];
		}
	}

	/* epilogue: scale, bias, routed weight, bf16 */
	__nv_bfloat16 *c = (__nv_bfloat16 *)a.c;
	float ts = 1.0f;
	if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR)
		ts = __ldg(a.a_scale) * __ldg((const float *)a.b_scale + e * a.bs_stride_e);
	for (int mi = 0; mi < S::MI; mi++)
		for (int h = 0; h < 2; h++) {
			const int id = r.tok[wm * S::WM + mi * 16 + lane / 4 + h * 8];
			if (id < 0)
				continue;
			float as = 1.0f, w = 1.0f;
			if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
				as = __ldg(a.a_scale + (int64_t)(id / a.top_k) * a.as_stride_m);
			if (a.mul_routed_weight)
				w = __ldg(a.topk_weights + id);
			for (int ni = 0; ni < S::NI; ni++) {
				const int n = n0 + wn * 32 + ni * 8 + (lane & 3) * 2;
				float v[2];
				for (int j = 0; j < 2; j++) {
					float x = acc[mi][ni][h * 2 + j];
					const int nn = n + j;
					if (nn >= a.N)
						continue;
					if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR)
						x *= ts;
					if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
						x *= as * __ldg((const float *)a.b_scale + e * a.bs_stride_e +
								(int64_t)nn * a.bs_stride_n);
					if (a.bias)
						x += __bfloat162float(((const __nv_bfloat16 *)a.bias)
							[e * a.bias_stride_e + (int64_t)nn * a.bias_stride_n]);
					if (a.mul_routed_weight)
						x *= w;
					v[j] = x;
				}
				__nv_bfloat16 *dst = c + (int64_t)id * a.c_stride_m + n;
				if (n + 1 < a.N && ((uintptr_t)dst & 3) == 0)
					*(uint32_t *)dst = pack_bf16(v[0], v[1]);
				else
					for (int j = 0; j < 2; j++)
						if (n + j < a.N)
							dst[j] = __float2bfloat16_rn(v[j]);
			}
		}
}

} /* namespace moe_gemm */

#define MOE_GEMM_DEFINE(quant, tm, name)                                                     \
	SM120_DYNAMIC_SMEM(name, moe_gemm_smem(quant, tm));                                  \
	extern "C" __global__ void __launch_bounds__(MOE_GEMM_THREADS, 1) name(const struct moe_gemm_args a) \
	{                                                                                    \
		extern __shared__ __align__(1024) unsigned char moe_gemm_smem_[];            \
		moe_gemm::gemm<quant, tm>(a, moe_gemm_smem_);                                \
	}

MOE_GEMM_KERNELS(MOE_GEMM_DEFINE)
