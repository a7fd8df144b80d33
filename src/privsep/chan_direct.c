/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chan_direct.c - chan.h's channels as direct calls, for a daemon whose
 * network half and device half share one process (zeusd.exe: Windows has
 * no fork and no descriptor passing; docs/windows.md).
 *
 * A request goes through the very path a datagram from the network
 * process takes in the device process: the boundary table (boundary.h)
 * finds its row, checks its size and every field (msg.c), and runs it
 * (exec.c, with the warden as judge); the reply is checked against the
 * request as chan.c checks one that came back over a socket. Only the
 * transport differs: the call runs on the caller's thread, in one of n
 * work areas (a request and a reply, about 90 KiB) taken from the pool,
 * so at most n calls run at once and a caller that finds none free waits,
 * as for a channel.
 *
 * A request the table refuses is what stops a split daemon
 * (privsep_message_refused): here too, it is logged and the process
 * exits (PSCHAN_EXIT_PEER). There is no asynchronous channel: the loop's
 * readers and writers (node/remote_read.c, remote_write.c) are not used,
 * and the lease check's own channel falls back to a free one.
 */
#include "chan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/wipe.h"
#include "boundary.h"

/* One call's work area: the checked request and the reply. */
struct pschan_area {
	union psop_msg m;
	union psop_reply out;
	size_t used;			/* the request's bytes in m */
};

struct pschan_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* an area came back */
	unsigned n, nfree;
	struct pschan_area *areas;	/* [n] */
	struct pschan_area **free;	/* [n]: a stack */
	const struct psexec *x;
	struct psmsg_limits lim;
	atomic_uint_fast64_t next_id;
};

int
pschan_pool_direct(const struct psexec *x, const struct psmsg_limits *lim,
    unsigned n, struct pschan_pool **out, struct zerr *err)
{
	struct pschan_pool *p;

	if (n == 0)
		return zerr_set(err, ZERR_INTERNAL, "a pool of no work areas");
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->areas = calloc(n, sizeof(*p->areas))) == NULL ||
	    (p->free = calloc(n, sizeof(*p->free))) == NULL) {
		if (p != NULL)
			free(p->areas);
		free(p);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	for (unsigned i = 0; i < n; i++)
		p->free[i] = &p->areas[i];
	p->n = p->nfree = n;
	p->x = x;
	p->lim = *lim;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_init(&p->next_id, 1);
	*out = p;
	return 0;
}

static struct pschan_area *
area_take(struct pschan_pool *p, bool wait)
{
	struct pschan_area *a = NULL;

	pthread_mutex_lock(&p->lock);
	while (p->nfree == 0 && wait)
		pthread_cond_wait(&p->cond, &p->lock);
	if (p->nfree > 0)
		a = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	return a;
}

/*
 * Back to the pool, with nothing of the request left in it (a token), as
 * device.c wipes what it received: its bytes only, not the whole area.
 */
static void
area_give(struct pschan_pool *p, struct pschan_area *a)
{
	wipe(&a->m, a->used < sizeof(a->m) ? a->used : sizeof(a->m));
	a->used = 0;
	pthread_mutex_lock(&p->lock);
	p->free[p->nfree++] = a;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* The device half refused a request, or its reply does not check out. */
static _Noreturn void
direct_fatal(const char *event, const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, event, "reason=%s msg=\"a request between zeusd's "
	    "network half and its device half does not check out; zeusd "
	    "stops\"", zlog_quote(q, sizeof(q), why));
	_exit(PSCHAN_EXIT_PEER);
}

/*
 * Runs the `size` bytes at `msg`, whose header is `h` (its id is assigned
 * here), through the boundary table in area `a` (`pass`: a descriptor
 * that goes with it, duplicated, or -1); the reply's length, the reply in
 * a->out. Does not return when the table refuses the request.
 */
static size_t
direct_run(struct pschan_pool *p, struct pschan_area *a,
    struct psmsg_request *h, const void *msg, size_t size, int pass)
{
	char why[128];
	size_t outlen = 0;
	int fd = -1;

	h->id = atomic_fetch_add(&p->next_id, 1);
	a->used = size;
	if (pass >= 0 && (fd = sock_dup_unix(pass)) < 0)
		fd = PSEXEC_FD_LOST;	/* answered busy, as out of fds */
	if (psop_dispatch(p->x, &p->lim, msg, size, fd, 0, &a->m, &a->out,
	    &outlen, why, sizeof(why)) != 0)
		direct_fatal("privsep_message_refused", why);
	return outlen;
}

/*
 * The end of a call: `rc` the reply's check (`why` when it failed, which
 * does not return), then area `a` back to the pool.
 */
static void
direct_done(struct pschan_pool *p, struct pschan_area *a, int rc,
    const char *why)
{
	if (rc != 0)
		direct_fatal("device_reply_refused", why);
	area_give(p, a);
}

/*
 * A request of `size` bytes whose header is `h` (a psmsg_request alone, or
 * a larger one) and its psmsg_reply, checked, in area `a`.
 */
static void
direct_call(struct pschan_pool *p, struct pschan_area *a,
    struct psmsg_request *h, const void *msg, size_t size, int pass,
    struct psmsg_reply *rep)
{
	char why[128];
	size_t n = direct_run(p, a, h, msg, size, pass);

	direct_done(p, a, psmsg_reply_check(&a->out, n, h->id, h->op, rep,
	    why, sizeof(why)), why);
}

int
pschan_call_now(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	struct pschan_area *a = area_take(p, false);

	if (a == NULL)
		return -1;
	direct_call(p, a, req, req, sizeof(*req), -1, rep);
	return 0;
}

void
pschan_call(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), req, req, sizeof(*req), -1, rep);
}

void
pschan_call_fd(struct pschan_pool *p, struct psmsg_request *req, int pass,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), req, req, sizeof(*req), pass, rep);
}

void
pschan_call_token(struct pschan_pool *p, struct psmsg_token *t,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), &t->h, t, sizeof(*t), -1, rep);
}

void
pschan_call_audit(struct pschan_pool *p, struct psmsg_audit *a,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), &a->h, a, sizeof(*a), -1, rep);
}

void
pschan_call_tcp_owner(struct pschan_pool *p, struct psmsg_tcp_owner *o,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), &o->h, o, sizeof(*o), -1, rep);
}

void
pschan_call_slurm_step(struct pschan_pool *p, struct psmsg_slurm_step *m,
    struct psmsg_reply *rep)
{
	direct_call(p, area_take(p, true), &m->h, m, sizeof(*m), -1, rep);
}

void
pschan_call_writes(struct pschan_pool *p, struct psmsg_writes *w,
    struct psmsg_writes_reply *out)
{
	struct pschan_area *a = area_take(p, true);
	char why[128];
	size_t n = direct_run(p, a, &w->h, w, sizeof(*w), -1);

	direct_done(p, a, psmsg_writes_reply_check(&a->out, n, w->h.id, w->n,
	    out, why, sizeof(why)), why);
}

int
pschan_call_leases(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_leases_reply *out)
{
	struct pschan_area *a = area_take(p, true);
	char why[128];
	size_t n = direct_run(p, a, req, req, sizeof(*req), -1);

	direct_done(p, a, psmsg_leases_reply_check(&a->out, n, req->id,
	    req->op, ngpu, out, why, sizeof(why)), why);
	return 0;
}

int
pschan_call_ledger(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_ledger_reply *out)
{
	struct pschan_area *a = area_take(p, true);
	char why[128];
	size_t n = direct_run(p, a, req, req, sizeof(*req), -1);

	direct_done(p, a, psmsg_ledger_reply_check(&a->out, n, req->id,
	    req->dev, ngpu, out, why, sizeof(why)), why);
	return 0;
}

int
pschan_async_open(struct pschan_pool *p, struct pschan_async *a,
    struct zerr *err)
{
	(void)p;
	(void)a;
	return zerr_set(err, ZERR_INTERNAL, "no asynchronous channel between "
	    "the halves of one process");
}

void
pschan_own_call(struct pschan_async *a, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	pschan_call(a->pool, req, rep);
}

unsigned
pschan_pool_size(const struct pschan_pool *p)
{
	return p->n;
}

void
pschan_pool_destroy(struct pschan_pool *p)
{
	if (p == NULL)
		return;
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->areas);
	free(p->free);
	free(p);
}
