/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chan.c - the channel pool of the network process (see chan.h).
 */
#include "chan.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

struct pschan_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a channel came back */
	unsigned n;
	unsigned nfree;
	int *fds;			/* [n] */
	int *free;			/* [n]: fds not in use, a stack */
	atomic_uint_fast64_t next_id;
};

int
pschan_pool_create(unsigned n, struct pschan_pool **out, int *peer,
    struct zerr *err)
{
	struct pschan_pool *p = calloc(1, sizeof(*p));
	unsigned made = 0;

	if (p == NULL || n == 0 || (p->fds = calloc(n, sizeof(int))) == NULL ||
	    (p->free = calloc(n, sizeof(int))) == NULL) {
		if (p != NULL) {
			free(p->fds);
			free(p);
		}
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	for (; made < n; made++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
		    sv) != 0) {
			int e = errno;

			for (unsigned i = 0; i < made; i++) {
				close(p->fds[i]);
				close(peer[i]);
			}
			free(p->fds);
			free(p->free);
			free(p);
			return zerr_set(err, ZERR_INTERNAL, "socketpair for "
			    "the device process: %s", strerror(e));
		}
		p->fds[made] = p->free[made] = sv[0];
		peer[made] = sv[1];
	}
	p->n = p->nfree = n;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_init(&p->next_id, 1);
	*out = p;
	return 0;
}

int
pschan_pool_adopt(const int *fds, unsigned n, struct pschan_pool **out,
    struct zerr *err)
{
	struct pschan_pool *p = calloc(1, sizeof(*p));

	if (p == NULL || n == 0 || (p->fds = calloc(n, sizeof(int))) == NULL ||
	    (p->free = calloc(n, sizeof(int))) == NULL) {
		if (p != NULL)
			free(p->fds);
		free(p);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	for (unsigned i = 0; i < n; i++) {
		(void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
		p->fds[i] = p->free[i] = fds[i];
	}
	p->n = p->nfree = n;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_init(&p->next_id, 1);
	*out = p;
	return 0;
}

unsigned
pschan_pool_size(const struct pschan_pool *p)
{
	return p->n;
}

int
pschan_pool_fd(const struct pschan_pool *p, unsigned i)
{
	return p->fds[i];
}

static int
pschan_take(struct pschan_pool *p)
{
	int fd;

	pthread_mutex_lock(&p->lock);
	while (p->nfree == 0)
		pthread_cond_wait(&p->cond, &p->lock);
	fd = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	return fd;
}

static void
pschan_give(struct pschan_pool *p, int fd)
{
	pthread_mutex_lock(&p->lock);
	p->free[p->nfree++] = fd;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* The device process is gone or talks nonsense: nothing left to serve. */
static _Noreturn void
pschan_fatal(const char *what, int e)
{
	zlog(ZLOG_ERROR, "device_process_gone", "during=%s errno=%d "
	    "msg=\"the device process closed its channel or answered "
	    "nonsense; stopping\"", what, e);
	_exit(PSCHAN_EXIT_PEER);
}

/* A reply that does not check out: said, and fatal. */
static _Noreturn void
pschan_bad_reply(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "device_reply_refused", "reason=%s",
	    zlog_quote(q, sizeof(q), why));
	pschan_fatal("check", 0);
}

/*
 * Sends `req` on `fd`, with descriptor `pass` (SCM_RIGHTS) when it is not
 * -1; does not return when that fails.
 */
static void
pschan_send(int fd, const struct psmsg_request *req, int pass, int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)req, .iov_len = sizeof(*req) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (pass >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass, sizeof(int));
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*req))
		pschan_fatal("send", n < 0 ? errno : 0);
}

/*
 * Receives the reply to `req` on `fd` into *rep, checked; returns -1 when
 * `flags` has MSG_DONTWAIT and none is there yet. Does not return when the
 * channel failed or the reply does not check out.
 */
static int
pschan_recv(int fd, const struct psmsg_request *req, struct psmsg_reply *rep,
    int flags)
{
	/* one byte more than a reply: a longer datagram shows as truncated */
	union {
		struct psmsg_reply rep;
		char raw[sizeof(struct psmsg_reply) + 1];
	} in;
	char why[128];
	ssize_t n;

	do
		n = recv(fd, in.raw, sizeof(in.raw), MSG_TRUNC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (flags & MSG_DONTWAIT) != 0 && (errno == EAGAIN ||
	    errno == EWOULDBLOCK))
		return -1;
	if (n <= 0)
		pschan_fatal("receive", n < 0 ? errno : 0);
	if (psmsg_reply_check(in.raw, (size_t)n, req->id, req->op, rep, why,
	    sizeof(why)) != 0)
		pschan_bad_reply(why);
	return 0;
}

int
pschan_call_now(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	int fd;

	pthread_mutex_lock(&p->lock);
	if (p->nfree == 0) {
		pthread_mutex_unlock(&p->lock);
		return -1;
	}
	fd = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	req->id = atomic_fetch_add(&p->next_id, 1);
	pschan_send(fd, req, -1, 0);
	(void)pschan_recv(fd, req, rep, 0);
	pschan_give(p, fd);
	return 0;
}

void
pschan_call(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	pschan_call_fd(p, req, -1, rep);
}

void
pschan_call_fd(struct pschan_pool *p, struct psmsg_request *req, int pass,
    struct psmsg_reply *rep)
{
	int fd;

	req->id = atomic_fetch_add(&p->next_id, 1);
	fd = pschan_take(p);
	pschan_send(fd, req, pass, 0);
	(void)pschan_recv(fd, req, rep, 0);
	pschan_give(p, fd);
}

/* Sends a larger request of `size` bytes whose header is `h`, on a
 * channel taken for it (returned: the caller reads the reply and gives it
 * back). */
static int
pschan_send_big(struct pschan_pool *p, struct psmsg_request *h,
    const void *msg, size_t size)
{
	ssize_t n;
	int fd;

	h->id = atomic_fetch_add(&p->next_id, 1);
	fd = pschan_take(p);
	do
		n = send(fd, msg, size, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)size)
		pschan_fatal("send", n < 0 ? errno : 0);
	return fd;
}

/* One larger request of `size` bytes whose header is `h`. */
static void
pschan_call_big(struct pschan_pool *p, struct psmsg_request *h,
    const void *msg, size_t size, struct psmsg_reply *rep)
{
	int fd = pschan_send_big(p, h, msg, size);

	(void)pschan_recv(fd, h, rep, 0);
	pschan_give(p, fd);
}

/*
 * Receives the reply to the writes request (id, nwrites) on `fd` into
 * *out, checked; returns -1 when `flags` has MSG_DONTWAIT and none is
 * there yet. Does not return when the channel failed or the reply does
 * not check out.
 */
static int
pschan_recv_writes(int fd, uint64_t id, uint32_t nwrites,
    struct psmsg_writes_reply *out, int flags)
{
	/*
	 * One byte more than a reply: a longer datagram shows as truncated.
	 * On the caller's stack (a GPU worker's, the loop's), not
	 * _Thread_local: that would put 33 KiB in every thread's TLS block.
	 */
	union {
		struct psmsg_writes_reply rep;
		char raw[sizeof(struct psmsg_writes_reply) + 1];
	} in;
	char why[128];
	ssize_t n;

	do
		n = recv(fd, in.raw, sizeof(in.raw), MSG_TRUNC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (flags & MSG_DONTWAIT) != 0 && (errno == EAGAIN ||
	    errno == EWOULDBLOCK))
		return -1;
	if (n <= 0)
		pschan_fatal("receive", n < 0 ? errno : 0);
	if (psmsg_writes_reply_check(in.raw, (size_t)n, id, nwrites, out,
	    why, sizeof(why)) != 0)
		pschan_bad_reply(why);
	return 0;
}

void
pschan_call_writes(struct pschan_pool *p, struct psmsg_writes *w,
    struct psmsg_writes_reply *out)
{
	int fd = pschan_send_big(p, &w->h, w, sizeof(*w));

	(void)pschan_recv_writes(fd, w->h.id, w->n, out, 0);
	pschan_give(p, fd);
}

/*
 * Receives one datagram on `fd` into raw[0..size) (`size` one byte more
 * than the reply expected: a longer datagram shows as truncated, its
 * length as it was sent); its length. Does not return when the channel
 * failed.
 */
static size_t
pschan_recv_raw(int fd, void *raw, size_t size)
{
	ssize_t n;

	do
		n = recv(fd, raw, size, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		pschan_fatal("receive", n < 0 ? errno : 0);
	return (size_t)n;
}

/*
 * One request of the lease record, its reply received into `raw` (the
 * caller's heap, `size` bytes) on the channel it went out on: its length.
 */
static size_t
pschan_call_raw(struct pschan_pool *p, struct psmsg_request *req, void *raw,
    size_t size)
{
	size_t n;
	int fd;

	req->id = atomic_fetch_add(&p->next_id, 1);
	fd = pschan_take(p);
	pschan_send(fd, req, -1, 0);
	n = pschan_recv_raw(fd, raw, size);
	pschan_give(p, fd);
	return n;
}

int
pschan_call_leases(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_leases_reply *out)
{
	/*
	 * Not on the stack: 45 KiB, and the callers are the look-up pool's
	 * threads. The check copies out of it, so it cannot be *out itself.
	 */
	size_t size = sizeof(*out) + 1, n;
	char why[128], *raw;

	assert(req->op == PSMSG_LEASES || req->op == PSMSG_RELEASE);
	if ((raw = malloc(size)) == NULL)
		return -1;
	n = pschan_call_raw(p, req, raw, size);
	if (psmsg_leases_reply_check(raw, n, req->id, req->op, ngpu, out, why,
	    sizeof(why)) != 0) {
		free(raw);
		pschan_bad_reply(why);
	}
	free(raw);
	return 0;
}

int
pschan_call_ledger(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_ledger_reply *out)
{
	size_t size = sizeof(*out) + 1, n;
	char why[128], *raw;

	assert(req->op == PSMSG_LEDGER);
	if ((raw = malloc(size)) == NULL)
		return -1;
	n = pschan_call_raw(p, req, raw, size);
	if (psmsg_ledger_reply_check(raw, n, req->id, req->dev, ngpu, out, why,
	    sizeof(why)) != 0) {
		free(raw);
		pschan_bad_reply(why);
	}
	free(raw);
	return 0;
}

void
pschan_call_token(struct pschan_pool *p, struct psmsg_token *t,
    struct psmsg_reply *rep)
{
	pschan_call_big(p, &t->h, t, sizeof(*t), rep);
}

void
pschan_call_audit(struct pschan_pool *p, struct psmsg_audit *a,
    struct psmsg_reply *rep)
{
	pschan_call_big(p, &a->h, a, sizeof(*a), rep);
}

void
pschan_call_tcp_owner(struct pschan_pool *p, struct psmsg_tcp_owner *o,
    struct psmsg_reply *rep)
{
	pschan_call_big(p, &o->h, o, sizeof(*o), rep);
}

void
pschan_call_slurm_step(struct pschan_pool *p, struct psmsg_slurm_step *m,
    struct psmsg_reply *rep)
{
	pschan_call_big(p, &m->h, m, sizeof(*m), rep);
}

int
pschan_async_open(struct pschan_pool *p, struct pschan_async *a,
    struct zerr *err)
{
	pthread_mutex_lock(&p->lock);
	/* the last free channel stays for the blocking callers */
	if (p->nfree < 2) {
		pthread_mutex_unlock(&p->lock);
		return zerr_set(err, ZERR_INTERNAL, "no device channel left "
		    "for an asynchronous reader");
	}
	a->fd = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	a->pool = p;
	atomic_init(&a->out, false);
	return 0;
}

void
pschan_own_call(struct pschan_async *a, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	req->id = atomic_fetch_add(&a->pool->next_id, 1);
	pschan_send(a->fd, req, -1, 0);
	(void)pschan_recv(a->fd, req, rep, 0);
}

void
pschan_async_send(struct pschan_async *a, struct psmsg_request *req)
{
	assert(!atomic_load_explicit(&a->out, memory_order_relaxed));
	req->id = atomic_fetch_add(&a->pool->next_id, 1);
	a->req = *req;
	a->nwrites = 0;
	atomic_store_explicit(&a->out, true, memory_order_release);
	/* one request out at a time: a datagram always fits the buffer */
	pschan_send(a->fd, req, -1, MSG_DONTWAIT);
}

void
pschan_async_send_writes(struct pschan_async *a, struct psmsg_writes *w)
{
	ssize_t n;

	assert(!atomic_load_explicit(&a->out, memory_order_relaxed));
	assert(w->n >= 2 && w->n <= PSMSG_WRITES_MAX);
	w->h.id = atomic_fetch_add(&a->pool->next_id, 1);
	a->req = w->h;
	a->nwrites = w->n;
	atomic_store_explicit(&a->out, true, memory_order_release);
	/* 41 KiB, alone in the socket's buffer: never short of room */
	do
		n = send(a->fd, w, sizeof(*w), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*w))
		pschan_fatal("send", n < 0 ? errno : 0);
}

/*
 * Whether something is out (acquire); when not, a readable channel means
 * the device process is gone (end of file, which would keep a
 * level-triggered loop spinning) or sent what nobody asked for: fatal.
 */
static bool
pschan_async_out(struct pschan_async *a)
{
	char c;
	ssize_t n;

	if (atomic_load_explicit(&a->out, memory_order_acquire))
		return true;
	n = recv(a->fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return false;
	pschan_fatal(n > 0 ? "unasked reply" : "receive", n < 0 ? errno : 0);
}

int
pschan_async_recv(struct pschan_async *a, struct psmsg_reply *rep)
{
	if (!pschan_async_out(a) ||
	    pschan_recv(a->fd, &a->req, rep, MSG_DONTWAIT) != 0)
		return -1;
	atomic_store_explicit(&a->out, false, memory_order_relaxed);
	return 0;
}

int
pschan_async_recv_writes(struct pschan_async *a,
    struct psmsg_writes_reply *out)
{
	struct psmsg_reply one;

	if (!pschan_async_out(a))
		return -1;
	if (a->nwrites == 0) {
		if (pschan_recv(a->fd, &a->req, &one, MSG_DONTWAIT) != 0)
			return -1;
		memset(out, 0, offsetof(struct psmsg_writes_reply, r) +
		    sizeof(out->r[0]));
		out->magic = one.magic;
		out->op = one.op;
		out->id = one.id;
		out->n = 1;
		out->r[0].rc = one.rc;
		out->r[0].err_kind = one.err_kind;
		out->r[0].lost = one.lost;
		memcpy(out->r[0].err_msg, one.err_msg, sizeof(one.err_msg));
	} else if (pschan_recv_writes(a->fd, a->req.id, a->nwrites, out,
	    MSG_DONTWAIT) != 0)
		return -1;
	atomic_store_explicit(&a->out, false, memory_order_relaxed);
	return 0;
}

void
pschan_pool_destroy(struct pschan_pool *p)
{
	if (p == NULL)
		return;
	for (unsigned i = 0; i < p->n; i++)
		close(p->fds[i]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->fds);
	free(p->free);
	free(p);
}
