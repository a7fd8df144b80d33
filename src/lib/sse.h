/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse.h - an incremental Server-Sent Events parser for zeusd's streams.
 *
 * Events end with a blank line ("\n\n", as zeusd sends them; "\r\n\r\n" is
 * accepted too). Within an event, "data:" lines are joined with '\n' and
 * handed to the callback; comment lines (":" first, the keepalive) and
 * other fields are skipped; an event without data calls nothing. One event
 * may be at most SSE_EVENT_MAX bytes.
 */
#ifndef ZEUS_SSE_H
#define ZEUS_SSE_H

#include <stddef.h>

#include "lib.h"

#define SSE_EVENT_MAX 65536
/* Bytes taken per step; an event is bounded per slice, not per feed. */
#define SSE_SLICE 4096

/* Return 0 to go on; anything else stops the parser with that value. */
typedef int (*sse_data_fn)(const char *data, size_t len, void *user);

struct sse_parser {
	struct zbuf pending;	/* bytes of the event being received */
	struct zbuf data;	/* scratch for the joined data lines */
	size_t max_event;	/* SSE_EVENT_MAX unless sse_init_bounds */
	size_t slice;
	sse_data_fn fn;
	void *user;
};

void sse_init(struct sse_parser *p, sse_data_fn fn, void *user);
/*
 * The same parser with other bounds (both > 0), for tests and fuzzing:
 * small bounds reach every limit with small inputs.
 */
void sse_init_bounds(struct sse_parser *p, sse_data_fn fn, void *user,
    size_t max_event, size_t slice);
void sse_free(struct sse_parser *p);
/* Drops a partial event, keeping the buffers, to parse a new stream. */
void sse_reset(struct sse_parser *p);

/*
 * Feeds bytes. Returns 0, the callback's non-zero value, or -1 when an
 * event outgrew max_event.
 */
int sse_feed(struct sse_parser *p, const char *buf, size_t n);

#endif
