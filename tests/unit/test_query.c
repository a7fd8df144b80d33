/*
 * test_query.c - the strict query parser and id lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/query.h"

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
	expect_fail("block=true", "Missing required query parameter 'gpu_ids'");
	expect_fail("gpu_ids=0", "'block'");
	expect_fail("gpu_ids=0&block=true&x=1", "Unknown query parameter 'x'");
	expect_fail("gpu_ids=0&gpu_ids=1&block=true", "more than once");
	expect_fail("gpu_ids=0&block=True", "'block'");
	expect_fail("gpu_ids=0&block=1", "'block'");
	expect_fail("gpu_ids=0&block", "'block' has no value");
	expect_fail("gpu_ids=0&block=", "'block'");
	expect_fail("gpu_ids=&block=true", "empty element");
	expect_fail("gpu_ids=1,&block=true", "empty element");
	expect_fail("gpu_ids=,1&block=true", "empty element");
	expect_fail("gpu_ids=%20&block=true", "empty element");
	expect_fail("gpu_ids=-1&block=true", "not a non-negative integer");
	expect_fail("gpu_ids=1x&block=true", "'1x'");
	expect_fail("gpu_ids=4294967296&block=true", "gpu_ids");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=-1", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=4294967296",
	    "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=1.5", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=0x10", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=", "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=12345678901",
	    "power_limit_mw");
	expect_fail("gpu_ids=0&block=true&power_limit_mw=%zz", "Malformed");
	expect_fail("gpu_ids=0%00&block=true", "Malformed");
	expect_fail("=1&gpu_ids=0&block=true", "Malformed");
	expect_fail("%zz=1", "Malformed");
	expect_fail("gpu_%69ds=0&gpu_ids=1&block=true", "more than once");
}

static void
test_too_long(void **state)
{
	char q[QUERY_MAX_LEN + 10];

	memset(q, 'a', sizeof(q) - 1);
	q[sizeof(q) - 1] = '\0';
	expect_fail(q, "too long");
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
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_many_ids),
		cmocka_unit_test(test_unescape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
