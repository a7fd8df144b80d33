/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c - runs one validated privsep request on the real backends.
 *
 * The request has passed psmsg_request_check, so indices and values are in
 * range; the executor still refuses an out-of-range index on its own (a
 * second, cheap line of defence: a root process indexing a driver table
 * with an attacker's number is the one thing this split exists to prevent).
 * The reply is zeroed first and filled field by field, and error messages
 * are copied only up to their NUL, so nothing of the device process's
 * memory reaches the network process by accident.
 */
#include "exec.h"

#include <stdbool.h>
#include <string.h>

#include "common/identity.h"
#include "common/procstat.h"
#include "common/sock.h"
#include "common/sockdiag.h"
#include "devices/rapl.h"

/* The bits below n, as in msg.c. */
static uint64_t
low_bits(unsigned n)
{
	return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
}

/*
 * A kind the network side accepts for a failure: a backend that failed
 * without setting one (or with garbage) becomes ZERR_INTERNAL, since
 * ZERR_NONE with rc -1 would read as success.
 */
static uint32_t
fail_kind(const struct zerr *err)
{
	if (err->kind == ZERR_NONE || (unsigned)err->kind > ZERR_CONFLICT)
		return ZERR_INTERNAL;
	return (uint32_t)err->kind;
}

/* Copies a zerr message up to its NUL; the rest of the field stays 0. */
static void
copy_msg(char *dst, const struct zerr *err)
{
	size_t n = strnlen(err->msg, ZERR_MSG_MAX - 1);

	memcpy(dst, err->msg, n);
	dst[n] = '\0';
}

/* rc -1 with the kind and message of `err`; always returns -1. */
static int
fail(struct psmsg_reply *rep, const struct zerr *err)
{
	rep->rc = -1;
	rep->err_kind = fail_kind(err);
	copy_msg(rep->err_msg, err);
	return -1;
}

/* A refusal of the executor itself (not the backend's). */
static void
internal(struct psmsg_reply *rep, const char *what)
{
	struct zerr err;

	zerr_set(&err, ZERR_INTERNAL, "privsep executor: %s", what);
	fail(rep, &err);
}

/* The wire write as the backend's struct gpu_write. */
static void
to_gpu_write(const struct psmsg_request *req, struct gpu_write *w)
{
	memset(w, 0, sizeof(*w));
	w->op = (enum gpu_write_op)req->w_op;
	w->power_limit_mw = req->w_power_limit_mw;
	w->enabled = req->w_enabled != 0;
	w->min_clock_mhz = req->w_min_mhz;
	w->max_clock_mhz = req->w_max_mhz;
}

/* One single-GPU operation; the caller checked dev and the backend. */
/*
 * PSMSG_PEER: the guard's handle and identity, or (no guard) the socket's
 * own credentials. A socket that is not a connected Unix stream fails.
 */
static void
run_peer(const struct psexec *x, const struct psmsg_request *req, int fd,
    struct psmsg_reply *rep)
{
	struct identity id;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	uint64_t handle = 0;
	struct zerr err;

	zerr_clear(&err);
	if (fd == PSEXEC_FD_LOST) {
		zerr_set(&err, ZERR_BUSY, "zeusd's device process has no "
		    "descriptor free to take the connection; retry later");
		fail(rep, &err);
		return;
	}
	if (x->guard != NULL) {
		if (x->guard->peer(x->guard->ctx, fd, req->auth, &id, &handle,
		    &err) != 0) {
			fail(rep, &err);
			return;
		}
	} else if (sock_peer_cred(fd, &uid, &gid, &pid) != 0) {
		zerr_set(&err, ZERR_INVALID, "not a connected Unix socket");
		fail(rep, &err);
		return;
	} else {
		identity_lookup(uid, gid, pid, &id);
	}
	psmsg_put_identity(rep, &id);
	rep->v = handle;
}

static void
run_gpu(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	struct gpu_backend *b = x->gpu;
	const struct gpu_backend_ops *ops = b->ops;
	unsigned gpu = req->dev;
	struct gpu_write w;
	struct zerr err;
	uint32_t mw, lo, hi;
	uint64_t mj;
	bool on;
	int rc = -1;

	zerr_clear(&err);
	switch (req->op) {
	case PSMSG_GPU_POWER:
		if ((rc = ops->get_power_mw(b, gpu, &mw, &err)) == 0)
			rep->a = mw;
		break;
	case PSMSG_GPU_ENERGY:
		if ((rc = ops->get_energy_mj(b, gpu, &mj, &err)) == 0)
			rep->v = mj;
		break;
	case PSMSG_GPU_LIMIT:
		if ((rc = ops->get_power_limit_mw(b, gpu, &mw, &err)) == 0)
			rep->a = mw;
		break;
	case PSMSG_GPU_CONSTRAINTS:
		rc = ops->get_power_limit_constraints(b, gpu, &lo, &hi, &err);
		if (rc == 0) {
			rep->a = lo;
			rep->b = hi;
		}
		break;
	case PSMSG_GPU_PERSISTENCE:
		if ((rc = ops->get_persistence_mode(b, gpu, &on, &err)) == 0)
			rep->a = on;
		break;
	case PSMSG_GPU_WRITE:
		to_gpu_write(req, &w);
		rc = x->guard != NULL ? x->guard->write(x->guard->ctx, b, gpu,
		    &w, req, &err) :
		    ops->write(b, gpu, &w, &err);
		break;
	}
	if (rc != 0)
		fail(rep, &err);
	rep->lost = ops->lost != NULL && ops->lost(b, gpu);
}

static void
run_rapl_read(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	bool dram = req->zone == RAPL_ZONE_DRAM;
	uint64_t cpu_uj, dram_uj, mono;
	struct zerr err;

	zerr_clear(&err);
	if (x->rapl_read(x->rapl_ctx, req->dev, &cpu_uj, dram ? &dram_uj :
	    NULL, &mono, &err) != 0) {
		fail(rep, &err);
		return;
	}
	rep->v = dram ? dram_uj : cpu_uj;
}

/*
 * One stream tick: every masked GPU's power and every masked package's
 * energy. Failures are per device and never fail the reply, so one lost
 * GPU does not silence the streams of the others.
 */
static void
run_sample(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	struct gpu_backend *b = x->gpu;
	bool failed = false;
	struct zerr err;

	for (uint64_t m = req->gpu_mask; m != 0; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);
		uint32_t mw;

		zerr_clear(&err);
		if (b->ops->get_power_mw(b, i, &mw, &err) == 0) {
			rep->gpu_ok |= UINT64_C(1) << i;
			rep->gpu_mw[i] = mw;
		} else if (!failed) {
			failed = true;
			rep->err_gpu_kind = fail_kind(&err);
			copy_msg(rep->err_msg, &err);
		}
		if (b->ops->lost != NULL && b->ops->lost(b, i))
			rep->gpu_lost |= UINT64_C(1) << i;
	}
	for (uint64_t m = req->pkg_mask; m != 0; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);
		uint64_t cpu, dram = 0, mono;

		zerr_clear(&err);
		if (x->rapl_read(x->rapl_ctx, i, &cpu, (x->dram_mask >> i & 1) ?
		    &dram : NULL, &mono, &err) != 0)
			continue;
		rep->mono_ns[i] = mono;
		rep->cpu_uj[i] = cpu;
		rep->dram_uj[i] = dram;
		rep->pkg_ok |= UINT64_C(1) << i;
	}
}

void
psexec_run(const struct psexec *x, const struct psmsg_request *req, int fd,
    struct psmsg_reply *rep)
{
	bool gpus = x->gpu != NULL && x->gpu->ops != NULL;

	memset(rep, 0, sizeof(*rep));
	rep->magic = PSMSG_MAGIC;
	rep->op = req->op;
	rep->id = req->id;
	switch (req->op) {
	case PSMSG_GPU_POWER:
	case PSMSG_GPU_ENERGY:
	case PSMSG_GPU_LIMIT:
	case PSMSG_GPU_CONSTRAINTS:
	case PSMSG_GPU_PERSISTENCE:
	case PSMSG_GPU_WRITE:
		if (!gpus || req->dev >= x->ngpu)
			internal(rep, "gpu index out of range");
		else
			run_gpu(x, req, rep);
		break;
	case PSMSG_RAPL_READ:
		if (x->rapl_read == NULL || req->dev >= x->npkg ||
		    req->zone > RAPL_ZONE_DRAM ||
		    (req->zone == RAPL_ZONE_DRAM && !(x->dram_mask >> req->dev
		    & 1)))
			internal(rep, "package index or zone out of range");
		else
			run_rapl_read(x, req, rep);
		break;
	case PSMSG_SAMPLE:
		if ((req->gpu_mask != 0 && !gpus) ||
		    (req->pkg_mask != 0 && x->rapl_read == NULL) ||
		    (req->gpu_mask & ~low_bits(x->ngpu)) != 0 ||
		    (req->pkg_mask & ~low_bits(x->npkg)) != 0)
			internal(rep, "sample mask out of range");
		else
			run_sample(x, req, rep);
		break;
	case PSMSG_PROC: {
		struct procstat p;

		procstat_self(&p);
		psmsg_put_procstat(rep, &p);
		if (x->guard != NULL && x->guard->audit != NULL) {
			bool down = false;

			x->guard->audit(x->guard->ctx, &rep->a_failures,
			    &rep->a_refused, &down);
			rep->a_down = down;
		}
		if (x->net > 0 && procstat_count_fds(x->net,
		    &rep->p_net_fds) == 0)
			rep->p_net_ok = 1;
		else
			rep->p_net_fds = 0;
		break;
	}
	case PSMSG_PEER:
		run_peer(x, req, fd, rep);
		break;
	case PSMSG_PEER_END:
		if (x->guard != NULL)
			x->guard->peer_end(x->guard->ctx, req->auth, req->dev);
		break;
	default:
		internal(rep, "unknown op");
		break;
	}
}

void
psexec_writes(const struct psexec *x, const struct psmsg_writes *w,
    struct psmsg_writes_reply *out)
{
	struct psmsg_reply rep;

	memset(out, 0, sizeof(*out));
	out->magic = PSMSG_MAGIC;
	out->op = PSMSG_GPU_WRITES;
	out->id = w->h.id;
	out->n = w->n;
	for (uint32_t i = 0; i < w->n && i < PSMSG_WRITES_MAX; i++) {
		struct psmsg_write_result *r = &out->r[i];

		psexec_run(x, &w->w[i], -1, &rep);
		r->rc = rep.rc;
		r->err_kind = rep.err_kind;
		r->lost = rep.lost;
		memcpy(r->err_msg, rep.err_msg, sizeof(r->err_msg));
	}
}

void
psexec_token(const struct psexec *x, const struct psmsg_token *t,
    struct psmsg_reply *rep)
{
	struct psexec_claims c;
	uint64_t handle = 0;
	struct zerr err;
	size_t n;

	memset(rep, 0, sizeof(*rep));
	rep->magic = PSMSG_MAGIC;
	rep->op = PSMSG_TOKEN;
	rep->id = t->h.id;
	zerr_clear(&err);
	memset(&c, 0, sizeof(c));
	if (x->guard == NULL || x->guard->token == NULL) {
		internal(rep, "no signing key here");
		return;
	}
	if (x->guard->token(x->guard->ctx, t->token, t->len, &c, &handle,
	    &err) != 0) {
		fail(rep, &err);
		return;
	}
	n = strnlen(c.sub, sizeof(rep->t_sub) - 1);
	memcpy(rep->t_sub, c.sub, n);
	rep->t_scopes = c.scopes;
	rep->t_has_exp = c.has_exp ? 1 : 0;
	rep->t_exp = c.has_exp ? c.exp : 0;
	rep->t_handle = handle;
}

void
psexec_audit(const struct psexec *x, const struct psmsg_audit *a,
    struct psmsg_reply *rep)
{
	struct zerr err;

	memset(rep, 0, sizeof(*rep));
	rep->magic = PSMSG_MAGIC;
	rep->op = PSMSG_AUDIT;
	rep->id = a->h.id;
	zerr_clear(&err);
	if (x->guard == NULL || x->guard->audit_record == NULL) {
		internal(rep, "no audit log here");
		return;
	}
	if (x->guard->audit_record(x->guard->ctx, a, &err) != 0)
		fail(rep, &err);
}

void
psexec_tcp_owner(const struct psexec *x, const struct psmsg_tcp_owner *o,
    struct psmsg_reply *rep)
{
	struct sockdiag_tuple t;
	struct zerr err;
	uint32_t uid;

	(void)x;
	memset(rep, 0, sizeof(*rep));
	rep->magic = PSMSG_MAGIC;
	rep->op = PSMSG_TCP_OWNER;
	rep->id = o->h.id;
	memset(&t, 0, sizeof(t));
	t.family = (uint8_t)o->family;
	memcpy(t.client, o->client, sizeof(t.client));
	memcpy(t.server, o->server, sizeof(t.server));
	t.client_port = (uint16_t)o->client_port;
	t.server_port = (uint16_t)o->server_port;
	/* sockdiag checks the tuple again: only loopback is ever asked */
	if (sockdiag_tcp_owner(&t, SOCKDIAG_TIMEOUT_MS, &uid) != 0) {
		zerr_set(&err, ZERR_NOT_FOUND, "the kernel did not tell who "
		    "owns that connection");
		fail(rep, &err);
		return;
	}
	rep->a = uid;
}

void
psexec_slurm_step(const struct psexec *x, const struct psmsg_slurm_step *m,
    struct psmsg_reply *rep)
{
	struct zerr err;

	memset(rep, 0, sizeof(*rep));
	rep->magic = PSMSG_MAGIC;
	rep->op = PSMSG_SLURM_STEP;
	rep->id = m->h.id;
	zerr_clear(&err);
	if (x->guard == NULL || x->guard->slurm_step == NULL) {
		internal(rep, "no warden here");
		return;
	}
	if (x->guard->slurm_step(x->guard->ctx, m, &err) != 0)
		fail(rep, &err);
}

/* The header of a lease record's reply, and its failure. */
#define REPLY_HEAD(out, req) do {					\
	(out)->magic = PSMSG_MAGIC;					\
	(out)->op = (req)->op;						\
	(out)->id = (req)->id;						\
} while (0)

#define REPLY_FAIL(out, req, err) do {					\
	memset((out), 0, sizeof(*(out)));				\
	REPLY_HEAD(out, req);						\
	(out)->rc = -1;							\
	(out)->err_kind = fail_kind(err);				\
	copy_msg((out)->err_msg, (err));				\
} while (0)

void
psexec_leases(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_leases_reply *out)
{
	const struct psexec_guard *g = x->guard;
	struct zerr err;
	int rc;

	memset(out, 0, sizeof(*out));
	REPLY_HEAD(out, req);
	zerr_clear(&err);
	if (g == NULL || g->leases == NULL || g->release == NULL)
		rc = zerr_set(&err, ZERR_INTERNAL, "privsep executor: no "
		    "warden here");
	else if (req->op == PSMSG_RELEASE)
		rc = g->release(g->ctx, req, out, &err);
	else
		rc = g->leases(g->ctx, out, &err);
	if (rc != 0)
		REPLY_FAIL(out, req, &err);
}

void
psexec_ledger(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_ledger_reply *out)
{
	const struct psexec_guard *g = x->guard;
	struct zerr err;
	int rc;

	memset(out, 0, sizeof(*out));
	REPLY_HEAD(out, req);
	zerr_clear(&err);
	if (g == NULL || g->ledger == NULL)
		rc = zerr_set(&err, ZERR_INTERNAL, "privsep executor: no "
		    "warden here");
	else
		rc = g->ledger(g->ctx, req->dev, out, &err);
	if (rc != 0)
		REPLY_FAIL(out, req, &err);
}

void
psexec_lease_check(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	struct zerr err;

	memset(rep, 0, sizeof(*rep));
	REPLY_HEAD(rep, req);
	zerr_clear(&err);
	if (x->guard == NULL || x->guard->lease_check == NULL) {
		internal(rep, "no warden here");
		return;
	}
	if (x->guard->lease_check(x->guard->ctx, req, &err) != 0)
		fail(rep, &err);
}
