/*
 * test_admit.c - route_admit (core/route/admit.h), the load-time decision
 * of the Python hook, against the rules compiled from rules/, and the
 * compiled-text lookups it reads (core/rules/compiled.h): the exact tiles,
 * and the tile-generic fused-MoE rules (core/rules/generic.h) at the
 * configurations of real tuned files, each way.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/route/admit.h"
#include "../../core/rules/compiled.h"

static struct target_limits sm120;

static int setup(void **state)
{
	(void)state;
	return target_parse("sm120", &sm120, NULL);
}

/* SGLang's default FP8 fused-MoE tile, compiled for sm_90 with block scales: 197632 B. */
#define MOE_TILE "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;" \
		 "GROUP_SIZE_M=32;MUL_ROUTED_WEIGHT=0;top_k=8;compute_type=bf16;c_sorted=0;" \
		 "filter_expert=1;use_fp8_w8a8=1;use_int8_w8a8=0;use_int8_w8a16=0;" \
		 "per_channel_quant=0;group_n=128;group_k=128;swap_ab=0"

/* SGLang 0.5.9's runtime arguments, as Triton's signature records them. */
#define SIGNATURE ";a_ptr:*fp8e4nv;b_ptr:*fp8e4nv;c_ptr:*bf16;a_scale_ptr:*fp32;b_scale_ptr:*fp32;" \
		  "topk_weights_ptr:*fp32;sorted_token_ids_ptr:*i32;expert_ids_ptr:*i32;" \
		  "num_tokens_post_padded_ptr:*i32;N:i32;K:i32;EM:i32;num_valid_tokens:i32;" \
		  "stride_am:i32;stride_be:i32;stride_bn:i32;stride_bias_e:i32;stride_bias_n:i32;" \
		  "stride_cm:i32;stride_asm:i32;stride_bse:i32;stride_bsn:i32"

/* vLLM 0.33's runtime arguments of a bf16 launch (no scale pointers). */
#define VLLM_SIGNATURE ";a_ptr:*bf16;b_ptr:*bf16;c_ptr:*bf16;b_bias_ptr=None;a_scale_ptr=None;" \
		       "b_scale_ptr=None;topk_weights_ptr:*fp32;sorted_token_ids_ptr:*i32;" \
		       "expert_ids_ptr:*i32;num_tokens_post_padded_ptr:*i32;N:i32;K:i32;EM:i32;" \
		       "num_valid_tokens:i32;stride_am:i32;stride_be:i32;stride_bn:i32;" \
		       "stride_cm:i32;stride_bbe:i32;stride_bbn:i32"

/* admit_on - route_admit of kernel @name compiled for sm_@sm, @shared bytes, @threads, @compiled. */
static uint64_t admit_on(int sm, const char *name, uint64_t shared, uint32_t threads,
			 const char *compiled, enum shim_mode mode, const char **rule, char *why)
{
	struct route_kernel k = { name, shared, threads, compiled, sm };
	struct route_admission a;

	memset(&a, 0x5a, sizeof(a)); /* poisoned: route_admit fills every field */
	route_admit(&k, &sm120, mode, rules_builtin, rules_builtin_count, &a);
	*rule = a.rule ? a.rule->id : NULL;
	strcpy(why, a.why.msg);
	assert_true(!a.advertise || a.rule);
	assert_int_equal(a.over, shared > sm120.optin_per_block);
	return a.advertise;
}

/* admit - admit_on an architecture the decision is not told. */
static uint64_t admit(const char *name, uint64_t shared, uint32_t threads, const char *compiled,
		      enum shim_mode mode, const char **rule, char *why)
{
	return admit_on(0, name, shared, threads, compiled, mode, rule, why);
}

static void test_compiled(void **state)
{
	char v[16];
	double x;

	(void)state;
	assert_int_equal(compiled_get(MOE_TILE SIGNATURE, "top_k", '=', v, sizeof(v)), 0);
	assert_string_equal(v, "8");
	assert_int_equal(compiled_get(MOE_TILE SIGNATURE, "a_ptr", ':', v, sizeof(v)), 0);
	assert_string_equal(v, "*fp8e4nv");
	assert_int_equal(compiled_get(MOE_TILE SIGNATURE, "a_ptr", '=', v, sizeof(v)), -ENOENT);
	assert_int_equal(compiled_get(MOE_TILE, "top", '=', v, sizeof(v)), -ENOENT); /* a prefix */
	assert_int_equal(compiled_get(MOE_TILE SIGNATURE, "sorted_token_ids_ptr", ':', v, 4),
			 -ENOSPC);
	assert_int_equal(compiled_get(NULL, "top_k", '=', v, sizeof(v)), -ENOENT);
	assert_int_equal(compiled_get("", "top_k", '=', v, sizeof(v)), -ENOENT);
	assert_int_equal(compiled_number(MOE_TILE, "BLOCK_SIZE_N", &x), 0);
	assert_true(x == 256);
	assert_int_equal(compiled_number("logit_cap=30.5", "logit_cap", &x), 0);
	assert_true(x == 30.5);
	assert_int_equal(compiled_number(MOE_TILE, "compute_type", &x), -EINVAL);
	assert_int_equal(compiled_number("top_k=", "top_k", &x), -EINVAL);
	assert_int_equal(compiled_number(MOE_TILE, "absent", &x), -ENOENT);
}

/* A kernel that fits, or any mode but reroute: nothing to advertise. */
static void test_fits_or_not_reroute(void **state)
{
	const char *rule;
	char why[512];

	(void)state;
	assert_int_equal(admit("fused_moe_kernel", 101376, 256, MOE_TILE, SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_null(rule);
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE, SHIM_MODE_ENFORCE, &rule,
			       why), 0);
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE, SHIM_MODE_DIAGNOSE, &rule,
			       why), 0);
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE, SHIM_MODE_OFF, &rule,
			       why), 0);
	assert_string_equal(why, "");
}

/* A rule's tile, exactly: admitted at the kernel's own need. */
static void test_rule_tile(void **state)
{
	const char *rule;
	char why[512];

	(void)state;
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE, SHIM_MODE_REROUTE, &rule,
			       why), 197632);
	assert_non_null(rule);
	assert_string_equal(why, "");
	/* with a signature: the rule whose kept parameters it has */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE SIGNATURE,
			       SHIM_MODE_REROUTE, &rule, why), 197632);
	assert_non_null(rule);
	assert_int_equal(strncmp(rule, "sglang-moe-", 11), 0);
	/* without the compiled text (a C program, an older hook) the tile is enough */
	assert_int_equal(admit("fused_moe_kernel", 147456, 256, NULL, SHIM_MODE_REROUTE, &rule,
			       why), 147456);
	/* SGLang's extend attention, the seed crash's tile */
	assert_int_equal(admit("_fwd_kernel", 106496, 256, "BLOCK_M=32;BLOCK_N=64;num_warps=8;"
			       "Lq=576;Lv=512;IS_CAUSAL=1;logit_cap=0.0", SHIM_MODE_REROUTE, &rule, why),
			 106496);
}

/* Over the limit and not a rule's tile: Triton is left to refuse it, with the reason. */
static void test_refused(void **state)
{
	const char *rule;
	char why[512];

	(void)state;
	/* no rule names it: the reason says so */
	assert_int_equal(admit("matmul_kernel", 196608, 256, "num_warps=8", SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_null(rule);
	assert_non_null(strstr(why, "no rule of this shim names kernel matmul_kernel"));
	/* a tuned config file's bucket, 64x256x128 FP8, 4 stages, without the compiled
	   facts (a C program): no tile of its bytes */
	assert_int_equal(admit("fused_moe_kernel", 163840, 128, NULL, SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_non_null(strstr(why, "has no tile of 163840 B (without the compiled facts only "
				    "its tiles are rerouted)"));
	/* ... and with facts that lack a value the generic rules need */
	assert_int_equal(admit("fused_moe_kernel", 163840, 128, "num_warps=4;BLOCK_SIZE_M=64",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "do not state BLOCK_SIZE_N, which rule sglang-moe-2026-03 "
				    "needs to reroute it at any configuration"));
	/* the tile's bytes with another warp count */
	assert_int_equal(admit("fused_moe_kernel", 197632, 128, NULL, SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_non_null(strstr(why, "runs 8 warps, the kernel 128 threads"));
	/* the tile's bytes with facts of another configuration (BLOCK_SIZE_N 128): the
	   formula gives those 98304 B on sm_120 and 131072 B on sm_90 (+ the scale
	   scratch), not 197632 */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, "num_warps=8;BLOCK_SIZE_M=128;"
			       "BLOCK_SIZE_N=128;BLOCK_SIZE_K=128;GROUP_SIZE_M=1;num_stages=4;"
			       "compute_type=bf16;use_fp8_w8a8=1;group_n=128;group_k=128",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "fused_moe_kernel has 197632 B of dynamic shared memory, but "
				    "Triton compiles 98304 B on sm_120"));
	assert_non_null(strstr(why, "the kernel and its compiled facts disagree"));
	/* a rule value (not a tile value) that differs: SGLang's fused all-reduce */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE ";FUSE_SUM_ALL_REDUCE=1",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with FUSE_SUM_ALL_REDUCE 1"));
	/* a signature without one of the rule's kept parameters (another release's kernel) */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE ";a_ptr:*bf16;b_ptr:*bf16",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "has no argument c_ptr"));
	/* a signature with an argument no rule lists (another release's kernel) */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE SIGNATURE ";extra_ptr:*i32",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "the kernel takes extra_ptr at run time, which rule "
				    "sglang-moe-2026-03's signature does not list"));
	/* a rule without a generic entry names only its tiles */
	assert_int_equal(admit("_fwd_kernel", 106497, 256, "BLOCK_M=32;num_warps=8",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "has no tile of 106497 B"));
	assert_null(strstr(why, "without the compiled facts"));
	/* no name: nothing */
	assert_int_equal(admit(NULL, 197632, 256, NULL, SHIM_MODE_REROUTE, &rule, why), 0);
}

/*
 * moe_facts - what SGLang 0.5.9 compiles into fused_moe_kernel for a tuned
 * bucket (@bm x @bn x @bk, @warps, @stages) of FP8 w8a8 (@fp8; else bf16)
 * with @group 128x128 block scales (0: none), in @out; @extra appended.
 */
static const char *moe_facts(char *out, size_t n, int bm, int bn, int bk, int warps, int stages,
			     int fp8, int group, int swap, const char *extra)
{
	/* vLLM's kernel (its SWAP_AB in @extra) has none of SGLang's four flags */
	char sglang[96];

	snprintf(sglang, sizeof(sglang), ";even_Ks=1;c_sorted=0;filter_expert=0;swap_ab=%d", swap);
	snprintf(out, n, "num_warps=%d;num_stages=%d;BLOCK_SIZE_M=%d;BLOCK_SIZE_N=%d;"
		 "BLOCK_SIZE_K=%d;GROUP_SIZE_M=16;MUL_ROUTED_WEIGHT=0;top_k=8;compute_type=bf16;"
		 "use_fp8_w8a8=%d;use_int8_w8a8=0;use_int8_w8a16=0;per_channel_quant=0;group_n=%d;"
		 "group_k=%d%s%s", warps, stages, bm, bn, bk, fp8, group, group,
		 strstr(extra, "SWAP_AB=") ? "" : sglang, extra);
	return out;
}

/*
 * The tile-generic rules at real tuned buckets: the configuration is the
 * facts', checked against the bounds, the block and the shared memory
 * Triton compiles for it on the kernel's architecture.
 */
static void test_generic(void **state)
{
	const char *rule;
	char why[1024], f[1024];

	(void)state;
	/* SGLang 0.5.9 E=161,N=384 H200 per-channel FP8, bucket 4096: 64x256x128, 4 warps,
	   4 stages: 163840 B on sm_90 (the refusal), 122880 B on sm_120 */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 1, 0, 0, "");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 163840);
	assert_string_equal(rule, "sglang-moe-2026-03");
	assert_int_equal(admit_on(120, "fused_moe_kernel", 122880, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 122880);
	assert_int_equal(admit("fused_moe_kernel", 163840, 128, f, SHIM_MODE_REROUTE, &rule, why),
			 163840);
	/* ... told the wrong architecture: the sizes disagree */
	assert_int_equal(admit_on(120, "fused_moe_kernel", 163840, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "has 163840 B of dynamic shared memory, but Triton compiles "
				    "122880 B on sm_120 for BLOCK_SIZE_M 64, BLOCK_SIZE_N 256, "
				    "BLOCK_SIZE_K 128"));
	/* ... an architecture the formula does not model: not checked, so not taken */
	assert_int_equal(admit_on(100, "fused_moe_kernel", 163840, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "cannot be checked against its compiled facts"));
	assert_non_null(strstr(why, "not sm_100"));
	/* ... the launch's threads are not the facts' warps */
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840, 256, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "runs 256 threads a block, but its compiled num_warps 4 makes "
				    "128"));
	/* DeepSeek-V3 block FP8 (E=256,N=256 B200, bucket 4): BLOCK_SIZE_M 16, 8 warps, 4
	   stages: 105472 B on sm_120 (the B scales' 1024 B scratch included) */
	moe_facts(f, sizeof(f), 16, 256, 128, 8, 4, 1, 128, 0, "");
	assert_int_equal(admit_on(120, "fused_moe_kernel", 105472, 256, f, SHIM_MODE_REROUTE,
				  &rule, why), 105472);
	/* ... on sm_90 SGLang swaps the dot (BLOCK_SIZE_M < 64): 140288 B */
	moe_facts(f, sizeof(f), 16, 256, 128, 8, 4, 1, 128, 1, "");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 140288, 256, f, SHIM_MODE_REROUTE, &rule,
				  why), 140288);
	/* E=129,N=352 B200 FP8, bucket 3072: BLOCK_SIZE_M 256, 256 x 64, 5 stages */
	moe_facts(f, sizeof(f), 256, 256, 64, 8, 5, 1, 0, 0, "");
	assert_int_equal(admit_on(120, "fused_moe_kernel", 131072, 256, f, SHIM_MODE_REROUTE,
				  &rule, why), 131072);
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840, 256, f, SHIM_MODE_REROUTE, &rule,
				  why), 163840);
	/* bf16 (no scales), 256 x 256 x 64, 3 stages (E=128,N=1344 B200, bucket 1024) */
	moe_facts(f, sizeof(f), 256, 256, 64, 8, 3, 0, 0, 0, "");
	assert_int_equal(admit_on(120, "fused_moe_kernel", 131072, 256, f, SHIM_MODE_REROUTE,
				  &rule, why), 131072);
	/* bounds: BLOCK_SIZE_M 8 and 512, block scales of 64, BLOCK_SIZE_K over group_k */
	moe_facts(f, sizeof(f), 8, 256, 128, 4, 4, 1, 0, 0, "");
	assert_int_equal(admit("fused_moe_kernel", 200000, 128, f, SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with BLOCK_SIZE_M 8; rule sglang-moe-2026-03 "
				    "reroutes BLOCK_SIZE_M from 16 to 256 in multiples of 16 (moe_gemm"));
	moe_facts(f, sizeof(f), 512, 64, 64, 8, 3, 1, 0, 0, "");
	assert_int_equal(admit("fused_moe_kernel", 200000, 256, f, SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "BLOCK_SIZE_M 512"));
	moe_facts(f, sizeof(f), 64, 256, 64, 4, 4, 1, 64, 0, "");
	assert_int_equal(admit("fused_moe_kernel", 200000, 128, f, SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with group_n 64; rule sglang-moe-2026-03 reroutes "
				    "group_n only at 0 or 128"));
	/* SGLang E=257,N=256 H20 block FP8, BLOCK_SIZE_K 256 over 128-wide groups (sm_90
	   4 stages: 64x256x256 gives 328704 B; the size is not what is refused) */
	moe_facts(f, sizeof(f), 64, 256, 256, 4, 4, 1, 128, 0, "");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 328704, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "compiled with BLOCK_SIZE_K 256 and group_k 128; rule "
				    "sglang-moe-2026-03 reroutes it only when BLOCK_SIZE_K divides "
				    "group_k"));
	/* ... BLOCK_SIZE_K 64 divides it: 64x256x64 4 stages on sm_90, 1024 B of scales */
	moe_facts(f, sizeof(f), 64, 256, 64, 4, 4, 1, 128, 0, "");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 82944, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0); /* fits sm120: nothing to admit */
	assert_int_equal(admit_on(90, "fused_moe_kernel", 82944 + 65536, 128, f, SHIM_MODE_REROUTE,
				  &rule, why), 0);
	assert_non_null(strstr(why, "but Triton compiles 82944 B on sm_90"));
	/* a value the facts state as no whole number */
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840, 128,
				  "num_warps=4;num_stages=4;BLOCK_SIZE_M=64;BLOCK_SIZE_N=256;"
				  "BLOCK_SIZE_K=128;GROUP_SIZE_M=2.5;compute_type=bf16;use_fp8_w8a8=1;"
				  "group_n=0;group_k=0", SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with GROUP_SIZE_M 2.5, not a whole number"));
	/* a rule value still refuses (SGLang's fused all-reduce down launch) */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 1, 0, 0, ";FUSE_SUM_ALL_REDUCE=1");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "compiled with FUSE_SUM_ALL_REDUCE 1; rule sglang-moe-2026-03 "
				    "reroutes the kernel's 163840 B only with FUSE_SUM_ALL_REDUCE 0"));
	/* SGLang's TMA up launch: b_desc passed, which no launch of the rule takes */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 1, 0, 0, ";b_desc:tensordesc");
	assert_int_equal(admit_on(90, "fused_moe_kernel", 163840 + 32, 128, f, SHIM_MODE_REROUTE,
				  &rule, why), 0);
	assert_non_null(strstr(why, "the kernel takes b_desc at run time, which rule "
				    "sglang-moe-2026-03 cannot reroute"));
	/* vLLM's bf16 kernel (its signature: the SGLang rules do not list stride_bbe) ... */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 0, 0, 0, ";SWAP_AB=0;USE_TD=0;SPLIT_K=1"
		  VLLM_SIGNATURE);
	assert_int_equal(admit_on(120, "fused_moe_kernel", 245760, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 245760);
	assert_string_equal(rule, "vllm-moe-main");
	/* ... a constexpr no rule or adapter answers for (a newer release's): refused at
	   load, as each of its launches would be; a text that types no argument (sm120
	   configs) is judged by the values alone */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 0, 0, 0, ";SWAP_AB=0;USE_TD=0;SPLIT_K=1;"
		  "NEW_FLAG=1" VLLM_SIGNATURE);
	assert_int_equal(admit_on(120, "fused_moe_kernel", 245760, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "compiled with NEW_FLAG=1, a value rule vllm-moe-main and "
				    "adapter vllm_fused_moe do not know"));
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 0, 0, 0, ";SWAP_AB=0;USE_TD=0;SPLIT_K=1;NEW_FLAG=1");
	assert_int_equal(admit_on(120, "fused_moe_kernel", 245760, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 245760);
	/* ... through its tensor-descriptor path, which the formula does not model */
	moe_facts(f, sizeof(f), 64, 256, 128, 4, 4, 0, 0, 0, ";SWAP_AB=0;USE_TD=1;SPLIT_K=1"
		  VLLM_SIGNATURE);
	assert_int_equal(admit_on(120, "fused_moe_kernel", 245760, 128, f, SHIM_MODE_REROUTE, &rule,
				  why), 0);
	assert_non_null(strstr(why, "USE_TD 1, VLLM_TRITON_USE_TD) is not modelled"));
	assert_non_null(strstr(why, "rule vllm-moe-main reroutes it only at the sizes of its "
				    "tiles"));
	/* the INT4 kernel: group_size from the facts (64 here; the tiles say 32) */
	assert_int_equal(admit_on(120, "fused_moe_kernel_gptq_awq", 163840, 256,
				  "num_warps=8;num_stages=4;N=512;K=7168;group_size=64;"
				  "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;GROUP_SIZE_M=1;"
				  "compute_type=bf16;has_zp=0;use_int4_w4a16=1;use_int8_w8a16=0",
				  SHIM_MODE_REROUTE, &rule, why), 163840);
	assert_string_equal(rule, "sglang-moe-gptq-awq");
	assert_int_equal(admit_on(120, "fused_moe_kernel_gptq_awq", 163840, 256,
				  "num_warps=8;num_stages=4;group_size=16;BLOCK_SIZE_M=128;"
				  "BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;GROUP_SIZE_M=1;compute_type=bf16;"
				  "use_int4_w4a16=1", SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "reroutes group_size only at 32, 64 or 128"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compiled),
		cmocka_unit_test(test_fits_or_not_reroute),
		cmocka_unit_test(test_rule_tile),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_generic),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
