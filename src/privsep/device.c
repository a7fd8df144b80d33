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
#include "boundary.h"

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

static void *
psdev_main(void *arg)
{
	struct psdev_chan *c = arg;
	struct psdev *d = c->d;
	/* one byte more than the largest request: a longer one shows */
	union {
		union psop_msg m;
		char raw[sizeof(union psop_msg) + 1];
	} in;
	/* the checked copy and the reply: 2 x 40 KiB of this thread's stack,
	 * not TLS, which every thread of the process would carry */
	union psop_msg msg;
	union psop_reply out;
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
		if (psop_dispatch(&d->x, &d->lim, in.raw, (size_t)n, fd, bad,
		    &msg, &out, &outlen, why, sizeof(why)) != 0) {
			psdev_refuse(d, why);
			break;
		}
		/* no token stays (n fits: a longer one was refused) */
		explicit_bzero(&in, (size_t)n < sizeof(in) ? (size_t)n :
		    sizeof(in));
		do
			n = send(c->fd, &out, outlen, MSG_NOSIGNAL);
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
