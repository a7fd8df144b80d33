/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_remote.c - the node of a split daemon's network process (node.h,
 * node_open_remote): the device process's GPUs and packages reached over
 * privsep's channels, with the network process's own workers, and the
 * reads (stream samples, process figures, a peer's identity) sent to the
 * device process as one request each. Linux only: Windows zeusd is one
 * process (docs/windows.md). Moved out of node.c so that node.c needs
 * nothing of privsep/.
 */
#include "node/node.h"

#include <stdlib.h>
#include <string.h>

#include "common/identity.h"
#include "common/procstat.h"
#include "devices/rapl.h"
#include "privsep/chan.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"
#include "privsep/remote_rapl.h"

static void node_sample_remote(struct node *node, const unsigned *gpus,
    unsigned ngpus, const unsigned *pkgs, unsigned npkgs,
    struct node_sample *out);
static void node_procstat_remote(struct node *node, struct procstat *out,
    struct procstat *net, struct node_audit *audit);
static void node_peer_remote(struct node *node, int sock, uint64_t refresh,
    struct identity *out, uint64_t *handle);
static void node_peer_end_remote(struct node *node, uint64_t handle);
static int node_token_remote(struct node *node, const char *token,
    size_t len, struct node_claims *out, struct zerr *err);

static const struct node_remote_ops node_remote_ops = {
	.sample = node_sample_remote,
	.procstat = node_procstat_remote,
	.peer = node_peer_remote,
	.peer_end = node_peer_end_remote,
	.token = node_token_remote,
};

int
node_open_remote(struct node *net, const struct node *dev,
    struct pschan_pool *pool, struct zerr *err)
{
	struct gpu_backend devgpu = dev->gpu;	/* lacks take it non-const */
	struct rapl_package_desc descs[PSMSG_MAX_PKGS];
	struct psgpu_lacks *lacks;
	void *ctx;

	memset(net, 0, sizeof(*net));
	net->queue_max = dev->queue_max;
	net->overrides = dev->overrides;
	net->pool = pool;
	net->remote = &node_remote_ops;
	if (dev->gpu.ops != NULL) {
		if ((lacks = malloc(sizeof(*lacks))) == NULL)
			return zerr_set(err, ZERR_INTERNAL, "out of memory");
		psgpu_lacks_of(&devgpu, lacks);
		if (psgpu_create(pool, dev->ngpu, dev->gpu_info, lacks,
		    &net->gpu, err) != 0) {
			free(lacks);
			return -1;
		}
		free(lacks);
		for (unsigned i = 0; i < dev->ngpu; i++)
			psgpu_set_lost(&net->gpu, i,
			    devgpu.ops->lost(&devgpu, i));
		net->ngpu = dev->ngpu;
		net->gpu_info = calloc(net->ngpu ? net->ngpu : 1,
		    sizeof(*net->gpu_info));
		if (net->gpu_info == NULL)
			goto oom;
		memcpy(net->gpu_info, dev->gpu_info,
		    net->ngpu * sizeof(*net->gpu_info));
	}
	if (dev->rapl != NULL) {
		if (dev->ncpu > PSMSG_MAX_PKGS) {
			node_close(net);
			return zerr_set(err, ZERR_INTERNAL, "%u RAPL packages: "
			    "privilege separation handles at most %d (try "
			    "--no-privsep)", dev->ncpu, PSMSG_MAX_PKGS);
		}
		for (unsigned i = 0; i < dev->ncpu; i++)
			rapl_describe(dev->rapl, i, &descs[i]);
		if ((ctx = psrapl_create(pool, dev->rapl)) == NULL)
			goto oom;
		/* rapl_open_source destroys ctx when it fails */
		if (rapl_open_source(&psrapl_ops, ctx, descs, dev->ncpu,
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

static void
node_sample_remote(struct node *node, const unsigned *gpus, unsigned ngpus,
    const unsigned *pkgs, unsigned npkgs, struct node_sample *out)
{
	struct node_fetch fetch = { .node = node, .gpus = gpus,
	    .ngpus = ngpus, .pkgs = pkgs, .npkgs = npkgs, .out = out };
	struct node_fetch *f = &fetch;
	struct rapl_raw_sample raw[PSMSG_MAX_PKGS] = { { 0 } };
	struct rapl_sample rs[PSMSG_MAX_PKGS];
	int rc[PSMSG_MAX_PKGS];

	if (f->npkgs > 0)
		(void)rapl_sample_batch(node->rapl, f->pkgs, f->npkgs,
		    node_fetch_remote, f, raw, rs, rc, &out->cpu_err);
	else
		(void)node_fetch_remote(f, NULL);
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

static void
node_procstat_remote(struct node *node, struct procstat *out,
    struct procstat *net, struct node_audit *audit)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_PROC, 0);
	pschan_call(node->pool, &req, &rep);
	psmsg_get_procstat(&rep, out);
	if (audit != NULL && rep.rc == 0) {
		audit->ok = true;
		audit->failures = rep.a_failures;
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
static void
node_peer_remote(struct node *node, int sock, uint64_t refresh,
    struct identity *out, uint64_t *handle)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_PEER, 0);
	req.auth = refresh;
	pschan_call_fd(node->pool, &req, sock, &rep);
	psmsg_get_identity(&rep, out);
	*handle = rep.rc == 0 ? rep.v : 0;
}

static void
node_peer_end_remote(struct node *node, uint64_t handle)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_PEER_END, 0);
	req.auth = handle;
	pschan_call(node->pool, &req, &rep);
}

/* The token goes whole (struct psmsg_token); only the device has the key. */
static int
node_token_remote(struct node *node, const char *token, size_t len,
    struct node_claims *out, struct zerr *err)
{
	static _Thread_local struct psmsg_token t;
	struct psmsg_reply rep;

	if (len == 0 || len > PSMSG_TOKEN_MAX)
		return zerr_set(err, ZERR_UNAUTHENTICATED, "Malformed token.");
	memset(&t, 0, sizeof(t));
	psmsg_request_init(&t.h, PSMSG_TOKEN, 0);
	t.len = (uint32_t)len;
	memcpy(t.token, token, len);
	pschan_call_token(node->pool, &t, &rep);
	explicit_bzero(&t, sizeof(t));
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
