/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chan.c - the channel pool of the network process (see chan.h).
 */
#include "chan.h"

#include <errno.h>
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

void
pschan_call(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep)
{
	/* one byte more than a reply: a longer datagram shows as truncated */
	union {
		struct psmsg_reply rep;
		char raw[sizeof(struct psmsg_reply) + 1];
	} in;
	char why[128];
	ssize_t n;
	int fd;

	req->id = atomic_fetch_add(&p->next_id, 1);
	fd = pschan_take(p);
	do
		n = send(fd, req, sizeof(*req), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*req))
		pschan_fatal("send", n < 0 ? errno : 0);
	do
		n = recv(fd, in.raw, sizeof(in.raw), MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	pschan_give(p, fd);
	if (n <= 0)
		pschan_fatal("receive", n < 0 ? errno : 0);
	if (psmsg_reply_check(in.raw, (size_t)n, req->id, req->op, rep, why,
	    sizeof(why)) != 0) {
		char q[160];

		zlog(ZLOG_ERROR, "device_reply_refused", "reason=%s",
		    zlog_quote(q, sizeof(q), why));
		pschan_fatal("check", 0);
	}
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
