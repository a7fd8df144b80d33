/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_remote.c - the network half's node (node.h, node_open_remote): the
 * device half's GPUs and packages reached through privsep's calls (over
 * socket pairs between Linux's two processes, or directly in zeusd.exe:
 * privsep/chan.h), with the network half's own workers, and every other
 * question for the device half (stream samples, process figures, a
 * peer's identity, tokens, leases, the ledger, Slurm job steps) sent as
 * one request each. node.c, the devices and their workers, needs nothing
 * of privsep/.
 */
#include "node/node.h"
#include "node/node_remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/identity.h"
#include "common/log.h"
#include "common/procstat.h"
#include "common/sockdiag.h"
#include "common/wipe.h"
#include "devices/rapl.h"
#include "privsep/chan.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"
#include "privsep/remote_rapl.h"

int
node_remote_describe(const struct node *dev, struct node_remote_desc *out,
    struct zerr *err)
{
	struct gpu_backend devgpu = dev->gpu;	/* lacks take it non-const */

	memset(out, 0, sizeof(*out));
	if (dev->ngpu > PSMSG_MAX_GPUS || dev->ncpu > PSMSG_MAX_PKGS)
		return zerr_set(err, ZERR_INVALID, "%u GPUs and %u RAPL "
		    "packages: privilege separation handles at most %d of "
		    "each", dev->ngpu, dev->ncpu, PSMSG_MAX_GPUS);
	out->queue_max = dev->queue_max;
	out->overrides = dev->overrides;
	if (dev->gpu.ops != NULL) {
		out->has_gpu = true;
		out->ngpu = dev->ngpu;
		psgpu_lacks_of(&devgpu, &out->lacks);
		memcpy(out->gpu_info, dev->gpu_info,
		    dev->ngpu * sizeof(*out->gpu_info));
		for (unsigned i = 0; i < dev->ngpu; i++)
			if (devgpu.ops->lost(&devgpu, i))
				out->lost |= 1ull << i;
	}
	if (dev->rapl != NULL) {
		out->has_rapl = true;
		out->ncpu = dev->ncpu;
		for (unsigned i = 0; i < dev->ncpu; i++) {
			rapl_describe(dev->rapl, i, &out->pkg[i]);
			for (unsigned z = 0; z < 2; z++) {
				const char *l = rapl_zone_label(dev->rapl, i,
				    (enum rapl_zone)z);

				if (l != NULL)
					snprintf(out->label[i][z],
					    sizeof(out->label[i][z]), "%s", l);
			}
		}
	}
	return 0;
}

/*
 * The packages as the device process described them, for psrapl_create
 * (which takes their labels from a struct rapl): a stand-in whose
 * counters read 0, closed once psrapl_create has the labels.
 */
static const char *
node_desc_label(void *ctx, unsigned pkg, enum rapl_zone zone)
{
	const struct node_remote_desc *d = ctx;

	return d->label[pkg][zone][0] != '\0' ? d->label[pkg][zone] : NULL;
}

static int
node_desc_read(void *ctx, unsigned pkg, enum rapl_zone zone, uint64_t *uj,
    struct zerr *err)
{
	(void)ctx;
	(void)pkg;
	(void)zone;
	(void)err;
	*uj = 0;
	return 0;
}

static const struct rapl_source_ops node_desc_ops = {
	.name = "described",
	.read = node_desc_read,
	.label = node_desc_label,
};

int
node_open_remote(struct node *net, const struct node_remote_desc *dev,
    struct pschan_pool *pool, struct zerr *err)
{
	struct rapl *described;
	void *ctx;

	memset(net, 0, sizeof(*net));
	net->device_apart = dev->device_apart;
	net->queue_max = dev->queue_max;
	net->overrides = dev->overrides;
	net->pool = pool;
	if (dev->ngpu > PSMSG_MAX_GPUS || dev->ncpu > PSMSG_MAX_PKGS)
		return zerr_set(err, ZERR_INTERNAL, "%u GPUs and %u RAPL "
		    "packages: privilege separation handles at most %d of "
		    "each", dev->ngpu, dev->ncpu, PSMSG_MAX_GPUS);
	if (dev->has_gpu) {
		if (psgpu_create(pool, dev->ngpu, dev->gpu_info, &dev->lacks,
		    &net->gpu, err) != 0)
			return -1;
		for (unsigned i = 0; i < dev->ngpu; i++)
			psgpu_set_lost(&net->gpu, i, (dev->lost >> i) & 1);
		net->ngpu = dev->ngpu;
		net->gpu_info = calloc(net->ngpu ? net->ngpu : 1,
		    sizeof(*net->gpu_info));
		if (net->gpu_info == NULL)
			goto oom;
		memcpy(net->gpu_info, dev->gpu_info,
		    net->ngpu * sizeof(*net->gpu_info));
	}
	if (dev->has_rapl) {
		if (rapl_open_source(&node_desc_ops, (void *)dev, dev->pkg,
		    dev->ncpu, &described, err) != 0) {
			node_close(net);
			return -1;
		}
		ctx = psrapl_create(pool, described);
		rapl_close(described);
		if (ctx == NULL)
			goto oom;
		/* rapl_open_source destroys ctx when it fails */
		if (rapl_open_source(&psrapl_ops, ctx, dev->pkg, dev->ncpu,
		    &net->rapl, err) != 0) {
			node_close(net);
			return -1;
		}
		net->ncpu = dev->ncpu;
	}
	if (node_start(net, err) != 0) {
		node_close(net);
		return -1;
	}
	return 0;
oom:
	node_close(net);
	return zerr_set(err, ZERR_INTERNAL, "out of memory");
}

/* ---- Stream samples ------------------------------------------------------ */

/* One request to the device process for every device of the tick. */
struct node_fetch {
	struct node *node;
	const unsigned *gpus, *pkgs;
	unsigned ngpus, npkgs;
	struct node_sample *out;
	struct psmsg_reply rep;
};

static int
node_fetch_remote(void *arg, struct rapl_raw_sample *raw)
{
	struct node_fetch *f = arg;
	struct psmsg_request req;

	psmsg_request_init(&req, PSMSG_SAMPLE, 0);
	for (unsigned k = 0; k < f->ngpus; k++)
		req.gpu_mask |= 1ull << f->gpus[k];
	for (unsigned k = 0; k < f->npkgs; k++)
		req.pkg_mask |= 1ull << f->pkgs[k];
	pschan_call(f->node->pool, &req, &f->rep);
	for (unsigned k = 0; raw != NULL && k < f->npkgs; k++)
		psrapl_raw_of(&f->rep, f->pkgs[k], &raw[k]);
	return 0;
}

void
node_sample(struct node *node, const unsigned *gpus, unsigned ngpus,
    const unsigned *pkgs, unsigned npkgs, struct node_sample *out)
{
	struct node_fetch fetch = { .node = node, .gpus = gpus,
	    .ngpus = ngpus, .pkgs = pkgs, .npkgs = npkgs, .out = out };
	struct node_fetch *f = &fetch;
	struct rapl_raw_sample raw[PSMSG_MAX_PKGS] = { { 0 } };
	struct rapl_sample rs[PSMSG_MAX_PKGS];
	int rc[PSMSG_MAX_PKGS];

	zerr_clear(&out->gpu_err);
	zerr_clear(&out->cpu_err);
	if (f->npkgs > 0)
		(void)rapl_sample_batch(node->rapl, f->pkgs, f->npkgs,
		    node_fetch_remote, f, raw, rs, rc, &out->cpu_err);
	else
		(void)node_fetch_remote(f, NULL);
	if (node->gpu.ops != NULL)	/* none on a node without GPUs */
		psgpu_note_sample(&node->gpu, &f->rep);
	for (unsigned k = 0; k < f->ngpus; k++) {
		unsigned i = f->gpus[k];

		out->gpu_rc[k] = (f->rep.gpu_ok >> i) & 1 ? 0 : -1;
		out->gpu_mw[k] = f->rep.gpu_mw[i];
	}
	if (f->rep.err_gpu_kind != ZERR_NONE)
		zerr_set(&out->gpu_err, (enum zerr_kind)f->rep.err_gpu_kind,
		    "%s", f->rep.err_msg);
	for (unsigned k = 0; k < f->npkgs; k++) {
		out->cpu_rc[k] = rc[k];
		out->cpu[k] = rs[k];
		if (rc[k] != 0 && !raw[k].ok)
			zerr_set(&out->cpu_err, ZERR_INTERNAL, "RAPL package "
			    "%u: the device process could not read its "
			    "counters", rapl_package_id(node->rapl, f->pkgs[k]));
	}
}

void
node_procstat(struct node *node, struct procstat *out,
    struct procstat *net, struct node_audit *audit)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	if (audit != NULL)
		memset(audit, 0, sizeof(*audit));
	psmsg_request_init(&req, PSMSG_PROC, 0);
	pschan_call(node->pool, &req, &rep);
	psmsg_get_procstat(&rep, out);
	if (audit != NULL && rep.rc == 0) {
		audit->ok = true;
		audit->failures = rep.a_failures;
		audit->refused = rep.a_refused;
		audit->down = rep.a_down != 0;
	}
	if (net != NULL && rep.p_net_ok) {
		net->open_fds = rep.p_net_fds;
		net->ok |= PROCSTAT_FDS;
	}
}

/*
 * The peer's connected socket goes with the request: the device process
 * reads who it is from the socket itself (access/warden.h).
 */
int
node_peer(struct node *node, int sock, uint64_t refresh, struct identity *out,
    uint64_t *handle, struct zerr *err)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	*handle = 0;
	psmsg_request_init(&req, PSMSG_PEER, 0);
	req.auth = refresh;
	pschan_call_fd(node->pool, &req, sock, &rep);
	psmsg_get_identity(&rep, out);
	*handle = rep.rc == 0 ? rep.v : 0;
	if (rep.rc != 0 && rep.err_kind == ZERR_BUSY)
		return zerr_set(err, ZERR_BUSY, "%s", rep.err_msg);
	return 0;
}

void
node_peer_end(struct node *node, uint64_t handle, uint32_t queued)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	if (handle == 0)
		return;		/* the device half gave it none */
	psmsg_request_init(&req, PSMSG_PEER_END, 0);
	req.auth = handle;
	req.dev = queued;
	pschan_call(node->pool, &req, &rep);
}

/*
 * Only a loopback tuple is sent: the device process takes any other as a
 * broken message (psmsg_tcp_owner_check) and stops the daemon.
 */
int
node_tcp_owner(struct node *node, const struct sockdiag_tuple *t,
    uint32_t *uid)
{
	struct psmsg_tcp_owner o;
	struct psmsg_reply rep;

	if (!sockdiag_tuple_loopback(t))
		return -1;
	memset(&o, 0, sizeof(o));
	psmsg_request_init(&o.h, PSMSG_TCP_OWNER, 0);
	o.family = t->family;
	o.client_port = t->client_port;
	o.server_port = t->server_port;
	memcpy(o.client, t->client, sizeof(o.client));
	memcpy(o.server, t->server, sizeof(o.server));
	pschan_call_tcp_owner(node->pool, &o, &rep);
	if (rep.rc != 0)
		return -1;
	*uid = rep.a;
	return 0;
}

/*
 * Only what the device process takes is sent (psmsg_slurm_step_check
 * takes anything else as a broken message and stops the daemon): the
 * handler checked the ids, and GPUs beyond the node's are left out here.
 */
int
node_slurm_step(struct node *node, const struct node_slurm_step *s,
    struct zerr *err)
{
	uint64_t mine = node->ngpu >= 64 ? UINT64_MAX :
	    (UINT64_C(1) << node->ngpu) - 1;
	struct psmsg_slurm_step m;
	struct psmsg_reply rep;
	bool step_ok = s->step < 0xfffffff0u || s->step == 0xfffffffbu ||
	    s->step == 0xfffffffcu || s->step == 0xfffffffau;

	if (s->who == 0 || s->job == 0 || !step_ok || (s->start &&
	    (s->uid == (uid_t)-1 || (s->gpus & mine) == 0 ||
	    (s->gpus & ~mine) != 0)))
		return zerr_set(err, ZERR_INVALID, "not a Slurm job step with "
		    "GPUs of this node");
	memset(&m, 0, sizeof(m));
	psmsg_request_init(&m.h, PSMSG_SLURM_STEP, 0);
	m.start = s->start ? 1 : 0;
	m.job = s->job;
	m.step = s->step;
	m.uid = s->start ? (uint32_t)s->uid : 0;
	m.gpus = s->start ? s->gpus : 0;
	m.who = s->who;
	pschan_call_slurm_step(node->pool, &m, &rep);
	if (rep.rc != 0)
		return zerr_set(err, (enum zerr_kind)rep.err_kind, "%s",
		    rep.err_msg);
	return 0;
}

/* The token goes whole (struct psmsg_token); only the device has the key. */
int
node_token(struct node *node, const char *token, size_t len,
    struct node_claims *out, struct zerr *err)
{
	/* on the stack: static _Thread_local would put it in every thread */
	struct psmsg_token t;
	struct psmsg_reply rep;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len > PSMSG_TOKEN_MAX)
		return zerr_set(err, ZERR_UNAUTHENTICATED, "Malformed token.");
	memset(&t, 0, sizeof(t));
	psmsg_request_init(&t.h, PSMSG_TOKEN, 0);
	t.len = (uint32_t)len;
	memcpy(t.token, token, len);
	pschan_call_token(node->pool, &t, &rep);
	wipe(&t, sizeof(t));
	if (rep.rc != 0) {
		zerr_set(err, (enum zerr_kind)rep.err_kind, "%s", rep.err_msg);
		return -1;
	}
	memcpy(out->sub, rep.t_sub, sizeof(out->sub) < sizeof(rep.t_sub) ?
	    sizeof(out->sub) : sizeof(rep.t_sub));
	out->sub[sizeof(out->sub) - 1] = '\0';
	out->scopes = rep.t_scopes;
	out->has_exp = rep.t_has_exp != 0;
	out->exp = rep.t_exp;
	out->handle = rep.t_handle;
	return 0;
}

int
node_audit(struct node *node, struct psmsg_audit *a, struct zerr *err)
{
	struct psmsg_reply rep;

	a->h.magic = PSMSG_MAGIC;
	a->h.op = PSMSG_AUDIT;
	pschan_call_audit(node->pool, a, &rep);
	if (rep.rc != 0) {
		char q[ZERR_MSG_MAX + 64];

		zerr_set(err, (enum zerr_kind)rep.err_kind, "%s", rep.err_msg);
		zlog(ZLOG_WARN, "audit_line_refused", "error=%s",
		    zlog_quote(q, sizeof(q), err->msg));
		return -1;
	}
	return 0;
}

/* ---- The network process's audit lines, as records ------------------------ */

static void
rec_send(struct node *node, struct psmsg_audit *a)
{
	struct zerr err;

	(void)node_audit(node, a, &err);	/* a refusal is logged */
}

void
node_audit_refused(struct node *node, const struct gpu_write *who,
    unsigned gpu, const char *op, unsigned code)
{
	struct psmsg_audit a;
	struct gpu_write w = *who;
	size_t k = 0;

	memset(&a, 0, sizeof(a));
	/* only who it was for: the values of the refused write are not kept */
	w.op = GPU_RESET_LOCKED_CLOCKS;
	w.writer_reason = NULL;
	psgpu_write_fields(&a.h, &w);
	a.h.w_op = 0;
	a.kind = PSMSG_AUDIT_REFUSED;
	if (gpu < node->ngpu)
		a.h.dev = gpu;
	else
		a.no_gpu = 1;
	/* [a-z_] only, as the record takes it */
	for (const char *p = op; p != NULL && *p != '\0' &&
	    k < sizeof(a.op) - 1; p++)
		a.op[k++] = (*p >= 'a' && *p <= 'z') ? *p : '_';
	if (k == 0)
		memcpy(a.op, "unknown", 7);
	a.code = code;
	rec_send(node, &a);
}

void
node_audit_superseded(struct node *node, const struct gpu_write *w,
    unsigned gpu)
{
	struct psmsg_audit a;
	struct gpu_write c = *w;

	memset(&a, 0, sizeof(a));
	c.writer_reason = NULL;
	if (c.writer == GPU_WRITER_RESTORE)
		c.writer = GPU_WRITER_UNSET;
	psgpu_write_fields(&a.h, &c);
	a.h.dev = gpu;
	a.kind = PSMSG_AUDIT_SUPERSEDED;
	rec_send(node, &a);
}

/* ---- The lease record ----------------------------------------------------- */

/* A reply's refusal as the caller's error. */
static int
lease_reply_err(int32_t rc, uint32_t kind, const char *msg, struct zerr *err)
{
	if (rc == 0)
		return 0;
	return zerr_set(err, (enum zerr_kind)kind, "%s", msg);
}

int
node_leases(struct node *node, struct psmsg_leases_reply *out,
    struct zerr *err)
{
	struct psmsg_request req;

	psmsg_request_init(&req, PSMSG_LEASES, 0);
	if (pschan_call_leases(node->pool, &req, node->ngpu, out) != 0)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	return lease_reply_err(out->rc, out->err_kind, out->err_msg, err);
}

/*
 * Only what the device process takes is sent (psmsg_request_check takes
 * anything else as a broken message and stops the daemon): GPUs of this
 * node, and who asks as a write names them, without the write's own
 * fields (its address, its label: a release has neither).
 */
int
node_release(struct node *node, const struct gpu_write *by,
    uint64_t gpu_mask, struct psmsg_leases_reply *out, struct zerr *err)
{
	uint64_t mine = node->ngpu >= 64 ? UINT64_MAX :
	    (UINT64_C(1) << node->ngpu) - 1;
	struct psmsg_request req;

	if (gpu_mask == 0 || (gpu_mask & ~mine) != 0)
		return zerr_set(err, ZERR_INVALID, "no GPU of this node to "
		    "release");
	if (by->writer != GPU_WRITER_UNIX && by->writer != GPU_WRITER_TCP)
		return zerr_set(err, ZERR_INTERNAL, "a release of nobody's");
	psmsg_request_init(&req, PSMSG_RELEASE, 0);
	req.gpu_mask = gpu_mask;
	req.w_from = (uint32_t)by->writer;
	req.auth = by->writer == GPU_WRITER_UNIX ? by->writer_handle : 0;
	req.tok = by->token_handle;
	if (pschan_call_leases(node->pool, &req, node->ngpu, out) != 0)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	return lease_reply_err(out->rc, out->err_kind, out->err_msg, err);
}

int
node_ledger(struct node *node, uint32_t first,
    struct psmsg_ledger_reply *out, struct zerr *err)
{
	struct psmsg_request req;

	psmsg_request_init(&req, PSMSG_LEDGER, 0);
	req.dev = first;
	if (pschan_call_ledger(node->pool, &req, node->ngpu, out) != 0)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	return lease_reply_err(out->rc, out->err_kind, out->err_msg, err);
}

int
node_lease_check(struct node *node, const struct gpu_write *by,
    uint64_t gpu_mask, struct zerr *err)
{
	uint64_t mine = node->ngpu >= 64 ? UINT64_MAX :
	    (UINT64_C(1) << node->ngpu) - 1;
	struct psmsg_request req;
	struct psmsg_reply rep;

	/* the write's own checks refuse these; nothing to say early */
	if (gpu_mask == 0 || (gpu_mask & ~mine) != 0 ||
	    (by->writer != GPU_WRITER_UNIX && by->writer != GPU_WRITER_TCP) ||
	    (unsigned)by->op >= GPU_WRITE_OP_COUNT)
		return 0;
	psmsg_request_init(&req, PSMSG_LEASE_CHECK, 0);
	req.gpu_mask = gpu_mask;
	req.w_op = (uint32_t)by->op;
	req.w_from = (uint32_t)by->writer;
	req.auth = by->writer == GPU_WRITER_UNIX ? by->writer_handle : 0;
	if (node->lease_chan == NULL) {
		struct pschan_async *a = calloc(1, sizeof(*a));
		struct zerr e;

		if (a != NULL && pschan_async_open(node->pool, a, &e) == 0)
			node->lease_chan = a;
		else
			free(a);
	}
	if (node->lease_chan != NULL)
		pschan_own_call(node->lease_chan, &req, &rep);
	else if (pschan_call_now(node->pool, &req, &rep) != 0)
		return 0;	/* every channel busy: the writes decide */
	return lease_reply_err(rep.rc, rep.err_kind, rep.err_msg, err);
}
