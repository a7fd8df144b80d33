/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_gate.c - bearer token -> claims -> scope decision (see auth_gate.h).
 */
#include "auth_gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "auth.h"
#include "request.h"
#include "router.h"

int
auth_gate_check(struct request *req, const struct auth_key *key,
    const struct route *r)
{
	struct auth_claims *claims;
	const char *hdr, *token;
	size_t len;
	struct zerr err;
	char msg[512];

	hdr = request_header(req, "Authorization");
	if (hdr == NULL) {
		zerr_set(&err, ZERR_UNAUTHENTICATED,
		    "Missing Authorization: Bearer token.");
		request_reply_unauthorized(req, &err);
		return -1;
	}
	if (auth_parse_bearer(hdr, &token, &len, &err) != 0) {
		request_reply_unauthorized(req, &err);
		return -1;
	}
	if ((claims = calloc(1, sizeof(*claims))) == NULL) {
		zerr_set(&err, ZERR_INTERNAL, "out of memory");
		request_reply_error(req, &err);
		return -1;
	}
	if (auth_verify(key, token, len, time(NULL), claims,
	    &err) != 0) {
		free(claims);
		request_reply_unauthorized(req, &err);
		return -1;
	}
	req->claims = claims;
	if (r != NULL && r->access == ROUTE_SCOPE &&
	    !(claims->scopes & GROUP_BIT(r->group))) {
		auth_format_forbidden(claims, (enum api_group)r->group, msg,
		    sizeof(msg));
		zerr_set(&err, ZERR_FORBIDDEN, "%s", msg);
		request_reply_error(req, &err);
		return -1;
	}
	return 0;
}

void
auth_gate_release(struct request *req)
{
	free((void *)req->claims);
	req->claims = NULL;
}
