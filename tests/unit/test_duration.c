/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_duration.c - duration_parse: accepted forms, no-expiry spellings,
 * refusals and overflow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/duration.h"

static int64_t
parse_ok(const char *s)
{
	struct zerr err = { 0 };
	int64_t v = -1;

	if (duration_parse(s, &v, &err) != 0)
		fail_msg("'%s' refused: %s", s, err.msg);
	return v;
}

static void
parse_bad(const char *s)
{
	struct zerr err = { 0 };
	int64_t v = 12345;

	if (duration_parse(s, &v, &err) == 0)
		fail_msg("'%s' accepted as %lld", s ? s : "(null)",
		    (long long)v);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_true(err.msg[0] != '\0');
	assert_int_equal(v, 12345);	/* output untouched on failure */
}

static void
test_single_units(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("45s"), 45);
	assert_int_equal(parse_ok("90m"), 5400);
	assert_int_equal(parse_ok("1h"), 3600);
	assert_int_equal(parse_ok("7d"), 7 * 86400);
	assert_int_equal(parse_ok("30d"), 30 * 86400);
	assert_int_equal(parse_ok("2w"), 14 * 86400);
	assert_int_equal(parse_ok("007s"), 7);
}

static void
test_long_forms(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("10sec"), 10);
	assert_int_equal(parse_ok("1second"), 1);
	assert_int_equal(parse_ok("2seconds"), 2);
	assert_int_equal(parse_ok("30min"), 1800);
	assert_int_equal(parse_ok("5mins"), 300);
	assert_int_equal(parse_ok("1minute 2minutes"), 180);
	assert_int_equal(parse_ok("1hour"), 3600);
	assert_int_equal(parse_ok("2hours"), 7200);
	assert_int_equal(parse_ok("3hr 1hrs"), 4 * 3600);
	assert_int_equal(parse_ok("1day"), 86400);
	assert_int_equal(parse_ok("2days"), 2 * 86400);
	assert_int_equal(parse_ok("1week 1weeks"), 14 * 86400);
}

static void
test_combinations(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("1h 30m"), 5400);
	assert_int_equal(parse_ok("1h30m"), 5400);
	assert_int_equal(parse_ok("1d 2h 3m 4s"), 86400 + 7200 + 180 + 4);
	assert_int_equal(parse_ok("  1h\t30m  "), 5400);
	assert_int_equal(parse_ok("1 h"), 3600);
	assert_int_equal(parse_ok("1h 1h"), 7200);
	assert_int_equal(parse_ok("0h 5m"), 300);
}

static void
test_no_expiry(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("never"), 0);
	assert_int_equal(parse_ok("0"), 0);
	assert_int_equal(parse_ok(" never "), 0);
	assert_int_equal(parse_ok("\t0 "), 0);
}

static void
test_refused(void **state)
{
	(void)state;
	parse_bad(NULL);
	parse_bad("");
	parse_bad("   ");
	parse_bad("1");
	parse_bad("90");
	parse_bad("00");
	parse_bad("0s");
	parse_bad("0h 0m");
	parse_bad("-1h");
	parse_bad("+1h");
	parse_bad("1.5h");
	parse_bad("h");
	parse_bad("1x");
	parse_bad("1ms");
	parse_bad("1M");
	parse_bad("1H");
	parse_bad("1y");
	parse_bad("1hour30");
	parse_bad("1h,30m");
	parse_bad("Never");
	parse_bad("never 1h");
	parse_bad("1h never");
	parse_bad("1h\n");
	parse_bad("1h\xff");
	parse_bad("forever");
}

static void
test_overflow(void **state)
{
	struct zerr err;
	int64_t v;

	(void)state;
	assert_int_equal(parse_ok("9223372036854775807s"), INT64_MAX);
	parse_bad("9223372036854775808s");
	parse_bad("99999999999999999999999999s");
	parse_bad("9223372036854775807m");
	parse_bad("15250284452472w");	/* * 604800 overflows */
	parse_bad("9223372036854775807s 1s");
	assert_int_equal(duration_parse("15250284452471w", &v, &err), 0);
}

static void
test_length_bound(void **state)
{
	char buf[DURATION_INPUT_MAX + 2];

	(void)state;
	/* "1s 1s ... " up to exactly the limit is fine; one more is not. */
	memset(buf, ' ', sizeof(buf));
	for (size_t i = 0; i + 2 < DURATION_INPUT_MAX; i += 3) {
		buf[i] = '1';
		buf[i + 1] = 's';
	}
	buf[DURATION_INPUT_MAX] = '\0';
	assert_true(parse_ok(buf) > 0);
	buf[DURATION_INPUT_MAX] = ' ';
	buf[DURATION_INPUT_MAX + 1] = '\0';
	parse_bad(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_units),
		cmocka_unit_test(test_long_forms),
		cmocka_unit_test(test_combinations),
		cmocka_unit_test(test_no_expiry),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_length_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
