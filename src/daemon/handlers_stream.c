/*
 * handlers_stream.c - GET /gpu/stream_power and GET /cpu/stream_power.
 *
 * Parses the id list (absent: every device), checks it against the devices
 * present (400 naming the unknown and the available ones), subscribes the
 * connection through streams.h and queues the never-ending SSE response.
 * The stream module does everything after that.
 */
#include <microhttpd.h>

#include "handlers.h"
#include "handlers_util.h"
#include "node.h"
#include "request.h"
#include "server.h"
#include "streams.h"

#include "../devices/rapl.h"

static const struct query_spec spec_gpu[] = {
	{ "gpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };
static const struct query_spec spec_cpu[] = {
	{ "cpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };

/*
 * Maps the requested ids (API ids, sorted) to device indices; absent means
 * all. `avail[i]` is the API id of device index i. Answers 400 itself.
 */
static int
stream_pick(struct request *req, const struct query_values *qv,
    const uint32_t *avail, unsigned navail, const char *what,
    unsigned *idx, unsigned *n)
{
	const struct id_list *ids = qv->v[0].ids;
	struct zerr err;

	*n = 0;
	if (!qv->v[0].present) {
		for (unsigned i = 0; i < navail; i++)
			idx[(*n)++] = i;
		return 0;
	}
	if (handlers_check_ids(ids, navail, avail, what, &err) != 0) {
		request_reply_error(req, &err);
		return -1;
	}
	for (unsigned k = 0; k < ids->n; k++)
		for (unsigned i = 0; i < navail; i++)
			if (avail[i] == ids->ids[k])
				idx[(*n)++] = i;
	return 0;
}

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
	req->status = 200;
	req->phase = REQ_ANSWERED;
	(void)MHD_queue_response(req->conn, 200, resp);
	MHD_destroy_response(resp);
}

void
handle_gpu_stream(struct request *req)
{
	const struct node *node = req->srv->node;
	unsigned navail = node->ngpu < QUERY_MAX_IDS ? node->ngpu :
	    QUERY_MAX_IDS;
	uint32_t avail[QUERY_MAX_IDS];
	unsigned idx[QUERY_MAX_IDS], n;
	struct query_values qv;

	if (handlers_parse(req, spec_gpu, &qv) != 0)
		return;
	for (unsigned i = 0; i < navail; i++)
		avail[i] = i;
	if (stream_pick(req, &qv, avail, navail, "GPU", idx, &n) != 0)
		return;
	stream_start(req, STREAMS_GPU, idx, n);
}

void
handle_cpu_stream(struct request *req)
{
	const struct node *node = req->srv->node;
	unsigned navail = node->ncpu < QUERY_MAX_IDS ? node->ncpu :
	    QUERY_MAX_IDS;
	uint32_t avail[QUERY_MAX_IDS];
	unsigned idx[QUERY_MAX_IDS], n;
	struct query_values qv;

	if (handlers_parse(req, spec_cpu, &qv) != 0)
		return;
	for (unsigned i = 0; i < navail; i++)
		avail[i] = rapl_package_id(node->rapl, i);
	if (stream_pick(req, &qv, avail, navail, "CPU", idx, &n) != 0)
		return;
	stream_start(req, STREAMS_CPU, idx, n);
}
