/*
 * lightning_kv.c - vLLM's and SGLang's lightning attention `_fwd_kv_parallel`
 * (lightning_attn.py, step 2 of lightning_attention: MiniMax-Text-01/M1's
 * and Bailing's linear attention) as lightning_kv_* (kernels/linear/
 * lightning_kv.h).
 *
 * What the launch shows (vLLM 0.33.0, SGLang 0.5.9 and 0.5.23
 * _attention.forward): grid (b * h, NUM_BLOCK), block 32 * num_warps, the
 * pointers K (b, h, n, d), V (b, h, n, e), K_decay (h, BLOCK) and KV (b, h,
 * NUM_BLOCK, d, e), all contiguous fp32 (the host calls .contiguous() and
 * allocates K_decay and KV itself), and the ints n and NUM_BLOCK (Triton
 * drops each when it is 1: one token).
 * What it does not show: b, h, d, e, BLOCK, CBLOCK, NUM_CBLOCK, D_FBLOCK,
 * E_FBLOCK and NUM_FBLOCK are constexprs, and the element types are
 * invisible.  So this adapter reroutes only with the Python hook's compiled
 * facts, which state them all; without them every launch is refused, naming
 * what is missing.  It takes each value from the facts, never from the
 * rule, and refuses every configuration lightning_kv does not compute
 * exactly: feature blocks (NUM_FBLOCK > 1 computes one corner of the tile),
 * NUM_CBLOCK other than BLOCK / CBLOCK, a CBLOCK that is not a multiple of
 * the kernel's chunk, head sizes without a bundled kernel, any type but
 * *fp32, a grid or NUM_BLOCK that does not follow from n, and offsets that
 * the framework's int32 arithmetic would wrap.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../../kernels/linear/lightning_kv.h"
#include "../rules/compiled.h"
#include "adapter.h"
#include "facts.h"

/* The constexprs the adapter reads from the facts, by index. */
enum { C_B, C_H, C_D, C_E, C_BLOCK, C_CBLOCK, C_NUM_CBLOCK, C_D_FBLOCK, C_E_FBLOCK,
       C_NUM_FBLOCK, C_WARPS, C_COUNT };
static const char *const constexpr_names[C_COUNT] = {
	"b", "h", "d", "e", "BLOCK", "CBLOCK", "NUM_CBLOCK", "D_FBLOCK", "E_FBLOCK",
	"NUM_FBLOCK", "num_warps",
};

/* The pointers lightning_kv reads or writes, each as fp32, and what another type would do. */
static const struct {
	const char *param, *consequence;
} lightning_ptrs[] = {
	{ "K", "so keys of another dtype would be decoded wrongly" },
	{ "V", "so values of another dtype would be decoded wrongly" },
	{ "K_decay", "so decays of another dtype would be decoded wrongly" },
	{ "KV", "so a tile of another dtype would be written as fp32 bits" },
};

/* The bundled kernels, one per pair of head sizes. */
static const struct variant {
	const char *name;
	int d, e;
	unsigned int smem;
} variants[] = {
#define LIGHTNING_VARIANT(name, d, e, smem) { #name, d, e, smem },
	LIGHTNING_KV_KERNELS(LIGHTNING_VARIANT)
#undef LIGHTNING_VARIANT
};

/* variant_for - the kernel of head sizes @d x @e, or NULL. */
static const struct variant *variant_for(int64_t d, int64_t e)
{
	size_t i;

	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		if (variants[i].d == d && variants[i].e == e)
			return &variants[i];
	return NULL;
}

/*
 * compiled_lightning - every constexpr of constexpr_names from the facts into
 * @c, and every pointer's element type checked; then the blocking that
 * lightning_kv computes: one feature block, NUM_CBLOCK = BLOCK / CBLOCK.
 */
static int compiled_lightning(const struct adapter_input *in, int64_t c[C_COUNT],
			      struct sm_err *why)
{
	size_t i;

	if (!in->compiled)
		return sm_err_set(why, -EINVAL, "b, h, d, e, BLOCK, CBLOCK, NUM_CBLOCK and the "
				  "feature blocks are compiled into %s (lightning attention) and no "
				  "launch shows them: rule %s reroutes it only with the compiled facts "
				  "of the shim's Python hook (python/ beside libsm120shim.so, "
				  "SM120SHIM_ADVERTISE kernel)", in->rule->kernel, in->rule->id);
	for (i = 0; i < C_COUNT; i++)
		if (compiled_int(in->compiled, constexpr_names[i], &c[i]))
			return sm_err_set(why, -EINVAL, "the compiled facts do not state %s as a whole "
					  "number: not lightning attention's %s as rule %s knows it",
					  constexpr_names[i], in->rule->kernel, in->rule->id);
	for (i = 0; i < sizeof(lightning_ptrs) / sizeof(lightning_ptrs[0]); i++)
		if (facts_type(in->compiled, lightning_ptrs[i].param, "*fp32", "lightning_kv",
			       lightning_ptrs[i].consequence, why))
			return -EINVAL;
	if (c[C_NUM_FBLOCK] != 1 || c[C_D_FBLOCK] != c[C_D] || c[C_E_FBLOCK] != c[C_E])
		return sm_err_set(why, -EINVAL, "the kernel was compiled with NUM_FBLOCK %lld "
				  "(D_FBLOCK %lld of d %lld, E_FBLOCK %lld of e %lld): it computes "
				  "one %lld x %lld corner of each tile, lightning_kv the whole tile",
				  (long long)c[C_NUM_FBLOCK], (long long)c[C_D_FBLOCK],
				  (long long)c[C_D], (long long)c[C_E_FBLOCK], (long long)c[C_E],
				  (long long)c[C_D_FBLOCK], (long long)c[C_E_FBLOCK]);
	if (c[C_B] < 1 || c[C_H] < 1 || c[C_CBLOCK] < 1 || c[C_BLOCK] < 1 ||
	    c[C_BLOCK] > 0x7fffffff || c[C_BLOCK] % c[C_CBLOCK] != 0 || c[C_NUM_CBLOCK] != c[C_BLOCK] / c[C_CBLOCK])
		return sm_err_set(why, -EINVAL, "the kernel was compiled with b %lld, h %lld, BLOCK "
				  "%lld, CBLOCK %lld and NUM_CBLOCK %lld: lightning_kv needs b, h >= 1 "
				  "and NUM_CBLOCK = BLOCK / CBLOCK, a whole number",
				  (long long)c[C_B], (long long)c[C_H], (long long)c[C_BLOCK],
				  (long long)c[C_CBLOCK], (long long)c[C_NUM_CBLOCK]);
	if (c[C_CBLOCK] % LIGHTNING_KV_CHUNK != 0)
		return sm_err_set(why, -EINVAL, "CBLOCK %lld is not a multiple of lightning_kv's "
				  "%d-row chunks", (long long)c[C_CBLOCK], LIGHTNING_KV_CHUNK);
	return 0;
}

/*
 * wraps - would the framework's int32 offsets (off_bh * n * d, off_bh *
 * NUM_BLOCK * d * e, off_block * BLOCK * d, off_block * d * e) pass 2^31 - 1
 * for @bh heads of @n tokens in @blocks blocks?
 */
static int wraps(int64_t bh, int64_t n, int64_t blocks, const int64_t c[C_COUNT])
{
	const int64_t width = c[C_D] > c[C_E] ? c[C_D] : c[C_E], tile = c[C_D] * c[C_E];

	return (bh - 1) * n > INT32_MAX / width || (bh - 1) * blocks > INT32_MAX / tile ||
	       (blocks - 1) * c[C_BLOCK] > INT32_MAX / width || (blocks - 1) > INT32_MAX / tile;
}

int adapt_lightning_kv_parallel(const struct adapter_input *in, struct reroute_plan *plan,
				struct sm_err *why)
{
	static const char *const ptr_names[4] = { "K", "V", "K_decay", "KV" };
	struct lightning_kv_args a = { 0 };
	const struct variant *k;
	const void *p[4];
	int64_t c[C_COUNT];
	int32_t n, blocks;
	unsigned int i;

	for (i = 0; i < 4; i++)
		if (adapter_ptr(in, ptr_names[i], &p[i], why))
			return -EINVAL;
	if (adapter_i32(in, "n", &n, why) || adapter_i32(in, "NUM_BLOCK", &blocks, why))
		return -EINVAL;
	if (compiled_lightning(in, c, why))
		return -EINVAL;
	k = variant_for(c[C_D], c[C_E]);
	if (!k)
		return sm_err_set(why, -EINVAL, "head sizes d %lld, e %lld have no bundled kernel "
				  "(lightning_kv with d = e = 128)", (long long)c[C_D],
				  (long long)c[C_E]);

	/* the geometry Triton was launched with */
	if (in->block[0] != (unsigned int)(32 * c[C_WARPS]) || in->block[1] != 1 ||
	    in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not the kernel's %lld warps",
				  in->block[0], in->block[1], in->block[2], (long long)c[C_WARPS]);
	if (n < 1 || blocks != (int32_t)(((int64_t)n + c[C_BLOCK] - 1) / c[C_BLOCK]))
		return sm_err_set(why, -EINVAL, "NUM_BLOCK %d is not cdiv(n %d, BLOCK %lld)", blocks,
				  n, (long long)c[C_BLOCK]);
	if ((int64_t)in->grid[0] != c[C_B] * c[C_H] || in->grid[1] != (unsigned int)blocks ||
	    in->grid[2] != 1)
		return sm_err_set(why, -EINVAL, "grid (%u, %u, %u) is not (b * h = %lld, NUM_BLOCK = "
				  "%d, 1)", in->grid[0], in->grid[1], in->grid[2],
				  (long long)(c[C_B] * c[C_H]), blocks);
	for (i = 0; i < 4; i++)
		if (!p[i] || (uintptr_t)p[i] % 16 != 0)
			return sm_err_set(why, -EINVAL, "%s at %p is not a 16-byte aligned fp32 "
					  "array (lightning_kv loads 16 bytes at a time)",
					  ptr_names[i], p[i]);
	if (wraps(in->grid[0], n, blocks, c))
		return sm_err_set(why, -EINVAL, "%u heads of %d tokens (%d blocks of %lld x %lld) "
				  "pass the framework's int32 offsets, which wrap past 2^31 - 1: the "
				  "Triton kernel would read and write elsewhere",
				  in->grid[0], n, blocks, (long long)c[C_D], (long long)c[C_E]);

	a.k = p[0];
	a.v = p[1];
	a.k_decay = p[2];
	a.kv = (float *)(uintptr_t)p[3];
	a.n = n;
	a.heads = (int32_t)c[C_H];
	a.num_block = blocks;
	a.block = (int32_t)c[C_BLOCK];
	a.cblock = (int32_t)c[C_CBLOCK];
	a.d = (int32_t)c[C_D];
	a.e = (int32_t)c[C_E];

	plan->kernel = k->name;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = in->grid[0];
	plan->grid[1] = (unsigned int)blocks;
	plan->grid[2] = 1;
	plan->block[0] = LIGHTNING_KV_THREADS;
	plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = k->smem;
	return 0;
}
