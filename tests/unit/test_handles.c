/*
 * test_handles.c - the handle registry: put/get, replacement, unload marks
 * handles dead (a recycled handle value then finds nothing), colliding
 * handles, and concurrent readers while a writer inserts.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../shim/state/handles.h"

static void test_put_get(void **state)
{
	struct kernel_rec *r;

	(void)state;
	assert_null(handles_get((void *)0x1000));
	r = handles_put((void *)0x1000, (void *)0xa, 0, "_fwd_kernel", 0);
	assert_non_null(r);
	assert_ptr_equal(handles_get((void *)0x1000), r);
	assert_string_equal(r->name, "_fwd_kernel");
	r = handles_put((void *)0x1000, (void *)0xa, 0, "again", 4096);
	assert_ptr_equal(handles_get((void *)0x1000), r);
	assert_int_equal(handles_get((void *)0x1000)->static_smem, 4096);
	assert_null(handles_put(NULL, NULL, 0, "x", 0));
	assert_null(handles_put(HANDLES_DEAD, NULL, 0, "x", 0));
}

static void test_unload(void **state)
{
	(void)state;
	assert_non_null(handles_put((void *)0x2000, (void *)0xb, 0, "a", 0));
	assert_non_null(handles_put((void *)0x2010, (void *)0xb, 1, "b", 0));
	assert_non_null(handles_put((void *)0x2020, (void *)0xc, 0, "c", 0));
	handles_drop_owner((void *)0xb);
	assert_null(handles_get((void *)0x2000));
	assert_null(handles_get((void *)0x2010));
	assert_non_null(handles_get((void *)0x2020));
	/* The driver recycles 0x2000 for a kernel of another module. */
	assert_non_null(handles_put((void *)0x2000, (void *)0xd, 0, "new", 8));
	assert_string_equal(handles_get((void *)0x2000)->name, "new");
}

/* Many handles, most colliding in their first slot choice. */
static void test_many(void **state)
{
	uintptr_t i;

	(void)state;
	for (i = 1; i <= 5000; i++)
		assert_non_null(handles_put((void *)(0x100000 + i * 0x10000), (void *)0xe, 0, "k",
					    (uint32_t)i));
	for (i = 1; i <= 5000; i++)
		assert_int_equal(handles_get((void *)(0x100000 + i * 0x10000))->static_smem, i);
	handles_drop_owner((void *)0xe);
	assert_null(handles_get((void *)(0x100000 + 0x10000)));
}

static atomic_int stop;

static void *reader(void *arg)
{
	long bad = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		struct kernel_rec *r = handles_get((void *)0x3000);

		if (r && strcmp(r->name, "stable") != 0)
			bad++;
	}
	return (void *)bad;
}

static void test_concurrent(void **state)
{
	pthread_t t[4];
	void *bad;
	uintptr_t i;
	int k;

	(void)state;
	assert_non_null(handles_put((void *)0x3000, (void *)0xf, 0, "stable", 0));
	for (k = 0; k < 4; k++)
		pthread_create(&t[k], NULL, reader, NULL);
	for (i = 0; i < 2000; i++)
		handles_put((void *)(0x4000000 + i * 16), (void *)0xf0, 0, "other", 0);
	atomic_store(&stop, 1);
	for (k = 0; k < 4; k++) {
		pthread_join(t[k], &bad);
		assert_null(bad);
	}
	assert_string_equal(handles_get((void *)0x3000)->name, "stable");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get),
		cmocka_unit_test(test_unload),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_concurrent),
	};

	return cmocka_run_group_tests_name("handles", tests, NULL, NULL);
}
