/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common.c - libzeus's shared helpers: the public error names, the log
 * handler (process-wide, like libcurl's), and the bounded buffer.
 */
#include "lib.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static pthread_mutex_t lib_log_lock = PTHREAD_MUTEX_INITIALIZER;
static zeus_log_fn lib_log_fn;
static void *lib_log_user;

const char *
zeus_version(void)
{
	return ZEUS_VERSION;
}

const char *
zeus_errc_name(enum zeus_errc code)
{
	switch (code) {
	case ZEUS_OK: return "ok";
	case ZEUS_ERR_INVALID: return "invalid";
	case ZEUS_ERR_NOT_FOUND: return "not_found";
	case ZEUS_ERR_DEVICE: return "device";
	case ZEUS_ERR_TRANSPORT: return "transport";
	case ZEUS_ERR_HTTP: return "http";
	case ZEUS_ERR_PUSH: return "push";
	case ZEUS_ERR_NOMEM: return "nomem";
	case ZEUS_ERR_INTERNAL: return "internal";
	}
	return "unknown";
}

/*
 * Control characters become '?': messages quote what peers chose (zeusd's
 * or a Pushgateway's error text) and end up on terminals and in logs,
 * where an escape sequence or a line break would rewrite or fake output.
 * C1 controls (U+0080..U+009F, "\xc2\x80".."\xc2\x9f") too.
 */
static void
lib_sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			p[0] = '?';
			p[1] = '?';
			p++;
		}
	}
}

int
lib_err(struct zeus_error *err, enum zeus_errc code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	err->code = code;
	err->http_status = 0;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	lib_sanitize(err->message);
	return -1;
}

void
zeus_set_log_handler(zeus_log_fn fn, void *user)
{
	pthread_mutex_lock(&lib_log_lock);
	lib_log_fn = fn;
	lib_log_user = user;
	pthread_mutex_unlock(&lib_log_lock);
}

void
lib_log(enum zeus_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "debug", "info", "warning",
		"error" };
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Held across the call so a handler being replaced is never torn. */
	pthread_mutex_lock(&lib_log_lock);
	if (lib_log_fn != NULL)
		lib_log_fn(level, msg, lib_log_user);
	else if (level >= ZEUS_LOG_WARN)
		fprintf(stderr, "zeus: %s: %s\n", names[level], msg);
	pthread_mutex_unlock(&lib_log_lock);
}

uint64_t
lib_now_ns(void)
{
	return zclock_now_ns();
}

int
lib_check_name(const char *s, size_t max)
{
	if (s == NULL || *s == '\0')
		return -1;
	return strnlen(s, max) < max ? 0 : -1;
}

void
zbuf_init(struct zbuf *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
}

void
zbuf_free(struct zbuf *b)
{
	free(b->data);
	zbuf_init(b, b->limit);
}

void
zbuf_reset(struct zbuf *b)
{
	b->len = 0;
	b->failed = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

int
zbuf_append(struct zbuf *b, const void *p, size_t n)
{
	if (b->failed)
		return -1;
	if (n > b->limit || b->len + n + 1 > b->limit) {
		b->failed = 1;
		return -1;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > b->limit)
			cap = b->limit;
		d = realloc(b->data, cap);
		if (d == NULL) {
			b->failed = 1;
			return -1;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
zbuf_printf(struct zbuf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof(small))
		return zbuf_append(b, small, (size_t)n);
	{
		char *big = malloc((size_t)n + 1);
		int rc;

		if (big == NULL)
			return -1;
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		rc = zbuf_append(b, big, (size_t)n);
		free(big);
		return rc;
	}
}

char *
zbuf_take(struct zbuf *b)
{
	char *d = b->data;

	if (d == NULL)
		d = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}
