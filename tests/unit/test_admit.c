/*
 * test_admit.c - route_admit (core/route/admit.h), the load-time decision
 * of the Python hook, against the rules compiled from rules/, and the
 * compiled-text lookups it reads (core/rules/compiled.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
		 "filter_expert=1"

/* SGLang 0.5.9's runtime arguments, as Triton's signature records them. */
#define SIGNATURE ";a_ptr:*fp8e4nv;b_ptr:*fp8e4nv;c_ptr:*bf16;a_scale_ptr:*fp32;b_scale_ptr:*fp32;" \
		  "topk_weights_ptr:*fp32;sorted_token_ids_ptr:*i32;expert_ids_ptr:*i32;" \
		  "num_tokens_post_padded_ptr:*i32;N:i32;K:i32;EM:i32;num_valid_tokens:i32;" \
		  "stride_am:i32;stride_be:i32;stride_bn:i32;stride_bias_e:i32;stride_bias_n:i32;" \
		  "stride_cm:i32;stride_asm:i32;stride_bse:i32;stride_bsn:i32"

/* admit - route_admit of kernel @name, @shared bytes, @threads, @compiled; why into @why. */
static uint64_t admit(const char *name, uint64_t shared, uint32_t threads, const char *compiled,
		      enum shim_mode mode, const char **rule, char *why)
{
	struct route_kernel k = { name, shared, threads, compiled };
	struct route_admission a;

	memset(&a, 0x5a, sizeof(a)); /* poisoned: route_admit fills every field */
	route_admit(&k, &sm120, mode, rules_builtin, rules_builtin_count, &a);
	*rule = a.rule ? a.rule->id : NULL;
	strcpy(why, a.why.msg);
	assert_true(!a.advertise || a.rule);
	assert_int_equal(a.over, shared > sm120.optin_per_block);
	return a.advertise;
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
	/* no rule names it: no reason to give */
	assert_int_equal(admit("matmul_kernel", 196608, 256, "num_warps=8", SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_null(rule);
	assert_string_equal(why, "");
	/* a tuned config file's bucket, 64x256x128 FP8, 4 stages: no tile of its bytes */
	assert_int_equal(admit("fused_moe_kernel", 163840, 128, "num_warps=4;BLOCK_SIZE_M=64",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "has no tile of 163840 B"));
	/* the tile's bytes with another warp count */
	assert_int_equal(admit("fused_moe_kernel", 197632, 128, NULL, SHIM_MODE_REROUTE, &rule,
			       why), 0);
	assert_non_null(strstr(why, "runs 8 warps, the kernel 128 threads"));
	/* the tile's bytes reached another way: BLOCK_SIZE_N 128 with more stages */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256,
			       "num_warps=8;BLOCK_SIZE_M=128;BLOCK_SIZE_N=128;num_stages=4",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with BLOCK_SIZE_N 128"));
	assert_non_null(strstr(why, "reroutes BLOCK_SIZE_N 256"));
	/* a rule value (not a tile value) that differs: SGLang's fused all-reduce */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE ";FUSE_SUM_ALL_REDUCE=1",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "compiled with FUSE_SUM_ALL_REDUCE 1"));
	/* a signature without one of the rule's kept parameters (another release's kernel) */
	assert_int_equal(admit("fused_moe_kernel", 197632, 256, MOE_TILE ";a_ptr:*bf16;b_ptr:*bf16",
			       SHIM_MODE_REROUTE, &rule, why), 0);
	assert_non_null(strstr(why, "has no argument c_ptr"));
	/* no name: nothing */
	assert_int_equal(admit(NULL, 197632, 256, NULL, SHIM_MODE_REROUTE, &rule, why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compiled),
		cmocka_unit_test(test_fits_or_not_reroute),
		cmocka_unit_test(test_rule_tile),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
