/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tokens.c - the device process's verdicts on tokens, kept (tokens.h).
 */
#include "http/tokens.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

struct token_verdict {
	unsigned gen;			/* tokens' generation when kept; 0 none */
	uint8_t hash[TOKENS_HASH];
	bool ok;
	time_t until;			/* wall-clock seconds it holds to */
	struct auth_claims c;		/* ok */
	struct zerr err;		/* !ok */
};

struct tokens {
	atomic_uint gen;		/* bumped by tokens_flush; from 1 */
	struct token_verdict *v;	/* [TOKENS_SLOTS] */
};

_Static_assert(SHA256_DIGEST_SIZE == TOKENS_HASH, "hash size");

struct tokens *
tokens_create(void)
{
	struct tokens *t = calloc(1, sizeof(*t));

	if (t == NULL || (t->v = calloc(TOKENS_SLOTS, sizeof(*t->v))) == NULL) {
		free(t);
		return NULL;
	}
	atomic_init(&t->gen, 1);
	return t;
}

void
tokens_destroy(struct tokens *t)
{
	if (t == NULL)
		return;
	free(t->v);
	free(t);
}

void
tokens_hash(const char *token, size_t len, uint8_t hash[TOKENS_HASH])
{
	struct sha256_ctx h;

	sha256_init(&h);
	sha256_update(&h, len, (const uint8_t *)token);
	sha256_digest(&h, TOKENS_HASH, hash);
}

static struct token_verdict *
tokens_slot(struct tokens *t, const uint8_t hash[TOKENS_HASH])
{
	unsigned i = ((unsigned)hash[0] << 8 | hash[1]) % TOKENS_SLOTS;

	return &t->v[i];
}

int
tokens_get(struct tokens *t, const uint8_t hash[TOKENS_HASH], time_t now,
    struct auth_claims *c, struct zerr *err)
{
	const struct token_verdict *v = tokens_slot(t, hash);

	if (v->gen != atomic_load(&t->gen) || memcmp(v->hash, hash,
	    TOKENS_HASH) != 0 || now > v->until)
		return -1;
	if (!v->ok) {
		*err = v->err;
		return 0;
	}
	*c = v->c;
	return 1;
}

void
tokens_put(struct tokens *t, const uint8_t hash[TOKENS_HASH], time_t now,
    const struct auth_claims *c, const struct zerr *err)
{
	struct token_verdict *v = tokens_slot(t, hash);

	memset(v, 0, sizeof(*v));
	memcpy(v->hash, hash, TOKENS_HASH);
	v->ok = c != NULL;
	if (c != NULL) {
		v->c = *c;
		/* a token without exp holds until the key changes */
		v->until = c->has_exp ? (time_t)(c->exp + AUTH_LEEWAY_S) :
		    (time_t)INT64_MAX;
	} else {
		v->err = *err;
		v->until = now + TOKENS_NEGATIVE_S;
	}
	v->gen = atomic_load(&t->gen);
}

void
tokens_flush(struct tokens *t)
{
	atomic_fetch_add(&t->gen, 1);
}
