/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - JWT authentication: the signing key, token verification and
 * issuing, and the Authorization header.
 *
 * Tokens are HS256 JWTs whose claims are `sub` (the user), `scopes` (API
 * group names, groups.h) and an optional `exp`. The key is the key file's
 * bytes exactly as read. Only HS256 is accepted; the signature is checked
 * with a constant-time comparison before any claim is looked at.
 *
 * The router calls auth_parse_bearer and auth_verify on every request that
 * needs a token and decides 401 / 403 itself; `zeusd token` (token.c) uses
 * auth_sign. Every failure here is ZERR_UNAUTHENTICATED (key loading:
 * ZERR_INVALID / ZERR_INTERNAL) and no message ever echoes the token.
 * See docs/security.md for the rules and the reasons behind them.
 */
#ifndef ZEUS_AUTH_H
#define ZEUS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"
#include "node/groups.h"

#define AUTH_KEY_MAX	(64 * 1024)	/* largest key file accepted */
#define AUTH_TOKEN_MAX	8192		/* longer tokens are refused unparsed */
#define AUTH_SUB_MAX	256		/* bytes in `sub` */
#define AUTH_LEEWAY_S	60		/* clock skew allowed on exp and nbf */

/* The exact message for a token whose exp has passed (docs/security.md). */
#define AUTH_MSG_EXPIRED "Token has expired."

struct auth_key;	/* opaque: the key bytes */

struct auth_claims {
	char sub[AUTH_SUB_MAX + 1];	/* NUL-terminated, no control bytes */
	group_set scopes;
	bool has_exp;
	int64_t exp;			/* unix seconds, when has_exp */
	/*
	 * The device process's handle for the token (access/warden.h), which
	 * its writes name; 0 when verified in this process.
	 */
	uint64_t handle;
};

/*
 * Reads the key file (at most AUTH_KEY_MAX bytes, all of them the key, a
 * trailing newline included). An unreadable, empty or oversized file is an
 * error naming the path. Warns in the log when the file is world-readable.
 */
int auth_key_load(const char *path, struct auth_key **out, struct zerr *err);

/*
 * The daemon's key file: opened without blocking (a FIFO is refused, not
 * waited on) and refused unless it is a regular file owned by root or the
 * daemon's effective user and writable by no one else, since whoever can
 * write it can mint any token once it is (re)loaded. Returns an fd for
 * auth_key_load_fd, or -1 with err naming the path. `zeusd token` keeps
 * auth_key_load: it runs as its user, and may read the key from a pipe.
 */
int auth_key_open(const char *path, struct zerr *err);

/* auth_key_open, then auth_key_load_fd: how zeusd serve loads its key. */
int auth_key_load_trusted(const char *path, struct auth_key **out,
    struct zerr *err);

/*
 * The same from a file already open (read from the start; not closed):
 * the network process of a split daemon gets the key file from the device
 * process as an fd, having no right to open it.
 */
int auth_key_load_fd(int fd, const char *path, struct auth_key **out,
    struct zerr *err);

/* A key from bytes in memory (tests, fuzzing). len must be 1..AUTH_KEY_MAX. */
int auth_key_from_bytes(const void *bytes, size_t len, struct auth_key **out,
    struct zerr *err);

/* Wipes and frees; NULL is fine. */
void auth_key_free(struct auth_key *key);

/*
 * Moves `fresh`'s bytes into `key` (SIGHUP reload) and frees `fresh`; safe
 * while other threads verify or sign with `key`: each of them uses either
 * the old bytes or the new ones, never a mix, and the old bytes are wiped
 * once none can use them. Returns whether the bytes differ.
 */
bool auth_key_replace(struct auth_key *key, struct auth_key *fresh);

/*
 * Verifies `token` (len bytes, need not be NUL-terminated) against `key` at
 * time `now` and fills `out`. Fails with ZERR_UNAUTHENTICATED and a short
 * reason; an expired token says exactly AUTH_MSG_EXPIRED.
 */
int auth_verify(const struct auth_key *key, const char *token, size_t len,
    time_t now, struct auth_claims *out, struct zerr *err);

/*
 * Splits an Authorization header value "Bearer <token>" (scheme matched
 * case-insensitively, one or more spaces/tabs before the token, surrounding
 * blanks ignored). On success *token points into header_value. NULL, an
 * empty value, another scheme or a missing token are ZERR_UNAUTHENTICATED.
 */
int auth_parse_bearer(const char *header_value, const char **token,
    size_t *len, struct zerr *err);

/*
 * Makes an HS256 JWT with claims sub, scopes (names in enum order), iat (now)
 * and exp when has_exp. `sub` must pass the same rules auth_verify applies
 * (1..AUTH_SUB_MAX bytes, no control bytes), else ZERR_INVALID. *out_token
 * is malloc'd; free() it.
 */
int auth_sign(const struct auth_key *key, const char *sub, group_set scopes,
    bool has_exp, int64_t exp, char **out_token, struct zerr *err);

/* Checks a user name against the `sub` rules (for the CLI's early error). */
int auth_check_sub(const char *sub, size_t len, struct zerr *err);

/*
 * The 403 message: "User 'alice' does not have the 'gpu-control' scope
 * (token scopes: gpu-read, cpu-read)." ("none" for an empty set).
 */
void auth_format_forbidden(const struct auth_claims *c, enum api_group needed,
    char *buf, size_t size);

/*
 * {"sub": ..., "scopes": [...], "exp": N} with exp absent when the token
 * never expires: the body of /auth/whoami and of `zeusd token verify`.
 * Returns a malloc'd string (free()), NULL on allocation failure.
 */
char *auth_claims_json(const struct auth_claims *c);

#endif
