/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_query.c - the strict query parser and id lists: what it accepts,
 * each refusal's wording (the upstream decoder's phrases, our parameter
 * names) and that echoed input stays printable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "http/query.h"

static const struct query_spec spec[] = {
	{ "gpu_ids", Q_IDS, true },
	{ "block", Q_BOOL, true },
	{ "power_limit_mw", Q_U32, false },
	{ NULL, Q_BOOL, false },
};

static int
parse(const char *q, struct query_values *v, struct zerr *err)
{
	return query_parse(q, strlen(q), spec, v, err);
}

static void
expect_fail(const char *q, const char *needle)
{
	struct query_values v;
	struct zerr err;

	zerr_clear(&err);
	assert_int_equal(parse(q, &v, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("'%s': message '%s' lacks '%s'", q, err.msg, needle);
}

static void
test_ok(void **state)
{
	struct query_values v;
	struct zerr err;

	assert_int_equal(parse("gpu_ids=2,%200%20,1,2&block=true"
	    "&power_limit_mw=4294967295", &v, &err), 0);
	assert_true(v.v[0].present);
	assert_int_equal(v.v[0].ids->n, 3);
	assert_int_equal(v.v[0].ids->ids[0], 0);
	assert_int_equal(v.v[0].ids->ids[1], 1);
	assert_int_equal(v.v[0].ids->ids[2], 2);
	assert_true(v.v[1].b);
	assert_int_equal(v.v[2].u32, UINT32_MAX);
}

static void
test_optional_absent_and_empty_pairs(void **state)
{
	struct query_values v;
	struct zerr err;

	assert_int_equal(parse("&gpu_ids=0&&block=false&", &v, &err), 0);
	assert_false(v.v[1].b);
	assert_false(v.v[2].present);
}

static void
test_plus_is_space(void **state)
{
	struct query_values v;
	struct zerr err;

	assert_int_equal(parse("gpu_ids=1,+3&block=true", &v, &err), 0);
	assert_int_equal(v.v[0].ids->n, 2);
	assert_int_equal(v.v[0].ids->ids[1], 3);
}

static void
test_refusals(void **state)
{
	expect_fail("block=true", "Invalid query: missing field `gpu_ids`");
	expect_fail("gpu_ids=0", "missing field `block`");
	expect_fail("gpu_ids=0&block=true&x=1", "Invalid query: unknown field "
	    "`x`, expected one of `gpu_ids`, `block`, `power_limit_mw`");
	expect_fail("gpu_ids=0&gpu_ids=1&block=true",
	    "duplicate field `gpu_ids`");
	expect_fail("gpu_ids=0&block=True", "Invalid query: invalid value "
	    "`True` for field `block`: not `true` or `false`");
	expect_fail("gpu_ids=0&block=1", "invalid value `1` for field `block`");
	/* No "=" is the empty value, refused by the type. */
	expect_fail("gpu_ids=0&block", "invalid value `` for field `block`: "
	    "not `true` or `false`");
	expect_fail("gpu_ids=0&block=", "`block`: not `true` or `false`");
	expect_fail("gpu_ids=&block=true", "empty element");
	expect_fail("gpu_ids&block=true", "`gpu_ids`: empty element");
	expect_fail("gpu_ids=1,&block=true",
	    "invalid value `1,` for field `gpu_ids`: empty element");
	expect_fail("gpu_ids=,1&block=true", "empty element");
	expect_fail("gpu_ids=%20&block=true", "empty element");
	expect_fail("gpu_ids=-1&block=true", "invalid value `-1` in field "
	    "`gpu_ids`: not a non-negative integer (expected u32)");
	expect_fail("gpu_ids=1x&block=true", "`1x`");
	expect_fail("gpu_ids=4294967296&block=true", "gpu_ids");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=-1",
	    "Invalid query: invalid value `-1` for field `power_limit_mw`: "
	    "expected u32");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=4294967296",
	    "`4294967296` for field `power_limit_mw`: expected u32");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=1.5", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=0x10", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=12345678901",
	    "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=%zz",
	    "invalid value for field `power_limit_mw`: malformed "
	    "percent-encoding");
	expect_fail("gpu_ids=0%00&block=true", "`gpu_ids`: malformed");
	expect_fail("=1&gpu_ids=0&block=true",
	    "Invalid query: malformed parameter name ``");
	expect_fail("%zz=1", "malformed parameter name `%zz`");
	expect_fail("gpu_%69ds=0&gpu_ids=1&block=true",
	    "duplicate field `gpu_ids`");
}

/* Each refusal starts the same way and names the parameter. */
static void
test_every_refusal_names_the_parameter(void **state)
{
	static const char *const q[] = {
		"gpu_ids=0&block=true&power_limit_mw=x",
		"gpu_ids=0&block=yes", "gpu_ids=a&block=true",
		"gpu_ids=0&block=true&block=true", "block=true",
		"gpu_ids=0&block=%zz",
	};
	static const char *const name[] = { "`power_limit_mw`", "`block`",
		"`gpu_ids`", "`block`", "`gpu_ids`", "`block`" };

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		expect_fail(q[i], "Invalid query: ");
		expect_fail(q[i], name[i]);
	}
}

/*
 * Input echoed in a message is printable ASCII, so the JSON body can always
 * be encoded: raw and %-encoded control bytes, invalid UTF-8, backticks.
 */
static void
test_echo_is_printable_ascii(void **state)
{
	static const char *const q[] = {
		"%ff%fe=1", "gpu_ids=0&block=%c3%28", "x%01y=1",
		"gpu_ids=1%0a2&block=true", "a`b=1",
		"gpu_ids=0&block=true&power_limit_mw=%e2%82%ac%e2%82",
		"\xff\x80=1",
	};

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		struct query_values v;
		struct zerr err;

		assert_int_equal(parse(q[i], &v, &err), -1);
		for (const char *p = err.msg; *p != '\0'; p++)
			if (*p < 0x20 || *p > 0x7e)
				fail_msg("'%s': byte 0x%02x in message", q[i],
				    (unsigned char)*p);
	}
	expect_fail("%ff=1", "unknown field `\\xff`");
	expect_fail("a`b=1", "unknown field `a\\x60b`");
}

/* A long value is cut in the message; a long name is unknown, not malformed. */
static void
test_long_echo_cut(void **state)
{
	char q[300];
	struct query_values v;
	struct zerr err;

	memset(q, 'n', 200);
	memcpy(q + 200, "=1", 3);
	assert_int_equal(parse(q, &v, &err), -1);
	assert_non_null(strstr(err.msg, "unknown field `nnnn"));
	assert_non_null(strstr(err.msg, "...`"));
	assert_true(strlen(err.msg) < 200);
}

static void
test_no_parameters_endpoint(void **state)
{
	static const struct query_spec none[] = { { NULL, Q_BOOL, false } };
	static const struct query_spec one[] = {
		{ "cpu", Q_BOOL, false }, { NULL, Q_BOOL, false } };
	struct query_values v;
	struct zerr err;

	assert_int_equal(query_parse("x=1", 3, none, &v, &err), -1);
	assert_string_equal(err.msg, "Invalid query: unknown field `x`: this "
	    "endpoint takes no parameters");
	assert_int_equal(query_parse("", 0, none, &v, &err), 0);
	assert_int_equal(query_parse("gpu=1", 5, one, &v, &err), -1);
	assert_string_equal(err.msg,
	    "Invalid query: unknown field `gpu`, expected `cpu`");
}

static void
test_too_long(void **state)
{
	char q[QUERY_MAX_LEN + 10];

	memset(q, 'a', sizeof(q) - 1);
	q[sizeof(q) - 1] = '\0';
	expect_fail(q, "Invalid query: query string longer than 4096 bytes");
}

static void
test_many_ids(void **state)
{
	char q[8192];
	size_t o = 0;
	struct query_values v;
	struct zerr err;

	o += (size_t)snprintf(q, sizeof(q), "block=true&gpu_ids=");
	for (int i = 0; i < QUERY_MAX_IDS + 1; i++)
		o += (size_t)snprintf(q + o, sizeof(q) - o, "%s%d", i ? "," : "",
		    i % 3);
	/* duplicates collapse, but the element count is still bounded */
	assert_int_equal(query_parse(q, o, spec, &v, &err), -1);
	assert_non_null(strstr(err.msg, "more than"));
}

static void
test_unescape(void **state)
{
	char out[16];

	assert_int_equal(query_unescape("a%2Fb+c", 7, true, out, sizeof(out)),
	    5);
	assert_string_equal(out, "a/b c");
	assert_int_equal(query_unescape("a+b", 3, false, out, sizeof(out)), 3);
	assert_string_equal(out, "a+b");
	assert_int_equal(query_unescape("%4", 2, true, out, sizeof(out)), -1);
	assert_int_equal(query_unescape("%", 1, true, out, sizeof(out)), -1);
	assert_int_equal(query_unescape("%00", 3, true, out, sizeof(out)), -1);
	assert_int_equal(query_unescape("abc", 3, true, out, 3), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_optional_absent_and_empty_pairs),
		cmocka_unit_test(test_plus_is_space),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_every_refusal_names_the_parameter),
		cmocka_unit_test(test_echo_is_printable_ascii),
		cmocka_unit_test(test_long_echo_cut),
		cmocka_unit_test(test_no_parameters_endpoint),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_many_ids),
		cmocka_unit_test(test_unescape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
