/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_toml.c - the strict TOML subset parser: what it accepts, and every
 * error with its line number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "overrides/toml.h"

static struct toml_doc *
parse_ok(const char *text)
{
	struct toml_doc *d = NULL;
	struct zerr err = { 0 };

	if (toml_parse(text, strlen(text), &d, &err) != 0)
		fail_msg("unexpected error: %s\n--- input:\n%s", err.msg, text);
	return d;
}

static const struct toml_key *
key(const struct toml_doc *d, const char *table, const char *name)
{
	for (size_t i = 0; i < d->n_tables; i++) {
		if (strcmp(d->tables[i].name, table) != 0)
			continue;
		for (size_t k = 0; k < d->tables[i].n_keys; k++)
			if (strcmp(d->tables[i].keys[k].name, name) == 0)
				return &d->tables[i].keys[k];
	}
	fail_msg("no key %s.%s", table, name);
	return NULL;
}

static void
test_accepts_the_subset(void **state)
{
	const char *text =
	    "# leading comment\n"
	    "\n"
	    "[set_power_limit]   # trailing comment\n"
	    "commands = [\n"
	    "  \"sudo -n nvidia-smi -i {gpu_id}\", # first\n"
	    "  # a comment line inside the array\n"
	    "  'literal \\n no escapes',\n"
	    "]\n"
	    "error_pattern = '(?i)error|fail'\n"
	    "timeout_s = 1_000\n"
	    "\t[ other-table_2 ]\n"
	    "neg = -9_223_372_036_854_775_808\n"
	    "pos = +9223372036854775807\n"
	    "zero = 0\n"
	    "empty = []\n"
	    "one = [\"x\"]\r\n"
	    "s = \"\"\n";
	struct toml_doc *d = parse_ok(text);
	const struct toml_key *k;

	(void)state;
	assert_int_equal(d->n_tables, 3);
	assert_string_equal(d->tables[0].name, "");
	assert_int_equal(d->tables[0].n_keys, 0);
	assert_string_equal(d->tables[1].name, "set_power_limit");
	assert_int_equal(d->tables[1].line, 3);
	assert_string_equal(d->tables[2].name, "other-table_2");
	k = key(d, "set_power_limit", "commands");
	assert_int_equal(k->v.type, TOML_ARRAY);
	assert_int_equal(k->line, 4);
	assert_int_equal(k->v.n_items, 2);
	assert_string_equal(k->v.items[0].str,
	    "sudo -n nvidia-smi -i {gpu_id}");
	assert_int_equal(k->v.items[0].line, 5);
	assert_string_equal(k->v.items[1].str, "literal \\n no escapes");
	assert_int_equal(k->v.items[1].line, 7);
	k = key(d, "set_power_limit", "error_pattern");
	assert_string_equal(k->v.str, "(?i)error|fail");
	assert_int_equal(key(d, "set_power_limit", "timeout_s")->v.i, 1000);
	assert_true(key(d, "other-table_2", "neg")->v.i == INT64_MIN);
	assert_true(key(d, "other-table_2", "pos")->v.i == INT64_MAX);
	assert_int_equal(key(d, "other-table_2", "zero")->v.i, 0);
	assert_int_equal(key(d, "other-table_2", "empty")->v.n_items, 0);
	assert_int_equal(key(d, "other-table_2", "one")->v.n_items, 1);
	assert_string_equal(key(d, "other-table_2", "s")->v.str, "");
	toml_free(d);
}

static void
test_escapes(void **state)
{
	struct toml_doc *d = parse_ok(
	    "a = \"q\\\" b\\\\ n\\n t\\t r\\r b\\b f\\f\"\n"
	    "u = \"\\u00e9\\u20AC\\U0001F600\"\n"
	    "raw = 'C:\\path\\\"x'\n"
	    "utf8 = \"caf\xc3\xa9\"\n"
	    "tab = \"a\tb\"\n");

	(void)state;
	assert_string_equal(key(d, "", "a")->v.str,
	    "q\" b\\ n\n t\t r\r b\b f\f");
	assert_string_equal(key(d, "", "u")->v.str,
	    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	assert_string_equal(key(d, "", "raw")->v.str, "C:\\path\\\"x");
	assert_string_equal(key(d, "", "utf8")->v.str, "caf\xc3\xa9");
	assert_string_equal(key(d, "", "tab")->v.str, "a\tb");
	toml_free(d);
}

static void
test_empty_and_comment_only(void **state)
{
	struct toml_doc *d = parse_ok("");

	(void)state;
	assert_int_equal(d->n_tables, 1);
	toml_free(d);
	d = parse_ok("# only\n\n   \n# comments");
	assert_int_equal(d->n_tables, 1);
	toml_free(d);
}

struct bad_case {
	const char *text;
	const char *msg;	/* expected message, "line N: ..." prefix */
};

static const struct bad_case bad_cases[] = {
	{ "a = 1.5\n", "line 1: floats are not supported" },
	{ "a = 1e3\n", "line 1: floats are not supported" },
	{ "a = inf\n", "line 1: floats are not supported" },
	{ "a = -nan\n", "line 1: floats are not supported" },
	{ "\n\na = 1979-05-27\n", "line 3: dates and times are not supported" },
	{ "a = 07:32:00\n", "line 1: leading zeros are not allowed" },
	{ "a = 12:32:00\n", "line 1: dates and times are not supported" },
	{ "a = true\n", "line 1: booleans are not supported" },
	{ "a = false\n", "line 1: booleans are not supported" },
	{ "a = { b = 1 }\n", "line 1: inline tables are not supported" },
	{ "a.b = 1\n", "line 1: dotted keys are not supported" },
	{ "[a.b]\n", "line 1: dotted keys are not supported" },
	{ "\"a\" = 1\n", "line 1: quoted keys are not supported" },
	{ "['a']\n", "line 1: quoted keys are not supported" },
	{ "[[a]]\n", "line 1: arrays of tables ([[...]]) are not supported" },
	{ "a = \"\"\"x\"\"\"\n", "line 1: multi-line strings are not "
	    "supported" },
	{ "a = '''x'''\n", "line 1: multi-line strings are not supported" },
	{ "a = 0x1F\n", "line 1: only decimal integers are supported" },
	{ "a = 0o17\n", "line 1: only decimal integers are supported" },
	{ "a = 0b1\n", "line 1: only decimal integers are supported" },
	{ "a = 012\n", "line 1: leading zeros are not allowed" },
	{ "a = 0_1\n", "line 1: leading zeros are not allowed" },
	{ "a = 1__2\n", "line 1: '_' must sit between digits" },
	{ "a = 1_\n", "line 1: '_' must sit between digits" },
	{ "a = _1\n", "line 1: unexpected '_' where a value was expected" },
	{ "a = +\n", "line 1: unexpected end of line in integer" },
	{ "a = 9223372036854775808\n", "line 1: integer out of range" },
	{ "a = -9223372036854775809\n", "line 1: integer out of range" },
	{ "a = 99999999999999999999999\n", "line 1: integer out of range" },
	{ "a = \"x\\q\"\n", "line 1: invalid escape \\ followed by 'q'" },
	{ "a = \"x\\e\"\n", "line 1: invalid escape \\ followed by 'e'" },
	{ "a = \"x\\\"\n", "line 1: unterminated string" },
	{ "a = \"\\u12\"\n", "line 1: \\u escape needs 4 hex digits" },
	{ "a = \"\\U0001F6\"\n", "line 1: \\U escape needs 8 hex digits" },
	{ "a = \"\\uD800\"\n", "line 1: escape is not a Unicode scalar value" },
	{ "a = \"\\U00110000\"\n", "line 1: escape is not a Unicode scalar "
	    "value" },
	{ "a = \"\\u0000\"\n", "line 1: NUL (\\u0000) is not allowed in "
	    "strings" },
	{ "a = \"x\x01\"\n", "line 1: control character in string" },
	{ "a = 'x\x7f'\n", "line 1: control character in string" },
	{ "# c\x01\n", "line 1: control character in comment" },
	{ "a = \"abc\nd\"\n", "line 1: unterminated string" },
	{ "\na = 'abc\n", "line 2: unterminated string" },
	{ "a = \"abc", "line 1: unterminated string" },
	{ "a = 1\na = 2\n", "line 2: duplicate key 'a'" },
	{ "[t]\n[u]\n[t]\n", "line 3: duplicate table [t]" },
	{ "t = 1\n[t]\n", "line 2: table [t] redefines a key" },
	{ "a = 1 b = 2\n", "line 1: unexpected 'b' after value (expected end "
	    "of line)" },
	{ "[t] x\n", "line 1: unexpected 'x' after value (expected end of "
	    "line)" },
	{ "[t\n", "line 1: unexpected end of line in table header (expected "
	    "']')" },
	{ "[]\n", "line 1: unexpected ']' in table header" },
	{ "a 1\n", "line 1: unexpected '1' after key (expected '=')" },
	{ "a =\n", "line 1: missing value after '='" },
	{ "a = # c\n", "line 1: missing value after '='" },
	{ "a =", "line 1: missing value after '='" },
	{ "= 1\n", "line 1: unexpected '=' where a key was expected" },
	{ "a = [\n 'x',\n 'y'\n", "line 4: unterminated array" },
	{ "a = [ 'x' 'y' ]\n", "line 1: unexpected byte 0x27 in array "
	    "(expected ',' or ']')" },
	{ "a = [ 'x',, ]\n", "line 1: arrays may only hold strings" },
	{ "a = [ 1 ]\n", "line 1: arrays may only hold strings" },
	{ "a = [ [ 'x' ] ]\n", "line 1: nested arrays are not supported" },
	{ "a = [\n\n  'x\n", "line 3: unterminated string" },
	{ "a = 1\rb = 2\n", "line 1: carriage return not followed by line "
	    "feed" },
	{ "a = 'x'\n\xff\n", "line 2: invalid UTF-8" },
	{ "a = '\xc0\xaf'\n", "line 1: invalid UTF-8" },
	{ "a = '\xed\xa0\x80'\n", "line 1: invalid UTF-8" },
	{ "a = '\xe2\x82'", "line 1: invalid UTF-8" },
	{ "a = x\n", "line 1: unexpected 'x' where a value was expected" },
	{ "\xc3\xa9 = 1\n", "line 1: unexpected byte 0xc3 where a key was "
	    "expected" },
};

static void
test_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct toml_doc *d = (struct toml_doc *)1;
		struct zerr err = { 0 };
		const struct bad_case *c = &bad_cases[i];

		if (toml_parse(c->text, strlen(c->text), &d, &err) == 0)
			fail_msg("case %zu accepted: %s", i, c->text);
		assert_null(d);
		assert_int_equal(err.kind, ZERR_INVALID);
		if (strcmp(err.msg, c->msg) != 0)
			fail_msg("case %zu: got '%s', want '%s'", i, err.msg,
			    c->msg);
	}
}

static void
test_nul_byte_is_refused(void **state)
{
	static const char text[] = "a = 1\n\0b = 2\n";
	struct toml_doc *d;
	struct zerr err = { 0 };

	(void)state;
	assert_int_equal(toml_parse(text, sizeof(text) - 1, &d, &err), -1);
	assert_string_equal(err.msg, "line 2: NUL byte in file");
}

static void
test_limits(void **state)
{
	size_t big = TOML_MAX_INPUT + 1, n = 0;
	char *text = malloc(big + 64);
	struct toml_doc *d;
	struct zerr err = { 0 };

	(void)state;
	assert_non_null(text);
	memset(text, '#', big);
	assert_int_equal(toml_parse(text, big, &d, &err), -1);
	assert_non_null(strstr(err.msg, "file larger than"));

	/* one item too many in an array */
	n = (size_t)sprintf(text, "a = [");
	for (int i = 0; i <= TOML_MAX_ITEMS; i++)
		n += (size_t)sprintf(text + n, "'x',");
	n += (size_t)sprintf(text + n, "]\n");
	assert_int_equal(toml_parse(text, n, &d, &err), -1);
	assert_string_equal(err.msg, "line 1: more than 256 items in array");

	/* one table too many */
	n = 0;
	for (int i = 0; i <= TOML_MAX_TABLES; i++)
		n += (size_t)sprintf(text + n, "[t%d]\n", i);
	assert_int_equal(toml_parse(text, n, &d, &err), -1);
	assert_string_equal(err.msg, "line 65: more than 64 tables");

	/* one key too many */
	n = 0;
	for (int i = 0; i <= TOML_MAX_KEYS; i++)
		n += (size_t)sprintf(text + n, "k%d = 1\n", i);
	assert_int_equal(toml_parse(text, n, &d, &err), -1);
	assert_string_equal(err.msg, "line 65: more than 64 keys in one table");

	/* an over-long key */
	{
		char key[201];

		memset(key, 'k', 200);
		key[200] = '\0';
		n = (size_t)sprintf(text, "%s = 1\n", key);
	}
	assert_int_equal(toml_parse(text, n, &d, &err), -1);
	assert_string_equal(err.msg, "line 1: key longer than 128 bytes");
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_the_subset),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_empty_and_comment_only),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_nul_byte_is_refused),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
