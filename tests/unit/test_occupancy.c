/*
 * test_occupancy.c - resident blocks per SM on SM120 and on an H100/H200, and
 * the dynamic shared memory that brings the Hopper device down to SM120's
 * count (core/limits/occupancy.c), as a table of launches; each padding is
 * checked to be the smallest that works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <cuda.h>

#include "../../core/limits/occupancy.h"

/* An H100 / H200 as the driver reports it (attributes 81, 97, 111, 39, 106, 10, 82, 12). */
static const struct occ_sm hopper = { 233472, 232448, 1024, 2048, 32, 32, 128, 65536, 65536 };

static struct occ_sm sm120(void)
{
	struct target_limits t;
	struct occ_sm out;

	assert_int_equal(target_parse("sm120", &t, NULL), 0);
	occupancy_target(&t, &hopper, &out);
	return out;
}

static void test_arch(void **state)
{
	struct occ_sm t = sm120(), o = { 0 };
	struct target_limits bytes;

	(void)state;
	assert_int_equal(t.smem_per_sm, 102400);
	assert_int_equal(t.smem_per_block, 101376);
	assert_int_equal(t.reserved_per_block, 1024);
	assert_int_equal(t.threads_per_sm, 1536);
	assert_int_equal(t.blocks_per_sm, 24);
	assert_int_equal(t.warp, 32);
	assert_int_equal(t.granularity, 128);
	assert_int_equal(t.regs_per_sm, 65536);
	assert_int_equal(t.regs_per_block, 65536);
	assert_int_equal(occupancy_arch(90, &o), 0);
	assert_int_equal(o.threads_per_sm, 2048);
	assert_int_equal(o.blocks_per_sm, 32);
	assert_int_equal(occupancy_arch(86, &o), 0);
	assert_int_equal(o.blocks_per_sm, 16);
	assert_int_equal(occupancy_arch(999, &o), -1);
	assert_int_equal(o.blocks_per_sm, 16); /* unchanged */
	assert_int_equal(occupancy_granularity(75), 256);
	assert_int_equal(occupancy_granularity(0), 0);
	/* The attributes are cuda.h's, and an H100's values read as the table's Hopper. */
	{
		static const int h100[OCC_DEVICE_ATTRS] = { 233472, 232448, 1024, 2048, 32, 32,
							    65536, 65536, 9, 0 };
		static const int nums[OCC_DEVICE_ATTRS] = {
			CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
			CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
			CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_WARP_SIZE,
			CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
			CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
			CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
		};

		assert_memory_equal(occupancy_device_attrs, nums, sizeof(nums));
		occupancy_from_attrs(h100, &o);
		assert_memory_equal(&o, &hopper, sizeof(o));
	}
	/* A byte-count target emulates shared memory only: threads and blocks are the device's. */
	assert_int_equal(target_parse("101376", &bytes, NULL), 0);
	occupancy_target(&bytes, &hopper, &o);
	assert_int_equal(o.smem_per_sm, 102400);
	assert_int_equal(o.threads_per_sm, 2048);
	assert_int_equal(o.blocks_per_sm, 32);
}

static void test_blocks(void **state)
{
	struct occ_sm t = sm120(), broken = hopper;

	(void)state;
	assert_int_equal(occupancy_blocks(&t, 256, 0, 49152), 2);      /* 2 x 50176 in 102400 */
	assert_int_equal(occupancy_blocks(&hopper, 256, 0, 49152), 4);
	assert_int_equal(occupancy_blocks(&t, 1024, 0, 0), 1);         /* 48 warps / 32 */
	assert_int_equal(occupancy_blocks(&hopper, 1024, 0, 0), 2);
	assert_int_equal(occupancy_blocks(&t, 33, 0, 0), 24);          /* 2 warps: block slots bind */
	assert_int_equal(occupancy_blocks(&t, 101376, 0, 0), 0);       /* 101376 threads */
	assert_int_equal(occupancy_blocks(&t, 128, 0, 101376), 1);
	assert_int_equal(occupancy_blocks(&t, 128, 0, 101377), 0);     /* over the opt-in */
	assert_int_equal(occupancy_blocks(&t, 0, 0, 0), 0);
	assert_int_equal(occupancy_blocks(&t, 1025, 0, 0), 0);
	/* 50176 B + 1 KiB = 51200 B: two fit in 102400 B; a byte more is allocated as 51328 B. */
	assert_int_equal(occupancy_blocks(&t, 128, 0, 50176), 2);
	assert_int_equal(occupancy_blocks(&t, 128, 0, 50177), 1);
	broken.warp = 0;
	assert_int_equal(occupancy_blocks(&broken, 128, 0, 0), 0);
	/* Registers: 126 a thread take 128 x 32 = 4096 of a warp, 4 warps of a 16 Ki partition,
	 * 16 an SM: two blocks of 256 threads on either (their other limits allow 6 and 8). */
	assert_int_equal(occupancy_blocks(&t, 256, 126, 11264), 2);
	assert_int_equal(occupancy_blocks(&hopper, 256, 126, 11264), 2);
	assert_int_equal(occupancy_blocks(&t, 256, 0, 11264), 6);
	assert_int_equal(occupancy_blocks(&hopper, 256, 0, 11264), 8);
	/* 80 a thread: 2560 a warp, 6 a partition: 24 warps an SM, not 25 */
	assert_int_equal(occupancy_blocks(&hopper, 32, 80, 0), 24);
	/* over a thread's 255, over a block's 64 Ki (1024 threads of 128) */
	assert_int_equal(occupancy_blocks(&hopper, 128, 256, 0), 0);
	assert_int_equal(occupancy_blocks(&hopper, 1024, 128, 0), 0);
	assert_int_equal(occupancy_blocks(&hopper, 1024, 64, 0), 1);
	/* a device whose registers are unknown counts none */
	broken = hopper;
	broken.regs_per_sm = 0;
	assert_int_equal(occupancy_blocks(&broken, 256, 126, 11264), 8);
	broken = hopper;
	broken.regs_per_block = 0;
	assert_int_equal(occupancy_blocks(&broken, 256, 126, 11264), 8);
}

/* One launch of the table: threads, registers, static, dynamic -> what occupancy_pad decides. */
struct row {
	const char *what;
	uint32_t threads, regs, static_smem, dynamic;
	enum occ_verdict verdict;
	uint32_t target_blocks, device_blocks, padded_dynamic, padded_blocks;
};

static const struct row rows[] = {
	{ "48 KiB, 256 threads: SM120 2, H100 4", 256, 0, 0, 49152, OCC_PAD, 2, 4, 76801, 2 },
	{ "96 KiB: SM120 1, H100 2", 256, 0, 0, 98304, OCC_PAD, 1, 2, 115713, 1 },
	{ "16 KiB, 1024 threads: thread-limited 1 vs 2", 1024, 0, 0, 16384, OCC_PAD, 1, 2, 115713, 1 },
	{ "no shared memory, 64 threads: block slots 24 vs 32", 64, 0, 0, 0, OCC_PAD, 24, 32, 8193, 24 },
	{ "static bytes count: 48000 static + 50000 dynamic", 256, 0, 48000, 50000, OCC_PAD, 1, 2,
	  67713, 1 },
	{ "768 threads, 40000 B: 2 on both (threads)", 768, 0, 0, 40000, OCC_SAME, 2, 2, 40000, 2 },
	{ "960 threads, 60000 B: thread-limited 1 vs 2", 960, 0, 0, 60000, OCC_PAD, 1, 2, 115713, 1 },
	{ "over SM120's limit: nothing to match", 256, 0, 0, 106496, OCC_TARGET_NONE, 0, 2, 106496, 2 },
	{ "over the device's limit too", 256, 0, 0, 240000, OCC_TARGET_NONE, 0, 0, 240000, 0 },
	{ "SM120's exact limit", 128, 0, 0, 101376, OCC_PAD, 1, 2, 115713, 1 },
	{ "a decode kernel, 126 registers: 2 on both (registers), not padded", 256, 126, 11264, 0,
	  OCC_SAME, 2, 2, 0, 2 },
	{ "the same, registers unknown: 6 vs 8 (threads)", 256, 0, 11264, 0, OCC_PAD, 6, 8, 20993, 6 },
	{ "124 registers, 128 threads, 33008 B: SM120 3 (shared memory), H100 4 (registers)", 128,
	  124, 2048, 30960, OCC_PAD, 3, 4, 55297, 3 },
	{ "more registers than a block may have", 1024, 128, 0, 0, OCC_TARGET_NONE, 0, 0, 0, 0 },
};

static void test_table(void **state)
{
	struct occ_sm t = sm120();
	struct occ_pad p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];

		print_message("%s\n", r->what);
		occupancy_pad(&t, &hopper, r->threads, r->regs, r->static_smem, r->dynamic, &p);
		assert_int_equal(p.verdict, r->verdict);
		assert_int_equal(p.target_blocks, r->target_blocks);
		assert_int_equal(p.device_blocks, r->device_blocks);
		assert_int_equal(p.dynamic, r->padded_dynamic);
		assert_int_equal(p.padded_blocks, r->padded_blocks);
		if (p.verdict != OCC_PAD)
			continue;
		/* The padding is what the model says, and one byte less is not enough. */
		assert_int_equal(p.needed, (uint64_t)r->static_smem + p.dynamic);
		assert_true(occupancy_blocks(&hopper, r->threads, r->regs, p.needed) <= p.target_blocks);
		assert_true(occupancy_blocks(&hopper, r->threads, r->regs, p.needed - 1) >
			    p.target_blocks);
		assert_true(p.needed <= hopper.smem_per_block);
	}
}

static void test_edges(void **state)
{
	struct occ_sm t = sm120(), small = hopper, coarse = hopper;
	struct occ_pad p;

	(void)state;
	/* The target itself, or a device no bigger: never padded. */
	occupancy_pad(&t, &t, 256, 0, 0, 49152, &p);
	assert_int_equal(p.verdict, OCC_SAME);
	assert_int_equal(p.dynamic, 49152);
	/* A device whose opt-in per block is too small for the padding. */
	small.smem_per_block = 100000;
	occupancy_pad(&t, &small, 256, 0, 0, 98304, &p);
	assert_int_equal(p.verdict, OCC_IMPOSSIBLE);
	assert_int_equal(p.dynamic, 98304);
	assert_int_equal(p.needed, 115713);
	assert_int_equal(p.padded_blocks, 2);
	/* Nothing the device cannot launch is touched (more threads than a block may have). */
	occupancy_pad(&t, &hopper, 2048, 0, 0, 0, &p);
	assert_int_equal(p.verdict, OCC_TARGET_NONE);
	/* Device attributes unknown (zero): no padding. */
	coarse.threads_per_sm = 0;
	occupancy_pad(&t, &coarse, 256, 0, 0, 49152, &p);
	assert_int_equal(p.verdict, OCC_DEVICE_NONE);
	assert_int_equal(p.dynamic, 49152);
	/* A coarse allocation unit can leave no size with exactly the target's count:
	 * 40000 B units in 200000 B, the target keeping 3 small blocks; 2 units
	 * per block leave room for 2. */
	coarse = (struct occ_sm){ 200000, 200000, 0, 2048, 32, 32, 40000, 0, 0 };
	t = (struct occ_sm){ 3072, 3072, 0, 2048, 32, 32, 128, 0, 0 };
	occupancy_pad(&t, &coarse, 128, 0, 0, 1000, &p);
	assert_int_equal(p.verdict, OCC_PAD);
	assert_int_equal(p.target_blocks, 3);
	assert_int_equal(p.device_blocks, 5);
	assert_int_equal(p.dynamic, 40001);
	assert_int_equal(p.padded_blocks, 2);
	assert_int_equal(occupancy_blocks(&coarse, 128, 0, 40000), 5);
	assert_string_equal(occupancy_verdict_name(OCC_IMPOSSIBLE), "impossible");
}

/* The attribute the process sees once the padding raised it. */
static void test_attr(void **state)
{
	const struct occ_attr none = { 101376, 101376 }, raised = { 101376, 115713 };
	struct occ_attr after;

	(void)state;
	/* Launches: within base padded; over base refused only where the shim raised it. */
	assert_int_equal(occupancy_attr_launch(&raised, 101376), OCC_ATTR_PAD);
	assert_int_equal(occupancy_attr_launch(&raised, 101377), OCC_ATTR_REFUSE);
	assert_int_equal(occupancy_attr_launch(&raised, 115713), OCC_ATTR_REFUSE);
	assert_int_equal(occupancy_attr_launch(&none, 101377), OCC_ATTR_PLAIN);
	assert_int_equal(occupancy_attr_launch(&none, 0), OCC_ATTR_PAD);
	/* Sets: lower than raised keeps raised in the driver, the process's value as base. */
	assert_int_equal(occupancy_attr_set(&raised, 60000, &after), 115713);
	assert_int_equal(after.base, 60000);
	assert_int_equal(after.raised, 115713);
	assert_int_equal(occupancy_attr_set(&raised, 0, &after), 115713);
	assert_int_equal(after.base, 0);
	/* Higher, equal or invalid: the driver judges the process's own value. */
	assert_int_equal(occupancy_attr_set(&raised, 200000, &after), 200000);
	assert_int_equal(after.base, 200000);
	assert_int_equal(after.raised, 200000);
	assert_int_equal(occupancy_attr_set(&raised, 115713, &after), 115713);
	assert_int_equal(after.raised, 115713);
	assert_int_equal(occupancy_attr_set(&raised, -1, &after), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arch),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_attr),
	};

	return cmocka_run_group_tests_name("occupancy", tests, NULL, NULL);
}
