/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lib_prom.c - unit tests of libzeus's exposition format and
 * Pushgateway URLs (src/lib/prom.c), of push errors that need no gateway
 * (bad URL, nothing listening), and of the default `instance`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/prom.h"
#include "zeus/zeus.h"

static void
test_double(void **state)
{
	char b[64];

	prom_double(b, sizeof(b), 50.0);
	assert_string_equal(b, "50");
	prom_double(b, sizeof(b), 0.1);
	assert_string_equal(b, "0.1");
	prom_double(b, sizeof(b), 123.456789012345);
	assert_float_equal(strtod(b, NULL), 123.456789012345, 0);
	prom_double(b, sizeof(b), INFINITY);
	assert_string_equal(b, "+Inf");
	prom_double(b, sizeof(b), -INFINITY);
	assert_string_equal(b, "-Inf");
	prom_double(b, sizeof(b), NAN);
	assert_string_equal(b, "NaN");
}

static void
test_histogram_text(void **state)
{
	const double bounds[] = { 5, 10 };
	const uint64_t counts[] = { 1, 0, 2 };
	struct zbuf b;

	zbuf_init(&b, 1 << 20);
	prom_header(&b, "m", "help", "histogram");
	prom_histogram(&b, "m", "w\"\\\n", 3, bounds, 2, counts, 42.5, 3);
	assert_string_equal(b.data,
	    "# HELP m help\n# TYPE m histogram\n"
	    "m_bucket{window=\"w\\\"\\\\\\n\",index=\"3\",le=\"5\"} 1\n"
	    "m_bucket{window=\"w\\\"\\\\\\n\",index=\"3\",le=\"10\"} 1\n"
	    "m_bucket{window=\"w\\\"\\\\\\n\",index=\"3\",le=\"+Inf\"} 3\n"
	    "m_sum{window=\"w\\\"\\\\\\n\",index=\"3\"} 42.5\n"
	    "m_count{window=\"w\\\"\\\\\\n\",index=\"3\"} 3\n");
	zbuf_free(&b);
}

static void
test_base64(void **state)
{
	struct zbuf b;

	zbuf_init(&b, 1024);
	prom_base64url(&b, "a/b");
	assert_string_equal(b.data, "YS9i");
	zbuf_reset(&b);
	prom_base64url(&b, "x");
	assert_string_equal(b.data, "eA==");
	zbuf_reset(&b);
	prom_base64url(&b, "\xff\xfe?");
	assert_string_equal(b.data, "__4_");
	zbuf_reset(&b);
	prom_base64url(&b, "");
	assert_string_equal(b.data, "=");
	zbuf_free(&b);
}

static void
test_push_url(void **state)
{
	struct zbuf b;

	zbuf_init(&b, 4096);
	assert_int_equal(prom_push_url(&b, "http://gw:9091/", "job 1",
	    "train/step", "h-1"), 0);
	assert_string_equal(b.data, "http://gw:9091/metrics/job/job%201"
	    "/window@base64/dHJhaW4vc3RlcA==/instance/h-1");
	zbuf_reset(&b);
	assert_int_equal(prom_push_url(&b, "http://gw", "j", NULL, ""), 0);
	assert_string_equal(b.data, "http://gw/metrics/job/j");
	zbuf_reset(&b);
	assert_int_equal(prom_push_url(&b, "http://gw", "a/b", "", NULL), 0);
	assert_string_equal(b.data,
	    "http://gw/metrics/job@base64/YS9i/window@base64/=");
	zbuf_reset(&b);
	assert_int_equal(prom_push_url(&b, "http://gw", ".", "..", "..."), 0);
	assert_string_equal(b.data,
	    "http://gw/metrics/job@base64/Lg==/window@base64/Li4="
	    "/instance/...");
	zbuf_free(&b);
}

static void
test_push_errors(void **state)
{
	struct zeus_push_options p = { .url = "ftp://x", .job = "j" };
	struct zeus_error e;

	assert_int_equal(zeus_push_text(&p, "w", "", &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	p.url = "http://127.0.0.1:1";
	p.job = "";
	assert_int_equal(zeus_push_text(&p, "w", "", &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	/* Port 1 on loopback: nothing listens, connect is refused. */
	p.job = "j";
	p.timeout_ms = 1000;
	assert_int_equal(zeus_push_text(&p, "w", "x 1\n", &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_PUSH);
	assert_non_null(strstr(e.message, "127.0.0.1:1"));
}

/* No pid in it: a rerun on the host reuses the window's group. */
static void
test_default_instance(void **state)
{
	char host[256] = "", inst[ZEUS_NAME_MAX];

	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	push_default_instance(inst, sizeof(inst));
	assert_string_equal(inst, host);
	push_default_instance(inst, 3);
	assert_int_equal(strlen(inst), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_double),
		cmocka_unit_test(test_histogram_text),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_push_url),
		cmocka_unit_test(test_push_errors),
		cmocka_unit_test(test_default_instance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
