/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sampler.c - the stream sampling timer thread (src/api/sampler.c):
 * rate on absolute deadlines, disarm stops firing, late callbacks skip
 * deadlines instead of bursting, re-arming and destroy while armed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/sampler.h"

struct counts {
	atomic_uint fired[4];
	unsigned sleep_ms;
};

static void
on_due(void *arg, const unsigned *due, unsigned n, uint64_t now)
{
	struct counts *c = arg;

	for (unsigned i = 0; i < n; i++)
		atomic_fetch_add(&c->fired[due[i]], 1);
	if (c->sleep_ms)
		usleep(c->sleep_ms * 1000);
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void
test_rate_and_disarm(void **state)
{
	struct counts c = { 0 };
	struct sampler *s;
	struct zerr err;
	unsigned a, b;

	assert_int_equal(sampler_create(3, on_due, &c, &s, &err), 0);
	sleep_ms(50);
	assert_int_equal(atomic_load(&c.fired[0]), 0);	/* nothing armed */
	sampler_arm(s, 0, 10000000, 0);			/* 100 Hz */
	sampler_arm(s, 1, 50000000, 25000000);		/* 20 Hz */
	sleep_ms(1000);
	a = atomic_load(&c.fired[0]);
	b = atomic_load(&c.fired[1]);
	assert_in_range(a, 90, 102);
	assert_in_range(b, 18, 21);
	assert_int_equal(atomic_load(&c.fired[2]), 0);
	sampler_disarm(s, 0);
	sleep_ms(20);
	a = atomic_load(&c.fired[0]);
	sleep_ms(100);
	assert_int_equal(atomic_load(&c.fired[0]), a);
	assert_true(atomic_load(&c.fired[1]) > b);
	sampler_destroy(s);			/* with timer 1 still armed */
}

static void
test_late_callback_skips(void **state)
{
	struct counts c = { .sleep_ms = 35 };
	struct sampler *s;
	struct zerr err;
	unsigned n;

	assert_int_equal(sampler_create(1, on_due, &c, &s, &err), 0);
	sampler_arm(s, 0, 10000000, 0);
	sleep_ms(500);
	sampler_stop(s);
	n = atomic_load(&c.fired[0]);
	/* ~one call per 40 ms, never a burst to catch up on 10 ms ticks */
	assert_in_range(n, 10, 16);
	assert_true(sampler_skipped(s) >= 30);
	sampler_destroy(s);
}

static void
test_rearm_and_bad_timer(void **state)
{
	struct counts c = { 0 };
	struct sampler *s;
	struct zerr err;

	assert_int_equal(sampler_create(2, on_due, &c, &s, &err), 0);
	sampler_arm(s, 5, 1000000, 0);		/* out of range: ignored */
	sampler_arm(s, 1, 0, 0);		/* zero period: ignored */
	sampler_arm(s, 0, 1000000000, 200000000);
	sleep_ms(100);
	assert_int_equal(atomic_load(&c.fired[0]), 0);
	sampler_arm(s, 0, 1000000000, 0);	/* re-arm: due at once */
	sleep_ms(50);
	assert_int_equal(atomic_load(&c.fired[0]), 1);
	assert_int_equal(atomic_load(&c.fired[1]), 0);
	sampler_destroy(s);
	sampler_destroy(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate_and_disarm),
		cmocka_unit_test(test_late_callback_skips),
		cmocka_unit_test(test_rearm_and_bad_timer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
