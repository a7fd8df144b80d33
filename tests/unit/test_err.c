/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_err.c - zerr_set: messages that fit are kept whole, longer ones are
 * cut at a UTF-8 character boundary (they end up in JSON answers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"

/* `pad` ASCII bytes, then `tail`: the message zerr_set is asked for. */
static void
set_padded(struct zerr *err, size_t pad, const char *tail)
{
	char buf[ZERR_MSG_MAX + 16];

	assert_true(pad + strlen(tail) < sizeof(buf));
	memset(buf, 'a', pad);
	strcpy(buf + pad, tail);
	zerr_set(err, ZERR_INVALID, "%s", buf);
}

static void
test_fits(void **state)
{
	struct zerr err;

	(void)state;
	set_padded(&err, ZERR_MSG_MAX - 4, "\xe2\x82\xac");	/* € fits */
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(strlen(err.msg), ZERR_MSG_MAX - 1);
	assert_memory_equal(err.msg + ZERR_MSG_MAX - 4, "\xe2\x82\xac", 3);
}

/* A character of `len` bytes starting `into` bytes before the cut. */
static void
check_cut(const char *ch, size_t len)
{
	for (size_t into = 1; into < len; into++) {
		struct zerr err;

		set_padded(&err, ZERR_MSG_MAX - 1 - into, ch);
		/* the partial character is gone, the ASCII before it kept */
		assert_int_equal(strlen(err.msg), ZERR_MSG_MAX - 1 - into);
		assert_int_equal(err.msg[strlen(err.msg) - 1], 'a');
	}
}

static void
test_cut_at_character(void **state)
{
	(void)state;
	check_cut("\xc3\xa9", 2);		/* é */
	check_cut("\xe2\x82\xac", 3);		/* € */
	check_cut("\xf0\x9f\x94\x8b", 4);	/* 🔋 */
}

static void
test_cut_ascii_and_bytes(void **state)
{
	struct zerr err;

	(void)state;
	/* plain ASCII: cut exactly where it no longer fits */
	set_padded(&err, ZERR_MSG_MAX + 8, "");
	assert_int_equal(strlen(err.msg), ZERR_MSG_MAX - 1);
	/* bytes that are not UTF-8 are no business of zerr_set */
	set_padded(&err, ZERR_MSG_MAX - 2, "\xff\xff\xff");
	assert_int_equal(strlen(err.msg), ZERR_MSG_MAX - 1);
}

/* zerr_copy: kind and message as they were, the longest message too. */
static void
test_copy(void **state)
{
	struct zerr a, b;

	(void)state;
	memset(&b, 'x', sizeof(b));
	zerr_clear(&a);
	zerr_copy(&b, &a);
	assert_int_equal(b.kind, ZERR_NONE);
	assert_string_equal(b.msg, "");
	zerr_set(&a, ZERR_UNAVAILABLE, "GPU %d is lost", 3);
	zerr_copy(&b, &a);
	assert_int_equal(b.kind, ZERR_UNAVAILABLE);
	assert_string_equal(b.msg, "GPU 3 is lost");
	set_padded(&a, ZERR_MSG_MAX + 8, "");
	memset(&b, 'x', sizeof(b));
	zerr_copy(&b, &a);
	assert_int_equal(strlen(b.msg), ZERR_MSG_MAX - 1);
	assert_string_equal(b.msg, a.msg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_cut_at_character),
		cmocka_unit_test(test_cut_ascii_and_bytes),
		cmocka_unit_test(test_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
