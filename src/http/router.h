/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.h - one canonical path decides the route, its method, its API group
 * and the scope a token needs. The same lookup serves routing and
 * authorisation, so no spelling of a path can reach a route under a weaker
 * scope. The table is not http's: the layer that has the handlers (src/api,
 * api/routes.c) makes it, and the wiring hands it to the server (ctx.h,
 * `routes`), so http names no handler.
 */
#ifndef ZEUS_ROUTER_H
#define ZEUS_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "node/groups.h"

struct request;

enum route_access {
	ROUTE_OPEN,		/* /discover, /time: never need a token */
	ROUTE_TOKEN,		/* any valid token (/auth/whoami) */
	ROUTE_SCOPE,		/* a valid token with scope == group */
};

struct route {
	const char *path;
	const char *method;		/* "GET" or "POST" */
	int group;			/* enum api_group, or -1: always on */
	enum route_access access;
	bool needs_auth_enabled;	/* exists only when auth is on */
	void (*handle)(struct request *req);
	int op;				/* handler-specific operation */
};

/* A route table: `n` routes, each path once. */
struct routes {
	const struct route *table;
	size_t n;
};

/* Looks up a canonical path in `rt`; NULL when unknown. */
const struct route *router_lookup(const struct routes *rt, const char *path);

/*
 * Canonicalises a percent-encoded request path (no query) into `out`:
 * decodes escapes, collapses repeated slashes, resolves "." and ".."
 * (never above the root), drops a trailing slash. Fails on a malformed
 * escape, an encoded NUL or a result that does not fit.
 */
int router_canonical_path(const char *raw, size_t len, char *out,
    size_t size);

#endif
