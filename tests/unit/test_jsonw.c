/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jsonw.c - the JSON writer against jansson: random bodies of nested
 * objects, integers (the extremes included), booleans and nulls must come
 * out byte for byte as json_dumps(JSON_COMPACT) writes the same tree; every
 * misuse and every key JSON would need escaped fails the body.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/jsonw.h"

/* A small deterministic generator (xorshift64*), so a failure repeats. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1du;
}

static const int64_t extremes[] = { 0, 1, -1, 9, 10, -10, INT64_MAX,
	INT64_MIN, INT64_MIN + 1, 4294967295, 4294967296, 1000000000000000000 };

static const char *const literals[] = { "cpu_energy_uj", "dram_energy_uj",
	"power_mw", "timestamp_ms", "enabled", "a", "", " ~!#$%&'()*+,-./:;<=>?@[]^_`{|}" };

static int64_t
random_int(void)
{
	switch (rng() % 3) {
	case 0:
		return extremes[rng() % (sizeof(extremes) / sizeof(extremes[0]))];
	case 1:
		return (int64_t)(rng() % 100000) - 50000;
	default:
		return (int64_t)rng();
	}
}

/* One object's members, written to both; depth: objects open so far. */
static void
random_members(struct jsonw *w, json_t *obj, unsigned depth)
{
	unsigned n = (unsigned)(rng() % 6);

	for (unsigned i = 0; i < n; i++) {
		char key[48];
		json_t *v;

		/* distinct keys: jansson would replace a repeated one */
		if (rng() % 2) {
			unsigned k = i + 1000u * (unsigned)(rng() % 5000);

			snprintf(key, sizeof(key), "%u", k);
			jsonw_key_u(w, k);
		} else {
			snprintf(key, sizeof(key), "%s%u", literals[rng() %
			    (sizeof(literals) / sizeof(literals[0]))], i);
			jsonw_key(w, key);
		}
		switch (rng() % (depth < 4 ? 4 : 3)) {
		case 0: {
			int64_t x = random_int();

			jsonw_int(w, x);
			v = json_integer((json_int_t)x);
			break;
		}
		case 1: {
			bool b = rng() % 2;

			jsonw_bool(w, b);
			v = json_boolean(b);
			break;
		}
		case 2:
			jsonw_null(w);
			v = json_null();
			break;
		default:
			jsonw_open(w);
			v = json_object();
			random_members(w, v, depth + 1);
			jsonw_close(w);
			break;
		}
		assert_int_equal(json_object_set_new(obj, key, v), 0);
	}
}

static void
test_matches_jansson(void **state)
{
	(void)state;
	for (unsigned round = 0; round < 3000; round++) {
		struct jsonw w;
		json_t *tree = json_object();
		char *want, *got;
		size_t len = 0;

		jsonw_init(&w);
		jsonw_open(&w);
		random_members(&w, tree, 1);
		jsonw_close(&w);
		got = jsonw_finish(&w, &len);
		want = json_dumps(tree, JSON_COMPACT);
		assert_non_null(got);
		assert_non_null(want);
		if (strcmp(got, want) != 0)
			fail_msg("round %u:\n jsonw   %s\n jansson %s", round, got,
			    want);
		assert_int_equal(len, strlen(want));
		free(got);
		free(want);
		json_decref(tree);
	}
}

/* The read bodies' own shapes, as the handlers write them; the edges. */
static void
test_read_bodies(void **state)
{
	struct jsonw w;
	size_t len;
	char *s;

	(void)state;
	jsonw_init(&w);
	jsonw_open(&w);
	jsonw_key_int(&w, "timestamp_ms", 1764800000123);
	jsonw_key(&w, "power_mw");
	jsonw_open(&w);
	for (unsigned g = 0; g < 3; g++) {
		jsonw_key_u(&w, g);
		jsonw_int(&w, 250000 + g);
	}
	jsonw_close(&w);
	jsonw_close(&w);
	s = jsonw_finish(&w, &len);
	assert_string_equal(s, "{\"timestamp_ms\":1764800000123,\"power_mw\":"
	    "{\"0\":250000,\"1\":250001,\"2\":250002}}");
	assert_int_equal(len, strlen(s));
	free(s);

	jsonw_open(&w);
	jsonw_close(&w);
	s = jsonw_finish(&w, &len);
	assert_string_equal(s, "{}");
	free(s);

	/* the deepest nesting allowed */
	jsonw_open(&w);
	for (unsigned i = 1; i < JSONW_DEPTH; i++) {
		jsonw_key(&w, "a");
		jsonw_open(&w);
	}
	for (unsigned i = 0; i < JSONW_DEPTH; i++)
		jsonw_close(&w);
	s = jsonw_finish(&w, &len);
	assert_non_null(s);
	assert_int_equal(len, 1 + 5 * (JSONW_DEPTH - 1) + JSONW_DEPTH);
	free(s);
}

typedef void (*misuse_fn)(struct jsonw *w);

static void
m_value_without_key(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_int(w, 1);
	jsonw_close(w);
}

static void
m_key_at_top(struct jsonw *w)
{
	jsonw_key(w, "a");
	jsonw_int(w, 1);
}

static void
m_two_values(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_key(w, "a");
	jsonw_int(w, 1);
	jsonw_null(w);
	jsonw_close(w);
}

static void
m_two_keys(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_key(w, "a");
	jsonw_key(w, "b");
	jsonw_int(w, 1);
	jsonw_close(w);
}

static void
m_close_with_key_due(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_key(w, "a");
	jsonw_close(w);
}

static void
m_close_too_often(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_close(w);
	jsonw_close(w);
}

static void
m_left_open(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_key(w, "a");
	jsonw_open(w);
	jsonw_close(w);
}

static void
m_second_body(struct jsonw *w)
{
	jsonw_open(w);
	jsonw_close(w);
	jsonw_open(w);
	jsonw_close(w);
}

static void
m_too_deep(struct jsonw *w)
{
	jsonw_open(w);
	for (unsigned i = 0; i < JSONW_DEPTH; i++) {
		jsonw_key(w, "a");
		jsonw_open(w);
	}
	for (unsigned i = 0; i <= JSONW_DEPTH; i++)
		jsonw_close(w);
}

static void
m_too_long(struct jsonw *w)
{
	jsonw_open(w);
	for (unsigned i = 0; i < JSONW_MAX / 8; i++) {
		jsonw_key_u(w, i);
		jsonw_int(w, INT64_MIN);
	}
	jsonw_close(w);
}

static void
m_nothing(struct jsonw *w)
{
	(void)w;
}

static void
test_misuse_fails(void **state)
{
	static const misuse_fn fns[] = { m_value_without_key, m_key_at_top,
		m_two_values, m_two_keys, m_close_with_key_due,
		m_close_too_often, m_left_open, m_second_body, m_too_deep,
		m_too_long, m_nothing };

	(void)state;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		struct jsonw w;
		size_t len = 12345;

		jsonw_init(&w);
		fns[i](&w);
		if (jsonw_finish(&w, &len) != NULL)
			fail_msg("misuse %zu gave a body", i);
		assert_int_equal(len, 12345);
		assert_null(w.buf);	/* freed: the writer is empty again */
	}
}

static void
test_keys_needing_escapes_fail(void **state)
{
	static const char *const bad[] = { "a\"b", "a\\b", "tab\there",
		"nl\n", "\x7f", "caf\xc3\xa9", "\x01" };
	char long_key[300];

	(void)state;
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
		struct jsonw w;
		size_t len;

		jsonw_init(&w);
		jsonw_open(&w);
		jsonw_key(&w, i < sizeof(bad) / sizeof(bad[0]) ? bad[i] :
		    long_key);
		jsonw_int(&w, 1);
		jsonw_close(&w);
		if (jsonw_finish(&w, &len) != NULL)
			fail_msg("key %zu was written", i);
	}
}

static void
test_discard(void **state)
{
	struct jsonw w;

	(void)state;
	jsonw_init(&w);
	jsonw_open(&w);
	jsonw_key(&w, "a");
	jsonw_discard(&w);	/* half-way: freed, no leak under ASan */
	assert_null(w.buf);
	assert_false(w.failed);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_jansson),
		cmocka_unit_test(test_read_bodies),
		cmocka_unit_test(test_misuse_fails),
		cmocka_unit_test(test_keys_needing_escapes_fail),
		cmocka_unit_test(test_discard),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
