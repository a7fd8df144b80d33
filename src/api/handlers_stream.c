/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_stream.c - GET /gpu/stream_power and GET /cpu/stream_power.
 *
 * Parses the id list (absent: every device), checks it against the devices
 * present (400 naming the unknown and the available ones), subscribes the
 * connection and answers the never-ending SSE response (handlers_reply_
 * stream). The stream module does everything after that.
 */
#include "api/handlers.h"

#include "api/handlers_util.h"
#include "api/streams.h"
#include "http/ctx.h"
#include "http/gate.h"
#include "http/request.h"

/*
 * Answers 200 with a never-ending Server-Sent Events body: subscribes the
 * connection to devices idx[0..n-1] of `kind` with what the gate granted
 * (streams.c re-checks it at each event and writes the events; its reader
 * suspends and resumes the connection itself and sets Content-Type and
 * Cache-Control), or answers the subscription's error.
 */
static void
handlers_reply_stream(struct request *req, enum streams_kind kind,
    const unsigned *idx, unsigned n)
{
	struct gate_grant rg;
	struct streams_grant g;
	struct MHD_Response *resp;
	struct zerr err;

	gate_grant(req, &rg);
	g = (struct streams_grant){ .until_s = rg.until_s,
	    .by_token = rg.by_token, .by_policy = rg.by_policy,
	    .group = rg.group, .pp = rg.pp };
	if (streams_subscribe(req->ctx->streams, kind, idx, n, req->conn,
	    &g, &resp, &err) != 0) {
		request_reply_error(req, &err);
		return;
	}
	request_reply_response(req, 200, resp);
}

static const struct query_spec spec_gpu[] = {
	{ "gpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };
static const struct query_spec spec_cpu[] = {
	{ "cpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };

void
handle_gpu_stream(struct request *req)
{
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_gpu, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0)
		return;
	handlers_reply_stream(req, STREAMS_GPU, ids.ids, ids.n);
}

void
handle_cpu_stream(struct request *req)
{
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_cpu, &qv) != 0 ||
	    handlers_pick_cpus(req, &qv.v[0], &ids) != 0)
		return;
	handlers_reply_stream(req, STREAMS_CPU, ids.ids, ids.n);
}
