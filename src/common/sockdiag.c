/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sockdiag.c - the owner of a loopback TCP client socket (see sockdiag.h).
 *
 * The request is an inet_diag "get one socket" (SOCK_DIAG_BY_FAMILY
 * without NLM_F_DUMP) naming the socket's exact four-tuple, so the kernel
 * does one hash look-up, not a walk of the socket table, and answers with
 * one message: the socket's inet_diag_msg, or an NLMSG_ERROR (ENOENT).
 * The answer is read into a fixed buffer and believed only when it is the
 * kernel's, for our sequence number, about the very tuple asked for, and
 * of a full socket in a connected state: the kernel's record of a
 * connection in TIME_WAIT (or of a half-open one) reports uid 0, which
 * would read as root.
 */
#include "common/sockdiag.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

/*
 * The answer: a netlink header, inet_diag_msg (72 bytes) and the few
 * attributes the kernel always adds (about 40 bytes in Linux 6.x). A
 * longer datagram shows as truncated (MSG_TRUNC) and is not read.
 */
#define SOCKDIAG_REPLY_MAX 1024

/* An arbitrary sequence number: the socket is ours alone, for one call. */
#define SOCKDIAG_SEQ 0x7a736431u		/* "zsd1" */

/*
 * Netlink refused outright (a unit without AF_NETLINK in
 * RestrictAddressFamilies=, a seccomp filter, a kernel without
 * inet_diag): said once, since every loopback client then counts as the
 * one loopback peer.
 */
static void
sockdiag_unavailable(const char *what, int e)
{
	static atomic_bool said;

	if (!atomic_exchange(&said, true))
		zlog(ZLOG_WARN, "tcp_owner_unavailable", "during=%s errno=%d "
		    "msg=\"the kernel cannot be asked who owns a loopback TCP "
		    "client's socket (netlink sock_diag); loopback TCP clients "
		    "count as one peer\"", what, e);
}

/* A full socket of an accepted connection, as its client may hold it. */
static bool
sockdiag_state_connected(uint8_t state)
{
	switch (state) {
	case TCP_ESTABLISHED:
	case TCP_FIN_WAIT1:
	case TCP_FIN_WAIT2:
	case TCP_CLOSE_WAIT:
	case TCP_LAST_ACK:
	case TCP_CLOSING:
		return true;
	default:
		return false;	/* TIME_WAIT, SYN_RECV, LISTEN, CLOSE, ... */
	}
}

/* Waits until `fd` is readable, at most `timeout_ms` in all. */
static bool
sockdiag_wait(int fd, unsigned timeout_ms)
{
	uint64_t until = zclock_now_ms() + timeout_ms;
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	for (;;) {
		uint64_t now = zclock_now_ms();
		int n;

		if (now > until)
			return false;
		n = poll(&pf, 1, (int)(until - now));
		if (n > 0)
			return (pf.revents & POLLIN) != 0;
		if (n == 0 || errno != EINTR)
			return false;
	}
}

/*
 * The one message of the answer (`len` bytes at `buf`): the socket's uid
 * when it is about `t` and connected; -1 otherwise (an NLMSG_ERROR too).
 */
static int
sockdiag_parse(const void *buf, size_t len, const struct sockdiag_tuple *t,
    uint32_t *uid)
{
	struct nlmsghdr nh;
	struct inet_diag_msg m;
	size_t alen = t->family == 4 ? 4 : 16;

	if (len < NLMSG_LENGTH(sizeof(m)))
		return -1;
	memcpy(&nh, buf, sizeof(nh));
	if (nh.nlmsg_len < NLMSG_LENGTH(sizeof(m)) || nh.nlmsg_len > len ||
	    nh.nlmsg_type != SOCK_DIAG_BY_FAMILY || nh.nlmsg_seq != SOCKDIAG_SEQ)
		return -1;
	memcpy(&m, (const char *)buf + NLMSG_HDRLEN, sizeof(m));
	if (m.idiag_family != (t->family == 4 ? AF_INET : AF_INET6) ||
	    !sockdiag_state_connected(m.idiag_state) ||
	    m.id.idiag_sport != htons(t->client_port) ||
	    m.id.idiag_dport != htons(t->server_port) ||
	    memcmp(m.id.idiag_src, t->client, alen) != 0 ||
	    memcmp(m.id.idiag_dst, t->server, alen) != 0 ||
	    m.idiag_uid == UINT32_MAX)
		return -1;
	*uid = m.idiag_uid;
	return 0;
}

/*
 * Sends one request to the kernel and reads its one answer into `buf`:
 * the answer's length, or -1 (no answer within `timeout_ms`, not the
 * kernel's, truncated). `tell`: say once when netlink is refused outright.
 */
static ssize_t
sockdiag_ask(const void *req, size_t len, unsigned timeout_ms, void *buf,
    size_t size, bool tell)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK }, from;
	socklen_t flen = sizeof(from);
	ssize_t n, got = -1;
	int fd;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0) {
		/* EMFILE and ENOBUFS pass: this process's lack, not a rule */
		if (tell && errno != EMFILE && errno != ENFILE &&
		    errno != ENOBUFS && errno != ENOMEM)
			sockdiag_unavailable("socket", errno);
		return -1;
	}
	do
		n = sendto(fd, req, len, 0, (const struct sockaddr *)&kernel,
		    sizeof(kernel));
	while (n < 0 && errno == EINTR);
	if (tell && n < 0 && errno != ENOBUFS && errno != ENOMEM)
		sockdiag_unavailable("send", errno);
	if (n != (ssize_t)len || !sockdiag_wait(fd, timeout_ms))
		goto out;
	memset(&from, 0, sizeof(from));
	do
		n = recvfrom(fd, buf, size, MSG_DONTWAIT | MSG_TRUNC,
		    (struct sockaddr *)&from, &flen);
	while (n < 0 && errno == EINTR);
	/* the kernel's (port id 0), whole */
	if (n > 0 && (size_t)n <= size && flen == sizeof(from) &&
	    from.nl_family == AF_NETLINK && from.nl_pid == 0)
		got = n;
out:
	close(fd);
	return got;
}

int
sockdiag_tcp_owner(const struct sockdiag_tuple *t, unsigned timeout_ms,
    uint32_t *uid)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nh;	/* aligned for it */
		char raw[SOCKDIAG_REPLY_MAX];
	} in;
	size_t alen = t->family == 4 ? 4 : 16;
	ssize_t n;

	if (!sockdiag_tuple_loopback(t))
		return -1;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST;	/* one socket: no NLM_F_DUMP */
	req.nh.nlmsg_seq = SOCKDIAG_SEQ;
	req.r.sdiag_family = t->family == 4 ? AF_INET : AF_INET6;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;	/* an exact look-up filters none */
	req.r.id.idiag_sport = htons(t->client_port);
	req.r.id.idiag_dport = htons(t->server_port);
	memcpy(req.r.id.idiag_src, t->client, alen);
	memcpy(req.r.id.idiag_dst, t->server, alen);
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	n = sockdiag_ask(&req, sizeof(req), timeout_ms, in.raw, sizeof(in.raw),
	    true);
	return n > 0 ? sockdiag_parse(in.raw, (size_t)n, t, uid) : -1;
}

/* ---- A Unix stream socket, by inode and cookie ---------------------------- */

/*
 * The unix_diag answer: 0 with *shutdown for the socket asked about, 1
 * for the kernel's "no such socket" (NLMSG_ERROR ENOENT), -1 otherwise.
 */
static int
sockdiag_unix_parse(const void *buf, size_t len, uint32_t seq, uint32_t ino,
    const uint32_t cookie[2], uint8_t *shutdown_mask)
{
	struct nlmsghdr nh;
	struct unix_diag_msg m;
	size_t at;

	if (len < NLMSG_HDRLEN)
		return -1;
	memcpy(&nh, buf, sizeof(nh));
	if (nh.nlmsg_len > len)
		return -1;
	if (nh.nlmsg_seq != seq)
		return -2;		/* an earlier question's late answer */
	if (nh.nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr e;

		if (nh.nlmsg_len < NLMSG_LENGTH(sizeof(e)))
			return -1;
		memcpy(&e, (const char *)buf + NLMSG_HDRLEN, sizeof(e));
		return e.error == -ENOENT ? 1 : -1;
	}
	if (nh.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    nh.nlmsg_len < NLMSG_LENGTH(sizeof(m)))
		return -1;
	memcpy(&m, (const char *)buf + NLMSG_HDRLEN, sizeof(m));
	if (m.udiag_family != AF_UNIX || m.udiag_ino != ino ||
	    m.udiag_cookie[0] != cookie[0] || m.udiag_cookie[1] != cookie[1])
		return -1;
	/* the attributes: UNIX_DIAG_SHUTDOWN is always among them */
	at = NLMSG_LENGTH(sizeof(m));
	while (at + sizeof(struct rtattr) <= nh.nlmsg_len) {
		struct rtattr a;

		memcpy(&a, (const char *)buf + at, sizeof(a));
		if (a.rta_len < sizeof(a) || at + a.rta_len > nh.nlmsg_len)
			return -1;
		if (a.rta_type == UNIX_DIAG_SHUTDOWN &&
		    a.rta_len >= RTA_LENGTH(1)) {
			memcpy(shutdown_mask, (const char *)buf + at +
			    RTA_LENGTH(0), 1);
			return 0;
		}
		at += RTA_ALIGN(a.rta_len);
	}
	return -1;
}

/*
 * The device process asks this before every write of a Unix peer, so the
 * netlink socket is kept, one per thread (the device process's channel
 * threads: a handful, for their lives), and only the question and its
 * answer cross: about half the cost of a socket per question. Each
 * question has its own sequence number, and an answer to another (one
 * that came after its question gave up) is read past.
 */
static _Thread_local int unix_nl = -1;
static _Thread_local uint32_t unix_seq;

int
sockdiag_unix_state(uint32_t ino, uint64_t cookie, unsigned timeout_ms,
    uint8_t *shutdown_mask)
{
	struct {
		struct nlmsghdr nh;
		struct unix_diag_req r;
	} req;
	union {
		struct nlmsghdr nh;
		char raw[SOCKDIAG_REPLY_MAX];
	} in;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK }, from;
	uint32_t ck[2] = { (uint32_t)cookie, (uint32_t)(cookie >> 32) };
	uint64_t until = zclock_now_ms() + timeout_ms;
	ssize_t n;
	int rc = -1;

	if (unix_nl < 0 && (unix_nl = socket(AF_NETLINK, SOCK_DGRAM |
	    SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) < 0)
		return -1;
	if (++unix_seq == 0)
		unix_seq = 1;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST;	/* one socket: no NLM_F_DUMP */
	req.nh.nlmsg_seq = unix_seq;
	req.r.sdiag_family = AF_UNIX;
	req.r.udiag_states = ~0u;
	req.r.udiag_ino = ino;
	req.r.udiag_cookie[0] = ck[0];
	req.r.udiag_cookie[1] = ck[1];
	do
		n = sendto(unix_nl, &req, sizeof(req), 0,
		    (const struct sockaddr *)&kernel, sizeof(kernel));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(req))
		goto broken;
	for (;;) {
		socklen_t flen = sizeof(from);
		uint64_t now = zclock_now_ms();

		memset(&from, 0, sizeof(from));
		do
			n = recvfrom(unix_nl, in.raw, sizeof(in.raw),
			    MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from,
			    &flen);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno == EAGAIN) {
			if (now >= until || !sockdiag_wait(unix_nl,
			    (unsigned)(until - now)))
				return -1;	/* its answer is read past later */
			continue;
		}
		if (n <= 0 || (size_t)n > sizeof(in.raw) ||
		    flen != sizeof(from) || from.nl_family != AF_NETLINK ||
		    from.nl_pid != 0)
			goto broken;
		rc = sockdiag_unix_parse(in.raw, (size_t)n, unix_seq, ino, ck,
		    shutdown_mask);
		if (rc != -2)
			return rc;
	}
broken:
	close(unix_nl);		/* a fresh one next time */
	unix_nl = -1;
	return -1;
}

int
sockdiag_unix_id(int fd, uint32_t *ino, uint64_t *cookie)
{
	struct stat st;
	socklen_t len = sizeof(*cookie);

	if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
	    st.st_ino > UINT32_MAX ||
	    getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len) != 0 ||
	    len != sizeof(*cookie))
		return -1;
	*ino = (uint32_t)st.st_ino;
	return 0;
}

bool
sockdiag_unix_works(void)
{
	int sv[2];
	uint32_t ino;
	uint64_t cookie;
	uint8_t sh = 0xff;
	bool ok = false;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return false;
	if (sockdiag_unix_id(sv[0], &ino, &cookie) == 0 &&
	    sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS, &sh) == 0 &&
	    sh == 0) {
		close(sv[1]);
		sv[1] = -1;
		ok = sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
		    &sh) == 0 && sh == 3;
	}
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return ok;
}
