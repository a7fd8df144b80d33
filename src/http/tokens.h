/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tokens.h - a split daemon's network process's memory of the device
 * process's verdicts on bearer tokens (docs/security.md, "Privilege
 * separation").
 *
 * The network process holds no signing key: a token it has not seen is
 * sent to the device process (PSMSG_TOKEN, from the look-up pool, gate.c),
 * and the verdict is kept here so that the next request with it costs
 * nothing: a verified token's claims and handle until the token expires
 * (its exp with the leeway) or the key is reloaded; a refusal for
 * TOKENS_NEGATIVE_S, so a client repeating a bad token does not make the
 * device process verify it each time. Direct-mapped by the token's
 * SHA-256: TOKENS_SLOTS verdicts at most, a newer one taking an older
 * one's slot. Loop thread only, but for tokens_flush (any thread).
 */
#ifndef ZEUS_HTTP_TOKENS_H
#define ZEUS_HTTP_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "access/auth.h"
#include "common/err.h"

#define TOKENS_SLOTS 1024
#define TOKENS_NEGATIVE_S 2
#define TOKENS_HASH 32

struct tokens;

struct tokens *tokens_create(void);
void tokens_destroy(struct tokens *t);

void tokens_hash(const char *token, size_t len, uint8_t hash[TOKENS_HASH]);

/*
 * The verdict on the token with `hash`, if one is kept and current at
 * `now`: 1 and *c (claims, handle) when verified, 0 and *err when refused,
 * -1 when none is kept.
 */
int tokens_get(struct tokens *t, const uint8_t hash[TOKENS_HASH], time_t now,
    struct auth_claims *c, struct zerr *err);

/* Keeps a verdict: `c` when verified, else `err`. */
void tokens_put(struct tokens *t, const uint8_t hash[TOKENS_HASH], time_t now,
    const struct auth_claims *c, const struct zerr *err);

/* The key changed: every verdict kept is void. */
void tokens_flush(struct tokens *t);

#endif
