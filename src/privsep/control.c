/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the control channel's messages (see control.h).
 */
#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
psctl_send(int fd, const struct psctl_msg *m, const int *fds, unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * PSCTL_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > PSCTL_MAX_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

int
psctl_recv(int fd, struct psctl_msg *m, int *fds, unsigned *nfds, char *why,
    size_t whysz)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * PSCTL_MAX_FDS)];
		struct cmsghdr align;
	} u;
	union {
		struct psctl_msg m;
		char raw[sizeof(struct psctl_msg) + 1];
	} in;
	struct iovec iov = { .iov_base = in.raw, .iov_len = sizeof(in.raw) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;
	int bad = 0;

	*nfds = 0;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n < 0) {
		snprintf(why, whysz, "receive: %s", strerror(errno));
		return -1;
	}
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = 1;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (*nfds < PSCTL_MAX_FDS)
				fds[(*nfds)++] = f;
			else {
				close(f);
				bad = 1;
			}
		}
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0)
		bad = 1;
	if (bad || n != (ssize_t)sizeof(*m) || in.m.magic != PSCTL_MAGIC) {
		for (unsigned i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		snprintf(why, whysz, "malformed control message (%zd bytes%s)",
		    n, bad ? ", bad ancillary data" : "");
		return -1;
	}
	memcpy(m, &in.m, sizeof(*m));
	return 1;
}

int
psctl_check_from_network(const struct psctl_msg *m, unsigned nfds, char *why,
    size_t whysz)
{
	static const struct psgpu_lacks zero;

	if (nfds != 0 || m->flags != 0) {
		snprintf(why, whysz, "control message with fds or flags");
		return -1;
	}
	if (memcmp(&m->lacks, &zero, sizeof(zero)) != 0) {
		snprintf(why, whysz, "control message with a lacks table");
		return -1;
	}
	if (m->type == PSCTL_RELOADED) {
		if (m->value <= PSCTL_RELOADED_MAX)
			return 0;
		snprintf(why, whysz, "reload result of %u failed parts",
		    m->value);
		return -1;
	}
	if (m->type != PSCTL_NOTIFY) {
		snprintf(why, whysz, "control message of type %u", m->type);
		return -1;
	}
	if (m->value < PSCTL_N_READY || m->value > PSCTL_N_STOPPING) {
		snprintf(why, whysz, "notification of kind %u", m->value);
		return -1;
	}
	return 0;
}
