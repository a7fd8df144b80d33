/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err.h - the one error type of the project.
 *
 * Every fallible function takes a `struct zerr *` and, on failure, fills in
 * a kind and a human-readable message and returns -1.  The kind alone decides
 * the HTTP status (zerr_http_status); nothing else in the code base maps
 * errors to statuses.
 */
#ifndef ZEUS_ERR_H
#define ZEUS_ERR_H

#include <stddef.h>

enum zerr_kind {
	ZERR_NONE = 0,
	ZERR_INVALID,		/* bad input, unsupported operation: 400 */
	ZERR_UNAUTHENTICATED,	/* missing/bad/expired token: 401 */
	ZERR_FORBIDDEN,		/* missing scope, driver "no permission": 403 */
	ZERR_NOT_FOUND,		/* unknown path, disabled group: 404 */
	ZERR_METHOD,		/* wrong method for a known path: 405 */
	ZERR_INTERNAL,		/* daemon-side failure: 500 */
	ZERR_BUSY,		/* a device queue is full, retry later: 503 */
	ZERR_UNAVAILABLE,	/* the device is gone (GPU lost): 503 */
	ZERR_CONFLICT,		/* the GPU is leased by another user: 409 */
};

/*
 * Room for one message and the names it quotes; longer ones are cut. A
 * zerr travels inside every queued device command and every reply of the
 * device process, so it is kept small, but not below what our longest
 * messages need with ordinary paths: the unsafe-directory refusal of
 * listen.c (a directory, the socket path, the reason and the fix) is about
 * 400 bytes with 60-byte paths; only near-limit (107-byte) paths cut it.
 */
#define ZERR_MSG_MAX 512

struct zerr {
	enum zerr_kind kind;
	char msg[ZERR_MSG_MAX];
};

/*
 * Sets kind and message; always returns -1. A message too long for msg is
 * cut at the last whole UTF-8 character that fits, never inside one: it
 * ends up in JSON replies, which must be valid UTF-8.
 */
int zerr_set(struct zerr *e, enum zerr_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resets to "no error". */
void zerr_clear(struct zerr *e);

/*
 * *dst = *src, copying the message up to its end only (a merged read
 * copies its leader's error into every read that joined it: 512 bytes
 * each where the message is usually empty).
 */
void zerr_copy(struct zerr *dst, const struct zerr *src);

/* HTTP status for a kind (200 for ZERR_NONE). */
unsigned zerr_http_status(enum zerr_kind kind);

/* Kind for an HTTP status (used when aggregating per-device errors). */
enum zerr_kind zerr_kind_from_status(unsigned status);

#endif
