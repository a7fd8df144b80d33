/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_privsep_direct.c - chan.h's channels as direct calls
 * (src/privsep/chan_direct.c), the transport of zeusd.exe, whose network
 * half and device half share one process. Nothing crosses a socket there,
 * so nothing but this file shows that a request still goes the way a
 * datagram takes in a split daemon's device process: through the boundary
 * table (its row's size and checks, the executor, the guard) and back,
 * checked as a channel's reply. A request the table refuses, or a reply
 * that does not check out, must stop the process as a lost device process
 * does (PSCHAN_EXIT_PEER): those cases run in a child whose exit status,
 * and the one log line it wrote, are checked. The work areas bound the
 * calls that run at once as the channels do: pschan_call_now gives up
 * when none is free, pschan_call waits for one.
 *
 * The device half is a fake GPU backend of two GPUs and a fake guard
 * (the warden's callbacks) that record what they were asked.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"
#include "privsep/chan.h"
#include "privsep/exec.h"
#include "privsep/msg.h"

#define NGPU 2

/* ---- The device half: a fake backend and a fake guard -------------------- */

struct fixture {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* the backend's calls, and how many ran at once at most */
	unsigned power_calls, energy_calls, writes;
	unsigned inside, max_inside;
	bool hold;			/* writes wait while set */
	bool held;			/* a write is waiting */
	uint32_t last_limit[NGPU];	/* each GPU's last power limit */
	uint64_t lost_mask;		/* GPUs lost() says are lost */
	/* the guard's */
	unsigned token_calls;
	const char *token_at;		/* where the executor read it */
	size_t token_len;
	char token_got[64];
	unsigned leases_calls, release_calls, ledger_calls;
	uint64_t release_mask;
	uint32_t release_from, ledger_first;
	bool leases_bad;		/* a record of a GPU the node lacks */
	bool leases_fail;		/* the record cannot be read */
	/* the wiring */
	struct gpu_backend gpu;
	struct psexec_guard guard;
	struct psexec x;
	struct psmsg_limits lim;
	struct pschan_pool *pool;
};

/* GPU i draws 100 W + i W + 7 mW. */
#define POWER_MW(i) (100000u + 1000u * (i) + 7u)
/* More than 32 bits, so that a truncated field shows. */
#define ENERGY_MJ UINT64_C(5000000000123)

static void
enter(struct fixture *f)
{
	if (++f->inside > f->max_inside)
		f->max_inside = f->inside;
}

static int
fake_power(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct fixture *f = b->ctx;

	(void)err;
	pthread_mutex_lock(&f->lock);
	enter(f);
	f->power_calls++;
	f->inside--;
	pthread_mutex_unlock(&f->lock);
	*mw = POWER_MW(gpu);
	return 0;
}

/* GPU 0 counts; GPU 1 fell off the bus. */
static int
fake_energy(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	struct fixture *f = b->ctx;

	pthread_mutex_lock(&f->lock);
	f->energy_calls++;
	pthread_mutex_unlock(&f->lock);
	if (gpu == 1)
		return zerr_set(err, ZERR_UNAVAILABLE, "gpu 1 fell off the "
		    "bus");
	*mj = ENERGY_MJ;
	return 0;
}

/* A power limit of 1 mW is refused, as a driver would; `hold` blocks. */
static int
fake_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct fixture *f = b->ctx;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	enter(f);
	f->writes++;
	if (w->op == GPU_SET_POWER_LIMIT && w->power_limit_mw == 1)
		rc = zerr_set(err, ZERR_INVALID, "gpu %u: limit 1 mW below "
		    "the minimum", gpu);
	else if (w->op == GPU_SET_POWER_LIMIT)
		f->last_limit[gpu] = w->power_limit_mw;
	if (f->hold) {
		f->held = true;
		pthread_cond_broadcast(&f->cond);
		while (f->hold)
			pthread_cond_wait(&f->cond, &f->lock);
		f->held = false;
	}
	f->inside--;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static bool
fake_lost(struct gpu_backend *b, unsigned gpu)
{
	struct fixture *f = b->ctx;

	return (f->lost_mask >> gpu & 1) != 0;
}

static unsigned
fake_count(struct gpu_backend *b)
{
	(void)b;
	return NGPU;
}

static const struct gpu_backend_ops fake_ops = {
	.name = "fake",
	.count = fake_count,
	.get_power_mw = fake_power,
	.get_energy_mj = fake_energy,
	.write = fake_write,
	.lost = fake_lost,
};

/* A token "bad" is refused; any other is alice's. */
static int
g_token(void *ctx, const char *token, size_t len, struct psexec_claims *c,
    uint64_t *handle, struct zerr *err)
{
	struct fixture *f = ctx;

	f->token_calls++;
	f->token_at = token;
	f->token_len = len;
	memset(f->token_got, 0, sizeof(f->token_got));
	memcpy(f->token_got, token, len < sizeof(f->token_got) - 1 ? len :
	    sizeof(f->token_got) - 1);
	if (len == 3 && memcmp(token, "bad", 3) == 0)
		return zerr_set(err, ZERR_UNAUTHENTICATED, "token expired");
	snprintf(c->sub, sizeof(c->sub), "alice@example.org");
	c->scopes = 0x5;
	c->has_exp = true;
	c->exp = INT64_C(1767225600);
	*handle = 77;
	return 0;
}

static void
fill_lease(struct psmsg_lease *r, uint32_t gpu, bool ended)
{
	r->gpu = gpu;
	r->uid = 1000;
	r->pid = 4242;
	r->state = ended ? PSMSG_LEASE_ENDED : PSMSG_LEASE_HELD;
	r->settings = GPU_SETTING_POWER_LIMIT;
	r->start_ms = UINT64_C(1767225600000);
	r->duration_us = 1500000;
	if (ended) {
		r->end_ms = r->start_ms + 1500;
		r->reason = PSMSG_REASON_RELEASE;
	}
	snprintf(r->user, sizeof(r->user), "alice");
	snprintf(r->label, sizeof(r->label), "train");
}

static int
g_leases(void *ctx, struct psmsg_leases_reply *out, struct zerr *err)
{
	struct fixture *f = ctx;

	f->leases_calls++;
	if (f->leases_fail)
		return zerr_set(err, ZERR_UNAVAILABLE, "the record is "
		    "being written");
	out->nopen = 1;
	fill_lease(&out->rec[0], f->leases_bad ? NGPU : 1, false);
	out->unleased_ok = 0x1;
	out->unleased_mj[0] = 99;
	return 0;
}

static int
g_release(void *ctx, const struct psmsg_request *req,
    struct psmsg_leases_reply *out, struct zerr *err)
{
	struct fixture *f = ctx;

	(void)err;
	f->release_calls++;
	f->release_mask = req->gpu_mask;
	f->release_from = req->w_from;
	out->nopen = 1;
	fill_lease(&out->rec[0], 1, true);
	out->not_leased = 0x1;
	return 0;
}

static int
g_ledger(void *ctx, uint32_t first, struct psmsg_ledger_reply *out,
    struct zerr *err)
{
	struct fixture *f = ctx;

	(void)err;
	f->ledger_calls++;
	f->ledger_first = first;
	out->nusers = 3;
	out->n = 2;
	out->u[0].uid = 1000;
	snprintf(out->u[0].user, sizeof(out->u[0].user), "alice");
	out->u[0].mj[1] = 42;
	out->u[1].uid = UINT32_MAX;
	snprintf(out->u[1].user, sizeof(out->u[1].user), "(other)");
	out->u[1].mj[0] = 7;
	return 0;
}

/* ---- Fixtures ------------------------------------------------------------ */

/* A pool of n work areas over the fake backend, with the guard or not. */
static int
open_pool(void **state, bool guarded, unsigned n)
{
	static struct fixture f;
	struct zerr err;

	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cond, NULL);
	f.gpu = (struct gpu_backend){ .ops = &fake_ops, .ctx = &f };
	f.guard = (struct psexec_guard){ .ctx = &f, .token = g_token,
	    .leases = g_leases, .release = g_release, .ledger = g_ledger };
	f.x = (struct psexec){ .guard = guarded ? &f.guard : NULL,
	    .gpu = &f.gpu, .ngpu = NGPU, .npkg = 0 };
	f.lim = (struct psmsg_limits){ .ngpu = NGPU };
	if (pschan_pool_direct(&f.x, &f.lim, n, &f.pool, &err) != 0) {
		fprintf(stderr, "pschan_pool_direct: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

static int
setup(void **state)
{
	return open_pool(state, false, NGPU);
}

static int
setup_one(void **state)
{
	return open_pool(state, false, 1);
}

static int
setup_guard(void **state)
{
	return open_pool(state, true, NGPU);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	pschan_pool_destroy(f->pool);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	return 0;
}

/* ---- Running a fatal call in a child ------------------------------------- */

static int log_fd = -1;		/* the child's: its log lines go here */

static void
pipe_sink(enum zlog_level level, const char *event, const char *fields)
{
	char line[512];
	int n;

	(void)level;
	n = snprintf(line, sizeof(line), "event=%s %s\n", event, fields);
	if (n > 0 && write(log_fd, line, (size_t)n < sizeof(line) ?
	    (size_t)n : sizeof(line) - 1) < 0)
		_exit(95);
}

/*
 * Runs fn(f, arg) in a child, which exits 0 if it returns: its exit status
 * (-1 when it was killed), and what it logged in log[0..logsz).
 */
static int
in_child(struct fixture *f, void (*fn)(struct fixture *, int), int arg,
    char *log, size_t logsz)
{
	size_t got = 0;
	ssize_t n;
	int fds[2], st;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		log_fd = fds[1];
		zlog_set_sink(pipe_sink);
		fn(f, arg);
		_exit(0);
	}
	close(fds[1]);
	while (got + 1 < logsz &&
	    (n = read(fds[0], log + got, logsz - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		got += (size_t)n;
	}
	log[got] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The child stopped as for a lost device process, saying `event` and `why`. */
static void
assert_stopped(struct fixture *f, void (*fn)(struct fixture *, int),
    int arg, const char *event, const char *why)
{
	char log[2048];
	int st = in_child(f, fn, arg, log, sizeof(log));

	if (st != PSCHAN_EXIT_PEER)
		fail_msg("case %d: exit status %d, not %d; log: %s", arg, st,
		    PSCHAN_EXIT_PEER, log);
	if (strstr(log, event) == NULL || strstr(log, why) == NULL)
		fail_msg("case %d: no \"%s\" with \"%s\" in the log: %s", arg,
		    event, why, log);
}

/* ---- Through the table and back ------------------------------------------ */

static void
test_pool_shape(void **state)
{
	struct fixture *f = *state;
	struct pschan_pool *p = NULL;
	struct zerr err;

	assert_int_equal(pschan_pool_size(f->pool), NGPU);
	zerr_clear(&err);
	assert_int_equal(pschan_pool_direct(&f->x, &f->lim, 0, &p, &err), -1);
	assert_null(p);
	assert_int_not_equal(err.kind, ZERR_NONE);
	pschan_pool_destroy(NULL);
}

static void
test_gpu_reads(void **state)
{
	struct fixture *f = *state;
	struct psmsg_request req;
	struct psmsg_reply rep;
	uint64_t id;

	/* each GPU's own figure, op and id echoed */
	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	req.dev = 1;
	memset(&rep, 0xa5, sizeof(rep));
	pschan_call(f->pool, &req, &rep);
	assert_int_not_equal(req.id, 0);
	assert_int_equal(rep.magic, PSMSG_MAGIC);
	assert_int_equal(rep.op, PSMSG_GPU_POWER);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.rc, 0);
	assert_int_equal(rep.err_kind, ZERR_NONE);
	assert_int_equal(rep.a, POWER_MW(1));
	assert_int_equal(rep.lost, 0);
	assert_int_equal(f->power_calls, 1);
	id = req.id;

	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	pschan_call(f->pool, &req, &rep);
	assert_true(req.id > id);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.a, POWER_MW(0));
	id = req.id;

	/* a 64-bit figure whole */
	psmsg_request_init(&req, PSMSG_GPU_ENERGY, 0);
	pschan_call(f->pool, &req, &rep);
	assert_true(req.id > id);
	assert_int_equal(rep.op, PSMSG_GPU_ENERGY);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.rc, 0);
	assert_true(rep.v == ENERGY_MJ);
	id = req.id;

	/* the backend's failure, its kind, message and lost flag */
	f->lost_mask = 0x2;
	psmsg_request_init(&req, PSMSG_GPU_ENERGY, 0);
	req.dev = 1;
	pschan_call(f->pool, &req, &rep);
	assert_true(req.id > id);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.err_kind, ZERR_UNAVAILABLE);
	assert_string_equal(rep.err_msg, "gpu 1 fell off the bus");
	assert_int_equal(rep.lost, 1);
	assert_int_equal(rep.v, 0);
	assert_int_equal(f->energy_calls, 2);
	id = req.id;

	/* pschan_call_now, with areas free, is the same call */
	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	req.dev = 1;
	assert_int_equal(pschan_call_now(f->pool, &req, &rep), 0);
	assert_true(req.id > id);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.a, POWER_MW(1));
	assert_int_equal(f->power_calls, 3);
}

/* One write, and a batch: each decided alone, in order, results in order. */
static void
test_gpu_writes(void **state)
{
	static struct psmsg_writes w;
	static struct psmsg_writes_reply out;
	static const uint32_t limits[] = { 200000, 1, 150000 };
	struct fixture *f = *state;
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_GPU_WRITE, 0);
	req.w_op = GPU_SET_POWER_LIMIT;
	req.w_power_limit_mw = 250000;
	req.w_from = PSMSG_FROM_TCP;
	pschan_call(f->pool, &req, &rep);
	assert_int_equal(rep.op, PSMSG_GPU_WRITE);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.rc, 0);
	assert_int_equal(f->writes, 1);
	assert_int_equal(f->last_limit[0], 250000);

	f->lost_mask = 0x2;
	psmsg_writes_init(&w, 3, 1);
	for (unsigned i = 0; i < 3; i++) {
		w.w[i].w_op = GPU_SET_POWER_LIMIT;
		w.w[i].w_power_limit_mw = limits[i];
		w.w[i].w_from = PSMSG_FROM_TCP;
	}
	memset(&out, 0xa5, sizeof(out));
	pschan_call_writes(f->pool, &w, &out);
	assert_true(w.h.id > req.id);
	assert_int_equal(out.id, w.h.id);
	assert_int_equal(out.n, 3);
	assert_int_equal(f->writes, 4);
	assert_int_equal(f->last_limit[1], 150000);	/* the last one */
	assert_int_equal(out.r[0].rc, 0);
	assert_int_equal(out.r[0].err_kind, ZERR_NONE);
	assert_int_equal(out.r[1].rc, -1);
	assert_int_equal(out.r[1].err_kind, ZERR_INVALID);
	assert_string_equal(out.r[1].err_msg, "gpu 1: limit 1 mW below the "
	    "minimum");
	assert_int_equal(out.r[2].rc, 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(out.r[i].lost, 1);
	assert_int_equal(out.r[3].rc, 0);	/* the rest zeroed */
	assert_int_equal(out.r[3].err_msg[0], '\0');
}

/*
 * PSMSG_PEER with its socket: the executor sees it (no guard: the
 * socket's own credentials, ours), the caller keeps it, and the copy
 * made for the call is closed.
 */
static void
test_peer_fd(void **state)
{
	struct fixture *f = *state;
	struct psmsg_request req;
	struct psmsg_reply rep;
	int sv[2], probe, next;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_true((probe = dup(0)) >= 0);	/* the lowest free fd */
	close(probe);
	psmsg_request_init(&req, PSMSG_PEER, 0);
	pschan_call_fd(f->pool, &req, sv[0], &rep);
	assert_int_equal(rep.op, PSMSG_PEER);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.rc, 0);
	assert_true(rep.i_ngids >= 1);
	assert_int_equal(rep.i_gids[0], (uint32_t)getgid());
	assert_int_equal(rep.v, 0);		/* no guard: handle 0 */
	assert_int_not_equal(fcntl(sv[0], F_GETFD), -1);
	assert_true((next = dup(0)) >= 0);
	close(next);
	assert_int_equal(next, probe);	/* no descriptor left over */
	close(sv[0]);
	close(sv[1]);
}

/* ---- The guard: a token -------------------------------------------------- */

static void
test_token(void **state)
{
	static struct psmsg_token t;
	static const char tok[] = "eyJhbGciOiJIUzI1NiJ9.e30.c2ln";
	struct fixture *f = *state;
	struct psmsg_reply rep;

	psmsg_request_init(&t.h, PSMSG_TOKEN, 0);
	t.len = sizeof(tok) - 1;
	memcpy(t.token, tok, t.len);
	pschan_call_token(f->pool, &t, &rep);
	assert_int_equal(f->token_calls, 1);
	assert_int_equal(f->token_len, sizeof(tok) - 1);
	assert_string_equal(f->token_got, tok);
	assert_int_not_equal(t.h.id, 0);
	assert_int_equal(rep.op, PSMSG_TOKEN);
	assert_int_equal(rep.id, t.h.id);
	assert_int_equal(rep.rc, 0);
	assert_string_equal(rep.t_sub, "alice@example.org");
	assert_int_equal(rep.t_scopes, 0x5);
	assert_int_equal(rep.t_has_exp, 1);
	assert_true(rep.t_exp == INT64_C(1767225600));
	assert_int_equal(rep.t_handle, 77);
	/*
	 * Where the executor read the token is the pool's work area, which
	 * lives as long as the pool: nothing of the token is left there.
	 */
	for (size_t i = 0; i < sizeof(tok) - 1; i++)
		if (f->token_at[i] != '\0')
			fail_msg("byte %zu of the token left in the work area",
			    i);

	/* a refusal comes back as the guard said it */
	psmsg_request_init(&t.h, PSMSG_TOKEN, 0);
	memset(t.token, 0, sizeof(t.token));
	t.len = 3;
	memcpy(t.token, "bad", 3);
	pschan_call_token(f->pool, &t, &rep);
	assert_int_equal(f->token_calls, 2);
	assert_int_equal(rep.id, t.h.id);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.err_kind, ZERR_UNAUTHENTICATED);
	assert_string_equal(rep.err_msg, "token expired");
	assert_int_equal(rep.t_handle, 0);
	assert_string_equal(rep.t_sub, "");
}

/* ---- The lease record ---------------------------------------------------- */

static void
test_leases_and_ledger(void **state)
{
	struct fixture *f = *state;
	struct psmsg_leases_reply *l = malloc(sizeof(*l));
	struct psmsg_ledger_reply *d = malloc(sizeof(*d));
	struct psmsg_request req;

	assert_non_null(l);
	assert_non_null(d);

	psmsg_request_init(&req, PSMSG_LEASES, 0);
	memset(l, 0xa5, sizeof(*l));
	assert_int_equal(pschan_call_leases(f->pool, &req, NGPU, l), 0);
	assert_int_equal(f->leases_calls, 1);
	assert_int_equal(l->op, PSMSG_LEASES);
	assert_int_equal(l->id, req.id);
	assert_int_equal(l->rc, 0);
	assert_int_equal(l->nopen, 1);
	assert_int_equal(l->nended, 0);
	assert_int_equal(l->rec[0].gpu, 1);
	assert_int_equal(l->rec[0].uid, 1000);
	assert_int_equal(l->rec[0].pid, 4242);
	assert_int_equal(l->rec[0].state, PSMSG_LEASE_HELD);
	assert_string_equal(l->rec[0].user, "alice");
	assert_string_equal(l->rec[0].label, "train");
	assert_int_equal(l->unleased_ok, 0x1);
	assert_int_equal(l->unleased_mj[0], 99);

	/* a release, who asked and which GPUs passed on */
	psmsg_request_init(&req, PSMSG_RELEASE, 0);
	req.gpu_mask = 0x3;
	req.w_from = PSMSG_FROM_TCP;
	assert_int_equal(pschan_call_leases(f->pool, &req, NGPU, l), 0);
	assert_int_equal(f->release_calls, 1);
	assert_int_equal(f->release_mask, 0x3);
	assert_int_equal(f->release_from, PSMSG_FROM_TCP);
	assert_int_equal(l->op, PSMSG_RELEASE);
	assert_int_equal(l->id, req.id);
	assert_int_equal(l->nopen, 1);
	assert_int_equal(l->rec[0].state, PSMSG_LEASE_ENDED);
	assert_int_equal(l->rec[0].reason, PSMSG_REASON_RELEASE);
	assert_int_equal(l->not_leased, 0x1);

	/* the guard's failure */
	f->leases_fail = true;
	psmsg_request_init(&req, PSMSG_LEASES, 0);
	assert_int_equal(pschan_call_leases(f->pool, &req, NGPU, l), 0);
	assert_int_equal(l->rc, -1);
	assert_int_equal(l->err_kind, ZERR_UNAVAILABLE);
	assert_string_equal(l->err_msg, "the record is being written");
	assert_int_equal(l->nopen, 0);

	/* a page of the ledger from the user asked */
	psmsg_request_init(&req, PSMSG_LEDGER, 0);
	req.dev = 1;
	memset(d, 0xa5, sizeof(*d));
	assert_int_equal(pschan_call_ledger(f->pool, &req, NGPU, d), 0);
	assert_int_equal(f->ledger_calls, 1);
	assert_int_equal(f->ledger_first, 1);
	assert_int_equal(d->op, PSMSG_LEDGER);
	assert_int_equal(d->id, req.id);
	assert_int_equal(d->rc, 0);
	assert_int_equal(d->nusers, 3);
	assert_int_equal(d->n, 2);
	assert_int_equal(d->u[0].uid, 1000);
	assert_string_equal(d->u[0].user, "alice");
	assert_int_equal(d->u[0].mj[1], 42);
	assert_int_equal(d->u[1].uid, UINT32_MAX);
	assert_string_equal(d->u[1].user, "(other)");
	assert_int_equal(d->u[1].mj[0], 7);
	free(l);
	free(d);
}

/* ---- What stops the process ---------------------------------------------- */

enum refused {
	R_VALID,		/* the control: a call that returns */
	R_NO_ROW,		/* an op the table does not have */
	R_OP_ZERO,
	R_GPU_RANGE,		/* GPU 2 of 2 */
	R_NONZERO_FIELD,	/* a read with a write's value */
	R_BAD_MAGIC,
	R_PEER_NO_FD,		/* PSMSG_PEER without its socket */
	R_FD_UNASKED,		/* a socket with a read */
	R_TOKEN_SMALL,		/* PSMSG_TOKEN, a plain request's size */
	R_TOKEN_EMPTY,		/* a token of 0 bytes */
	R_WRITES_ONE,		/* a batch of 1 */
	R_WRITES_MANY,		/* a batch of PSMSG_WRITES_MAX + 1 */
	R_WRITES_MIXED,		/* a batch over two GPUs */
	R_LEASES_BAD,		/* the reply names a GPU the node lacks */
	R_LEDGER_GPU,		/* a figure of a GPU the caller lacks */
	R_LEDGER_PAST,		/* a page past the ledger's end */
};

static void
call_refused(struct fixture *f, int which)
{
	static struct psmsg_token t;
	static struct psmsg_writes w;
	static struct psmsg_writes_reply wout;
	static struct psmsg_leases_reply lout;
	static struct psmsg_ledger_reply dout;
	struct psmsg_request req;
	struct psmsg_reply rep;
	int sv[2];

	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	switch ((enum refused)which) {
	case R_VALID:
		req.dev = NGPU - 1;
		pschan_call(f->pool, &req, &rep);
		if (rep.rc != 0 || rep.a != POWER_MW(NGPU - 1))
			_exit(97);
		return;
	case R_NO_ROW:
		req.op = PSMSG_OP_END;
		break;
	case R_OP_ZERO:
		req.op = 0;
		break;
	case R_GPU_RANGE:
		req.dev = NGPU;
		break;
	case R_NONZERO_FIELD:
		req.w_power_limit_mw = 1;
		break;
	case R_BAD_MAGIC:
		req.magic = ~PSMSG_MAGIC;
		break;
	case R_PEER_NO_FD:
		req.op = PSMSG_PEER;
		break;
	case R_FD_UNASKED:
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			_exit(96);
		pschan_call_fd(f->pool, &req, sv[0], &rep);
		return;
	case R_TOKEN_SMALL:
		req.op = PSMSG_TOKEN;
		break;
	case R_TOKEN_EMPTY:
		psmsg_request_init(&t.h, PSMSG_TOKEN, 0);
		pschan_call_token(f->pool, &t, &rep);
		return;
	case R_WRITES_ONE:
	case R_WRITES_MANY:
	case R_WRITES_MIXED:
		psmsg_writes_init(&w, 2, 0);
		for (unsigned i = 0; i < 2; i++) {
			w.w[i].w_op = GPU_RESET_LOCKED_CLOCKS;
			w.w[i].w_from = PSMSG_FROM_TCP;
		}
		if (which == R_WRITES_ONE) {
			memset(&w.w[1], 0, sizeof(w.w[1]));
			w.n = 1;
		} else if (which == R_WRITES_MANY) {
			w.n = PSMSG_WRITES_MAX + 1;
		} else {
			w.w[1].dev = 1;
		}
		pschan_call_writes(f->pool, &w, &wout);
		return;
	case R_LEASES_BAD:
		f->leases_bad = true;
		req.op = PSMSG_LEASES;
		(void)pschan_call_leases(f->pool, &req, NGPU, &lout);
		return;
	case R_LEDGER_GPU:
		/* GPU 1's figure, read by a caller that knows of one GPU */
		req.op = PSMSG_LEDGER;
		req.dev = 1;
		(void)pschan_call_ledger(f->pool, &req, 1, &dout);
		return;
	case R_LEDGER_PAST:
		/* users [2, 4) of 3: checked against the user asked */
		req.op = PSMSG_LEDGER;
		req.dev = 2;
		(void)pschan_call_ledger(f->pool, &req, NGPU, &dout);
		return;
	}
	pschan_call(f->pool, &req, &rep);
}

static void
test_refused_requests_stop(void **state)
{
	static const struct {
		enum refused which;
		const char *why;
	} cases[] = {
		{ R_NO_ROW, "unknown op" },
		{ R_OP_ZERO, "unknown op 0" },
		{ R_GPU_RANGE, "gpu 2 out of range" },
		{ R_NONZERO_FIELD, "non-zero write fields" },
		{ R_BAD_MAGIC, "bad magic" },
		{ R_PEER_NO_FD, "peer without its descriptor" },
		{ R_FD_UNASKED, "a descriptor with gpu_power" },
		{ R_TOKEN_SMALL, "token of" },
		{ R_TOKEN_EMPTY, "token of 0 bytes" },
		{ R_WRITES_ONE, "1 writes" },
		{ R_WRITES_MANY, "65 writes" },
		{ R_WRITES_MIXED, "writes of gpus 0 and 1" },
	};
	struct fixture *f = *state;
	char log[2048];

	/* the harness tells a call that returns from one that stops */
	assert_int_equal(in_child(f, call_refused, R_VALID, log, sizeof(log)),
	    0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_stopped(f, call_refused, (int)cases[i].which,
		    "privsep_message_refused", cases[i].why);
}

/* A reply that does not check out stops the process as well. */
static void
test_refused_replies_stop(void **state)
{
	struct fixture *f = *state;

	assert_stopped(f, call_refused, R_LEASES_BAD, "device_reply_refused",
	    "lease record 0");
	assert_stopped(f, call_refused, R_LEDGER_GPU, "device_reply_refused",
	    "ledger user 0, GPU 1");
	assert_stopped(f, call_refused, R_LEDGER_PAST, "device_reply_refused",
	    "2 users from 2 of 3");
}

/* ---- The work areas: pschan_call_now gives up, pschan_call waits --------- */

struct caller {
	struct fixture *f;
	struct psmsg_request req;
	struct psmsg_reply rep;
};

static void *
call_thread(void *arg)
{
	struct caller *c = arg;

	pschan_call(c->f->pool, &c->req, &c->rep);
	return NULL;
}

static void
test_call_now_when_all_taken(void **state)
{
	struct fixture *f = *state;
	struct caller a = { .f = f }, b = { .f = f };
	struct psmsg_request req;
	struct psmsg_reply rep;
	pthread_t ta, tb;
	struct timespec pause = { 0, 50 * 1000 * 1000 };

	/* A's write holds the one work area until we let it go */
	psmsg_request_init(&a.req, PSMSG_GPU_WRITE, 0);
	a.req.w_op = GPU_SET_POWER_LIMIT;
	a.req.w_power_limit_mw = 180000;
	a.req.w_from = PSMSG_FROM_TCP;
	f->hold = true;
	assert_int_equal(pthread_create(&ta, NULL, call_thread, &a), 0);
	pthread_mutex_lock(&f->lock);
	while (!f->held)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);

	/* none free: -1, and nothing ran */
	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	memset(&rep, 0xa5, sizeof(rep));
	assert_int_equal(pschan_call_now(f->pool, &req, &rep), -1);
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->power_calls, 0);
	assert_int_equal(f->writes, 1);
	pthread_mutex_unlock(&f->lock);

	/* a waiting caller waits for the area: it does not run beside A */
	psmsg_request_init(&b.req, PSMSG_GPU_POWER, 0);
	b.req.dev = 1;
	assert_int_equal(pthread_create(&tb, NULL, call_thread, &b), 0);
	nanosleep(&pause, NULL);
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->power_calls, 0);
	f->hold = false;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(pthread_join(ta, NULL), 0);
	assert_int_equal(pthread_join(tb, NULL), 0);
	assert_int_equal(a.rep.rc, 0);
	assert_int_equal(a.rep.id, a.req.id);
	assert_int_equal(f->last_limit[0], 180000);
	assert_int_equal(b.rep.rc, 0);
	assert_int_equal(b.rep.id, b.req.id);
	assert_int_equal(b.rep.a, POWER_MW(1));
	assert_int_not_equal(a.req.id, b.req.id);
	assert_int_equal(f->max_inside, 1);

	/* the area is back: now it runs */
	assert_int_equal(pschan_call_now(f->pool, &req, &rep), 0);
	assert_int_equal(rep.rc, 0);
	assert_int_equal(rep.id, req.id);
	assert_int_equal(rep.a, POWER_MW(0));
	assert_int_equal(f->power_calls, 2);
	assert_int_equal(f->writes, 1);
}

/* ---- No asynchronous channel --------------------------------------------- */

static void
test_no_async_channel(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_request req;
	struct psmsg_reply rep;
	struct zerr err;

	memset(&a, 0, sizeof(a));
	zerr_clear(&err);
	assert_int_equal(pschan_async_open(f->pool, &a, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "asynchronous"));
	/* it took nothing: the one work area still serves */
	psmsg_request_init(&req, PSMSG_GPU_POWER, 0);
	assert_int_equal(pschan_call_now(f->pool, &req, &rep), 0);
	assert_int_equal(rep.a, POWER_MW(0));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pool_shape, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_gpu_reads, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_gpu_writes, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_peer_fd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_token, setup_guard,
		    teardown),
		cmocka_unit_test_setup_teardown(test_leases_and_ledger,
		    setup_guard, teardown),
		cmocka_unit_test_setup_teardown(test_refused_requests_stop,
		    setup_guard, teardown),
		cmocka_unit_test_setup_teardown(test_refused_replies_stop,
		    setup_guard, teardown),
		cmocka_unit_test_setup_teardown(test_call_now_when_all_taken,
		    setup_one, teardown),
		cmocka_unit_test_setup_teardown(test_no_async_channel,
		    setup_one, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
