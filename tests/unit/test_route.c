/*
 * test_route.c - the pure decisions of core/route: route_decide's fit and
 * attribute table (the rule-matched rows are in test_reroute.c), the library
 * class under an emulated target (the evidence itself: test_evidence.c),
 * device attributes, occupancy; each mode, at and around the limits (101376 =
 * the last byte that fits sm120).
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

/*
 * decide - route_decide on a launch (or an attribute set) of kernel "k" with
 * @st static and @dyn dynamic bytes, no rules; stores the reason in @why.
 */
static enum route_action decide(enum route_event ev, uint32_t st, int64_t dyn, enum shim_mode m,
				uint32_t advertise, char *why)
{
	struct route_launch l = { .event = ev, .static_smem = st, .attr_value = dyn,
				  .sel = { .kernel = "k", .dynamic_smem = dyn > 0 ? (uint64_t)dyn : 0 } };
	struct route_decision d;

	memset(&d, 0x5a, sizeof(d)); /* poisoned: route_decide must fill every field */
	route_decide(&l, &sm120, m, NULL, 0, advertise, &d);
	if (why)
		strcpy(why, d.why.msg);
	assert_true(d.action != ROUTE_REROUTE || d.rule);
	assert_true(d.action == ROUTE_REROUTE || d.rule == NULL);
	return d.action;
}

#define LAUNCH ROUTE_EVENT_LAUNCH
#define ATTR ROUTE_EVENT_SET_ATTRIBUTE

/* The fit, for launches and attribute sets, in every mode (no rule exists). */
static void test_fit_by_mode(void **state)
{
	static const struct {
		enum route_event ev;
		uint32_t st;
		int64_t dyn;
		enum route_action by_mode[4]; /* off, diagnose, enforce, reroute */
	} rows[] = {
		{ LAUNCH, 0, 101376, { ROUTE_PASS, ROUTE_PASS, ROUTE_PASS, ROUTE_PASS } },
		{ LAUNCH, 0, 106496, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE } },
		{ LAUNCH, 48000, 53376, { ROUTE_PASS, ROUTE_PASS, ROUTE_PASS, ROUTE_PASS } },
		{ LAUNCH, 48000, 53377, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE } },
		{ LAUNCH, 101377, 0, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE } },
		/* Triton sets optin - static: fits exactly */
		{ ATTR, 0, 101376, { ROUTE_PASS, ROUTE_PASS, ROUTE_PASS, ROUTE_PASS } },
		{ ATTR, 48000, 53377, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE } },
		{ ATTR, 0, 232448, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE } },
		/* a negative value is the driver's to refuse */
		{ ATTR, 0, -1, { ROUTE_PASS, ROUTE_PASS, ROUTE_PASS, ROUTE_PASS } },
	};
	char why[512];
	size_t i;
	int m;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		for (m = SHIM_MODE_OFF; m <= SHIM_MODE_REROUTE; m++) {
			assert_int_equal(decide(rows[i].ev, rows[i].st, rows[i].dyn, m, 0, why),
					 rows[i].by_mode[m]);
			/* no rule names "k": a refusal has nothing more to say */
			assert_string_equal(why, "");
		}
}

/* Reroute mode: attribute sets are accepted up to what was advertised. */
static void test_advertise(void **state)
{
	char why[512];

	(void)state;
	assert_int_equal(decide(ATTR, 0, 147456, SHIM_MODE_REROUTE, 147456, why), ROUTE_ACCEPT);
	assert_int_equal(decide(ATTR, 1024, 146432, SHIM_MODE_REROUTE, 147456, why), ROUTE_ACCEPT);
	assert_int_equal(decide(ATTR, 1024, 146433, SHIM_MODE_REROUTE, 147456, why), ROUTE_REFUSE);
	assert_string_equal(why, "more than the 147456 B advertised for rerouting "
				 "(SM120SHIM_ADVERTISE)");
	assert_int_equal(decide(ATTR, 0, 147457, SHIM_MODE_REROUTE, 147456, why), ROUTE_REFUSE);
	/* nothing advertised: refused as the card refuses, with no advertising to blame */
	assert_int_equal(decide(ATTR, 0, 147456, SHIM_MODE_REROUTE, 0, why), ROUTE_REFUSE);
	assert_string_equal(why, "");
	/* advertising is a reroute-mode thing */
	assert_int_equal(decide(ATTR, 0, 147456, SHIM_MODE_ENFORCE, 147456, why), ROUTE_REFUSE);
	assert_int_equal(decide(ATTR, 0, 147456, SHIM_MODE_DIAGNOSE, 147456, why), ROUTE_LOG);
	/* launches are never accepted: over the limit they are rerouted or refused */
	assert_int_equal(decide(LAUNCH, 0, 147456, SHIM_MODE_REROUTE, 147456, why), ROUTE_REFUSE);
}

/* An over-limit launch of a kernel the driver cannot name is refused, and says so. */
static void test_unknown_kernel(void **state)
{
	struct route_launch l = { .event = LAUNCH, .sel = { .kernel = NULL, .dynamic_smem = 106496 } };
	struct route_decision d;

	(void)state;
	route_decide(&l, &sm120, SHIM_MODE_REROUTE, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_REFUSE);
	assert_string_equal(d.why.msg, "the kernel is unknown to the driver");
	assert_true(route_cannot_exceed(101376 - 49152, &sm120));
	assert_false(route_cannot_exceed(101376 - 49151, &sm120));
}

/*
 * A library's kernel under emulation: LIBRARY in every mode but off, for
 * launches and attribute sets alike, with the evidence said; judged when a
 * rule names it, when the device is the target, or when nothing was gathered.
 */
static void test_library_class(void **state)
{
	struct evidence_codes codes = { 0 };
	struct route_evidence ev = { .device_sm = 90, .image = EVIDENCE_IMAGE_FATBIN,
				     .origin = "libcublas.so.13+0x10", .codes = &codes };
	const struct rule named = { .id = "r", .kernel = "k" };
	struct route_launch l = { .event = LAUNCH, .sel = { .kernel = "k", .dynamic_smem = 213268 },
				  .evidence = &ev };
	struct route_launch a = { .event = ATTR, .attr_value = 213268, .sel = { .kernel = "k" },
				  .evidence = &ev };
	struct route_decision d;
	int m;

	(void)state;
	evidence_codes_add(&codes, 90, 0, 0);
	evidence_codes_add(&codes, 120, 0, 0);
	for (m = SHIM_MODE_DIAGNOSE; m <= SHIM_MODE_REROUTE; m++) {
		route_decide(&l, &sm120, m, NULL, 0, 0, &d);
		assert_int_equal(d.action, ROUTE_LIBRARY);
		assert_string_equal(route_action_name(d.action), "library");
		assert_non_null(strstr(d.evidence.msg, "library: its image libcublas.so.13+0x10 is "
					"a fatbin that also holds sm_120"));
		assert_string_equal(d.why.msg, "");
		route_decide(&a, &sm120, m, NULL, 0, 0, &d);
		assert_int_equal(d.action, ROUTE_LIBRARY);
	}
	route_decide(&l, &sm120, SHIM_MODE_OFF, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_PASS);
	assert_string_equal(d.evidence.msg, "");
	/* a launch that fits weighs nothing */
	l.sel.dynamic_smem = 101376;
	route_decide(&l, &sm120, SHIM_MODE_ENFORCE, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_PASS);
	assert_string_equal(d.evidence.msg, "");
	l.sel.dynamic_smem = 213268;
	/* a kernel a rule names is judged: rerouted or refused, never passed */
	route_decide(&l, &sm120, SHIM_MODE_ENFORCE, &named, 1, 0, &d);
	assert_int_equal(d.action, ROUTE_REFUSE);
	assert_string_equal(d.evidence.msg, "judged: a reroute rule names k");
	route_decide(&l, &sm120, SHIM_MODE_DIAGNOSE, &named, 1, 0, &d);
	assert_int_equal(d.action, ROUTE_LOG);
	/* without target code: judged, and the evidence says why */
	codes.n = 1;
	route_decide(&l, &sm120, SHIM_MODE_ENFORCE, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_REFUSE);
	assert_non_null(strstr(d.evidence.msg, "judged: its image libcublas.so.13+0x10 is a fatbin "
				"with no code for sm_120 (it holds sm_90)"));
	/* on a real SM120 card nothing changes, and nothing is said */
	codes.n = 2;
	ev.device_sm = 120;
	route_decide(&l, &sm120, SHIM_MODE_ENFORCE, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_REFUSE);
	assert_string_equal(d.evidence.msg, "");
	/* no evidence gathered: as before */
	l.evidence = NULL;
	ev.device_sm = 90;
	route_decide(&l, &sm120, SHIM_MODE_ENFORCE, NULL, 0, 0, &d);
	assert_int_equal(d.action, ROUTE_REFUSE);
	assert_string_equal(d.evidence.msg, "");
	assert_true(route_rule_names(&named, 1, "k"));
	assert_false(route_rule_names(&named, 1, "k2"));
	assert_false(route_rule_names(&named, 1, NULL));
	assert_false(route_rule_names(NULL, 0, "k"));
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
		cmocka_unit_test(test_fit_by_mode),
		cmocka_unit_test(test_advertise),
		cmocka_unit_test(test_unknown_kernel),
		cmocka_unit_test(test_library_class),
		cmocka_unit_test(test_device_attr),
		cmocka_unit_test(test_occupancy),
		cmocka_unit_test(test_potential_block),
	};

	return cmocka_run_group_tests_name("route", tests, setup, NULL);
}
