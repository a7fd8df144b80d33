/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_cpu.c - /cpu/get_cumulative_energy and /cpu/get_power.
 *
 * cpu_ids are RAPL package numbers (N of intel-rapl:N), not positions; they
 * are mapped to the rapl set's indices here, and each listed package gets one
 * command. Power (two reads one sampling period apart) runs on the package's
 * worker; cumulative energy (one read, nothing to order it with: RAPL has no
 * writes) runs on the shared energy reader, so it never waits behind a
 * power request's sleep. Both queues are bounded (node.h): when one is full
 * the request is answered 503 with Retry-After and nothing is queued.
 */
#include <stdlib.h>

#include "common/jsonw.h"
#include "devices/cpu_cmd.h"
#include "api/batch.h"
#include "api/handlers.h"
#include "api/handlers_util.h"
#include "node/node.h"
#include "http/reply_share.h"
#include "http/request.h"
#include "http/router.h"

static const struct query_spec spec_energy[] = {
	{ "cpu_ids", Q_IDS, false }, { "cpu", Q_BOOL, true },
	{ "dram", Q_BOOL, true }, { NULL, Q_BOOL, false } };
static const struct query_spec spec_power[] = {
	{ "cpu_ids", Q_IDS, false }, { NULL, Q_BOOL, false } };

struct cpu_batch {
	enum cpu_cmd_op op;
	bool want_cpu, want_dram;
	unsigned n;
	struct cpu_cmd cmds[];
};

/* A package's value: the number, or null when not asked for or absent. */
static void
cpu_value(struct jsonw *w, const char *key, bool want, bool have, uint64_t v)
{
	jsonw_key(w, key);
	if (want && have)
		jsonw_int(w, (int64_t)v);
	else
		jsonw_null(w);
}

static void
cpu_finish(struct request *req)
{
	const struct cpu_batch *b = req->hctx;
	const struct node *node = request_node(req);
	const bool energy = b->op == CPU_CMD_GET_ENERGY;
	struct reply_key rk;
	struct jsonw w;

	if (batch_cpu_errors(req, b->cmds, b->n))
		return;
	if (energy) {
		/* every input of the body (reply_share.h) */
		reply_key_init(&rk, REPLY_CPU_ENERGY);
		reply_key_add(&rk, b->want_cpu);
		reply_key_add(&rk, b->want_dram);
		for (unsigned i = 0; i < b->n; i++) {
			const struct cpu_cmd *c = &b->cmds[i];

			reply_key_add(&rk, rapl_package_id(node->rapl,
			    c->pkg));
			reply_key_add(&rk, c->cpu);
			reply_key_add(&rk, c->has_dram);
			reply_key_add(&rk, c->dram);
		}
		if (reply_share_try(req, &rk))
			return;
	}
	/* written, not built as a tree (common/jsonw.h) */
	jsonw_init(&w);
	jsonw_open(&w);
	if (!energy) {
		jsonw_key_int(&w, "timestamp_ms",
		    (int64_t)handlers_now_ms());
		jsonw_key(&w, "power_mw");
		jsonw_open(&w);
	}
	for (unsigned i = 0; i < b->n; i++) {
		const struct cpu_cmd *c = &b->cmds[i];

		jsonw_key_u(&w, rapl_package_id(node->rapl, c->pkg));
		jsonw_open(&w);
		if (energy) {
			cpu_value(&w, "cpu_energy_uj", b->want_cpu, true,
			    c->cpu);
			cpu_value(&w, "dram_energy_uj", b->want_dram,
			    c->has_dram, c->dram);
		} else {
			cpu_value(&w, "cpu_mw", true, true, c->cpu);
			cpu_value(&w, "dram_mw", true, c->has_dram, c->dram);
		}
		jsonw_close(&w);
	}
	jsonw_close(&w);
	if (energy) {
		reply_share_keep(req, &rk, &w);
	} else {
		jsonw_close(&w);
		request_reply_jsonw(req, 200, &w);
	}
}

static void
cpu_handle(struct request *req, enum cpu_cmd_op op)
{
	const struct query_spec *spec = op == CPU_CMD_GET_ENERGY ? spec_energy :
	    spec_power;
	struct query_values qv;
	struct cpu_batch *b;
	struct id_list ids;
	struct batch bt;

	if (handlers_parse(req, spec, &qv) != 0 ||
	    handlers_pick_cpus(req, &qv.v[0], &ids) != 0 ||
	    (b = batch_state(req, sizeof(*b) + ids.n * sizeof(b->cmds[0]),
	    free)) == NULL)
		return;
	b->op = op;
	b->n = ids.n;
	b->want_cpu = op == CPU_CMD_GET_ENERGY && qv.v[1].b;
	b->want_dram = op == CPU_CMD_GET_ENERGY && qv.v[2].b;
	batch_init(&bt, req);
	for (unsigned i = 0; i < ids.n; i++) {
		cpu_cmd_init(&b->cmds[i], op, ids.ids[i], batch_cpu_done, req);
		b->cmds[i].period_ms = 1000 /
		    request_config(req)->cpu_power_poll_hz;
		if (batch_add_cpu(&bt, &b->cmds[i]) != 0)
			return;
	}
	request_finish_answers_only(req);
	batch_run(&bt, cpu_finish);
}

void
handle_cpu_energy(struct request *req)
{
	cpu_handle(req, CPU_CMD_GET_ENERGY);
}

void
handle_cpu_power(struct request *req)
{
	cpu_handle(req, CPU_CMD_GET_POWER);
}
