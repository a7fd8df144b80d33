/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lib_sse.c - unit tests of libzeus's SSE parser (src/lib/sse.c):
 * events split at every byte, comments, CRLF, multi-line data, the size
 * bound (default and small, at every cut), a callback that stops the
 * stream, and a reset parser reused for a new stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sse.h"

struct got {
	char data[8][128];
	int n;
	int stop_at;	/* return 1 at this event number (1-based); 0: never */
};

static int
on_data(const char *d, size_t len, void *user)
{
	struct got *g = user;

	if (g->n < 8)
		snprintf(g->data[g->n], sizeof(g->data[0]), "%.*s", (int)len,
		    d);
	g->n++;
	return g->stop_at == g->n ? 1 : 0;
}

static const char stream[] =
    ": keepalive\n\n"
    "data: {\"gpu_id\": 0}\n\n"
    "data:{\"gpu_id\": 1}\n\n"
    "event: x\nid: 3\n\n"
    "data: a\ndata: b\n\n"
    "data: crlf\r\n\r\n";

static void
check(const struct got *g)
{
	assert_int_equal(g->n, 4);
	assert_string_equal(g->data[0], "{\"gpu_id\": 0}");
	assert_string_equal(g->data[1], "{\"gpu_id\": 1}");
	assert_string_equal(g->data[2], "a\nb");
	assert_string_equal(g->data[3], "crlf");
}

static void
test_whole(void **state)
{
	struct sse_parser p;
	struct got g = { 0 };

	sse_init(&p, on_data, &g);
	assert_int_equal(sse_feed(&p, stream, strlen(stream)), 0);
	check(&g);
	sse_free(&p);
}

static void
test_byte_by_byte(void **state)
{
	struct sse_parser p;
	struct got g = { 0 };

	sse_init(&p, on_data, &g);
	for (size_t i = 0; i < strlen(stream); i++)
		assert_int_equal(sse_feed(&p, stream + i, 1), 0);
	check(&g);
	sse_free(&p);
}

static void
test_stop(void **state)
{
	struct sse_parser p;
	struct got g = { .stop_at = 2 };

	sse_init(&p, on_data, &g);
	assert_int_equal(sse_feed(&p, stream, strlen(stream)), 1);
	assert_int_equal(g.n, 2);
	sse_free(&p);
}

static void
test_too_big(void **state)
{
	struct sse_parser p;
	struct got g = { 0 };
	char *big = malloc(SSE_EVENT_MAX + 100);
	int rc = 0;

	memset(big, 'x', SSE_EVENT_MAX + 100);
	memcpy(big, "data: ", 6);
	sse_init(&p, on_data, &g);
	for (size_t off = 0; off < SSE_EVENT_MAX + 100 && rc == 0; off += 1000)
		rc = sse_feed(&p, big + off, SSE_EVENT_MAX + 100 - off < 1000 ?
		    SSE_EVENT_MAX + 100 - off : 1000);
	assert_int_equal(rc, -1);
	assert_int_equal(g.n, 0);
	sse_free(&p);
	free(big);
}

static void
test_large_chunk_many_events(void **state)
{
	/* One chunk far larger than a slice, holding many events. */
	struct sse_parser p;
	struct got g = { 0 };
	size_t n = 20000, len = 0;
	char *buf = malloc(n * 16);

	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "data: %05zu\n\n", i % 100000);
	sse_init(&p, on_data, &g);
	assert_int_equal(sse_feed(&p, buf, len), 0);
	assert_int_equal(g.n, (int)n);
	sse_free(&p);
	free(buf);
}

/*
 * An event of exactly the bound passes (its CR counts), one byte more
 * fails, however the stream is cut.
 */
static void
test_small_bounds(void **state)
{
	static const char ok[] = "data: 12\n\ndata: a\r\n\r\n";
	static const char big[] = "data: 123\n\n";

	for (size_t chunk = 1; chunk <= sizeof(ok); chunk++) {
		struct sse_parser p;
		struct got g = { 0 };
		int rc = 0;

		sse_init_bounds(&p, on_data, &g, 8, 3);
		for (size_t o = 0; o < strlen(ok) && rc == 0; o += chunk)
			rc = sse_feed(&p, ok + o, strlen(ok) - o < chunk ?
			    strlen(ok) - o : chunk);
		assert_int_equal(rc, 0);
		assert_int_equal(g.n, 2);
		assert_string_equal(g.data[0], "12");
		assert_string_equal(g.data[1], "a");
		rc = 0;
		for (size_t o = 0; o < strlen(big) && rc == 0; o += chunk)
			rc = sse_feed(&p, big + o, strlen(big) - o < chunk ?
			    strlen(big) - o : chunk);
		assert_int_equal(rc, -1);
		assert_int_equal(g.n, 2);
		sse_free(&p);
	}
}

static void
test_reset(void **state)
{
	struct sse_parser p;
	struct got g = { 0 };

	sse_init(&p, on_data, &g);
	assert_int_equal(sse_feed(&p, "data: half", 10), 0);
	sse_reset(&p);
	assert_int_equal(sse_feed(&p, stream, strlen(stream)), 0);
	check(&g);
	sse_free(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_large_chunk_many_events),
		cmocka_unit_test(test_small_bounds),
		cmocka_unit_test(test_reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
