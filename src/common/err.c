/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err.c - the error type and the single kind -> HTTP status mapping.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
 * Drops a UTF-8 sequence that truncation left incomplete at the end of the
 * `len` bytes of `s`. Only the tail is looked at: up to three continuation
 * bytes and the lead byte before them. Bytes that were not UTF-8 to begin
 * with are left as they are.
 */
static void
zerr_cut_partial(char *s, size_t len)
{
	size_t i = len, cont = 0;
	unsigned char lead;
	size_t need;

	while (i > 0 && cont < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
		i--;
		cont++;
	}
	if (i == 0)
		return;
	lead = (unsigned char)s[i - 1];
	if (lead >= 0xF0 && lead <= 0xF4)
		need = 3;
	else if (lead >= 0xE0 && lead <= 0xEF)
		need = 2;
	else if (lead >= 0xC2 && lead <= 0xDF)
		need = 1;
	else
		need = 0;		/* ASCII, or not a lead byte */
	if (need > cont)
		s[i - 1] = '\0';
}

int
zerr_set(struct zerr *e, enum zerr_kind kind, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (e == NULL)
		return -1;
	e->kind = kind;
	va_start(ap, fmt);
	n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(e->msg))
		zerr_cut_partial(e->msg, sizeof(e->msg) - 1);
	return -1;
}

void
zerr_clear(struct zerr *e)
{
	e->kind = ZERR_NONE;
	e->msg[0] = '\0';
}

void
zerr_copy(struct zerr *dst, const struct zerr *src)
{
	size_t n = strnlen(src->msg, sizeof(src->msg) - 1);

	dst->kind = src->kind;
	memcpy(dst->msg, src->msg, n);
	dst->msg[n] = '\0';
}

unsigned
zerr_http_status(enum zerr_kind kind)
{
	switch (kind) {
	case ZERR_NONE:
		return 200;
	case ZERR_INVALID:
		return 400;
	case ZERR_UNAUTHENTICATED:
		return 401;
	case ZERR_FORBIDDEN:
		return 403;
	case ZERR_NOT_FOUND:
		return 404;
	case ZERR_METHOD:
		return 405;
	case ZERR_CONFLICT:
		return 409;
	case ZERR_BUSY:
	case ZERR_UNAVAILABLE:
		return 503;
	case ZERR_INTERNAL:
		break;
	}
	return 500;
}

enum zerr_kind
zerr_kind_from_status(unsigned status)
{
	switch (status) {
	case 200:
		return ZERR_NONE;
	case 400:
		return ZERR_INVALID;
	case 401:
		return ZERR_UNAUTHENTICATED;
	case 403:
		return ZERR_FORBIDDEN;
	case 404:
		return ZERR_NOT_FOUND;
	case 405:
		return ZERR_METHOD;
	case 409:
		return ZERR_CONFLICT;
	case 503:
		/* ZERR_UNAVAILABLE shares it; either kind gives 503 back. */
		return ZERR_BUSY;
	default:
		return ZERR_INTERNAL;
	}
}
