/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_label.c - lease_label_invalid: every allowed character, the
 * 64-byte bound, and every byte outside the set refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/lease_label.h"

static void
test_good(void **state)
{
	char max[LEASE_LABEL_MAX + 1];

	(void)state;
	assert_null(lease_label_invalid("slurm:42.0"));
	assert_null(lease_label_invalid("alice/train-3_b@x+y"));
	assert_null(lease_label_invalid("a"));
	memset(max, 'z', LEASE_LABEL_MAX);
	max[LEASE_LABEL_MAX] = '\0';
	assert_null(lease_label_invalid(max));
}

static void
test_bounds(void **state)
{
	char over[LEASE_LABEL_MAX + 2];
	const char *why;

	(void)state;
	memset(over, 'z', LEASE_LABEL_MAX + 1);
	over[LEASE_LABEL_MAX + 1] = '\0';
	why = lease_label_invalid(over);
	assert_non_null(why);
	assert_non_null(strstr(why, "64"));
	assert_non_null(lease_label_invalid(""));
	assert_non_null(lease_label_invalid(NULL));
}

/* Each of the 255 non-NUL bytes: accepted exactly when in the set. */
static void
test_every_byte(void **state)
{
	const char *set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._:@+/-";

	(void)state;
	for (int c = 1; c < 256; c++) {
		char s[4] = { 'a', (char)c, 'b', '\0' };
		bool ok = strchr(set, c) != NULL;

		if ((lease_label_invalid(s) == NULL) != ok)
			fail_msg("byte 0x%02x: %s", c, ok ? "refused" :
			    "accepted");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_every_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
