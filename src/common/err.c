/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err.c - the error type and the single kind -> HTTP status mapping.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int
zerr_set(struct zerr *e, enum zerr_kind kind, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return -1;
	e->kind = kind;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void
zerr_clear(struct zerr *e)
{
	e->kind = ZERR_NONE;
	e->msg[0] = '\0';
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
