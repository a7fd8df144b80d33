/*
 * sse.c - incremental Server-Sent Events parsing (see sse.h).
 */
#include "sse.h"

#include <string.h>

#define SSE_SLICE 4096

void
sse_init(struct sse_parser *p, sse_data_fn fn, void *user)
{
	zbuf_init(&p->pending, SSE_EVENT_MAX + SSE_SLICE + 8);
	zbuf_init(&p->data, SSE_EVENT_MAX + 8);
	p->fn = fn;
	p->user = user;
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

/* The end of the first event in buf: offset past its blank line, or 0. */
static size_t
sse_boundary(const char *buf, size_t n, size_t *ev_len)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n') {
			*ev_len = i;
			return i + 2;
		}
		if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') {
			*ev_len = i;
			return i + 3;
		}
	}
	return 0;
}

/* Takes one slice, so pending never holds more than an event plus a slice. */
static int
sse_feed_slice(struct sse_parser *p, const char *buf, size_t n)
{
	if (zbuf_append(&p->pending, buf, n) != 0)
		return -1;
	for (;;) {
		size_t ev_len, used;
		int rc;

		used = sse_boundary(p->pending.data, p->pending.len, &ev_len);
		if (used == 0)
			break;
		rc = sse_event(p, p->pending.data, ev_len);
		memmove(p->pending.data, p->pending.data + used,
		    p->pending.len - used);
		p->pending.len -= used;
		p->pending.data[p->pending.len] = '\0';
		if (rc != 0)
			return rc;
	}
	if (p->pending.len > SSE_EVENT_MAX)
		return -1;
	return 0;
}

int
sse_feed(struct sse_parser *p, const char *buf, size_t n)
{
	while (n > 0) {
		size_t k = n < SSE_SLICE ? n : SSE_SLICE;
		int rc = sse_feed_slice(p, buf, k);

		if (rc != 0)
			return rc;
		buf += k;
		n -= k;
	}
	return 0;
}
