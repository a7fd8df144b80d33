/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_stream.c - GET /gpu/stream_power and GET /cpu/stream_power.
 *
 * Parses the id list (absent: every device), checks it against the devices
 * present (400 naming the unknown and the available ones), subscribes the
 * connection and answers the never-ending SSE response
 * (request_reply_stream). The stream module does everything after that.
 */
#include "handlers.h"
#include "handlers_util.h"
#include "request.h"
#include "streams.h"

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
	request_reply_stream(req, STREAMS_GPU, ids.ids, ids.n);
}

void
handle_cpu_stream(struct request *req)
{
	struct query_values qv;
	struct id_list ids;

	if (handlers_parse(req, spec_cpu, &qv) != 0 ||
	    handlers_pick_cpus(req, &qv.v[0], &ids) != 0)
		return;
	request_reply_stream(req, STREAMS_CPU, ids.ids, ids.n);
}
