/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_gate.h - applies the authentication order of docs/security.md
 * ("How a token is checked, in order") to one request, using
 * the route the router already chose (so routing and scope can never
 * disagree). Only called when a signing key is configured.
 *
 * Called by server.c's dispatch; answers through request.h and calls
 * nothing back in server.c.
 */
#ifndef ZEUS_AUTH_GATE_H
#define ZEUS_AUTH_GATE_H

struct auth_key;
struct request;
struct route;

/*
 * Returns 0 when the request may go on (claims attached to req), or answers
 * 401 (missing/bad/expired token) or 403 (missing scope) and returns -1.
 * `r` is NULL for an unknown path, which needs any valid token. `key` is
 * the server's signing key.
 */
int auth_gate_check(struct request *req, const struct auth_key *key,
    const struct route *r);

/* Frees what auth_gate_check attached to the request. */
void auth_gate_release(struct request *req);

#endif
