/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_lib_sse.c - libzeus's SSE parser (src/lib/sse.c) on arbitrary
 * streams cut into arbitrary chunks: no crash, no overread, every event
 * it hands out is within the parser's bound, and the outcome (the
 * events, in order, and the final return value) does not depend on how
 * the stream was cut, as TCP may cut it anywhere.
 *
 * Input: 8 bytes seed the chunk sizes, the rest is the stream, where
 * 0xff hi lo b stands for byte b repeated (hi << 8 | lo) + 1 times.
 * An event whose data starts with "stop" makes the callback stop the
 * parser, exercising that path too.
 *
 * Speed: the parser runs with small bounds (sse_init_bounds: events of
 * FUZZ_EVENT_MAX bytes, slices of FUZZ_SLICE, the production ratio), so
 * every limit is reached by streams of a few KiB. With the real 64 KiB
 * bound a useful input expanded to hundreds of KiB, and the per-byte and
 * per-event work under coverage instrumentation held the target near
 * 600 executions/s. The two parsers live across inputs (sse_reset: no
 * allocation once warm); the whole-stream feed records its events in a
 * log and the cut feed memcmp's against it, which still reads (and ASan
 * checks) every byte without a hash loop in instrumented code.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sse.h"

#define FUZZ_EVENT_MAX 512
#define FUZZ_SLICE 32
#define FUZZ_STREAM_MAX (8 * FUZZ_EVENT_MAX)
/* An event with data is at least "data:\n\n". */
#define FUZZ_EVENTS_MAX (FUZZ_STREAM_MAX / 7 + 1)
#define FUZZ_STOP_RC 7

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The events of the whole-stream feed: event k is
 * bytes[off[k], off[k + 1]). The cut feed checks against it.
 */
struct fuzz_log {
	char bytes[FUZZ_STREAM_MAX];
	size_t off[FUZZ_EVENTS_MAX + 1];
	size_t events;		/* recorded */
	size_t seen;		/* checked by the cut feed */
	bool checking;
};

static struct fuzz_log fuzz_log;

static int
fuzz_on_data(const char *d, size_t len, void *user)
{
	struct fuzz_log *l = user;

	if (len > FUZZ_EVENT_MAX)
		abort();
	if (!l->checking) {
		size_t at = l->off[l->events];

		/* The joined data never outgrows the stream it came from. */
		if (l->events == FUZZ_EVENTS_MAX || len > FUZZ_STREAM_MAX - at)
			abort();
		memcpy(l->bytes + at, d, len);	/* reads every byte */
		l->off[++l->events] = at + len;
	} else {
		size_t k = l->seen++;

		if (k >= l->events || l->off[k + 1] - l->off[k] != len ||
		    memcmp(l->bytes + l->off[k], d, len) != 0)
			abort();
	}
	return len >= 4 && memcmp(d, "stop", 4) == 0 ? FUZZ_STOP_RC : 0;
}

/* Expands the 0xff repeat escapes; returns the stream's length. */
static size_t
fuzz_expand(const uint8_t *in, size_t n, char *out)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		size_t k = 1;
		uint8_t b = in[i];

		if (b == 0xff && i + 3 < n) {
			k = ((size_t)in[i + 1] << 8 | in[i + 2]) + 1;
			b = in[i + 3];
			i += 3;
		}
		if (k > FUZZ_STREAM_MAX - len)
			k = FUZZ_STREAM_MAX - len;
		memset(out + len, b, k);
		len += k;
	}
	return len;
}

static uint64_t
fuzz_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Feeds the stream in chunks drawn from `seed` (0: all at once). */
static int
fuzz_feed(struct sse_parser *p, const char *buf, size_t n, uint64_t seed)
{
	static const size_t spans[] = { 1, 3, 17, 40, 600, 5000 };
	int rc = 0;

	sse_reset(p);
	if (seed == 0)
		rc = sse_feed(p, buf, n);
	while (seed != 0 && n > 0 && rc == 0) {
		uint64_t x = fuzz_next(&seed);
		size_t k = 1 + (size_t)(x >> 8) % spans[x % 6];

		if (k > n)
			k = n;
		rc = sse_feed(p, buf, k);
		buf += k;
		n -= k;
	}
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char stream[FUZZ_STREAM_MAX];
	static struct sse_parser whole, cut;
	static bool ready;
	uint64_t seed = 0;
	size_t n;
	int rc_whole, rc_cut;

	if (!ready) {
		/* Kept for the process: their buffers are reused. */
		sse_init_bounds(&whole, fuzz_on_data, &fuzz_log,
		    FUZZ_EVENT_MAX, FUZZ_SLICE);
		sse_init_bounds(&cut, fuzz_on_data, &fuzz_log,
		    FUZZ_EVENT_MAX, FUZZ_SLICE);
		ready = true;
	}
	if (size < 8)
		return 0;
	memcpy(&seed, data, 8);
	seed |= 1;	/* xorshift needs a non-zero state */
	n = fuzz_expand(data + 8, size - 8, stream);
	fuzz_log.events = fuzz_log.seen = 0;
	fuzz_log.checking = false;
	rc_whole = fuzz_feed(&whole, stream, n, 0);
	fuzz_log.checking = true;
	rc_cut = fuzz_feed(&cut, stream, n, seed);
	if (rc_whole != -1 && rc_whole != 0 && rc_whole != FUZZ_STOP_RC)
		abort();
	if (rc_whole != rc_cut || fuzz_log.seen != fuzz_log.events)
		abort();
	return 0;
}
