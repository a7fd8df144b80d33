/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_metrics.c - GET /metrics: the node's devices and the daemon's own
 * health in the Prometheus text exposition format (version 0.0.4).
 *
 * A scrape reads the devices like any request: one snapshot command per GPU
 * and one energy read per RAPL package, queued on their workers, so a scrape
 * never blocks the event loop. A snapshot depends on no setting, so it goes
 * ahead of queued writes (it waits for at most the command running): a
 * scrape is a sample and keeps no read-after-write order with block=false
 * writes. Like any request it is refused with 503 when a queue it needs is
 * full. A device field that cannot be read is left out of that scrape (and
 * counted in zeusd_device_command_errors_total when the whole command
 * failed).
 */
#include <assert.h>
#include <limits.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fileio.h"
#include "common/membuf.h"
#include "common/procstat.h"
#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "access/audit.h"
#include "api/batch.h"
#include "http/deadline.h"
#include "api/handlers.h"
#include "api/handlers_util.h"
#include "node/node.h"
#include "http/gate.h"
#include "common/pool.h"
#include "http/request.h"
#include "http/server.h"
#include "http/stats.h"
#include "api/streams.h"
#include "privsep/msg.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * The energy ledger as the device process keeps it (--gpu-leases): each
 * GPU's unleased energy (PSMSG_LEASES) and the users' series
 * (PSMSG_LEDGER, a page at a time). On the heap: the replies are large.
 */
struct metrics_ledger {
	bool ok;			/* read whole */
	struct psmsg_leases_reply leases;
	struct psmsg_ledger_reply page;	/* the one being read */
	unsigned nusers;
	struct psmsg_ledger_user *users;	/* [nusers], in their order */
};

/*
 * One block: the GPU commands, then the CPU ones right after them, then
 * which GPUs the scrape may show (the node policy's grants of `metrics`).
 */
struct metrics_scrape {
	/*
	 * The device process's figures (node_procstat: a round trip) and its
	 * energy ledger (`ledger`, NULL without --gpu-leases), read on the
	 * look-up pool, not on the loop; `dev.ok` and `ledger->ok` stay 0
	 * when not.
	 */
	struct pool_job job;
	struct request *req;
	struct node *node;
	struct procstat dev, net;
	struct node_audit dev_audit;	/* the device process's audit log */
	struct metrics_ledger *ledger;
	unsigned ngpu, ncpu;
	struct cpu_cmd *cpu;		/* [ncpu], at gpu + ngpu */
	bool *shown;			/* [ngpu], at cpu + ncpu */
	struct gpu_cmd gpu[];		/* [ngpu] */
};

/* gpu + ngpu is aligned for a gpu_cmd, hence for a cpu_cmd too. */
static_assert(alignof(struct cpu_cmd) <= alignof(struct gpu_cmd),
    "struct metrics_scrape places cpu_cmds after gpu_cmds");

/* Writes a label value with \, " and newline escaped, as the format asks. */
static void
metrics_label(FILE *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', out);
		if (*s == '\n') {
			fputs("\\n", out);
			continue;
		}
		fputc(*s, out);
	}
}

static void
metrics_head(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A series of one unlabelled sample: its head and its value. */
static void
metrics_one(FILE *out, const char *name, const char *type, const char *help,
    unsigned long long v)
{
	metrics_head(out, name, type, help);
	fprintf(out, "%s %llu\n", name, v);
}

enum metrics_gpu_field {
	MF_POWER, MF_ENERGY, MF_LIMIT, MF_LIMIT_MIN, MF_LIMIT_MAX, MF_PERSISTENCE
};

static const struct {
	enum metrics_gpu_field field;
	unsigned bit;			/* GPU_SNAP_* the value needs */
	const char *name, *type, *help;
} metrics_gpu_families[] = {
	{ MF_POWER, GPU_SNAP_POWER, "zeusd_gpu_power_watts", "gauge",
	    "Instantaneous GPU power draw." },
	{ MF_ENERGY, GPU_SNAP_ENERGY, "zeusd_gpu_energy_joules_total",
	    "counter", "GPU energy since the driver was loaded." },
	{ MF_LIMIT, GPU_SNAP_LIMIT, "zeusd_gpu_power_limit_watts", "gauge",
	    "GPU power limit." },
	{ MF_LIMIT_MIN, GPU_SNAP_CONSTRAINTS, "zeusd_gpu_power_limit_min_watts",
	    "gauge", "Lowest power limit the GPU accepts." },
	{ MF_LIMIT_MAX, GPU_SNAP_CONSTRAINTS, "zeusd_gpu_power_limit_max_watts",
	    "gauge", "Highest power limit the GPU accepts." },
	{ MF_PERSISTENCE, GPU_SNAP_PERSISTENCE, "zeusd_gpu_persistence_mode",
	    "gauge", "1 when persistence mode is on." },
};

static double
metrics_gpu_value(const struct gpu_snapshot *s, enum metrics_gpu_field f)
{
	switch (f) {
	case MF_POWER:
		return s->power_mw / 1e3;
	case MF_ENERGY:
		return (double)s->energy_mj / 1e3;
	case MF_LIMIT:
		return s->limit_mw / 1e3;
	case MF_LIMIT_MIN:
		return s->min_mw / 1e3;
	case MF_LIMIT_MAX:
		return s->max_mw / 1e3;
	case MF_PERSISTENCE:
		break;
	}
	return s->persistence ? 1 : 0;
}

static void
metrics_gpus(FILE *out, const struct node *node,
    const struct metrics_scrape *m)
{
	metrics_head(out, "zeusd_gpu_info", "gauge",
	    "GPU identity; the value is always 1.");
	for (unsigned i = 0; i < node->ngpu; i++) {
		if (!m->shown[i])
			continue;
		fprintf(out, "zeusd_gpu_info{index=\"%u\",name=\"", i);
		metrics_label(out, node->gpu_info[i].name);
		fprintf(out, "\",pci_address=\"");
		metrics_label(out, node->gpu_info[i].pci_address);
		/*
		 * The UUID twice: `uuid` in our own style, and `UUID`, the
		 * name dcgm-exporter gives it, so series join on(UUID)
		 * without a label_replace.
		 */
		fprintf(out, "\",uuid=\"");
		metrics_label(out, node->gpu_info[i].uuid);
		fprintf(out, "\",UUID=\"");
		metrics_label(out, node->gpu_info[i].uuid);
		fprintf(out, "\",cumulative_energy_available=\"%s\"} 1\n",
		    node->gpu_info[i].energy_available ? "true" : "false");
	}
	metrics_head(out, "zeusd_gpu_lost", "gauge",
	    "1 while the driver reports the GPU lost (fallen off the bus).");
	for (unsigned i = 0; i < node->ngpu; i++)
		if (m->shown[i])
			fprintf(out, "zeusd_gpu_lost{index=\"%u\"} %d\n", i,
			    node_gpu_lost(node, i) ? 1 : 0);
	for (size_t f = 0; f < sizeof(metrics_gpu_families) /
	    sizeof(metrics_gpu_families[0]); f++) {
		const char *name = metrics_gpu_families[f].name;

		metrics_head(out, name, metrics_gpu_families[f].type,
		    metrics_gpu_families[f].help);
		for (unsigned i = 0; i < m->ngpu; i++) {
			const struct gpu_snapshot *s = &m->gpu[i].out.snap;

			if (!m->shown[i] || m->gpu[i].rc != 0 ||
			    !(s->ok & metrics_gpu_families[f].bit))
				continue;
			fprintf(out, "%s{index=\"%u\"} %.3f\n", name, i,
			    metrics_gpu_value(s, metrics_gpu_families[f].field));
		}
	}
}

/*
 * The look-up pool: the device process's energy ledger, its unleased
 * energy per GPU, then its users a page at a time, in their order. Left
 * out of the scrape (ok false) when any call fails.
 */
static void
metrics_ledger_read(struct node *node, struct metrics_ledger *l)
{
	struct psmsg_ledger_user *more;
	struct zerr err;
	uint32_t first = 0;

	if (node_leases(node, &l->leases, &err) != 0)
		return;
	do {
		if (node_ledger(node, first, &l->page, &err) != 0)
			return;
		/* the reply check kept [first, first + n) within nusers */
		if (l->page.n == 0)
			break;
		if ((more = realloc(l->users, (l->nusers + l->page.n) *
		    sizeof(*l->users))) == NULL)
			return;
		l->users = more;
		memcpy(&l->users[l->nusers], l->page.u, l->page.n *
		    sizeof(*l->users));
		l->nusers += l->page.n;
		first += l->page.n;
	} while (first < l->page.nusers);
	l->ok = true;
}

/*
 * The energy ledger (docs/metrics.md): joules charged to each user's
 * leases and to nobody, per GPU, as the device process counted them when
 * this scrape asked.
 */
static void
metrics_ledger(FILE *out, const struct metrics_scrape *m)
{
	const struct metrics_ledger *l = m->ledger;

	if (l == NULL || m->ngpu == 0)
		return;
	metrics_head(out, "zeusd_gpu_lease_energy_joules_total", "counter",
	    "GPU energy charged to a user's leases (--gpu-leases), ended "
	    "and open.");
	for (unsigned u = 0; l->ok && u < l->nusers; u++) {
		const struct psmsg_ledger_user *lu = &l->users[u];

		for (unsigned i = 0; i < m->ngpu; i++) {
			if (!m->shown[i])
				continue;
			fprintf(out, "zeusd_gpu_lease_energy_joules_total"
			    "{index=\"%u\",user=\"", i);
			if (lu->user[0] != '\0')
				metrics_label(out, lu->user);
			else if (lu->uid == UINT32_MAX)
				fputs("(other)", out);
			else
				fprintf(out, "%u", (unsigned)lu->uid);
			fprintf(out, "\"} %.3f\n", (double)lu->mj[i] / 1000);
		}
	}
	metrics_head(out, "zeusd_gpu_unleased_energy_joules_total", "counter",
	    "GPU energy while no lease ran on the GPU, since the ledger's "
	    "first reading.");
	for (unsigned i = 0; l->ok && i < m->ngpu; i++)
		if (m->shown[i] && (l->leases.unleased_ok >> i & 1))
			fprintf(out, "zeusd_gpu_unleased_energy_joules_total"
			    "{index=\"%u\"} %.3f\n", i,
			    (double)l->leases.unleased_mj[i] / 1000);
}

static void
metrics_cpus(FILE *out, const struct node *node,
    const struct metrics_scrape *m)
{
	metrics_head(out, "zeusd_cpu_energy_joules_total", "counter",
	    "CPU package energy (RAPL, wrap-compensated).");
	for (unsigned i = 0; i < m->ncpu; i++)
		if (m->cpu[i].rc == 0)
			fprintf(out, "zeusd_cpu_energy_joules_total{index=\"%u\"} "
			    "%.6f\n", rapl_package_id(node->rapl, i),
			    (double)m->cpu[i].cpu / 1e6);
	metrics_head(out, "zeusd_dram_energy_joules_total", "counter",
	    "DRAM energy of a CPU package (RAPL, wrap-compensated).");
	for (unsigned i = 0; i < m->ncpu; i++)
		if (m->cpu[i].rc == 0 && m->cpu[i].has_dram)
			fprintf(out, "zeusd_dram_energy_joules_total{index=\"%u\"} "
			    "%.6f\n", rapl_package_id(node->rapl, i),
			    (double)m->cpu[i].dram / 1e6);
}

static unsigned long
metrics_commands(const struct work_counters *c)
{
	return atomic_load(&c->commands);
}

static unsigned long
metrics_failures(const struct work_counters *c)
{
	return atomic_load(&c->failures);
}

static unsigned long
metrics_superseded(const struct work_counters *c)
{
	return atomic_load(&c->superseded);
}

static unsigned long
metrics_merged(const struct work_counters *c)
{
	return atomic_load(&c->merged);
}

/* One counter per device (GPUs shown, then RAPL packages). */
static void
metrics_device_series(FILE *out, const struct node *node, const bool *shown,
    const char *name, const char *help,
    unsigned long (*value)(const struct work_counters *))
{
	metrics_head(out, name, "counter", help);
	for (unsigned i = 0; i < node->ngpu; i++)
		if (shown[i])
			fprintf(out, "%s{device=\"gpu\",index=\"%u\"} %lu\n",
			    name, i, value(&node->gpu_counters[i]));
	for (unsigned i = 0; i < node->ncpu; i++)
		fprintf(out, "%s{device=\"cpu\",index=\"%u\"} %lu\n", name,
		    rapl_package_id(node->rapl, i),
		    value(&node->cpu_counters[i]));
}

static void
metrics_workers(FILE *out, const struct node *node, const bool *shown)
{
	metrics_device_series(out, node, shown, "zeusd_device_commands_total",
	    "Device commands run for each device.", metrics_commands);
	metrics_device_series(out, node, shown,
	    "zeusd_device_command_errors_total",
	    "Device commands that failed.", metrics_failures);
	metrics_device_series(out, node, shown,
	    "zeusd_device_commands_superseded_total",
	    "Queued block=false writes replaced by a newer write before they "
	    "ran.", metrics_superseded);
	metrics_device_series(out, node, shown,
	    "zeusd_device_commands_merged_total",
	    "Reads answered by a queued read of the same value they joined.",
	    metrics_merged);
}

/*
 * The process_* families every Prometheus exporter exposes, so the usual
 * dashboards and alerts for exporters work on zeusd too. They are read from
 * /proc/self at each scrape; a value that cannot be read or parsed is left
 * out of that scrape (HELP and TYPE stay), as a device field is.
 */
/* The process_* families of one process (procstat.h). */
static void
metrics_process(FILE *out, const struct procstat *p)
{
	metrics_head(out, "process_start_time_seconds", "gauge",
	    "Start time of the process since the Unix epoch, in seconds.");
	if (p->ok & PROCSTAT_STAT)
		fprintf(out, "process_start_time_seconds %.2f\n",
		    (double)p->start_ms / 1000);
	metrics_head(out, "process_cpu_seconds_total", "counter",
	    "User and system CPU time spent, in seconds.");
	if (p->ok & PROCSTAT_STAT)
		fprintf(out, "process_cpu_seconds_total %.2f\n",
		    (double)p->cpu_ms / 1000);
	metrics_head(out, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.");
	if (p->ok & PROCSTAT_STAT)
		fprintf(out, "process_resident_memory_bytes %llu\n",
		    (unsigned long long)p->rss_bytes);
	metrics_head(out, "process_virtual_memory_bytes", "gauge",
	    "Virtual memory size in bytes.");
	if (p->ok & PROCSTAT_STAT)
		fprintf(out, "process_virtual_memory_bytes %llu\n",
		    (unsigned long long)p->vsize_bytes);
	metrics_head(out, "process_open_fds", "gauge",
	    "Number of open file descriptors.");
	if (p->ok & PROCSTAT_FDS)
		fprintf(out, "process_open_fds %llu\n",
		    (unsigned long long)p->open_fds);
	metrics_head(out, "process_max_fds", "gauge",
	    "Maximum number of open file descriptors (soft limit).");
	if (p->ok & PROCSTAT_MAX_FDS)
		fprintf(out, "process_max_fds %llu\n",
		    (unsigned long long)p->max_fds);
}

/*
 * process_* describe the process that serves /metrics, as Prometheus's
 * client libraries do: with privilege separation, the network process
 * (connections, streams and request memory are there). The device process
 * (the main PID, root) follows as zeusd_device_process_*, asked over a
 * channel: it has a /proc/self of its own.
 */
/* The look-up pool: the device process's figures, and our descriptors. */
static void
metrics_proc_run(struct pool_job *job)
{
	struct metrics_scrape *m = (struct metrics_scrape *)job;

	node_procstat(m->node, &m->dev, &m->net, &m->dev_audit);
	if (m->ledger != NULL)
		metrics_ledger_read(m->node, m->ledger);
	request_complete_one(m->req);
}

static void
metrics_processes(FILE *out, struct node *node,
    const struct metrics_scrape *m)
{
	struct procstat self;
	const struct procstat *dev = &m->dev;

	procstat_self(&self);
	if (m->net.ok & PROCSTAT_FDS) {
		/* the device process counts our descriptors */
		self.open_fds = m->net.open_fds;
		self.ok |= PROCSTAT_FDS;
	}
	metrics_process(out, &self);
	if (!node->device_apart)	/* zeusd.exe: these are the process's */
		return;
	metrics_head(out, "zeusd_device_process_cpu_seconds_total", "counter",
	    "User and system CPU time of the device process (privilege "
	    "separation), in seconds.");
	if (dev->ok & PROCSTAT_STAT)
		fprintf(out, "zeusd_device_process_cpu_seconds_total %.2f\n",
		    (double)dev->cpu_ms / 1000);
	metrics_head(out, "zeusd_device_process_resident_memory_bytes",
	    "gauge", "Resident memory of the device process, in bytes.");
	if (dev->ok & PROCSTAT_STAT)
		fprintf(out, "zeusd_device_process_resident_memory_bytes "
		    "%llu\n", (unsigned long long)dev->rss_bytes);
	metrics_head(out, "zeusd_device_process_open_fds", "gauge",
	    "Open file descriptors of the device process.");
	if (dev->ok & PROCSTAT_FDS)
		fprintf(out, "zeusd_device_process_open_fds %llu\n",
		    (unsigned long long)dev->open_fds);
}

static void
metrics_daemon(FILE *out, struct server *srv, const struct metrics_scrape *m)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	metrics_head(out, "zeusd_build_info", "gauge",
	    "zeusd version; the value is always 1.");
	fprintf(out, "zeusd_build_info{version=\"%s\"} 1\n", ZEUS_VERSION);
	metrics_head(out, "zeusd_uptime_seconds", "gauge",
	    "Seconds since the daemon started serving.");
	fprintf(out, "zeusd_uptime_seconds %.3f\n",
	    (double)(now.tv_sec - srv->started.tv_sec) +
	    (now.tv_nsec - srv->started.tv_nsec) / 1e9);
	metrics_processes(out, srv->ctx.node, m);
	metrics_one(out, "zeusd_streams_open", "gauge",
	    "Open power streams (SSE subscribers).",
	    srv->ctx.streams ? streams_subscribers(srv->ctx.streams) : 0);
	metrics_head(out, "zeusd_stream_events_skipped_total", "counter",
	    "Stream events skipped because their reader did not keep up "
	    "(docs/streams.md).");
	fprintf(out, "zeusd_stream_events_skipped_total{kind=\"gpu\"} %llu\n"
	    "zeusd_stream_events_skipped_total{kind=\"cpu\"} %llu\n",
	    (unsigned long long)streams_skipped_total(srv->ctx.streams, STREAMS_GPU),
	    (unsigned long long)streams_skipped_total(srv->ctx.streams,
	    STREAMS_CPU));
	metrics_one(out, "zeusd_connections_refused_total", "counter",
	    "Connections refused at accept time: the peer held its "
	    "ZEUSD_MAX_CONNS_PER_PEER connections, or the connection limit "
	    "(16384, less under a low descriptor limit) was reached.",
	    atomic_load(&srv->conns_refused));
	/* a split daemon's device process writes the lines of what it runs */
	metrics_one(out, "zeusd_audit_write_failures_total", "counter",
	    "Audit log lines (--audit-log) that could not be written.",
	    (unsigned long long)audit_failures() + (m->dev_audit.ok ?
	    m->dev_audit.failures : 0));
	metrics_one(out, "zeusd_audit_writable", "gauge",
	    "1 while audit lines can be written (or there is no audit "
	    "log), 0 since a line or its reserved room could not be.",
	    audit_down_now() || (m->dev_audit.ok && m->dev_audit.down) ? 0 : 1);
	metrics_one(out, "zeusd_audit_required_refusals_total", "counter",
	    "GPU writes refused (503) by --audit-required because the "
	    "audit log could not be written.",
	    (unsigned long long)audit_refused_writes() + (m->dev_audit.ok ?
	    m->dev_audit.refused : 0));
	metrics_one(out, "zeusd_request_deadline_expired_total", "counter",
	    "Connections closed because no whole request arrived within "
	    "ZEUSD_REQUEST_TIMEOUT_S.", srv->deadlines != NULL ?
	    deadline_expired_total(srv->deadlines) : 0);
	metrics_one(out, "zeusd_requests_malformed_total", "counter",
	    "Requests refused for ambiguous framing (duplicate or conflicting "
	    "Content-Length/Transfer-Encoding, several Authorization headers).",
	    atomic_load(&srv->ctx.requests_refused));
	metrics_one(out, "zeusd_answers_shared_total", "counter",
	    "Requests answered with the response (the same body) of the "
	    "request before them from the same merged reads.",
	    atomic_load(&srv->ctx.answers_shared));
	metrics_one(out, "zeusd_requests_waited_unsuspended_total", "counter",
	    "Device requests that waited for their commands unsuspended, "
	    "many requests waiting at once.",
	    atomic_load(&srv->ctx.waited_on_loop));
	metrics_one(out, "zeusd_requests_orphaned_total", "counter",
	    "Device requests whose client left while they waited "
	    "unsuspended; their commands ran, their answer was dropped.",
	    atomic_load(&srv->ctx.orphaned));
	stats_write(&srv->stats, srv->ctx.routes, out);
}

static void
metrics_scrape_free(void *hctx)
{
	struct metrics_scrape *m = hctx;

	if (m->ledger != NULL)
		free(m->ledger->users);
	free(m->ledger);
	free(m);
}

static void
metrics_finish(struct request *req)
{
	struct metrics_scrape *m = req->hctx;
	struct server *srv = req->ctx->server;
	struct membuf mb;
	char *text = NULL;
	size_t len = 0;
	FILE *out = membuf_open(&mb);

	if (out == NULL) {
		handlers_reply_oom(req);
		return;
	}
	metrics_gpus(out, srv->ctx.node, m);
	metrics_ledger(out, m);
	metrics_cpus(out, srv->ctx.node, m);
	metrics_workers(out, srv->ctx.node, m->shown);
	metrics_daemon(out, srv, m);
	if (membuf_close(&mb, &text, &len) != 0) {
		handlers_reply_oom(req);
		return;
	}
	request_reply_text(req, 200, METRICS_CONTENT_TYPE, text, len);
}

void
handle_metrics(struct request *req)
{
	static const struct query_spec none[] = { { NULL, Q_BOOL, false } };
	const struct node *node = req->ctx->node;
	struct metrics_scrape *m;
	struct query_values qv;
	struct batch bt;

	if (handlers_parse(req, none, &qv) != 0 ||
	    (m = batch_state(req, sizeof(*m) + node->ngpu * sizeof(m->gpu[0]) +
	    node->ncpu * sizeof(*m->cpu) + node->ngpu * sizeof(*m->shown),
	    metrics_scrape_free)) == NULL)
		return;
	m->ngpu = node->ngpu;
	m->ncpu = node->ncpu;
	m->req = req;
	m->node = req->ctx->node;
	m->cpu = (struct cpu_cmd *)(m->gpu + m->ngpu);
	m->shown = (bool *)(m->cpu + m->ncpu);
	/* the ledger (--gpu-leases): the device process's, read by the job */
	if (req->ctx->lookups != NULL && request_leases_on(req) &&
	    m->ngpu > 0 &&
	    (m->ledger = calloc(1, sizeof(*m->ledger))) == NULL) {
		handlers_reply_oom(req);
		return;
	}
	batch_init(&bt, req);
	for (unsigned i = 0; i < m->ngpu; i++) {
		/* a GPU the node policy does not grant is not even read */
		if (!(m->shown[i] = gate_gpu_allowed(req, i)))
			continue;
		gpu_cmd_init(&m->gpu[i], GPU_CMD_SNAPSHOT, i, batch_gpu_done,
		    req);
		if (batch_add_gpu(&bt, &m->gpu[i]) != 0)
			return;
	}
	for (unsigned i = 0; i < m->ncpu; i++) {
		cpu_cmd_init(&m->cpu[i], CPU_CMD_GET_ENERGY, i, batch_cpu_done,
		    req);
		if (batch_add_cpu(&bt, &m->cpu[i]) != 0)
			return;
	}
	if (req->ctx->lookups != NULL) {
		m->job.run = metrics_proc_run;
		batch_add_job(&bt, &m->job);
	}
	batch_run(&bt, metrics_finish);
}
