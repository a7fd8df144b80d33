/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reply_share.c - the kept answer of reply_share.h, one per server
 * (struct http_ctx.share, made at its first use on the server's thread).
 */
#include "http/reply_share.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "http/ctx.h"
#include "http/request.h"

struct reply_share {
	struct MHD_Response *resp;	/* NULL: nothing kept */
	struct reply_key key;
};

void
reply_key_init(struct reply_key *k, enum reply_kind kind)
{
	k->len = 0;
	k->over = false;
	reply_key_add(k, (uint64_t)kind);
}

void
reply_key_add(struct reply_key *k, uint64_t v)
{
	if (k->over || sizeof(v) > sizeof(k->b) - k->len) {
		k->over = true;
		return;
	}
	memcpy(k->b + k->len, &v, sizeof(v));
	k->len += sizeof(v);
}

bool
reply_share_try(struct request *req, const struct reply_key *k)
{
	struct reply_share *s = req->ctx->share;

	if (s == NULL || s->resp == NULL || k->over || k->len != s->key.len ||
	    memcmp(k->b, s->key.b, k->len) != 0)
		return false;
	request_reply_kept(req, 200, s->resp);
	atomic_fetch_add(&req->ctx->answers_shared, 1);
	return true;
}

void
reply_share_keep(struct request *req, const struct reply_key *k,
    struct jsonw *w)
{
	struct http_ctx *ctx = req->ctx;
	struct reply_share *s = ctx->share;
	struct MHD_Response *resp;

	if (k->over || (s == NULL &&
	    (s = ctx->share = calloc(1, sizeof(*s))) == NULL)) {
		request_reply_jsonw(req, 200, w);
		return;
	}
	if ((resp = request_jsonw_response(req, w)) == NULL)
		return;		/* answered 500 */
	if (s->resp != NULL)
		MHD_destroy_response(s->resp);
	s->resp = resp;
	s->key.len = k->len;
	s->key.over = false;
	memcpy(s->key.b, k->b, k->len);
	request_reply_kept(req, 200, resp);
}

void
reply_share_free(struct reply_share *s)
{
	if (s == NULL)
		return;
	if (s->resp != NULL)
		MHD_destroy_response(s->resp);
	free(s);
}
