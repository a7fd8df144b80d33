/*
 * handlers_basic.c - /discover, /time and /auth/whoami: the endpoints that
 * need no device command.
 */
#include <time.h>

#include "../devices/rapl.h"
#include "auth.h"
#include "handlers.h"
#include "node.h"
#include "query.h"
#include "request.h"
#include "server.h"

static const struct query_spec no_params[] = { { NULL, Q_BOOL, false } };

/* Every endpoint refuses unknown query parameters, these included. */
static int
handlers_no_query(struct request *req)
{
	struct query_values qv;
	struct zerr err;

	if (query_parse(req->query ? req->query : "", req->query_len,
	    no_params, &qv, &err) != 0) {
		request_reply_error(req, &err);
		return -1;
	}
	return 0;
}

void
handle_discover(struct request *req)
{
	const struct node *node = req->srv->node;
	json_t *gpus = json_array(), *cpus = json_array(), *groups = json_array();

	if (handlers_no_query(req) != 0) {
		json_decref(gpus);
		json_decref(cpus);
		json_decref(groups);
		return;
	}
	for (unsigned i = 0; i < node->ngpu; i++)
		json_array_append_new(gpus, json_pack("{s:I,s:s,s:s,s:b}",
		    "id", (json_int_t)i, "name", node->gpu_info[i].name,
		    "pci_address", node->gpu_info[i].pci_address,
		    "cumulative_energy_available",
		    node->gpu_info[i].energy_available));
	for (unsigned i = 0; i < node->ncpu; i++)
		json_array_append_new(cpus, json_pack("{s:I,s:b}", "id",
		    (json_int_t)rapl_package_id(node->rapl, i), "dram_available",
		    rapl_has_dram(node->rapl, i)));
	for (unsigned g = 0; g < GROUP_COUNT; g++)
		if (req->srv->cfg->enabled & GROUP_BIT(g))
			json_array_append_new(groups,
			    json_string(group_name((enum api_group)g)));
	request_reply_json(req, 200, json_pack("{s:o,s:o,s:o,s:b}", "gpus",
	    gpus, "cpus", cpus, "enabled_api_groups", groups, "auth_required",
	    req->srv->key != NULL));
}

void
handle_time(struct request *req)
{
	struct timespec ts;

	if (handlers_no_query(req) != 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	request_reply_json(req, 200, json_pack("{s:I}", "timestamp_ms",
	    (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
}

void
handle_whoami(struct request *req)
{
	const struct auth_claims *c = req->claims;
	json_t *scopes = json_array(), *body;

	if (handlers_no_query(req) != 0) {
		json_decref(scopes);
		return;
	}
	for (unsigned g = 0; g < GROUP_COUNT; g++)
		if (c->scopes & GROUP_BIT(g))
			json_array_append_new(scopes,
			    json_string(group_name((enum api_group)g)));
	body = json_pack("{s:s,s:o}", "sub", c->sub, "scopes", scopes);
	if (c->has_exp)
		json_object_set_new(body, "exp", json_integer(c->exp));
	request_reply_json(req, 200, body);
}
