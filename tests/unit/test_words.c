/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_words.c - shell-style word splitting without expansion: the quoting
 * edge cases, checked against what POSIX sh would hand to a program.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "overrides/words.h"

#define MAXW 8

struct split_case {
	const char *in;
	const char *want[MAXW];	/* NULL-terminated */
};

/* Expected words as `sh -c 'for a; do ...' x <input>` would see them. */
static const struct split_case cases[] = {
	{ "", { NULL } },
	{ "   \t \n ", { NULL } },
	{ "a", { "a", NULL } },
	{ "  a  b\tc\nd  ", { "a", "b", "c", "d", NULL } },
	{ "nvidia-smi -i 0 -pl 250", { "nvidia-smi", "-i", "0", "-pl", "250",
	    NULL } },
	/* single quotes: everything literal, even backslash and " */
	{ "'a b'", { "a b", NULL } },
	{ "'a\\b' 'c\"d' '$HOME'", { "a\\b", "c\"d", "$HOME", NULL } },
	{ "'a\\'", { "a\\", NULL } },
	{ "'multi\nline'", { "multi\nline", NULL } },
	/* empty quoted strings are words */
	{ "''", { "", NULL } },
	{ "\"\"", { "", NULL } },
	{ "a '' b", { "a", "", "b", NULL } },
	{ "'' \"\" ''", { "", "", "", NULL } },
	/* adjacent parts form one word */
	{ "a'b c'd\"e f\"g", { "ab cde fg", NULL } },
	{ "--opt=\"x y\"", { "--opt=x y", NULL } },
	{ "a''b", { "ab", NULL } },
	/* double quotes: backslash escapes only $ ` " \ and newline */
	{ "\"a\\\"b\"", { "a\"b", NULL } },
	{ "\"a\\\\b\"", { "a\\b", NULL } },
	{ "\"\\$x \\`y\\`\"", { "$x `y`", NULL } },
	{ "\"a\\nb\"", { "a\\nb", NULL } },
	{ "\"a\\'b\"", { "a\\'b", NULL } },
	{ "\"a\\\nb\"", { "ab", NULL } },
	{ "\"it's\"", { "it's", NULL } },
	/* backslash outside quotes: next character literal */
	{ "a\\ b", { "a b", NULL } },
	{ "\\'a\\'", { "'a'", NULL } },
	{ "\\\"", { "\"", NULL } },
	{ "\\\\", { "\\", NULL } },
	{ "\\n", { "n", NULL } },
	{ "a\\\nb", { "ab", NULL } },
	{ "a \\\n b", { "a", "b", NULL } },
	{ "\\\n", { NULL } },
	{ "'a'\\''b'", { "a'b", NULL } },
	/* no expansion, no operators: all plain characters */
	{ "$HOME ~ * ?(x) [a] {gpu_id}", { "$HOME", "~", "*", "?(x)", "[a]",
	    "{gpu_id}", NULL } },
	{ "a|b;c&d>e<f", { "a|b;c&d>e<f", NULL } },
	{ "a | b ; c", { "a", "|", "b", ";", "c", NULL } },
	{ "$(rm -rf /) `id`", { "$(rm", "-rf", "/)", "`id`", NULL } },
	{ "#not-a-comment x", { "#not-a-comment", "x", NULL } },
	{ "caf\xc3\xa9 \"\xe2\x82\xac\"", { "caf\xc3\xa9", "\xe2\x82\xac",
	    NULL } },
	{ "\"tab\there\"", { "tab\there", NULL } },
};

static void
test_split_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct split_case *c = &cases[i];
		struct words w;
		struct zerr err = { 0 };
		size_t n = 0;

		if (words_split(c->in, &w, &err) != 0)
			fail_msg("case %zu (%s): %s", i, c->in, err.msg);
		while (c->want[n] != NULL)
			n++;
		if (w.n != n)
			fail_msg("case %zu (%s): %zu words, want %zu", i, c->in,
			    w.n, n);
		for (size_t k = 0; k < n; k++)
			if (strcmp(w.v[k], c->want[k]) != 0)
				fail_msg("case %zu word %zu: '%s', want '%s'",
				    i, k, w.v[k], c->want[k]);
		assert_null(w.v[n]);
		words_free(&w);
	}
}

struct bad_case {
	const char *in;
	const char *msg;
};

static const struct bad_case bad[] = {
	{ "'abc", "unterminated single quote (opened at offset 0)" },
	{ "ab 'c\"d", "unterminated single quote (opened at offset 3)" },
	{ "\"abc", "unterminated double quote (opened at offset 0)" },
	{ "x \"a\\\"", "unterminated double quote (opened at offset 2)" },
	{ "abc\\", "trailing backslash" },
	{ "'\\'\\", "trailing backslash" },
	{ "a\x01" "b", "control character 0x01 at offset 1" },
	{ "'\x1b[0m'", "control character 0x1b at offset 1" },
	{ "\"a\rb\"", "control character 0x0d at offset 2" },
	{ "\\\x7f", "control character 0x7f at offset 1" },
};

static void
test_split_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct words w = { (char **)1, 99 };
		struct zerr err = { 0 };

		if (words_split(bad[i].in, &w, &err) == 0)
			fail_msg("case %zu accepted", i);
		assert_int_equal(err.kind, ZERR_INVALID);
		assert_null(w.v);
		assert_int_equal(w.n, 0);
		if (strcmp(err.msg, bad[i].msg) != 0)
			fail_msg("case %zu: got '%s', want '%s'", i, err.msg,
			    bad[i].msg);
	}
}

static void
test_limits(void **state)
{
	char *s = malloc(WORDS_MAX_INPUT + 2);
	struct words w;
	struct zerr err = { 0 };

	(void)state;
	assert_non_null(s);
	memset(s, 'a', WORDS_MAX_INPUT + 1);
	s[WORDS_MAX_INPUT + 1] = '\0';
	assert_int_equal(words_split(s, &w, &err), -1);
	assert_string_equal(err.msg, "command longer than 8192 bytes");
	s[WORDS_MAX_INPUT] = '\0';
	assert_int_equal(words_split(s, &w, &err), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(strlen(w.v[0]), WORDS_MAX_INPUT);
	words_free(&w);
	/* 257 words */
	for (int i = 0; i <= WORDS_MAX_COUNT; i++) {
		s[2 * i] = 'x';
		s[2 * i + 1] = ' ';
	}
	s[2 * (WORDS_MAX_COUNT + 1)] = '\0';
	assert_int_equal(words_split(s, &w, &err), -1);
	assert_string_equal(err.msg, "more than 256 words");
	s[2 * WORDS_MAX_COUNT] = '\0';
	assert_int_equal(words_split(s, &w, &err), 0);
	assert_int_equal(w.n, WORDS_MAX_COUNT);
	words_free(&w);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_cases),
		cmocka_unit_test(test_split_errors),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
