/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_util.c - shared handler pieces (see handlers_util.h).
 */
#include "api/handlers_util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/rapl.h"
#include "node/node.h"
#include "http/gate.h"
#include "http/request.h"

int
handlers_parse(struct request *req, const struct query_spec *spec,
    struct query_values *qv)
{
	struct zerr err;

	if (query_parse(req->query ? req->query : "", req->query_len, spec,
	    qv, &err) != 0) {
		request_reply_error(req, &err);
		return -1;
	}
	return 0;
}

static void
handlers_format_avail(unsigned n, const uint32_t *avail, char *buf,
    size_t size)
{
	size_t o = 0;

	buf[0] = '\0';
	if (n == 0) {
		snprintf(buf, size, "none");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		int k = snprintf(buf + o, size - o, "%s%u", i ? ", " : "",
		    avail[i]);

		if (k < 0 || (size_t)k >= size - o) {
			snprintf(buf + (size > 4 ? size - 4 : 0),
			    size > 4 ? 4 : size, "...");
			return;
		}
		o += (size_t)k;
	}
}

/* avail[i] is the API id of device index i, ascending. */
static int
handlers_pick(struct request *req, const struct query_value *v,
    const uint32_t *avail, unsigned navail, const char *what,
    struct id_list *out)
{
	struct zerr err;
	char list[256];

	out->n = 0;
	if (!v->present) {
		for (unsigned i = 0; i < navail; i++)
			out->ids[out->n++] = i;
		return 0;
	}
	for (unsigned k = 0; k < v->ids->n; k++) {
		unsigned i = 0;

		while (i < navail && avail[i] != v->ids->ids[k])
			i++;
		if (i == navail) {
			handlers_format_avail(navail, avail, list, sizeof(list));
			zerr_set(&err, ZERR_INVALID,
			    "Unknown %s index %u (available: %s)", what,
			    v->ids->ids[k], list);
			request_reply_error(req, &err);
			return -1;
		}
		out->ids[out->n++] = i;
	}
	return 0;
}

int
handlers_pick_gpus(struct request *req, const struct query_value *v,
    struct id_list *out)
{
	const struct node *node = request_node(req);
	unsigned n = node->ngpu < QUERY_MAX_IDS ? node->ngpu : QUERY_MAX_IDS;
	uint32_t avail[QUERY_MAX_IDS];

	for (unsigned i = 0; i < n; i++)
		avail[i] = i;
	if (handlers_pick(req, v, avail, n, "GPU", out) != 0)
		return -1;
	return gate_check_gpus(req, out->ids, out->n);
}

int
handlers_pick_cpus(struct request *req, const struct query_value *v,
    struct id_list *out)
{
	const struct node *node = request_node(req);
	unsigned n = node->ncpu < QUERY_MAX_IDS ? node->ncpu : QUERY_MAX_IDS;
	uint32_t avail[QUERY_MAX_IDS];

	for (unsigned i = 0; i < n; i++)
		avail[i] = rapl_package_id(node->rapl, i);
	return handlers_pick(req, v, avail, n, "CPU", out);
}

int
handlers_gpu_lacks(struct request *req, const char *op, const char *lacks)
{
	struct zerr err;

	if (lacks == NULL)
		return 0;
	/* a sentence (it has a space) says why; else it names a symbol */
	if (strchr(lacks, ' ') != NULL)
		zerr_set(&err, ZERR_INVALID, "%s is not supported: %s", op,
		    lacks);
	else if (strncmp(lacks, "amdsmi_", 7) == 0)
		zerr_set(&err, ZERR_INVALID, "%s is not supported by this AMD "
		    "SMI library (it lacks %s)", op, lacks);
	else
		zerr_set(&err, ZERR_INVALID, "%s is not supported by this "
		    "NVIDIA driver (NVML lacks %s)", op, lacks);
	request_reply_error(req, &err);
	return -1;
}

void
handlers_errors_init(struct handlers_errors *agg)
{
	agg->map = NULL;
	agg->worst = 0;
}

void
handlers_errors_add(struct handlers_errors *agg, uint32_t id,
    const struct zerr *err)
{
	unsigned status = zerr_http_status(err->kind);
	char key[16];

	if (status < 400)
		status = 500;
	if (agg->map == NULL)
		agg->map = json_object();
	snprintf(key, sizeof(key), "%u", id);
	json_object_set_new(agg->map, key, json_string(err->msg));
	if (status > agg->worst)
		agg->worst = status;
}

int
handlers_errors_reply(struct request *req, struct handlers_errors *agg)
{
	if (agg->map == NULL)
		return 0;
	request_reply_json(req, agg->worst, json_pack("{s:o}", "errors",
	    agg->map));
	agg->map = NULL;
	return 1;
}

void
handlers_reply_oom(struct request *req)
{
	struct zerr err;

	zerr_set(&err, ZERR_INTERNAL, "out of memory");
	request_reply_error(req, &err);
}

int64_t
handlers_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
