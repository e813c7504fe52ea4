/*
 * test_route.c - the pure decisions of core/route: launches, device
 * attributes, the max-dynamic-smem attribute, occupancy; each mode, at and
 * around the limits (101376 = the last byte that fits sm120).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/route/route.h"

static struct target_limits sm120;

static int setup(void **state)
{
	(void)state;
	return target_parse("sm120", &sm120, NULL);
}

static void test_modes(void **state)
{
	(void)state;
	assert_int_equal(route_mode_parse("off"), SHIM_MODE_OFF);
	assert_int_equal(route_mode_parse("diagnose"), SHIM_MODE_DIAGNOSE);
	assert_int_equal(route_mode_parse("enforce"), SHIM_MODE_ENFORCE);
	assert_int_equal(route_mode_parse("reroute"), SHIM_MODE_REROUTE);
	assert_int_equal(route_mode_parse("Enforce"), -1);
	assert_int_equal(route_mode_parse(NULL), -1);
	assert_string_equal(route_mode_name(SHIM_MODE_REROUTE), "reroute");
}

static void test_launch(void **state)
{
	struct route_launch fits = { 0, 101376, 0 }, over = { 0, 106496, 0 };
	struct route_launch edge = { 48000, 53377, 0 }, matched = { 0, 147456, 1 };
	int m;

	(void)state;
	for (m = SHIM_MODE_OFF; m <= SHIM_MODE_REROUTE; m++)
		assert_int_equal(route_launch_decide(&fits, &sm120, m), ROUTE_PASS);
	assert_int_equal(route_launch_decide(&over, &sm120, SHIM_MODE_OFF), ROUTE_PASS);
	assert_int_equal(route_launch_decide(&over, &sm120, SHIM_MODE_DIAGNOSE), ROUTE_LOG);
	assert_int_equal(route_launch_decide(&over, &sm120, SHIM_MODE_ENFORCE), ROUTE_REFUSE);
	assert_int_equal(route_launch_decide(&over, &sm120, SHIM_MODE_REROUTE), ROUTE_REFUSE);
	assert_int_equal(route_launch_decide(&edge, &sm120, SHIM_MODE_ENFORCE), ROUTE_REFUSE);
	edge.dynamic_smem--;
	assert_int_equal(route_launch_decide(&edge, &sm120, SHIM_MODE_ENFORCE), ROUTE_PASS);
	assert_int_equal(route_launch_decide(&matched, &sm120, SHIM_MODE_REROUTE), ROUTE_REROUTE);
	assert_int_equal(route_launch_decide(&matched, &sm120, SHIM_MODE_ENFORCE), ROUTE_REFUSE);
}

/* The H200's values, seen through each mode. */
static void test_device_attr(void **state)
{
	(void)state;
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_DIAGNOSE, 0), 232448);
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_OFF, 0), 232448);
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_ENFORCE, 0), 101376);
	assert_int_equal(route_device_attr(81, 233472, &sm120, SHIM_MODE_ENFORCE, 0), 102400);
	assert_int_equal(route_device_attr(8, 49152, &sm120, SHIM_MODE_ENFORCE, 0), 49152);
	assert_int_equal(route_device_attr(111, 1024, &sm120, SHIM_MODE_ENFORCE, 0), 1024);
	assert_int_equal(route_device_attr(16, 132, &sm120, SHIM_MODE_ENFORCE, 0), 132);
	/* advertising only in reroute */
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_REROUTE, 0), 101376);
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_REROUTE, 147456), 147456);
	assert_int_equal(route_device_attr(97, 232448, &sm120, SHIM_MODE_ENFORCE, 147456), 101376);
	/* a real SM120 card: the advertised bytes, more than it has, so Triton loads the kernel */
	assert_int_equal(route_device_attr(97, 101376, &sm120, SHIM_MODE_REROUTE, 106496), 106496);
	/* advertising less than the target has changes nothing */
	assert_int_equal(route_device_attr(97, 101376, &sm120, SHIM_MODE_REROUTE, 65536), 101376);
	/* a smaller real device is never reported larger */
	assert_int_equal(route_device_attr(97, 65536, &sm120, SHIM_MODE_ENFORCE, 0), 65536);
}

static void test_set_max_dynamic(void **state)
{
	(void)state;
	/* Triton asks for optin - static: fits exactly */
	assert_int_equal(route_set_max_dynamic(101376, 0, &sm120, SHIM_MODE_ENFORCE, 0), ROUTE_ATTR_PASS);
	assert_int_equal(route_set_max_dynamic(101377, 0, &sm120, SHIM_MODE_ENFORCE, 0), ROUTE_ATTR_REFUSE);
	assert_int_equal(route_set_max_dynamic(53376, 48000, &sm120, SHIM_MODE_ENFORCE, 0), ROUTE_ATTR_PASS);
	assert_int_equal(route_set_max_dynamic(53377, 48000, &sm120, SHIM_MODE_ENFORCE, 0), ROUTE_ATTR_REFUSE);
	assert_int_equal(route_set_max_dynamic(232448, 0, &sm120, SHIM_MODE_DIAGNOSE, 0), ROUTE_ATTR_LOG);
	assert_int_equal(route_set_max_dynamic(232448, 0, &sm120, SHIM_MODE_OFF, 0), ROUTE_ATTR_PASS);
	/* reroute: accepted up to what was advertised */
	assert_int_equal(route_set_max_dynamic(147456, 0, &sm120, SHIM_MODE_REROUTE, 147456), ROUTE_ATTR_ACCEPT);
	assert_int_equal(route_set_max_dynamic(147457, 0, &sm120, SHIM_MODE_REROUTE, 147456), ROUTE_ATTR_REFUSE);
	assert_int_equal(route_set_max_dynamic(147456, 0, &sm120, SHIM_MODE_REROUTE, 0), ROUTE_ATTR_REFUSE);
}

static void test_occupancy(void **state)
{
	(void)state;
	/* 102400 per SM: a 50 KiB block plus 1 KiB reserved fits once */
	assert_int_equal(route_occupancy_blocks(4, 0, 51200, &sm120, SHIM_MODE_ENFORCE), 1);
	assert_int_equal(route_occupancy_blocks(4, 0, 49152, &sm120, SHIM_MODE_ENFORCE), 2);
	assert_int_equal(route_occupancy_blocks(1, 0, 49152, &sm120, SHIM_MODE_ENFORCE), 1);
	assert_int_equal(route_occupancy_blocks(2, 0, 106496, &sm120, SHIM_MODE_ENFORCE), 0);
	assert_int_equal(route_occupancy_blocks(2, 0, 106496, &sm120, SHIM_MODE_DIAGNOSE), 2);
	assert_int_equal(route_occupancy_blocks(16, 0, 0, &sm120, SHIM_MODE_ENFORCE), 16);
	/* one block: everything but the reservation, capped at opt-in */
	assert_int_equal(route_occupancy_dynamic(232448, 1, 0, &sm120, SHIM_MODE_ENFORCE), 101376);
	assert_int_equal(route_occupancy_dynamic(232448, 2, 0, &sm120, SHIM_MODE_ENFORCE), 50176);
	assert_int_equal(route_occupancy_dynamic(232448, 2, 4096, &sm120, SHIM_MODE_ENFORCE), 46080);
	assert_int_equal(route_occupancy_dynamic(1000, 1, 0, &sm120, SHIM_MODE_ENFORCE), 1000);
	assert_int_equal(route_occupancy_dynamic(232448, 1, 0, &sm120, SHIM_MODE_DIAGNOSE), 232448);
}

/* An H200 answering for a kernel that uses 200 B of dynamic smem per thread. */
static struct route_block_probe h200_probe(void *ctx, int size)
{
	uint64_t smem = (uint64_t)size * 200;
	int by_threads = 2048 / size, by_smem = (int)(233472 / (smem + 1024));

	(void)ctx;
	return (struct route_block_probe){ by_threads < by_smem ? by_threads : by_smem, smem };
}

static struct route_block_probe failing_probe(void *ctx, int size)
{
	(void)ctx;
	return (struct route_block_probe){ size > 512 ? 1 : -1, 0 };
}

static void test_potential_block(void **state)
{
	int size, blocks;

	(void)state;
	/* sm120: 512 threads would need 102400 B; the largest that fits is 480 (96000 B) */
	assert_int_equal(route_potential_block(1024, 32, 0, h200_probe, NULL, &sm120,
					       SHIM_MODE_ENFORCE, &size, &blocks), 0);
	assert_int_equal(size, 480);
	assert_int_equal(blocks, 1);
	/* 8000 B static as well: 448 threads x 200 + 8000 = 97600 fits once (448 threads);
	   smaller blocks fit more often but hold fewer threads (96: 3 blocks = 288) */
	assert_int_equal(route_potential_block(1024, 32, 8000, h200_probe, NULL, &sm120,
					       SHIM_MODE_ENFORCE, &size, &blocks), 0);
	assert_int_equal(size, 448);
	/* @max_block bounds the search; a size that is no multiple of the warp rounds down */
	assert_int_equal(route_potential_block(200, 32, 0, h200_probe, NULL, &sm120,
					       SHIM_MODE_ENFORCE, &size, &blocks), 0);
	assert_int_equal(size % 32, 0);
	assert_true(size <= 200 && blocks * size >= 160);
	/* nothing fits: 0 and 0 */
	assert_int_equal(route_potential_block(1024, 32, 101376, h200_probe, NULL, &sm120,
					       SHIM_MODE_ENFORCE, &size, &blocks), 0);
	assert_int_equal(size, 0);
	assert_int_equal(blocks, 0);
	assert_int_equal(route_potential_block(1024, 32, 0, failing_probe, NULL, &sm120,
					       SHIM_MODE_ENFORCE, &size, &blocks), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_launch),
		cmocka_unit_test(test_device_attr),
		cmocka_unit_test(test_set_max_dynamic),
		cmocka_unit_test(test_occupancy),
		cmocka_unit_test(test_potential_block),
	};

	return cmocka_run_group_tests_name("route", tests, setup, NULL);
}
