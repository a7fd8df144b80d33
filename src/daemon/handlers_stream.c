/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_stream.c - GET /gpu/stream_power and GET /cpu/stream_power.
 *
 * Parses the id list (absent: every device), checks it against the devices
 * present (400 naming the unknown and the available ones), subscribes the
 * connection through streams.h and queues the never-ending SSE response.
 * The stream module does everything after that.
 */
#include <assert.h>

#include <microhttpd.h>

#include "handlers.h"
#include "handlers_util.h"
#include "node.h"
#include "request.h"
#include "server.h"
#include "streams.h"


static const struct query_spec spec_gpu[] = {
	{ "gpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };
static const struct query_spec spec_cpu[] = {
	{ "cpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };

static void
stream_start(struct request *req, enum streams_kind kind,
    const unsigned *idx, unsigned n)
{
	struct MHD_Response *resp;
	struct zerr err;

	if (streams_subscribe(req->srv->streams, kind, idx, n, req->conn,
	    &resp, &err) != 0) {
		request_reply_error(req, &err);
		return;
	}
	assert(req->phase == REQ_NEW);	/* as request_reply_* */
	req->status = 200;
	req->phase = REQ_ANSWERED;
	(void)MHD_queue_response(req->conn, 200, resp);
	MHD_destroy_response(resp);
}

void
handle_gpu_stream(struct request *req)
{
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_gpu, &qv) != 0 ||
	    handlers_pick_gpus(req, &qv.v[0], &ids) != 0)
		return;
	stream_start(req, STREAMS_GPU, ids.ids, ids.n);
}

void
handle_cpu_stream(struct request *req)
{
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_cpu, &qv) != 0 ||
	    handlers_pick_cpus(req, &qv.v[0], &ids) != 0)
		return;
	stream_start(req, STREAMS_CPU, ids.ids, ids.n);
}
