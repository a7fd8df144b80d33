/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_basic.c - /discover, /time and /auth/whoami: the endpoints that
 * need no device command.
 *
 * /discover keeps the upstream daemon's four GPU fields exactly as they
 * were and adds, after them, what zeusd learned when it opened the GPU
 * (UUID, architecture, supported operations and ranges) and whether the
 * driver reports it lost now; none of it asks the driver.
 */
#include <stdio.h>
#include <time.h>

#include "devices/rapl.h"
#include "access/auth.h"
#include "api/handlers.h"
#include "node/node.h"
#include "access/peer.h"
#include "http/query.h"
#include "http/gate.h"
#include "http/request.h"

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

/* A probed value; 0 means it could not be read. */
static json_t *
discover_u32(uint32_t v)
{
	return v != 0 ? json_integer(v) : json_null();
}

static json_t *
discover_range(uint32_t lo, uint32_t hi)
{
	return json_pack("{s:o,s:o}", "min", discover_u32(lo), "max",
	    discover_u32(hi));
}

static json_t *
discover_gpu(struct node *node, unsigned i)
{
	const struct gpu_info *g = &node->gpu_info[i];
	const struct gpu_caps *k = &g->caps;
	json_t *o;

	o = json_pack("{s:I,s:s,s:s,s:b}", "id", (json_int_t)i, "name",
	    g->name, "pci_address", g->pci_address,
	    "cumulative_energy_available", g->energy_available);
	json_object_set_new(o, "uuid", g->uuid[0] != '\0' ?
	    json_string(g->uuid) : json_null());
	json_object_set_new(o, "architecture", json_string(g->architecture));
	json_object_set_new(o, "lost", json_boolean(node_gpu_lost(node, i)));
	json_object_set_new(o, "supports", json_pack("{s:b,s:b,s:b,s:b}",
	    "power_limit", k->power_limit, "persistence_mode",
	    k->persistence_mode, "gpu_locked_clocks", k->gpu_locked_clocks,
	    "mem_locked_clocks", k->mem_locked_clocks));
	json_object_set_new(o, "power_limit_range_mw", json_pack(
	    "{s:o,s:o,s:o}", "min", discover_u32(k->limit_min_mw), "max",
	    discover_u32(k->limit_max_mw), "default",
	    discover_u32(k->limit_default_mw)));
	json_object_set_new(o, "clock_range_mhz", json_pack("{s:o,s:o}",
	    "gpu", discover_range(k->gpu_clock_min_mhz, k->gpu_clock_max_mhz),
	    "mem", discover_range(k->mem_clock_min_mhz,
	    k->mem_clock_max_mhz)));
	return o;
}

void
handle_discover(struct request *req)
{
	struct node *node = request_node(req);
	json_t *gpus = json_array(), *cpus = json_array(), *groups = json_array();

	if (handlers_no_query(req) != 0) {
		json_decref(gpus);
		json_decref(cpus);
		json_decref(groups);
		return;
	}
	for (unsigned i = 0; i < node->ngpu; i++)
		json_array_append_new(gpus, discover_gpu(node, i));
	for (unsigned i = 0; i < node->ncpu; i++)
		json_array_append_new(cpus, json_pack("{s:I,s:b}", "id",
		    (json_int_t)rapl_package_id(node->rapl, i), "dram_available",
		    rapl_has_dram(node->rapl, i)));
	for (unsigned g = 0; g < GROUP_COUNT; g++)
		if (request_config(req)->enabled & GROUP_BIT(g))
			json_array_append_new(groups,
			    json_string(group_name((enum api_group)g)));
	request_reply_json(req, 200, json_pack("{s:o,s:o,s:o,s:b}", "gpus",
	    gpus, "cpus", cpus, "enabled_api_groups", groups, "auth_required",
	    request_auth_on(req)));
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

/*
 * The devices each held scope reaches (docs/api.md): GPUs the node policy
 * grants for gpu-read and gpu-control, every package for cpu-read, none
 * for a scope not held or a group not enabled. So a client measuring
 * "what it may" (zeus measure without --gpus) asks once, not by a 403.
 */
static json_t *
whoami_devices(struct request *req, group_set held)
{
	static const enum api_group gpu_groups[] = { GROUP_GPU_READ,
	    GROUP_GPU_CONTROL };
	const struct node *node = request_node(req);
	json_t *out = json_object(), *cpus = json_array();

	for (size_t k = 0; k < sizeof(gpu_groups) / sizeof(gpu_groups[0]);
	    k++) {
		enum api_group g = gpu_groups[k];
		json_t *ids = json_array();

		for (unsigned i = 0; (held & GROUP_BIT(g)) && i < node->ngpu;
		    i++)
			if (gate_policy_grants_gpu(req, g, i))
				json_array_append_new(ids, json_integer(i));
		json_object_set_new(out, group_name(g), ids);
	}
	for (unsigned i = 0; (held & GROUP_BIT(GROUP_CPU_READ)) &&
	    i < node->ncpu; i++)
		json_array_append_new(cpus, json_integer(
		    rapl_package_id(node->rapl, i)));
	json_object_set_new(out, group_name(GROUP_CPU_READ), cpus);
	return out;
}

void
handle_whoami(struct request *req)
{
	const struct auth_claims *c = req->claims;
	const struct peer *p = request_peer(req);
	json_t *scopes = json_array(), *body;
	const char *name;
	group_set held;

	if (handlers_no_query(req) != 0) {
		json_decref(scopes);
		return;
	}
	/* a token's scopes; on the Unix socket without one, the peer's */
	held = c != NULL ? c->scopes : gate_peer_scopes(req);
	for (unsigned g = 0; g < GROUP_COUNT; g++)
		if (held & GROUP_BIT(g))
			json_array_append_new(scopes,
			    json_string(group_name((enum api_group)g)));
	body = json_pack("{s:o}", "scopes", scopes);
	if (c != NULL) {
		json_object_set_new(body, "sub", json_string(c->sub));
		if (c->has_exp)
			json_object_set_new(body, "exp", json_integer(c->exp));
	}
	/* with a token, the token is described, exactly as before */
	if (c == NULL && p != NULL && p->kind == PEER_UNIX) {
		char sub[96];

		name = gate_user_name(req);
		/* clients that read `sub` (libzeus) get the peer's name */
		if (name != NULL)
			snprintf(sub, sizeof(sub), "unix:%s", name);
		else
			snprintf(sub, sizeof(sub), "unix:uid=%u",
			    (unsigned)p->uid);
		json_object_set_new(body, "sub", json_string(sub));
		json_object_set_new(body, "uid", json_integer(p->uid));
		json_object_set_new(body, "user", name != NULL ?
		    json_string(name) : json_null());
		json_object_set_new(body, "gid", json_integer(p->gid));
		json_object_set_new(body, "pid", json_integer(p->pid));
		json_object_set_new(body, "node_policy",
		    json_boolean(request_policy_on(req)));
		json_object_set_new(body, "devices", whoami_devices(req,
		    held & request_config(req)->enabled));
	}
	request_reply_json(req, 200, body);
}
