/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_log.c - zlog_quote: what a quoted log value may not carry raw
 * (quotes, backslashes, control bytes, and since issue 30 item 8 the C1
 * controls, line separators and bidirectional controls).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"

static void
check(const char *in, const char *want)
{
	char buf[256];

	assert_string_equal(zlog_quote(buf, sizeof(buf), in), want);
}

static void
test_ascii(void **state)
{
	(void)state;
	check("plain", "\"plain\"");
	check("a\"b\\c", "\"a\\\"b\\\\c\"");
	check("a\nb\x7f", "\"a\\x0ab\\x7f\"");
	check(NULL, "\"\"");
}

static void
test_invisible_characters(void **state)
{
	(void)state;
	check("user\xe2\x80\xaegpj.exe", "\"user\\u202egpj.exe\"");	/* RLO */
	check("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad",
	    "\"\\u202a\\u202b\\u202c\\u202d\"");
	check("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c", "\"a\\u2028b\\u2029c\"");
	check("a\xc2\x85" "b", "\"a\\u0085b\"");			/* NEL */
	check("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9",
	    "\"\\u2066\\u2067\\u2068\\u2069\"");
	check("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c",
	    "\"\\u200e\\u200f\\u061c\"");
	/* printable characters stay as they are */
	check("caf\xc3\xa9 \xe2\x82\xac \xe2\x80\x94 \xe2\x81\xa5",
	    "\"caf\xc3\xa9 \xe2\x82\xac \xe2\x80\x94 \xe2\x81\xa5\"");
	/* a cut sequence at the end is not read past */
	check("x\xe2\x80", "\"x\xe2\x80\"");
}

static void
test_truncated_escape_is_whole(void **state)
{
	char buf[8];

	(void)state;
	/* "ab\u202e" needs 11 bytes: the escape is left out, not cut */
	assert_string_equal(zlog_quote(buf, sizeof(buf), "ab\xe2\x80\xae"),
	    "\"ab\"");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ascii),
		cmocka_unit_test(test_invisible_characters),
		cmocka_unit_test(test_truncated_escape_is_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
