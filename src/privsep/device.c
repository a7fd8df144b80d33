/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.c - the executor threads of the device process (see device.h).
 */
#include "device.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

struct psdev_chan {
	struct psdev *d;
	int fd;
	pthread_t thread;
	bool started;
};

struct psdev {
	struct psexec x;
	struct psmsg_limits lim;
	pid_t net;
	void (*on_refused)(void *arg);
	void *arg;
	atomic_ulong refused;
	unsigned n;
	struct psdev_chan *chans;	/* [n] */
};

static void
psdev_refuse(struct psdev *d, const char *why)
{
	char q[160];

	atomic_fetch_add(&d->refused, 1);
	zlog(ZLOG_ERROR, "privsep_message_refused", "reason=%s msg=\"the "
	    "network process sent a request that does not check out; it is "
	    "killed and zeusd stops\"", zlog_quote(q, sizeof(q), why));
	if (d->net > 0)
		(void)kill(d->net, SIGKILL);
	if (d->on_refused != NULL)
		d->on_refused(d->arg);
}

/*
 * One request and the descriptors that came with it: *fd is the one
 * descriptor a PSMSG_PEER carries, -1 for none. More than one, or a
 * truncated control message that brought one, closes them all and sets
 * *bad. A truncated one that brought none is this process's own lack
 * (recvmsg could not install the descriptor: EMFILE), not a hostile
 * message: *fd is PSEXEC_FD_LOST and the request is answered busy.
 * Returns the datagram's length as recv does (MSG_TRUNC: its real length).
 */
static ssize_t
psdev_recv(int chan, void *buf, size_t len, int *fd, bool *bad)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	unsigned nfds = 0;
	ssize_t n;

	*fd = -1;
	*bad = false;
	do
		n = recvmsg(chan, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
	    c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			*bad = true;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int),
			    sizeof(got));
			if (nfds++ == 0)
				*fd = got;
			else
				close(got);
		}
	}
	if (nfds > 1 || (nfds == 1 && (mh.msg_flags & MSG_CTRUNC) != 0)) {
		*bad = true;
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	} else if (nfds == 0 && (mh.msg_flags & MSG_CTRUNC) != 0) {
		*fd = PSEXEC_FD_LOST;
	}
	return n;
}

/*
 * One datagram, told apart by its size (a request, a token, an audit
 * line, writes, a TCP owner's look-up, a Slurm step), checked in full and
 * run. 0 with the reply to send in *out (*rep, or for writes a reply of
 * its own) and its length in *outlen,
 * or -1 with `why` (a message that does not check out). `fd`, the
 * descriptor that came with it (-1: none), is closed here; `bad`: more
 * came, or not SCM_RIGHTS.
 */
struct psdev_writes {
	struct psmsg_writes w;
	struct psmsg_writes_reply rep;
};

static int
psdev_one(struct psdev *d, const void *raw, size_t n, int fd, bool bad,
    struct psdev_writes *wr, struct psmsg_reply *rep, const void **out,
    size_t *outlen, char *why, size_t whysz)
{
	/* on the stack: static _Thread_local would put it in every thread */
	struct psmsg_token tok;
	struct psmsg_audit audit;
	struct psmsg_tcp_owner owner;
	struct psmsg_slurm_step step;
	/* 7 + 33 KiB: the channel's own (psdev_main's `wr`), not TLS, which
	 * every thread of the process would carry */
	struct psmsg_writes *writes = &wr->w;
	struct psmsg_writes_reply *wrep = &wr->rep;
	struct psmsg_request req;
	bool big = n == sizeof(tok) || n == sizeof(audit) ||
	    n == sizeof(*writes) || n == sizeof(owner) || n == sizeof(step);
	int rc = 0;

	why[0] = '\0';
	*out = rep;
	*outlen = sizeof(*rep);
	memset(&req, 0, sizeof(req));
	if (n == sizeof(tok))
		(void)psmsg_token_check(raw, n, &tok, why, whysz);
	else if (n == sizeof(audit))
		(void)psmsg_audit_check(raw, n, &d->lim, &audit, why, whysz);
	else if (n == sizeof(*writes))
		(void)psmsg_writes_check(raw, n, &d->lim, writes, why, whysz);
	else if (n == sizeof(owner))
		(void)psmsg_tcp_owner_check(raw, n, &owner, why, whysz);
	else if (n == sizeof(step))
		(void)psmsg_slurm_step_check(raw, n, &d->lim, &step, why,
		    whysz);
	else
		(void)psmsg_request_check(raw, n, &d->lim, &req, why, whysz);
	if (why[0] == '\0' && bad)
		snprintf(why, whysz, "more than one descriptor, or not "
		    "SCM_RIGHTS");
	else if (why[0] == '\0' && !big && req.op == PSMSG_PEER && fd == -1)
		snprintf(why, whysz, "a peer request without its socket");
	else if (why[0] == '\0' && fd != -1 && (big || req.op != PSMSG_PEER))
		snprintf(why, whysz, "a descriptor with a request that takes "
		    "none");
	if (why[0] != '\0')
		rc = -1;
	else if (n == sizeof(tok))
		psexec_token(&d->x, &tok, rep);
	else if (n == sizeof(audit))
		psexec_audit(&d->x, &audit, rep);
	else if (n == sizeof(owner))
		psexec_tcp_owner(&d->x, &owner, rep);
	else if (n == sizeof(step))
		psexec_slurm_step(&d->x, &step, rep);
	else if (n == sizeof(*writes)) {
		psexec_writes(&d->x, writes, wrep);
		*out = wrep;
		*outlen = psmsg_writes_reply_size(writes->n);
	} else
		psexec_run(&d->x, &req, fd, rep);
	explicit_bzero(&tok, sizeof(tok));
	if (fd >= 0)
		close(fd);
	return rc;
}

static void *
psdev_main(void *arg)
{
	struct psdev_chan *c = arg;
	struct psdev *d = c->d;
	/* one byte more than the largest request: a longer one shows */
	union {
		struct psmsg_request req;
		struct psmsg_token tok;
		struct psmsg_audit audit;
		struct psmsg_writes writes;
		char raw[sizeof(struct psmsg_token) + 1];
	} in;
	struct psmsg_reply rep;
	struct psdev_writes wr;		/* 40 KiB of this thread's stack */
	const void *out;
	size_t outlen;
	char why[128];
	ssize_t n;
	bool bad;
	int fd;

	for (;;) {
		n = psdev_recv(c->fd, in.raw, sizeof(in.raw), &fd, &bad);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;		/* end of file: the network side left */
		if (psdev_one(d, in.raw, (size_t)n, fd, bad, &wr, &rep, &out,
		    &outlen, why, sizeof(why)) != 0) {
			psdev_refuse(d, why);
			break;
		}
		if ((size_t)n == sizeof(in.tok))	/* no token stays */
			explicit_bzero(&in, sizeof(in));
		do
			n = send(c->fd, out, outlen, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n != (ssize_t)outlen)
			break;		/* the network side left mid-request */
	}
	return NULL;
}

int
psdev_start(const struct psexec *x, const struct psmsg_limits *lim,
    const int *fds, unsigned n, pid_t net, void (*on_refused)(void *arg),
    void *arg, struct psdev **out, struct zerr *err)
{
	struct psdev *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->chans = calloc(n ? n : 1,
	    sizeof(*d->chans))) == NULL) {
		free(d);
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	d->x = *x;
	d->lim = *lim;
	d->net = net;
	d->on_refused = on_refused;
	d->arg = arg;
	d->n = n;
	atomic_init(&d->refused, 0);
	for (unsigned i = 0; i < n; i++) {
		d->chans[i].d = d;
		d->chans[i].fd = fds[i];
	}
	for (unsigned i = 0; i < n; i++) {
		int e = pthread_create(&d->chans[i].thread, NULL, psdev_main,
		    &d->chans[i]);

		if (e != 0) {
			(void)psdev_stop(d, 0);
			return zerr_set(err, ZERR_INTERNAL, "cannot start a "
			    "device thread: %s", strerror(e));
		}
		d->chans[i].started = true;
	}
	*out = d;
	return 0;
}

unsigned long
psdev_refused(const struct psdev *d)
{
	return atomic_load(&((struct psdev *)d)->refused);
}

int
psdev_stop(struct psdev *d, unsigned timeout_ms)
{
	struct timespec until;
	int rc = 0;

	if (d == NULL)
		return 0;
	for (unsigned i = 0; i < d->n; i++)
		(void)shutdown(d->chans[i].fd, SHUT_RDWR);
	/* pthread_timedjoin_np takes CLOCK_REALTIME */
	until = zclock_realtime_in(timeout_ms);
	for (unsigned i = 0; i < d->n; i++)
		if (d->chans[i].started &&
		    pthread_timedjoin_np(d->chans[i].thread, NULL, &until) != 0)
			rc = -1;
	if (rc != 0)
		return -1;	/* a command never returned: leave it all */
	for (unsigned i = 0; i < d->n; i++)
		close(d->chans[i].fd);
	free(d->chans);
	free(d);
	return 0;
}
