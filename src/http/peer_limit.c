/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_limit.c - per-peer connection counts (see peer_limit.h).
 *
 * A chained hash table of peers that hold connections; an entry lives
 * while its count is above zero, so memory follows open connections, which
 * the server's global connection limit bounds.
 */
#include "http/peer_limit.h"

#include <stdint.h>
#include <stdlib.h>

#define PEER_LIMIT_BUCKETS 1024		/* power of two */

struct peer_entry {
	struct peer_entry *next;
	struct peer peer;
	unsigned count;
};

struct peer_limit {
	unsigned max;
	unsigned peers;
	struct peer_entry *bucket[PEER_LIMIT_BUCKETS];
};

int
peer_limit_create(unsigned max, struct peer_limit **out, struct zerr *err)
{
	struct peer_limit *pl;

	if (max == 0)
		return zerr_set(err, ZERR_INVALID, "per-peer limit must be >= 1");
	if ((pl = calloc(1, sizeof(*pl))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pl->max = max;
	*out = pl;
	return 0;
}

void
peer_limit_destroy(struct peer_limit *pl)
{
	if (pl == NULL)
		return;
	for (unsigned i = 0; i < PEER_LIMIT_BUCKETS; i++) {
		struct peer_entry *e = pl->bucket[i], *next;

		for (; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(pl);
}

static struct peer_entry **
peer_limit_find(const struct peer_limit *pl, const struct peer *p)
{
	struct peer_entry *const *pp;

	pp = &pl->bucket[peer_hash(p) & (PEER_LIMIT_BUCKETS - 1)];
	while (*pp != NULL && !peer_same(&(*pp)->peer, p))
		pp = &(*pp)->next;
	return (struct peer_entry **)pp;
}

bool
peer_limit_acquire(struct peer_limit *pl, const struct peer *p)
{
	struct peer_entry **pp = peer_limit_find(pl, p);
	struct peer_entry *e = *pp;

	if (e == NULL) {
		if ((e = calloc(1, sizeof(*e))) == NULL)
			return false;
		e->peer = *p;
		*pp = e;
		pl->peers++;
	}
	if (e->count >= pl->max)
		return false;
	e->count++;
	return true;
}

void
peer_limit_release(struct peer_limit *pl, const struct peer *p)
{
	struct peer_entry **pp = peer_limit_find(pl, p);
	struct peer_entry *e = *pp;

	if (e == NULL || e->count == 0)
		return;
	if (--e->count == 0) {
		*pp = e->next;
		free(e);
		pl->peers--;
	}
}

unsigned
peer_limit_count(const struct peer_limit *pl, const struct peer *p)
{
	struct peer_entry *const *pp = peer_limit_find(pl, p);

	return *pp != NULL ? (*pp)->count : 0;
}

unsigned
peer_limit_peers(const struct peer_limit *pl)
{
	return pl->peers;
}
