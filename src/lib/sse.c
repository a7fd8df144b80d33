/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse.c - incremental Server-Sent Events parsing (see sse.h).
 */
#include "sse.h"

#include <string.h>

void
sse_init_bounds(struct sse_parser *p, sse_data_fn fn, void *user,
    size_t max_event, size_t slice)
{
	zbuf_init(&p->pending, max_event + slice + 8);
	zbuf_init(&p->data, max_event + 8);
	p->max_event = max_event;
	p->slice = slice;
	p->fn = fn;
	p->user = user;
}

void
sse_init(struct sse_parser *p, sse_data_fn fn, void *user)
{
	sse_init_bounds(p, fn, user, SSE_EVENT_MAX, SSE_SLICE);
}

void
sse_reset(struct sse_parser *p)
{
	zbuf_reset(&p->pending);
	zbuf_reset(&p->data);
}

void
sse_free(struct sse_parser *p)
{
	zbuf_free(&p->pending);
	zbuf_free(&p->data);
}

/* Handles one complete event (without its blank line) of `n` bytes. */
static int
sse_event(struct sse_parser *p, const char *ev, size_t n)
{
	const char *end = ev + n;
	int have = 0;

	zbuf_reset(&p->data);
	while (ev < end) {
		const char *nl = memchr(ev, '\n', (size_t)(end - ev));
		size_t len = (nl != NULL ? nl : end) - ev;

		if (len > 0 && ev[len - 1] == '\r')
			len--;
		if (len >= 5 && memcmp(ev, "data:", 5) == 0) {
			const char *v = ev + 5;
			size_t vl = len - 5;

			if (vl > 0 && *v == ' ') {
				v++;
				vl--;
			}
			if ((have && zbuf_append(&p->data, "\n", 1) != 0) ||
			    zbuf_append(&p->data, v, vl) != 0)
				return -1;
			have = 1;
		}
		/* ":" comments, "event:", "id:", "retry:" are ignored. */
		ev = nl != NULL ? nl + 1 : end;
	}
	if (!have)
		return 0;
	return p->fn(p->data.data != NULL ? p->data.data : "", p->data.len,
	    p->user);
}

/*
 * The end of the first event in buf: offset past its blank line, or 0.
 * The scan starts at `from`, before which the caller knows no boundary
 * begins. It jumps from newline to newline with memchr: a byte loop here
 * was most of the cost of a large event.
 */
static size_t
sse_boundary(const char *buf, size_t n, size_t from, size_t *ev_len)
{
	size_t i = from;

	while (i + 1 < n) {
		const char *nl = memchr(buf + i, '\n', n - 1 - i);

		if (nl == NULL)
			return 0;
		i = (size_t)(nl - buf);
		if (buf[i + 1] == '\n') {
			*ev_len = i;
			return i + 2;
		}
		if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') {
			*ev_len = i;
			return i + 3;
		}
		i++;
	}
	return 0;
}

/* Drops the first `used` bytes of pending (the events handled). */
static void
sse_consume(struct sse_parser *p, size_t used)
{
	if (used == 0)
		return;
	memmove(p->pending.data, p->pending.data + used,
	    p->pending.len - used);
	p->pending.len -= used;
	p->pending.data[p->pending.len] = '\0';
}

/*
 * Takes one slice, so pending never holds more than an event plus a
 * slice. Handled events are dropped with one move at the end: a move per
 * event cost a slice of tiny events quadratic time.
 */
static int
sse_feed_slice(struct sse_parser *p, const char *buf, size_t n)
{
	/*
	 * What was pending held no boundary, so only its last two bytes
	 * (a "\n" or "\n\r" the slice may complete) need a second look:
	 * rescanning it all made a stream trickled in small chunks cost
	 * quadratic time in the event's size.
	 */
	size_t from = p->pending.len > 2 ? p->pending.len - 2 : 0;
	size_t off = 0;
	int rc = 0;

	if (zbuf_append(&p->pending, buf, n) != 0)
		return -1;
	while (rc == 0) {
		const char *ev = p->pending.data + off;
		size_t ev_len, used;

		used = sse_boundary(ev, p->pending.len - off, from, &ev_len);
		if (used == 0)
			break;
		from = 0;
		off += used;
		/*
		 * Checked per event, not only on what is left pending: a
		 * slice may complete an event that grew past the bound
		 * since the last check, and whether it is accepted must
		 * not depend on where the stream was cut.
		 */
		rc = ev_len > p->max_event ? -1 : sse_event(p, ev, ev_len);
	}
	sse_consume(p, off);
	if (rc != 0)
		return rc;
	/*
	 * What is left has no complete boundary, so its event is at least
	 * len - 2 bytes (a "\n" or "\n\r" may begin the terminator).
	 */
	if (p->pending.len > p->max_event + 2)
		return -1;
	return 0;
}

int
sse_feed(struct sse_parser *p, const char *buf, size_t n)
{
	while (n > 0) {
		size_t k = n < p->slice ? n : p->slice;
		int rc = sse_feed_slice(p, buf, k);

		if (rc != 0)
			return rc;
		buf += k;
		n -= k;
	}
	return 0;
}
