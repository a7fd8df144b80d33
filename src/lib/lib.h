/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib.h - what libzeus's own files share and users never see: error and
 * log helpers, a bounded growable buffer, and the libcurl request wrapper
 * (http.c) that the zeusd client and the Pushgateway pusher both use.
 */
#ifndef ZEUS_LIB_H
#define ZEUS_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zeus/zeus.h"

/* Fills err (may be NULL); always returns -1. */
int lib_err(struct zeus_error *err, enum zeus_errc code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sends one message to the log handler. */
void lib_log(enum zeus_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Monotonic time in ns. */
uint64_t lib_now_ns(void);

/* 0 when s is non-NULL, non-empty and shorter than max bytes; else -1. */
int lib_check_name(const char *s, size_t max);

/* A growable byte buffer that refuses to grow past `limit`. */
struct zbuf {
	char *data;		/* NUL-terminated when len > 0 */
	size_t len, cap, limit;
	int failed;		/* set once an append did not fit */
};

void zbuf_init(struct zbuf *b, size_t limit);
void zbuf_free(struct zbuf *b);
void zbuf_reset(struct zbuf *b);
int zbuf_append(struct zbuf *b, const void *p, size_t n);
int zbuf_printf(struct zbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hands the data to the caller (never NULL unless out of memory). */
char *zbuf_take(struct zbuf *b);

/* ---- http.c: one libcurl request ----------------------------------------- */

/* Calls curl_global_init once per process (thread-safe). */
int http_global_init(struct zeus_error *err);

/* Called with each piece of a streamed body; return non-zero to stop. */
typedef int (*http_chunk_fn)(const char *p, size_t n, void *user);

struct http_request {
	const char *method;		/* "GET", "POST", "PUT", "DELETE" */
	const char *url;		/* full URL ("http://zeusd/gpu/...") */
	const char *unix_socket;	/* NULL: TCP */
	const char *pipe_name;		/* Windows named pipe; NULL: none */
	const char *bearer;		/* NULL: no Authorization */
	const char *lease_label;	/* checked; NULL: no X-Zeus-Lease-Label */
	bool no_proxy;			/* ignore http_proxy and the like */
	const char *content_type;	/* with body */
	const char *body;
	size_t body_len;
	long timeout_ms;		/* 0: none (streams) */
	long connect_timeout_ms;
	http_chunk_fn on_chunk;		/* NULL: collect into `response` */
	void *user;
	const volatile bool *stop;	/* streams: checked every 100 ms */
};

struct http_response {
	long status;
	struct zbuf body;		/* when on_chunk is NULL; 4 MiB max */
};

/*
 * Runs one request on `curl` (a CURL *, reused so connections stay open;
 * NULL: a fresh handle). Transport failures are ZEUS_ERR_TRANSPORT; any
 * HTTP status is success here (the caller judges it). `resp->body` must be
 * initialised by the caller and freed by it.
 */
int http_perform(void *curl, const struct http_request *rq,
    struct http_response *resp, struct zeus_error *err);

/*
 * url for messages, its user name and password (before the host's @)
 * shown as "***". Cut to fit `size`.
 */
void http_url_shown(const char *url, char *out, size_t size);

/* Percent-encodes `s` (RFC 3986 unreserved kept) into b. */
int http_escape(struct zbuf *b, const char *s);

#endif
