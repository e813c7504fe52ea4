/*
 * bench_moe_decode.c - the fused-MoE decode rows of issue 18, one GPU, one
 * run: the row tile the shim's fused-MoE plan picks for a launch against
 * the decode kernel it picks (both moe_gemm_choose),
 * and every decode column tile, on the gate/up and the down GEMM of Kimi K2
 * and GLM-4.7 at TP8, bf16, FP8 (per tensor, per channel, 128 x 128 blocks)
 * and INT4 W4A16 (bf16 scales per group of 32), as fractions of the
 * weight-read floor.
 *
 * Usage: gpu_bench_moe_decode bench_peaks.cubin [ALT.fatbin]
 *   bench_peaks.cubin  its read_bw kernel measures the streaming read
 *                      bandwidth (a 4 GiB buffer, median of 9) and the
 *                      "limit" column (below);
 *   ALT.fatbin         another build of the bundled kernels (bench.sh:
 *                      fp8_mma_proxy.fatbin): the plan's kernel in it timed
 *                      in column "alt": the decode kernel of "new", or
 *                      where the plan keeps the row tile, that tile padded
 *                      as "old_pad" is; and with MOE_DECODE_ROWTILES=1 each row tile on the
 *                      plan's grid, plain and padded ("alt", "pad" after
 *                      "per"; then "same": whether it wrote the same bytes
 *                      as this build), and on its shallow pipeline where
 *                      it has one ("altsh"); launched with this build's
 *                      grid, block size and shared memory, so a build whose
 *                      tiles have other warps or columns (MOE_GEMM_WARPS)
 *                      is timed with its own binary instead.
 * Environment: MOE_DECODE_M (batches, default 1,2,4,8,16,64,256),
 * MOE_DECODE_BM (the framework's BLOCK_SIZE_M, default 128: the over-limit
 * Hopper configurations the shim reroutes; 16 is a small-batch tuned one),
 * MOE_DECODE_QUANT (quantizations by name, default all: bf16, fp8_tensor,
 * fp8_channel, fp8_block, int4), MOE_DECODE_MODEL (comma-separated: kimi, glm, glm_tp1:
 * GLM-4.7 unsplit, the reference engine's shapes, or kimi_tp4 and kimi_tp2:
 * Kimi K2 at TP4 and TP2; default kimi and glm),
 * MOE_DECODE_HALF (gateup or down, default both), MOE_DECODE_ROWTILES=1 (a
 * second line per case: every row tile on a block per column tile and on the plan's grid,
 * plain and padded to SM120's blocks per SM, and a kernel's shallow
 * pipeline (moe_gemm.h) where it has one: row_tiles), MOE_DECODE_SMS=S (a
 * "green" line per case: the plan's kernel on a green context of S SMs,
 * as the weight bytes it streams per SM and second against an SM120 SM's
 * share of its DRAM, SM120_SM_GBS; and read_bw reading exactly those bytes
 * on the same SMs, the most that launch, ramp and tail leave of that rate;
 * and mma120, the most of that share an SM120 SM's MMA rate lets the row
 * stream, SM120_SM_FLOPS), MOE_DECODE_PARTS=P (args.row_parts of every launch of a MOE_GEMM_PARTS
 * row tile: 0 for a row block per TM rows; default the plan's,
 * moe_gemm_row_parts; "parts" in the rows line), MOE_DECODE_PER=P (every
 * decode launch on P column tiles a block, the grid's x ceil(tiles / P);
 * default the plan's, moe_gemm_decode_cols).
 *
 * Each case: M tokens, top_k 8 distinct experts each, uniform (the routing
 * of tests/gpu/bench_moe.py), aligned as moe_align_block_size lays it out
 * (EM = rows + (E + 1)(BLOCK_SIZE_M - 1)); gate/up: A [M, hidden], N
 * 2 x intermediate, top_k 8; down: A [8M, intermediate], N hidden, top_k 1
 * and the routed weights.  Weights: one buffer of non-constant finite data
 * (no NaN as bf16 or E4M3; any byte is two 4-bit codes) read as each
 * case's [E, N, K]; INT4 scales [E, N, K / 32] bf16 in [1e-3, 2e-3).
 *
 * Timing: the median of 25 launches, each between two events; two untimed
 * launches first.  The weights come from DRAM, as in a forward pass: launch
 * i reads copy i % C of the weight tensor (C = 12 copies, fewer where they
 * would pass 40 GiB, each then far more than the L2; read_bw likewise 12
 * regions when its bytes are under 256 MiB), so that more than the L2 holds
 * was read between two launches on one copy, and no flush runs between
 * launches.  MOE_DECODE_FLUSH=write: one copy and a 256 MiB memset before
 * each launch instead, as tests/gpu/bench_moe.py flushes (the memset's
 * dirty lines are then written back while the timed kernel reads: at one
 * token that is most of the weights' bytes again).  floor = bytes of
 * the touched experts' weights and weight scales / the read bandwidth;
 * each column prints floor / time (1.00 = at the floor).  "limit": read_bw
 * over exactly those bytes, timed the same way (a kernel that only reads
 * them: what launch, ramp and tail leave of the floor at this size).
 * "own": the plan's kernel (new's; where it keeps the row tile, that tile
 * padded as old_pad) with every expert's weights and weight scales read
 * from expert 0's, in one copy: the L2 holds them, so floor / its time is
 * what the kernel's own work (its instructions, not the DRAM) allows the
 * row at this size on this GPU (own_time).  Below "limit": the kernel, not
 * the memory, holds the row here.
 * "old": the row tile the plan picks where it picks no decode kernel
 * (moe_gemm_choose's tm, on its grid and pipeline); "old pad": the same with its dynamic shared
 * memory padded so that this GPU runs no more of its blocks per SM than
 * SM120 would (occupancy_pad, core/limits/occupancy.h, as
 * SM120SHIM_EMULATE_OCCUPANCY pads; both counts printed first); the decode
 * kernels run as many per SM here as on SM120 (their registers decide).  Each case's old and new outputs are compared
 * (max |old - new| / max |old|, a wiring check: the tests check values).
 */
#include <stdint.h>

#include "../../core/limits/occupancy.h"
#include "../../kernels/moe/moe_gemm.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

#define TOP_K 8
#define REPS 25
#define FLUSH_BYTES ((size_t)256 << 20)
#define NCOPY 12
#define COPY_BYTES ((size_t)40 << 30)   /* the most the weight copies take */

struct model {
	const char *name;
	int experts, hidden, inter;
	int named;   /* run only when MOE_DECODE_MODEL names it */
};

/* TP8 shapes; glm_tp1 is GLM-4.7 unsplit, as the reference engine runs it (N 3072 x K 5120);
 * kimi_tp4 and kimi_tp2 Kimi K2 at TP4 and TP2 (the down GEMM's K 512 and 1024) */
static const struct model models[] = {
	{ "kimi", 384, 7168, 256, 0 },
	{ "glm", 160, 5120, 192, 0 },
	{ "glm_tp1", 160, 5120, 1536, 1 },
	{ "kimi_tp4", 384, 7168, 512, 1 },
	{ "kimi_tp2", 384, 7168, 1024, 1 },
};

struct quant {
	const char *name;
	int quant, scale;
};

static const struct quant quants[] = {
	{ "bf16", MOE_BF16, MOE_SCALE_NONE },
	{ "fp8_tensor", MOE_FP8, MOE_SCALE_TENSOR },
	{ "fp8_channel", MOE_FP8, MOE_SCALE_CHANNEL },
	{ "fp8_block", MOE_FP8, MOE_SCALE_BLOCK },
	{ "int4", MOE_W4A16, MOE_SCALE_NONE },
};

#define INT4_GROUP 32

static CUstream stream;
static CUevent ev0, ev1;
static CUdeviceptr flush_buf;
static int flush_write;       /* MOE_DECODE_FLUSH=write: one copy, a memset before each launch */
static int ncopy = NCOPY;     /* weight copies rotated over: fewer where NCOPY would pass COPY_BYTES */
static int rowtiles;          /* MOE_DECODE_ROWTILES=1: each row tile's line (row_tiles) */
static CUstream green;        /* MOE_DECODE_SMS: a stream of a green context of green_sms SMs, or NULL */
static unsigned green_sms;

/*
 * The DRAM bandwidth an SM of an SM120 card gets when every SM streams: the
 * most of the SM120 cards, the RTX 5090's 1792 GB/s over 170 SMs (the RTX
 * PRO 6000: 1792 over 188, 9.5; DGX Spark: 273 over 48, 5.7).  A kernel
 * that streams this rate per SM on a few of this GPU's SMs would not be the
 * limit on those cards; the DRAM would.
 */
#define SM120_SM_GBS (1792.0 / 170)

/*
 * The dense mma.sync rate of an SM of that card, flop a second, from its
 * data sheet (not measured): 209.5 TFLOP/s of bf16 with FP32 accumulate
 * (838.4 sparse with FP16 accumulate, halved for each) over its 170 SMs,
 * the rate of the bf16 and W4A16 kernels' MMAs; FP8 twice that (its FP8
 * figure is twice its FP16 one).  A row of F flop per weight byte streams
 * at most SM120_SM_FLOPS / F bytes a second on such an SM, whatever this
 * GPU's SMs, which do mma.sync several times faster, stream: where that is
 * below SM120_SM_GBS ("mma120" < 1), SM120's MMA rate, not its DRAM, bounds
 * the row, and an x5090 above mma120 does not carry over.
 */
#define SM120_SM_FLOPS(quant) (((quant) == MOE_FP8 ? 2.0 : 1.0) * 209.5e12 / 170)

/* mma120 - the most of SM120_SM_GBS an SM120 SM's MMA rate (SM120_SM_FLOPS) lets a row of
 * @quant stream: its 2 x @products flop over @bytes of weights. */
static double mma120(int quant, size_t bytes, double products)
{
	return SM120_SM_FLOPS(quant) / (2.0 * products / (double)bytes) / (SM120_SM_GBS * 1e9);
}

/* green_stream - a stream whose launches run on @want SMs of @dev only (a green context of
 * the primary context's memory); sets green_sms to the count the driver gave. */
static CUstream green_stream(CUdevice dev, unsigned want)
{
	CUdevResource all, part;
	CUdevResourceDesc desc;
	CUgreenCtx g;
	CUstream st;
	unsigned n = 1;

	CHECK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
	CHECK(cuDevSmResourceSplitByCount(&part, &n, &all, NULL, 0, want));
	CHECK(cuDevResourceGenerateDesc(&desc, &part, 1));
	CHECK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	CHECK(cuGreenCtxStreamCreate(&st, g, CU_STREAM_NON_BLOCKING, 0));
	green_sms = part.sm.smCount;
	return st;
}

static int cmp_float(const void *x, const void *y)
{
	float a = *(const float *)x, b = *(const float *)y;

	return (a > b) - (a < b);
}

/*
 * timed_ms - median of REPS launches of @f (grid gx x gy, @smem dynamic
 * bytes); before launch i the device address at @slot (in the parameters)
 * is @base + ((i + 1) % ncopy) * @stride, the untimed ones' @base
 * (MOE_DECODE_FLUSH=write: @base, and a 256 MiB memset before each launch).
 */
static double timed_ms(CUfunction f, unsigned gx, unsigned gy, unsigned threads, unsigned smem, void **params,
		       void *slot, CUdeviceptr base, size_t stride)
{
	float t[REPS];

	memcpy(slot, &base, sizeof(base));
	for (int i = 0; i < 2; i++)
		CHECK(cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, smem, stream, params, NULL));
	for (int i = 0; i < REPS; i++) {
		const CUdeviceptr p = base + (flush_write ? 0 : (CUdeviceptr)((i + 1) % ncopy) * stride);

		memcpy(slot, &p, sizeof(p));
		if (flush_write)
			CHECK(cuMemsetD32Async(flush_buf, (unsigned)i, FLUSH_BYTES / 4, stream));
		CHECK(cuEventRecord(ev0, stream));
		CHECK(cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, smem, stream, params, NULL));
		CHECK(cuEventRecord(ev1, stream));
		CHECK(cuEventSynchronize(ev1));
		CHECK(cuEventElapsedTime(&t[i], ev0, ev1));
	}
	memcpy(slot, &base, sizeof(base));
	qsort(t, REPS, sizeof(t[0]), cmp_float);
	return t[REPS / 2];
}

/*
 * own_time - timed_ms of @f (as timed_ms' arguments) on the launch @a with
 * every expert's weights and weight scales read from expert 0's (strides
 * along E 0) in one copy (@base, no rotation, no MOE_DECODE_FLUSH memset):
 * they then stay in the L2, and the time is what the kernel's own work
 * takes on this GPU (its instructions, shared memory and barriers, the
 * activation rows and routing reads), not the DRAM.  @a's strides are
 * restored.
 */
static double own_time(struct moe_gemm_args *a, CUfunction f, unsigned gx, unsigned gy, unsigned threads,
		       unsigned smem, void **params, CUdeviceptr base)
{
	const int64_t se = a->b_stride_e, sse = a->bs_stride_e;
	const int flush = flush_write;
	double ms;

	a->b_stride_e = 0, a->bs_stride_e = 0;
	flush_write = 0;
	ms = timed_ms(f, gx, gy, threads, smem, params, &a->b, base, 0);
	flush_write = flush;
	a->b_stride_e = se, a->bs_stride_e = sse;
	return ms;
}

/* sm_gbs - GB/s per SM of the green context: @bytes streamed in @ms milliseconds. */
static double sm_gbs(size_t bytes, double ms)
{
	return (double)bytes / (ms * 1e-3) / 1e9 / green_sms;
}

/* green_ms - timed_ms of a launch of @threads threads a block on the green context's stream. */
static double green_ms(CUfunction f, unsigned gx, unsigned gy, unsigned threads, unsigned smem, void **params,
		       void *slot, CUdeviceptr base, size_t stride)
{
	const CUstream saved = stream;
	double t;

	stream = green;
	t = timed_ms(f, gx, gy, threads, smem, params, slot, base, stride);
	stream = saved;
	return t;
}

static CUfunction get(CUmodule mod, const char *name, int smem)
{
	CUfunction f;

	if (!name) {
		fprintf(stderr, "bench_moe_decode: no bundled kernel for this launch (a plan or table mismatch)\n");
		exit(1);
	}
	CHECK(cuModuleGetFunction(&f, mod, name));
	CHECK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
	return f;
}

static int blocks_per_sm(CUfunction f, int threads, int smem)
{
	int n = 0;

	CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, threads, (size_t)smem));
	return n;
}

/* This GPU's and SM120's resident-block limits (sm120_pad). */
static struct occ_sm dev_occ, sm120_occ;

/* sm120_init - dev_occ from this GPU's attributes, sm120_occ from the "sm120" profile. */
static void sm120_init(CUdevice dev)
{
	int v[OCC_DEVICE_ATTRS];
	struct target_limits t;
	struct sm_err err;

	for (int i = 0; i < OCC_DEVICE_ATTRS; i++)
		CHECK(cuDeviceGetAttribute(&v[i], (CUdevice_attribute)occupancy_device_attrs[i], dev));
	occupancy_from_attrs(v, &dev_occ);
	if (target_parse("sm120", &t, &err)) {
		fprintf(stderr, "bench_moe_decode: no sm120 profile: %s\n", err.msg);
		exit(1);
	}
	occupancy_target(&t, &dev_occ, &sm120_occ);
}

/*
 * sm120_pad - the dynamic bytes that make this GPU keep no more blocks of
 * @f per SM than SM120 would at @threads threads a block and @smem dynamic
 * bytes and its registers (occupancy_pad, as SM120SHIM_EMULATE_OCCUPANCY
 * pads), with @f's attribute raised to it.
 */
static int sm120_pad(CUfunction f, int threads, int smem)
{
	struct occ_pad p;
	int st = 0, regs = 0;

	CHECK(cuFuncGetAttribute(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
	CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	occupancy_pad(&sm120_occ, &dev_occ, (uint32_t)threads, (uint32_t)regs, (uint32_t)st, (uint32_t)smem,
		      &p);
	if (p.verdict == OCC_PAD)
		CHECK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)p.dynamic));
	return p.verdict == OCC_PAD ? (int)p.dynamic : smem;
}

static CUdeviceptr upload(const void *p, size_t n)
{
	CUdeviceptr d;

	CHECK(cuMemAlloc(&d, n));
	CHECK(cuMemcpyHtoD(d, p, n));
	return d;
}

/* fill_f32 - n floats in [lo, hi) */
static float *fill_f32(size_t n, double lo, double hi)
{
	float *p = malloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++)
		p[i] = (float)(lo + (hi - lo) * urand());
	return p;
}

/* fill_bytes - finite as bf16 pairs and as E4M3: low bytes without bit 6, high ones 0x3c | sign */
static void fill_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const uint8_t r = (uint8_t)(rand64() >> 32);

		p[i] = (i & 1) ? (uint8_t)(0x3c | (r & 0x80)) : (uint8_t)(r & 0xbf);
	}
}

/* parts_of - args.row_parts for row tile @tm of @quant on framework blocks of @bm (@nv routed
 * rows, @em sorted): MOE_DECODE_PARTS where set (a count; 0: a row block per TM rows), else the
 * plan's (moe_gemm_row_parts); 0 where it would be every part. */
static int parts_of(int quant, int tm, int bm, int nv, int em)
{
	const char *env = getenv("MOE_DECODE_PARTS");
	const int p = env && *env ? atoi(env) : moe_gemm_row_parts(quant, tm, bm, nv, em);

	return MOE_GEMM_PARTS(quant, tm) && p > 0 && p < bm / tm ? p : 0;
}

/* decode_cols - the decode grid's x for @quant, N @n, K @k on tile @tn (@em, @bm, @nv as for
 * moe_gemm_decode_cols): MOE_DECODE_PER=P where set, P column tiles a block (a knob to
 * measure the plan's choice against), else the plan's (moe_gemm_decode_cols). */
static int decode_cols(int quant, int n, int k, int tn, int em, int bm, int nv)
{
	const char *env = getenv("MOE_DECODE_PER");
	const int per = env && *env ? atoi(env) : 0;
	const int tiles = (n + tn - 1) / tn;

	return per > 0 ? (tiles + per - 1) / per : moe_gemm_decode_cols(quant, n, k, tn, em, bm, nv);
}

/*
 * variant - @f on the grid (@gx, @gy, @th threads a block) at @smem dynamic bytes, timed plain
 * and padded to SM120's blocks per SM, printed after @label as fractions of
 * @floor_ms, then "same" and whether it wrote the bytes @ref holds (@buf:
 * room for its output, @cbytes of C at @dc).
 */
static void variant(const char *label, CUfunction f, unsigned gx, unsigned gy, unsigned th, int smem, void **params,
		    void *wptr, CUdeviceptr wbuf, size_t wbytes, CUdeviceptr dc, size_t cbytes,
		    const uint16_t *ref, uint16_t *buf, double floor_ms)
{
	const int pad = sm120_pad(f, (int)th, smem);   /* (raises the attribute; @f allows @smem already) */

	printf(" %s %.2f pad %.2f", label, floor_ms / timed_ms(f, gx, gy, th, (unsigned)smem, params, wptr, wbuf, wbytes),
	       floor_ms / timed_ms(f, gx, gy, th, (unsigned)pad, params, wptr, wbuf, wbytes));
	CHECK(cuMemsetD16(dc, NAN_BF16, cbytes / 2));
	CHECK(cuLaunchKernel(f, gx, gy, 1, th, 1, 1, (unsigned)smem, stream, params, NULL));
	CHECK(cuStreamSynchronize(stream));
	CHECK(cuMemcpyDtoH(buf, dc, cbytes));
	printf(" same %d", !memcmp(buf, ref, cbytes));
}

/*
 * row_tiles - MOE_DECODE_ROWTILES=1: each row tile TM (16, 32, 64, 128)
 * of @quant that divides @bm, as floor / time, on a block per column tile ("tiles") and
 * on the grid x the plan launches (moe_gemm_rows_cols: "cols", gx; several
 * column tiles per block for the MOE_GEMM_MULTI kernels when K is short),
 * that also padded to SM120's one block per SM ("pad"); "same" whether the
 * two grids wrote the same bytes; for the MULTI kernels, "per": 2, 4, 8 and
 * 16 column tiles per block.
 */
static void row_tiles(CUmodule mod, CUmodule alt, int quant, int N, int K, int em, int nv, int bm, void **params,
		      struct moe_gemm_args *a, CUdeviceptr dc, size_t cbytes, CUdeviceptr wbuf, size_t wbytes,
		      double floor_ms)
{
	printf("      rows:");
	for (int i = 0; i < MOE_GEMM_NKERNELS; i++) {
		const int tm = moe_gemm_kernels[i].tm;

		if (moe_gemm_kernels[i].quant != quant || bm % tm)
			continue;
		const int smem = moe_gemm_smem(quant, tm);
		const unsigned th = (unsigned)moe_gemm_threads(quant, tm);
		const int tn = moe_gemm_tn(quant, tm, N, K);
		const unsigned tiles = (unsigned)((N + tn - 1) / tn);
		const int parts = parts_of(quant, tm, bm, nv, em);
		const unsigned gx = (unsigned)moe_gemm_rows_cols(quant, tm, N, K, nv);
		const unsigned gy = (unsigned)moe_gemm_rows_grid(tm, bm, em, parts, 0);
		CUfunction f = get(mod, moe_gemm_kernel_name(quant, tm), smem);
		const int pad = sm120_pad(f, (int)th, smem);
		double tiles_ms, cols_ms, pad_ms;
		uint16_t *c0 = malloc(cbytes), *c1 = malloc(cbytes);

		a->row_parts = parts;

		tiles_ms = timed_ms(f, tiles, gy, th, (unsigned)smem, params, &a->b, wbuf, wbytes);
		cols_ms = gx != tiles ? timed_ms(f, gx, gy, th, (unsigned)smem, params, &a->b, wbuf, wbytes) : tiles_ms;
		pad_ms = timed_ms(f, gx, gy, th, (unsigned)pad, params, &a->b, wbuf, wbytes);
		for (int t = 0; t < 2; t++) {
			CHECK(cuMemsetD16(dc, NAN_BF16, cbytes / 2));
			CHECK(cuLaunchKernel(f, t ? gx : tiles, gy, 1, th, 1, 1, (unsigned)smem, stream, params, NULL));
			CHECK(cuStreamSynchronize(stream));
			CHECK(cuMemcpyDtoH(t ? c1 : c0, dc, cbytes));
		}
		printf("  m%d tiles %.2f cols %.2f (gx %u of %u, parts %d) pad %.2f same %d", tm, floor_ms / tiles_ms,
		       floor_ms / cols_ms, gx, tiles, parts, floor_ms / pad_ms, !memcmp(c0, c1, cbytes));
		if (MOE_GEMM_MULTI(quant, tm)) {
			/* the column tiles per block a MULTI kernel could take: 2, 4, 8, 16 */
			printf(" per");
			for (unsigned per = 2; per <= 16; per *= 2)
				printf(" %u:%.2f", per,
				       floor_ms / timed_ms(f, (tiles + per - 1) / per, gy, th, (unsigned)smem,
							   params, &a->b, wbuf, wbytes));
		}
		if (MOE_GEMM_SHALLOW(quant, tm)) {
			a->stages = MOE_GEMM_SHALLOW_STAGES;
			variant("shallow", f, gx, gy, th, moe_gemm_launch_smem(quant, tm, MOE_GEMM_SHALLOW_STAGES), params,
				&a->b, wbuf, wbytes, dc, cbytes, c1, c0, floor_ms);
			a->stages = 0;
		}
		if (alt) {
			CUfunction fa = get(alt, moe_gemm_kernel_name(quant, tm), smem);

			variant("alt", fa, gx, gy, th, smem, params, &a->b, wbuf, wbytes, dc, cbytes, c1, c0, floor_ms);
			if (MOE_GEMM_SHALLOW(quant, tm)) {
				a->stages = MOE_GEMM_SHALLOW_STAGES;
				variant("altsh", fa, gx, gy, th, moe_gemm_launch_smem(quant, tm, MOE_GEMM_SHALLOW_STAGES),
					params, &a->b, wbuf, wbytes, dc, cbytes, c1, c0, floor_ms);
				a->stages = 0;
			}
		}
		a->row_parts = 0;
		free(c0);
		free(c1);
	}
	printf("\n");
}

/* model_run - whether MOE_DECODE_MODEL (@env, a comma-separated list of names; NULL: unset)
 * runs model @md. */
static int model_run(const struct model *md, const char *env)
{
	const size_t len = strlen(md->name);

	if (!env)
		return !md->named;
	for (const char *p = env; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, md->name, len) && (p[len] == ',' || p[len] == 0))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *ms_env = getenv("MOE_DECODE_M"), *bm_env = getenv("MOE_DECODE_BM");
	const char *q_env = getenv("MOE_DECODE_QUANT"), *model_env = getenv("MOE_DECODE_MODEL");
	const char *half_env = getenv("MOE_DECODE_HALF");
	char mlist[256];
	int batches[32], nb = 0, bm = bm_env ? atoi(bm_env) : 128;
	CUmodule mod, peaks, alt = NULL;
	CUfunction rd;
	CUdevice dev;
	CUdeviceptr wbuf, rbuf, rout;
	size_t wbytes = 0, big = (size_t)4 << 30;
	double bw;
	char devname[128];
	int sms;

	if (argc < 2) {
		fprintf(stderr, "usage: %s bench_peaks.cubin [ALT.fatbin]\n", argv[0]);
		return 2;
	}
	snprintf(mlist, sizeof(mlist), "%s", ms_env ? ms_env : "1,2,4,8,16,64,256");
	for (char *t = strtok(mlist, ","); t && nb < 32; t = strtok(NULL, ","))
		batches[nb++] = atoi(t);
	mod = gpu_test_module(NULL);
	CHECK(cuCtxGetDevice(&dev));
	sm120_init(dev);
	CHECK(cuDeviceGetName(devname, sizeof(devname), dev));
	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CHECK(cuModuleLoad(&peaks, argv[1]));
	if (argc > 2)
		CHECK(cuModuleLoad(&alt, argv[2]));
	CHECK(cuModuleGetFunction(&rd, peaks, "read_bw"));
	CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev0, 0));
	CHECK(cuEventCreate(&ev1, 0));
	CHECK(cuMemAlloc(&flush_buf, FLUSH_BYTES));
	flush_write = getenv("MOE_DECODE_FLUSH") && !strcmp(getenv("MOE_DECODE_FLUSH"), "write");
	rowtiles = getenv("MOE_DECODE_ROWTILES") && !strcmp(getenv("MOE_DECODE_ROWTILES"), "1");
	if (getenv("MOE_DECODE_SMS") && atoi(getenv("MOE_DECODE_SMS")) > 0)
		green = green_stream(dev, (unsigned)atoi(getenv("MOE_DECODE_SMS")));

	/* the read bandwidth: read_bw over 4 GiB, median of 9 */
	CHECK(cuMemAlloc(&rbuf, big));
	CHECK(cuMemAlloc(&rout, 4096));
	CHECK(cuMemsetD8(rbuf, 1, big));
	{
		size_t n16 = big / 16;
		void *p[] = { &rbuf, &n16, &rout };
		float t[9];

		for (int i = 0; i < 9; i++) {
			CHECK(cuEventRecord(ev0, stream));
			CHECK(cuLaunchKernel(rd, (unsigned)sms * 16, 1, 1, 256, 1, 1, 0, stream, p, NULL));
			CHECK(cuEventRecord(ev1, stream));
			CHECK(cuEventSynchronize(ev1));
			CHECK(cuEventElapsedTime(&t[i], ev0, ev1));
		}
		qsort(t, 9, sizeof(t[0]), cmp_float);
		bw = (double)big / (t[4] * 1e-3) / 1e9;
	}

	/* one weight buffer for every case: the largest [E, N, K] of the models run */
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		size_t b = (size_t)models[m].experts * 2 * models[m].inter * models[m].hidden * 2;

		if (model_run(&models[m], model_env))
			wbytes = b > wbytes ? b : wbytes;
	}
	if (!wbytes) {
		fprintf(stderr, "MOE_DECODE_MODEL=%s names no model: give kimi, glm, glm_tp1, kimi_tp4 or kimi_tp2, "
			"comma-separated\n", model_env);
		return 2;
	}
	wbytes = (wbytes + 4095) & ~(size_t)4095;
	if (flush_write)
		ncopy = 1;
	else if (wbytes * NCOPY > COPY_BYTES)
		ncopy = COPY_BYTES / wbytes > 2 ? (int)(COPY_BYTES / wbytes) : 2;
	CHECK(cuMemAlloc(&wbuf, wbytes * (size_t)ncopy));
	{
		const size_t tile = (size_t)64 << 20;
		uint8_t *h = malloc(tile);

		fill_bytes(h, tile);
		for (size_t o = 0; o < wbytes; o += tile)
			CHECK(cuMemcpyHtoD(wbuf + o, h, o + tile <= wbytes ? tile : wbytes - o));
		for (int c = 1; c < ncopy; c++)
			CHECK(cuMemcpyDtoD(wbuf + (size_t)c * wbytes, wbuf, wbytes));
		free(h);
	}

	{
		printf("# %s, %d SMs; streaming read %.0f GB/s (read_bw, 4 GiB); BLOCK_SIZE_M %d; %s\n", devname,
		       sms, bw, bm, flush_write ? "a 256 MiB memset before each launch (bench_moe.py's flush)"
					       : "launches rotate over copies of the weights (no flush)");
		printf("# weight copies: %d\n", ncopy);
		printf("# blocks per SM here, plain/padded to SM120's (pad):");
		for (int i = 0; i < MOE_GEMM_NKERNELS; i++) {
			const struct moe_gemm_kernel *k = &moe_gemm_kernels[i];
			const int smem = moe_gemm_smem(k->quant, k->tm);
			CUfunction f = get(mod, k->name, smem);
			const int th = moe_gemm_threads(k->quant, k->tm);
			const int plain = blocks_per_sm(f, th, smem), pad = sm120_pad(f, th, smem);

			printf(" %s %d/%d", k->name, plain, blocks_per_sm(f, th, pad));
		}
		printf("\n# blocks per SM of the decode kernels here:");
#define DECODE_OCC(quant, tn, rows, name) printf(" %s %d", #name, blocks_per_sm(get(mod, #name, 0), MOE_GEMM_THREADS, 0));
		MOE_DECODE_KERNELS(DECODE_OCC)
#define STAGED_OCC(quant, tn, rows, staging, name) DECODE_OCC(quant, tn, rows, name)
		MOE_DECODE_STAGED_KERNELS(STAGED_OCC)
#undef STAGED_OCC
#undef DECODE_OCC
		printf(" (SM120 the same: their registers)\n");
	}
	printf("# fractions of the floor (floor / time); old = row tiles (the plan before), new = the decode "
	       "kernel the plan picks now (its tile: tn, its rows a pass: rp; W4A16 of 16 rows a pass the "
	       "staged one of the tile, moe_gemm_decode_kernel, up to %d rows a pass, %d at K %d; tn 0 = the row tile "
	       "kept); d16..d128 "
	       "each decode tile at 8 rows a pass, eq = whether "
	       "the staged kernel of K (16 rows a pass, moe_gemm_decode_kernel; -1: none for the format) "
	       "wrote the same bytes as the 8-row kernel of its 128 columns (the same sums in the same order, where "
	       "their warps split K alike); own = the plan's kernel "
	       "with every expert's weights and weight scales expert 0's (the L2 holds them: its own work, not the "
	       "DRAM); us = microseconds\n",
	       MOE_DECODE_W4_SPASS, MOE_DECODE_W4_HALVED_PASS, MOE_DECODE_W4_HALVED_K);
	if (green)
		printf("# a green line per case: the plan's kernel (new; a row tile padded to SM120's blocks per SM) "
		       "on a green context of %u SMs: its microseconds, the weight bytes it streamed per second and SM "
		       "(GB/s), and that over %.1f GB/s, an RTX 5090 SM's share of its DRAM (x5090 >= 1: on SM120 the "
		       "DRAM, not this kernel, is the limit; measured on an otherwise idle GPU, whose DRAM answers "
		       "sooner than one under full load); then read_bw reading exactly those bytes on the same SMs, "
		       "timed the same way: what launch, ramp and tail leave there; mma120: the most of that share "
		       "an RTX 5090 SM's mma.sync rate allows the row's flop (2 x routed rows x N x K) per weight byte "
		       "(its data sheet: %.0f TFLOP/s bf16, FP8 twice; below 1, SM120's MMA rate bounds the row)\n",
		       green_sms, SM120_SM_GBS, SM120_SM_FLOPS(MOE_BF16) * 170 / 1e12);
	printf("%-5s %-6s %-11s %4s %4s %8s %6s %9s %6s %8s %4s %3s %9s %6s %6s %6s %6s %6s %3s %6s%s\n",
	       "model", "half", "quant", "M", "exp", "floor_us", "limit", "old_us", "old", "old_pad", "tn", "rp",
	       "new_us", "new", "d16", "d32", "d64", "d128", "eq", "own",
	       alt ? "    alt    wiring" : "    wiring");

	for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++)
		for (int half = 0; half < 2; half++)
			for (size_t qi = 0; qi < sizeof(quants) / sizeof(quants[0]); qi++)
				for (int bi = 0; bi < nb; bi++) {
					if ((q_env && !strstr(q_env, quants[qi].name)) ||
					    !model_run(&models[mi], model_env) ||
					    (half_env && strcmp(half_env, half ? "down" : "gateup")))
						continue;
					const struct model *md = &models[mi];
					const struct quant *qt = &quants[qi];
					const int M = batches[bi], E = md->experts;
					const int N = half ? md->hidden : 2 * md->inter;
					const int K = half ? md->inter : md->hidden;
					const int esz = qt->quant == MOE_FP8 ? 1 : 2;   /* of A */
					const size_t wcol = (size_t)MOE_DECODE_WBYTES(qt->quant, K);   /* W bytes a column */
					const int nv = M * TOP_K, arows = half ? nv : M;
					const int em = nv + (E + 1) * (bm - 1), nblk = (em + bm - 1) / bm;
					const int gk = (K + 127) / 128, gn = (N + 127) / 128;
					int32_t *sorted = malloc((size_t)em * 4), *eids = malloc((size_t)nblk * 4);
					int *topk = malloc((size_t)nv * sizeof(int)), *cnt = calloc((size_t)E, sizeof(int));
					int32_t ntpp = 0;
					int touched = 0;
					struct moe_gemm_args a;
					CUdeviceptr da, dc, das = 0, dbs = 0, dtw, dsorted, deids, dntpp;
					size_t abytes = (size_t)arows * K * esz, cbytes = (size_t)nv * N * 2;
					size_t as_n = 0, bs_n = 0, per_scale = 0;
					double floor_ms, lim_ms, glim_ms = 0, old_ms, pad_ms, new_ms, dn[4], alt_ms = 0, wire = 0;
					double g_ms = 0;   /* the plan's kernel on the green context */
					double own_ms = 0; /* the plan's kernel, every expert's weights expert 0's (own_time) */
					struct moe_gemm_choice choice;
					int told, tn, rp, eq16 = -1;
					void *params[] = { &a };

					/* routing: distinct experts per token, aligned (moe_align_block_size) */
					for (int t = 0; t < M; t++)
						for (int j = 0; j < TOP_K; j++) {
							int e, dup;

							do {
								e = (int)(urand() * E);
								dup = 0;
								for (int k = 0; k < j; k++)
									dup |= topk[t * TOP_K + k] == e;
							} while (dup);
							topk[t * TOP_K + j] = e;
							cnt[e]++;
						}
					for (int i = 0; i < em; i++)
						sorted[i] = nv;
					for (int b = 0; b < nblk; b++)
						eids[b] = -1;
					for (int e = 0; e < E; e++) {
						if (!cnt[e])
							continue;
						touched++;
						for (int id = 0; id < nv; id++)
							if (topk[id] == e)
								sorted[ntpp++] = id;
						ntpp = (ntpp + bm - 1) / bm * bm;
						for (int b = (ntpp - 1) / bm; b >= 0 && eids[b] == -1; b--)
							eids[b] = e;
					}

					memset(&a, 0, sizeof(a));
					a.b = (const void *)wbuf;
					a.b_stride_n = qt->quant == MOE_W4A16 ? K / 2 : K;
					a.b_stride_e = (int64_t)N * a.b_stride_n;
					a.c_stride_m = N;
					a.a_stride_m = K;
					a.N = N, a.K = K, a.EM = em, a.num_valid = nv;
					a.top_k = half ? 1 : TOP_K;
					a.block_m = bm;
					a.mul_routed_weight = half;
					a.scale = qt->scale;
					if (qt->scale == MOE_SCALE_TENSOR) {
						as_n = 1, bs_n = (size_t)E, per_scale = 4;
						a.bs_stride_e = 1;
					} else if (qt->scale == MOE_SCALE_CHANNEL) {
						as_n = (size_t)arows, bs_n = (size_t)E * N, per_scale = (size_t)N * 4;
						a.as_stride_m = 1, a.bs_stride_e = N, a.bs_stride_n = 1;
					} else if (qt->scale == MOE_SCALE_BLOCK) {
						as_n = (size_t)arows * gk, bs_n = (size_t)E * gn * gk;
						per_scale = (size_t)gn * gk * 4;
						a.as_stride_m = gk, a.as_stride_k = 1;
						a.bs_stride_e = (int64_t)gn * gk, a.bs_stride_n = gk, a.bs_stride_k = 1;
						a.group_n = a.group_k = 128;
					} else if (qt->quant == MOE_W4A16) {
						bs_n = (size_t)E * N * (K / INT4_GROUP), per_scale = (size_t)N * (K / INT4_GROUP) * 2;
						a.bs_stride_e = (int64_t)N * (K / INT4_GROUP), a.bs_stride_n = K / INT4_GROUP;
						a.bs_stride_k = 1;
						a.group_size = INT4_GROUP;
					}
					{
						uint8_t *ha = malloc(abytes);
						float *tw = fill_f32((size_t)nv, 0.05, 1);

						fill_bytes(ha, abytes);
						da = upload(ha, abytes);
						dtw = upload(tw, (size_t)nv * 4);
						free(ha);
						free(tw);
						if (as_n) {
							float *s = fill_f32(as_n, 1e-3, 2e-3);

							das = upload(s, as_n * 4);
							free(s);
						}
						if (bs_n && qt->quant == MOE_W4A16) {
							float *s = fill_f32(bs_n, 1e-3, 2e-3);
							uint16_t *h = malloc(bs_n * 2);

							for (size_t i = 0; i < bs_n; i++) {
								uint32_t u;

								memcpy(&u, &s[i], 4);
								h[i] = (uint16_t)(u >> 16);
							}
							dbs = upload(h, bs_n * 2);
							free(s);
							free(h);
						} else if (bs_n) {
							float *s = fill_f32(bs_n, 1e-3, 2e-3);

							dbs = upload(s, bs_n * 4);
							free(s);
						}
					}
					CHECK(cuMemAlloc(&dc, cbytes));
					dsorted = upload(sorted, (size_t)em * 4);
					deids = upload(eids, (size_t)nblk * 4);
					dntpp = upload(&ntpp, 4);
					a.a = (const void *)da, a.c = (void *)dc;
					a.a_scale = (const float *)das, a.b_scale = (const void *)dbs;
					a.topk_weights = (const float *)dtw;
					a.sorted_ids = (const int32_t *)dsorted, a.expert_ids = (const int32_t *)deids;
					a.num_tokens_post_padded = (const int32_t *)dntpp;

					/* floor and limit: the touched experts' weight bytes */
					const size_t bytes = (size_t)touched * ((size_t)N * wcol + per_scale);
					{
						size_t n16 = bytes / 16;
						void *p[] = { &rbuf, &n16, &rout };

						floor_ms = (double)bytes / (bw * 1e9) * 1e3;
						const size_t stride = bytes < ((size_t)256 << 20) ? (size_t)256 << 20 : 0;

						lim_ms = timed_ms(rd, (unsigned)sms * 16, 1, 256, 0, p, &rbuf, rbuf, stride);
						if (green)
							glim_ms = green_ms(rd, green_sms * 16, 1, 256, 0, p, &rbuf, rbuf, stride);
					}

					/* old: the row tile the plan picks where it picks no decode kernel, on its
					 * grid and pipeline; padded to SM120's blocks per SM */
					choice = moe_gemm_choose(qt->quant, qt->scale, bm, nv, em, N, K, 0, sms);
					told = choice.tm;
					a.stages = choice.stages;
					a.row_parts = parts_of(qt->quant, told, bm, nv, em);
					{
						const int smem = moe_gemm_launch_smem(qt->quant, told, a.stages);
						CUfunction f = get(mod, moe_gemm_kernel_name(qt->quant, told), smem);
						const unsigned gx = (unsigned)moe_gemm_rows_cols(qt->quant, told, N, K, nv);
						const unsigned gy = (unsigned)moe_gemm_rows_grid(told, bm, em, a.row_parts, 0);

						const unsigned th = (unsigned)moe_gemm_threads(qt->quant, told);

						old_ms = timed_ms(f, gx, gy, th, (unsigned)smem, params, &a.b, wbuf, wbytes);
						const int pad = sm120_pad(f, (int)th, smem);

						pad_ms = pad != smem ? timed_ms(f, gx, gy, th, (unsigned)pad, params, &a.b, wbuf, wbytes)
								     : old_ms;
						if (alt && !choice.tn)   /* the plan keeps the row tile: ALT's, padded alike */
							alt_ms = timed_ms(get(alt, moe_gemm_kernel_name(qt->quant, told), pad), gx, gy,
									  th, (unsigned)pad, params, &a.b, wbuf, wbytes);
						if (green && !choice.tn)
							g_ms = green_ms(f, gx, gy, th, (unsigned)pad, params, &a.b, wbuf, wbytes);
						if (!choice.tn)
							own_ms = own_time(&a, f, gx, gy, th, (unsigned)pad, params, wbuf);
					}
					a.stages = 0;
					a.row_parts = 0;
					/* new: the decode kernel the plan picks (0: it keeps the row tile) */
					tn = choice.tn;
					rp = choice.rows;
					for (int t = 0; t < 4; t++) {
						const int dt = 16 << t;

						dn[t] = timed_ms(get(mod, moe_gemm_decode_name(qt->quant, dt, 8), 0),
								 (unsigned)decode_cols(qt->quant, N, K, dt, em, bm, nv),
								 (unsigned)moe_gemm_decode_blocks(em, bm, nv), MOE_GEMM_THREADS, 0,
								 params, &a.b, wbuf, wbytes);
					}
					if (moe_gemm_decode_staged(qt->quant)) {
						/* the bytes of the staged kernel of K (16 rows a pass, which the plan
						 * launches past a few rows an expert) against the 8-row kernel of its tile */
						const int dt = 128;
						const unsigned gx = (unsigned)decode_cols(qt->quant, N, K, dt, em, bm, nv);
						const unsigned gy = (unsigned)moe_gemm_decode_blocks(em, bm, nv);
						uint16_t *c0 = malloc(cbytes), *c1 = malloc(cbytes);

						for (int r = 0; r < 2; r++) {
							CHECK(cuMemsetD16(dc, NAN_BF16, cbytes / 2));
							CHECK(cuLaunchKernel(get(mod, r ? moe_gemm_decode_kernel(qt->quant, dt, 16, K)
											: moe_gemm_decode_name(qt->quant, dt, 8),
										 0),
									     gx, gy, 1, MOE_GEMM_THREADS, 1, 1, 0, stream, params, NULL));
							CHECK(cuStreamSynchronize(stream));
							CHECK(cuMemcpyDtoH(r ? c1 : c0, dc, cbytes));
						}
						eq16 = !memcmp(c0, c1, cbytes);
						free(c0);
						free(c1);
					}
					/* the decode kernel the plan launches: a staged one, or the one of 8 rows a pass timed above */
					const char *pk = tn ? moe_gemm_decode_kernel(qt->quant, tn, rp, K) : NULL;
					/* its grid */
					const unsigned pgx = tn ? (unsigned)decode_cols(qt->quant, N, K, tn, em, bm, nv) : 0;
					const unsigned pgy = (unsigned)moe_gemm_decode_blocks(em, bm, nv);

					if (tn && rp == 16)
						new_ms = timed_ms(get(mod, pk, 0), pgx, pgy, MOE_GEMM_THREADS, 0, params, &a.b, wbuf,
								  wbytes);
					else
						new_ms = !tn ? old_ms : dn[tn == 16 ? 0 : tn == 32 ? 1 : tn == 64 ? 2 : 3];
					if (tn)
						own_ms = own_time(&a, get(mod, pk, 0), pgx, pgy, MOE_GEMM_THREADS, 0, params, wbuf);
					if (green && tn)
						g_ms = green_ms(get(mod, pk, 0), pgx, pgy, MOE_GEMM_THREADS, 0, params, &a.b, wbuf, wbytes);
					if (alt && tn) {
						/* the plan's kernel in ALT; a build without it, the 8-row one of the tile */
						CUfunction f;

						if (cuModuleGetFunction(&f, alt, pk) != CUDA_SUCCESS)
							f = get(alt, moe_gemm_decode_name(qt->quant, tn, 8), 0);
						alt_ms = timed_ms(f, pgx, pgy, MOE_GEMM_THREADS, 0, params, &a.b, wbuf, wbytes);
					}

					/* wiring check: the row tile's output against the decode kernel's (tile 16 or the plan's) */
					{
						const int dt = tn ? tn : 16;
						uint16_t *c0 = malloc(cbytes), *c1 = malloc(cbytes);
						CUfunction fo = get(mod, moe_gemm_kernel_name(qt->quant, told), moe_gemm_smem(qt->quant, told));
						CUfunction fd = get(mod, moe_gemm_decode_name(qt->quant, dt, 8), 0);
						const int otn = moe_gemm_tn(qt->quant, told, N, K);
						double mx = 0, md_ = 0;

						CHECK(cuMemsetD16(dc, NAN_BF16, cbytes / 2));
						CHECK(cuLaunchKernel(fo, (unsigned)((N + otn - 1) / otn),
								     (unsigned)((em + told - 1) / told), 1,
								     (unsigned)moe_gemm_threads(qt->quant, told), 1, 1,
								     (unsigned)moe_gemm_smem(qt->quant, told), stream, params, NULL));
						CHECK(cuStreamSynchronize(stream));
						CHECK(cuMemcpyDtoH(c0, dc, cbytes));
						CHECK(cuMemsetD16(dc, NAN_BF16, cbytes / 2));
						CHECK(cuLaunchKernel(fd, (unsigned)decode_cols(qt->quant, N, K, dt, em, bm, nv),
								     (unsigned)moe_gemm_decode_blocks(em, bm, nv), 1, MOE_GEMM_THREADS,
								     1, 1, 0, stream, params, NULL));
						CHECK(cuStreamSynchronize(stream));
						CHECK(cuMemcpyDtoH(c1, dc, cbytes));
						for (size_t i = 0; i < cbytes / 2; i++) {
							const double x = bf16_to_float(c0[i]), y = bf16_to_float(c1[i]);

							const double d = isnan(x) || isnan(y) ? INFINITY : fabs(x - y);

							mx = fabs(x) > mx ? fabs(x) : mx;
							md_ = d > md_ ? d : md_;
						}
						wire = mx > 0 ? md_ / mx : md_;
						free(c0);
						free(c1);
					}

					printf("%-5s %-6s %-11s %4d %4d %8.1f %6.2f %9.1f %6.2f %8.2f %4d %3d %9.1f %6.2f %6.2f %6.2f %6.2f "
					       "%6.2f %3d %6.2f",
					       md->name, half ? "down" : "gateup", qt->name, M, touched, floor_ms * 1e3,
					       floor_ms / lim_ms, old_ms * 1e3, floor_ms / old_ms, floor_ms / pad_ms, tn, tn ? rp : 0,
					       new_ms * 1e3, floor_ms / new_ms, floor_ms / dn[0], floor_ms / dn[1],
					       floor_ms / dn[2], floor_ms / dn[3], eq16, own_ms > 0 ? floor_ms / own_ms : 0.0);
					if (alt)
						printf(" %6.2f", floor_ms / alt_ms);
					printf(" %9.1e%s\n", wire, tn ? "" : "  (new = old: row tile kept)");
					if (green)
						printf("      green: %u SMs %.1f us %.1f GB/s/SM x5090 %.2f  read_bw %.1f us x5090 %.2f"
						       "  mma120 %.2f\n",
						       green_sms, g_ms * 1e3, sm_gbs(bytes, g_ms), sm_gbs(bytes, g_ms) / SM120_SM_GBS,
						       glim_ms * 1e3, sm_gbs(bytes, glim_ms) / SM120_SM_GBS,
						       mma120(qt->quant, bytes, (double)nv * N * K));
					if (rowtiles)
						row_tiles(mod, alt, qt->quant, N, K, em, nv, bm, params, &a, dc, cbytes, wbuf, wbytes,
							  floor_ms);
					fflush(stdout);

					CHECK(cuMemFree(da));
					CHECK(cuMemFree(dc));
					CHECK(cuMemFree(dtw));
					if (das)
						CHECK(cuMemFree(das));
					if (dbs)
						CHECK(cuMemFree(dbs));
					CHECK(cuMemFree(dsorted));
					CHECK(cuMemFree(deids));
					CHECK(cuMemFree(dntpp));
					free(sorted);
					free(eids);
					free(topk);
					free(cnt);
				}
	return 0;
}
