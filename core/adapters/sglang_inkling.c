/*
 * sglang_inkling.c - SGLang's inkling grouped GEMM `_grouped_gemm_kernel`
 * (inkling_moe.py, 0.5.16 to 0.5.23: the bf16 routed experts of Inkling
 * models, gate/up and down) as moe_gemm_bf16_m<TM> in schedule mode
 * (kernels/moe/moe_gemm.h).
 *
 * What the launch shows (grouped_gemm_triton): a 1-D grid of grid_m *
 * cdiv(N, BLOCK_SIZE_N) programs, grid_m (the schedule's entries, a runtime
 * argument; Triton drops it when it is 1) among the parameters, block 32 *
 * num_warps, and the framework's own routing buffers: NumTokensPerExpert
 * [E], ExpertTokenOffs [E + 1], ExpertBlockOffs [E + 1] (its last entry the
 * blocks in use) and ExpertBlockSchedule [grid_m] (words expert | block <<
 * 16).  What it does not show: E, N, K and every stride (a_stride_0,
 * b_stride_0, b_stride_1, c_stride_0) are constexprs, as are KN_MASK and
 * INT64_INDEX, and the element types are invisible.  So this adapter
 * reroutes only with the Python hook's compiled facts, which state them
 * all; without them every launch is refused, naming what is missing.
 *
 * The rule pins the two configurations grouped_gemm_triton compiles (the
 * decode branch, BLOCK_SIZE_M 16, and the prefill one, 128); the row tile is
 * the largest of moe_gemm's that divides BLOCK_SIZE_M, so every framework
 * block is whole blocks of ours.  Rows are read from A and written to C at
 * their own index: top_k 1, no routed weight, no bias, as the Triton kernel.
 * INT64_INDEX only widens the framework's index arithmetic (set when a
 * tensor is 2 GiB or more); moe_gemm forms every address in 64 bits, so
 * both values compute the same.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../../kernels/moe/moe_gemm.h"
#include "../rules/compiled.h"
#include "adapter.h"
#include "facts.h"
#include "fused_moe.h"

/* The element type moe_gemm's schedule mode reads or writes through each pointer. */
static const struct facts_ptype inkling_types[] = {
	{ "A", "*bf16", "so another activation dtype (fp16, fp32) would be decoded wrongly" },
	{ "B", "*bf16", "so another weight dtype would be decoded wrongly" },
	{ "C", "*bf16", "so an output of another dtype would be written as bf16 bits" },
	{ "NumTokensPerExpert", "*i32", "so wider counts would be misread" },
	{ "ExpertTokenOffs", "*i32", "so wider offsets would be misread" },
	{ "ExpertBlockOffs", "*i32", "so a wider block count would be misread" },
	{ "ExpertBlockSchedule", "*i32", "so wider schedule words would be misread" },
};

/* The constexprs the launch cannot show, in the order of struct inkling's fields. */
static const char *const inkling_constexprs[] = {
	"E", "N", "K", "a_stride_0", "b_stride_0", "b_stride_1", "c_stride_0", "KN_MASK", "INT64_INDEX",
};

/* What Triton compiled in (inkling_constexprs, in order). */
struct inkling {
	int64_t e, n, k, as0, bs0, bs1, cs0, kn_mask, int64_index;
};

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* compiled_inkling - the constexprs and the pointers' element types, from the facts. */
static int compiled_inkling(const struct adapter_input *in, struct inkling *c, struct sm_err *why)
{
	int64_t *v = &c->e;
	size_t i;

	if (!in->compiled)
		return sm_err_set(why, -EINVAL, "E, N, K and the strides (a_stride_0, b_stride_0, "
				  "b_stride_1, c_stride_0) are compiled into %s (SGLang inkling_moe.py) "
				  "and no launch shows them: rule %s reroutes it only with the compiled "
				  "facts of the shim's Python hook (python/ beside libsm120shim.so, "
				  "SM120SHIM_ADVERTISE kernel)", in->rule->kernel, in->rule->id);
	for (i = 0; i < sizeof(inkling_constexprs) / sizeof(inkling_constexprs[0]); i++)
		if (compiled_int(in->compiled, inkling_constexprs[i], &v[i]) != 0)
			return sm_err_set(why, -EINVAL, "the compiled facts do not state %s as a whole "
					  "number: not SGLang's inkling _grouped_gemm_kernel as rule %s "
					  "knows it", inkling_constexprs[i], in->rule->id);
	if (facts_types(in->compiled, inkling_types, sizeof(inkling_types) / sizeof(inkling_types[0]),
			"moe_gemm", why))
		return -EINVAL;
	if ((c->kn_mask != 0 && c->kn_mask != 1) || (c->int64_index != 0 && c->int64_index != 1))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with KN_MASK %lld and "
				  "INT64_INDEX %lld, which grouped_gemm_triton never passes",
				  (long long)c->kn_mask, (long long)c->int64_index);
	return 0;
}

int adapt_sglang_inkling(const struct adapter_input *in, struct reroute_plan *plan,
			 struct sm_err *why)
{
	static const char *const ptr_names[7] = {
		"A", "B", "C", "NumTokensPerExpert", "ExpertTokenOffs", "ExpertBlockOffs",
		"ExpertBlockSchedule",
	};
	static const int tiles[] = { 128, 64, 16 };   /* the moe_gemm row tiles it takes, largest first (not 32: unmeasured here) */
	struct moe_gemm_args a = { 0 };
	struct inkling c;
	const void *p[7];
	double bm, bn, bk, warps;
	int32_t grid_m;
	int64_t rows;
	unsigned int i;
	int tm = 0;

	if (adapter_value(in, "BLOCK_SIZE_M", &bm, why) || adapter_value(in, "BLOCK_SIZE_N", &bn, why) ||
	    adapter_value(in, "BLOCK_SIZE_K", &bk, why) || adapter_value(in, "num_warps", &warps, why))
		return -EINVAL;
	for (i = 0; i < 7; i++)
		if (adapter_ptr(in, ptr_names[i], &p[i], why))
			return -EINVAL;
	if (adapter_i32(in, "grid_m", &grid_m, why) || compiled_inkling(in, &c, why))
		return -EINVAL;

	/* the geometry Triton was launched with */
	if (in->block[0] != (unsigned int)(32 * warps) || in->block[1] != 1 || in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not the tile's %g warps",
				  in->block[0], in->block[1], in->block[2], warps);
	if (c.n < 1 || c.n > INT32_MAX || bn < 1 || grid_m < 1 ||
	    (int64_t)in->grid[0] != grid_m * cdiv(c.n, (int64_t)bn) || in->grid[1] != 1 ||
	    in->grid[2] != 1)
		return sm_err_set(why, -EINVAL, "grid (%u, %u, %u) is not grid_m %d * cdiv(N %lld, %g)",
				  in->grid[0], in->grid[1], in->grid[2], grid_m, (long long)c.n, bn);
	if (c.e < 1 || c.e > 65536)
		return sm_err_set(why, -EINVAL, "E %lld: the schedule's words hold experts 0 to 65535",
				  (long long)c.e);
	if (c.k < 16 || c.k % 16 != 0 || c.k > INT32_MAX)
		return sm_err_set(why, -EINVAL, "K %lld is not a multiple of 16, which moe_gemm needs",
				  (long long)c.k);
	if (!c.kn_mask && (c.n % (int64_t)bn != 0 || c.k % (int64_t)bk != 0))
		return sm_err_set(why, -EINVAL, "the kernel was compiled without KN_MASK for N %lld and "
				  "K %lld, not multiples of its %g x %g tile: it reads and writes past "
				  "them, which moe_gemm does not reproduce", (long long)c.n,
				  (long long)c.k, bn, bk);
	if (c.as0 < c.k || c.cs0 < c.n || c.bs1 < c.k || c.bs0 / c.bs1 < c.n)
		return sm_err_set(why, -EINVAL, "strides (a %lld, b %lld, %lld, c %lld) overlap for N "
				  "%lld, K %lld", (long long)c.as0, (long long)c.bs0, (long long)c.bs1,
				  (long long)c.cs0, (long long)c.n, (long long)c.k);
	if (!moe_aligned16(p[0], c.as0, 2) || !moe_aligned16(p[1], c.bs1, 2) ||
	    !moe_aligned16(p[1], c.bs0, 2))
		return sm_err_set(why, -EINVAL, "A or B rows are not 16-byte aligned (a_stride_0 %lld, "
				  "b_stride_1 %lld, b_stride_0 %lld)", (long long)c.as0,
				  (long long)c.bs1, (long long)c.bs0);
	if (!p[2])
		return sm_err_set(why, -EINVAL, "C is NULL");
	for (i = 3; i < 7; i++)
		if (!p[i] || (uintptr_t)p[i] % 4 != 0)
			return sm_err_set(why, -EINVAL, "%s at %p is not a 4-byte aligned int32 array",
					  ptr_names[i], p[i]);
	for (i = 0; i < sizeof(tiles) / sizeof(tiles[0]) && !tm && bm == (int64_t)bm; i++)
		if ((int64_t)bm % tiles[i] == 0)
			tm = tiles[i];
	if (!tm)
		return sm_err_set(why, -EINVAL, "BLOCK_SIZE_M %g is not a multiple of 16", bm);
	rows = (int64_t)grid_m * ((int64_t)bm / tm);
	if (rows > 65535 || (int64_t)grid_m * (int64_t)bm > INT32_MAX)
		return sm_err_set(why, -EINVAL, "grid_m %d needs %lld row blocks of moe_gemm, over the "
				  "65535 a grid's y dimension holds", grid_m, (long long)rows);

	a.a = p[0], a.b = p[1], a.c = (void *)(uintptr_t)p[2];
	a.tokens_per_expert = p[3];
	a.token_offs = p[4];
	a.num_blocks = (const int32_t *)p[5] + c.e;       /* ExpertBlockOffs[E] */
	a.schedule = p[6];
	a.a_stride_m = c.as0, a.b_stride_e = c.bs0, a.b_stride_n = c.bs1, a.c_stride_m = c.cs0;
	a.N = (int32_t)c.n, a.K = (int32_t)c.k;
	a.EM = grid_m * (int32_t)bm;
	a.top_k = 1;
	a.block_m = (int32_t)bm;

	plan->kernel = moe_gemm_kernel_name(MOE_BF16, tm);
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = (unsigned int)cdiv(c.n, MOE_GEMM_TN(MOE_BF16, tm));
	plan->grid[1] = (unsigned int)rows;
	plan->grid[2] = 1;
	plan->block[0] = (unsigned)moe_gemm_threads(MOE_BF16, tm), plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = moe_gemm_smem(MOE_BF16, tm);
	return 0;
}
