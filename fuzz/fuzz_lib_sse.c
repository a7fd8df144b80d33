/*
 * fuzz_lib_sse.c - libzeus's SSE parser (src/lib/sse.c) on arbitrary
 * streams cut into arbitrary chunks: no crash, no overread, every event
 * it hands out is at most SSE_EVENT_MAX bytes, and the outcome (the
 * events, in order, and the final return value) does not depend on how
 * the stream was cut, as TCP may cut it anywhere.
 *
 * Input: 8 bytes seed the chunk sizes, the rest is the stream, where
 * 0xff hi lo b stands for byte b repeated (hi << 8 | lo) + 1 times, so
 * the fuzzer reaches events around SSE_EVENT_MAX with small inputs.
 * An event whose data starts with "stop" makes the callback stop the
 * parser, exercising that path too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sse.h"

#define FUZZ_STREAM_MAX (4 * SSE_EVENT_MAX)
#define FUZZ_STOP_RC 7

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a run saw: a running hash of the events and their count. */
struct fuzz_run {
	uint64_t hash;
	size_t events;
};

static uint64_t
fuzz_mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static int
fuzz_on_data(const char *d, size_t len, void *user)
{
	struct fuzz_run *r = user;

	if (len > SSE_EVENT_MAX)
		abort();
	r->hash = fuzz_mix(r->hash, &len, sizeof(len));
	r->hash = fuzz_mix(r->hash, d, len);	/* reads every byte */
	r->events++;
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
fuzz_feed(const char *buf, size_t n, uint64_t seed, struct fuzz_run *r)
{
	static const size_t spans[] = { 1, 3, 17, 600, 5000, 70000 };
	struct sse_parser p;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	sse_init(&p, fuzz_on_data, r);
	if (seed == 0)
		rc = sse_feed(&p, buf, n);
	while (seed != 0 && n > 0 && rc == 0) {
		uint64_t x = fuzz_next(&seed);
		size_t k = 1 + (size_t)(x >> 8) % spans[x % 6];

		if (k > n)
			k = n;
		rc = sse_feed(&p, buf, k);
		buf += k;
		n -= k;
	}
	sse_free(&p);
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char stream[FUZZ_STREAM_MAX];
	struct fuzz_run whole, cut;
	uint64_t seed = 0;
	size_t n;
	int rc_whole, rc_cut;

	if (size < 8)
		return 0;
	memcpy(&seed, data, 8);
	seed |= 1;	/* xorshift needs a non-zero state */
	n = fuzz_expand(data + 8, size - 8, stream);
	rc_whole = fuzz_feed(stream, n, 0, &whole);
	rc_cut = fuzz_feed(stream, n, seed, &cut);
	if (rc_whole != -1 && rc_whole != 0 && rc_whole != FUZZ_STOP_RC)
		abort();
	if (rc_whole != rc_cut || whole.events != cut.events ||
	    whole.hash != cut.hash)
		abort();
	return 0;
}
