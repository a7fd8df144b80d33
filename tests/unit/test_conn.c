/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_conn.c - the connection guards of the HTTP side: peer identity
 * (peer.c), per-peer counting (peer_limit.c) and the whole-request deadline
 * thread (deadline.c), on real sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sockdiag.h"
#include "http/deadline.h"
#include "access/peer.h"
#include "http/peer_limit.h"

static struct peer
peer_v4(const char *a)
{
	struct peer p;

	memset(&p, 0, sizeof(p));
	p.kind = PEER_INET4;
	assert_int_equal(inet_pton(AF_INET, a, p.addr), 1);
	return p;
}

static struct peer
peer_v6(const char *a)
{
	struct peer p;

	memset(&p, 0, sizeof(p));
	p.kind = PEER_INET6;
	assert_int_equal(inet_pton(AF_INET6, a, p.addr), 1);
	return p;
}

static struct peer
peer_uid(uid_t uid, pid_t pid)
{
	struct peer p;

	memset(&p, 0, sizeof(p));
	p.kind = PEER_UNIX;
	p.uid = uid;
	p.pid = pid;
	return p;
}

static void
test_identify_unix(void **state)
{
	int sv[2];
	struct peer p;
	char buf[96];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(peer_identify(sv[0], NULL, 0, &p), 0);
	assert_int_equal(p.kind, PEER_UNIX);
	assert_int_equal(p.uid, geteuid());
	assert_int_equal(p.pid, getpid());
	assert_int_equal(peer_is_root(&p), geteuid() == 0);
	peer_format(&p, buf, sizeof(buf));
	assert_non_null(strstr(buf, "uid="));
	close(sv[0]);
	close(sv[1]);
}

/* The kernel's groups of the peer: its gid first, then each of the
 * groups it held, once; a TCP socket has none. */
static void
test_own_groups(void **state)
{
	int sv[2], n;
	unsigned others;
	gid_t mine[IDENTITY_MAX_GROUPS];
	struct identity id;

	memset(&id, 0, sizeof(id));
	id.ngids = 1;
	n = getgroups(IDENTITY_MAX_GROUPS, mine);
	assert_true(n >= 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* 4242: a gid this process holds no group of */
	assert_int_equal(peer_own_groups(sv[0], 4242, &id), 0);
	assert_int_equal(id.gids[0], 4242);
	assert_int_equal(id.ngids, 1 + (unsigned)n);
	for (int i = 0; i < n; i++)
		assert_int_equal(id.gids[1 + i], mine[i]);
	/* the gid itself is not listed twice */
	if (n > 0) {
		others = 0;
		for (int i = 0; i < n; i++)
			others += mine[i] != mine[0];
		assert_int_equal(peer_own_groups(sv[0], mine[0], &id), 0);
		assert_int_equal(id.gids[0], mine[0]);
		assert_int_equal(id.ngids, 1 + others);
	}
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(peer_own_groups(-1, 1, &id), -1);
	(void)state;
}

/* The pidfd is the connecting process's: it polls as exited once that
 * process is gone, whatever its pid number is then given to. */
static void
test_pidfd_follows_the_process(void **state)
{
	int sv[2], st;
	struct peer p, q;
	pid_t child;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(peer_identify(sv[0], NULL, 0, &p), 0);
	assert_int_equal(p.pidfd, -1);
	assert_true(peer_exited(&p));		/* none taken: exited */
	assert_int_equal(peer_take_pidfd(sv[0], &p), 0);
	assert_true(p.pidfd >= 0);
	assert_false(peer_exited(&p));		/* this process */
	peer_release(&p);
	assert_int_equal(p.pidfd, -1);
	peer_release(&p);			/* twice: harmless */
	close(sv[0]);
	close(sv[1]);

	/* a child makes a pair, hands one end over and exits: the end's
	 * peer is the child (SO_PEERCRED names the pair's creator) */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int pair[2];
		char c = 0, cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { .iov_base = &c, .iov_len = 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
		    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		/* the padding CMSG_SPACE adds goes out too: valgrind checks it */
		memset(cbuf, 0, sizeof(cbuf));
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
			_exit(1);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pair[0], sizeof(int));
		if (sendmsg(sv[1], &mh, 0) != 1)
			_exit(1);
		/* until the parent took the pidfd */
		_exit(read(sv[1], &c, 1) == 1 ? 0 : 1);
	}
	{
		char c, cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { .iov_base = &c, .iov_len = 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
		    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		int end;

		assert_int_equal(recvmsg(sv[0], &mh, 0), 1);
		memcpy(&end, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
		assert_int_equal(peer_identify(end, NULL, 0, &q), 0);
		assert_int_equal(q.pid, child);
		assert_int_equal(peer_take_pidfd(end, &q), 0);
		assert_false(peer_exited(&q));
		assert_int_equal(write(sv[0], "x", 1), 1);
		assert_int_equal(waitpid(child, &st, 0), child);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		/* reaped: the number is free, the pidfd still knows */
		assert_true(peer_exited(&q));
		peer_release(&q);
		close(end);
	}
	close(sv[0]);
	close(sv[1]);
}

static void
test_identify_v4_mapped(void **state)
{
	struct sockaddr_in6 in6;
	struct peer p, q = peer_v4("10.1.2.3");
	char buf[96];

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.1.2.3",
	    &in6.sin6_addr), 1);
	assert_int_equal(peer_identify(-1, (struct sockaddr *)&in6,
	    sizeof(in6), &p), 0);
	assert_int_equal(p.kind, PEER_INET4);
	assert_true(peer_same(&p, &q));
	assert_int_equal(peer_hash(&p), peer_hash(&q));
	assert_string_equal(peer_format(&p, buf, sizeof(buf)), "addr=10.1.2.3");
	assert_false(peer_is_root(&p));
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &in6.sin6_addr), 1);
	assert_int_equal(peer_identify(-1, (struct sockaddr *)&in6,
	    sizeof(in6), &p), 0);
	assert_int_equal(p.kind, PEER_INET6);
	assert_false(peer_same(&p, &q));
	assert_string_equal(peer_format(&p, buf, sizeof(buf)),
	    "addr=2001:db8::1");
}

static void
test_same_ignores_pid(void **state)
{
	struct peer a = peer_uid(1000, 1), b = peer_uid(1000, 2),
	    c = peer_uid(1001, 1);

	assert_true(peer_same(&a, &b));
	assert_int_equal(peer_hash(&a), peer_hash(&b));
	assert_false(peer_same(&a, &c));
}

/* All of loopback is one peer; the logs still name the real address. */
static void
test_same_loopback_is_one_peer(void **state)
{
	struct peer a = peer_v4("127.0.0.1"), b = peer_v4("127.5.6.7"),
	    c = peer_v6("::1"), d = peer_v4("128.0.0.1"), e = peer_v6("::2"),
	    f = peer_v4("126.255.255.255"), u = peer_uid(0, 1);
	struct peer_limit *pl;
	struct zerr err;
	char buf[96];

	assert_true(peer_same(&a, &b));
	assert_true(peer_same(&a, &c));
	assert_true(peer_same(&c, &b));
	assert_int_equal(peer_hash(&a), peer_hash(&b));
	assert_int_equal(peer_hash(&a), peer_hash(&c));
	assert_true(peer_is_loopback(&b) && peer_is_loopback(&c));
	assert_false(peer_is_loopback(&d) || peer_is_loopback(&e) ||
	    peer_is_loopback(&f) || peer_is_loopback(&u));
	assert_false(peer_same(&a, &d));
	assert_false(peer_same(&a, &f));
	assert_false(peer_same(&c, &e));	/* ::2 is no loopback */
	assert_false(peer_same(&a, &u));
	assert_string_equal(peer_format(&b, buf, sizeof(buf)),
	    "addr=127.5.6.7");
	assert_string_equal(peer_format(&c, buf, sizeof(buf)), "addr=::1");
	/* the attack: switching loopback addresses does not pass the cap */
	assert_int_equal(peer_limit_create(8, &pl, &err), 0);
	for (unsigned i = 0; i < 260; i++) {
		char s[32];
		struct peer p;

		snprintf(s, sizeof(s), "127.%u.%u.%u", i / 250, i % 250,
		    i % 7 + 1);
		p = peer_v4(s);
		assert_true(peer_limit_acquire(pl, &p) == (i < 8));
	}
	assert_false(peer_limit_acquire(pl, &c));
	assert_int_equal(peer_limit_peers(pl), 1);
	assert_int_equal(peer_limit_count(pl, &a), 8);
	assert_true(peer_limit_acquire(pl, &d));
	peer_limit_destroy(pl);
}

/*
 * A loopback TCP peer whose client socket's owner is known counts as that
 * user, from any loopback address and on the Unix socket alike; the rest
 * of loopback stays one peer. The address stays in the logs.
 */
static void
test_same_owned_loopback_is_its_user(void **state)
{
	struct peer a = peer_v4("127.0.0.1"), b = peer_v4("127.5.6.7"),
	    c = peer_v6("::1"), d = peer_v4("10.0.0.1"), u = peer_uid(1000, 7),
	    w = peer_uid(1001, 7), plain = peer_v4("127.0.0.1");
	struct peer_limit *pl;
	struct zerr err;
	char buf[96];

	peer_set_owner(&a, 1000);
	peer_set_owner(&b, 1000);
	peer_set_owner(&c, 1001);
	peer_set_owner(&d, 1000);	/* not loopback: no owner taken */
	assert_true(a.owned && b.owned && c.owned);
	assert_false(d.owned);
	assert_true(peer_same(&a, &b));
	assert_true(peer_same(&a, &u));	/* one count per user */
	assert_int_equal(peer_hash(&a), peer_hash(&u));
	assert_true(peer_same(&c, &w));
	assert_false(peer_same(&a, &c));
	assert_false(peer_same(&a, &plain));
	assert_false(peer_same(&a, &d));
	assert_true(peer_is_loopback(&a) && peer_is_loopback(&c));
	assert_false(peer_is_root(&a));	/* root is a Unix peer's */
	assert_string_equal(peer_format(&b, buf, sizeof(buf)),
	    "addr=127.5.6.7 uid=1000");
	assert_string_equal(peer_format(&c, buf, sizeof(buf)),
	    "addr=::1 uid=1001");
	/* two users on loopback: each has its own cap */
	assert_int_equal(peer_limit_create(2, &pl, &err), 0);
	assert_true(peer_limit_acquire(pl, &a));
	assert_true(peer_limit_acquire(pl, &b));
	assert_false(peer_limit_acquire(pl, &a));
	assert_false(peer_limit_acquire(pl, &u));
	assert_true(peer_limit_acquire(pl, &c));
	assert_true(peer_limit_acquire(pl, &plain));
	assert_int_equal(peer_limit_peers(pl), 3);
	peer_limit_release(pl, &u);
	assert_true(peer_limit_acquire(pl, &b));
	peer_limit_destroy(pl);
}

/* The tuple of an accepted loopback connection, as its client has it. */
static void
test_loopback_tuple(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_in cl;
	socklen_t len = sizeof(sin);
	struct sockdiag_tuple t;
	int l, c, s, sv[2];

	assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr), 1);
	assert_true((l = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	assert_true((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	memset(&cl, 0, sizeof(cl));
	cl.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, "127.0.0.9", &cl.sin_addr), 1);
	assert_int_equal(bind(c, (struct sockaddr *)&cl, sizeof(cl)), 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_true((s = accept(l, NULL, NULL)) >= 0);
	len = sizeof(cl);
	assert_int_equal(getsockname(c, (struct sockaddr *)&cl, &len), 0);
	assert_int_equal(peer_loopback_tuple(s, &t), 0);
	assert_int_equal(t.family, 4);
	assert_memory_equal(t.client, &cl.sin_addr, 4);
	assert_memory_equal(t.server, &sin.sin_addr, 4);
	assert_int_equal(t.client_port, ntohs(cl.sin_port));
	assert_int_equal(t.server_port, ntohs(sin.sin_port));
	assert_true(sockdiag_tuple_loopback(&t));
	/* not TCP/IP: no tuple */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(peer_loopback_tuple(sv[0], &t), -1);
	assert_int_equal(t.family, 0);
	close(sv[0]);
	close(sv[1]);
	close(s);
	close(c);
	close(l);
}

/* An IPv6 /64 is one peer; IPv4 addresses are peers of their own. */
static void
test_same_v6_prefix_v4_address(void **state)
{
	struct peer a = peer_v6("2001:db8:1:2::1"),
	    b = peer_v6("2001:db8:1:2:ffff:ffff:ffff:fffe"),
	    c = peer_v6("2001:db8:1:3::1"), d = peer_v6("2001:db9:1:2::1"),
	    e = peer_v4("10.0.0.1"), f = peer_v4("10.0.0.2"),
	    g = peer_v4("10.0.0.1");

	assert_true(peer_same(&a, &b));
	assert_int_equal(peer_hash(&a), peer_hash(&b));
	assert_false(peer_same(&a, &c));
	assert_false(peer_same(&a, &d));
	assert_false(peer_same(&e, &f));
	assert_true(peer_same(&e, &g));
	assert_int_equal(peer_hash(&e), peer_hash(&g));
	assert_false(peer_same(&a, &e));
	/* hashes spread: different /64s and addresses rarely collide */
	assert_true(peer_hash(&a) != peer_hash(&c) ||
	    peer_hash(&a) != peer_hash(&d));
	assert_true(peer_hash(&e) != peer_hash(&f));
}

static void
test_limit_counts_per_peer(void **state)
{
	struct peer_limit *pl;
	struct zerr err;
	struct peer a = peer_uid(1000, 1), b = peer_v4("127.0.0.2");

	assert_int_equal(peer_limit_create(0, &pl, &err), -1);
	assert_int_equal(peer_limit_create(3, &pl, &err), 0);
	for (int i = 0; i < 3; i++)
		assert_true(peer_limit_acquire(pl, &a));
	assert_false(peer_limit_acquire(pl, &a));
	assert_int_equal(peer_limit_count(pl, &a), 3);
	assert_true(peer_limit_acquire(pl, &b));
	assert_int_equal(peer_limit_peers(pl), 2);
	peer_limit_release(pl, &a);
	assert_true(peer_limit_acquire(pl, &a));
	assert_false(peer_limit_acquire(pl, &a));
	for (int i = 0; i < 3; i++)
		peer_limit_release(pl, &a);
	assert_int_equal(peer_limit_count(pl, &a), 0);
	peer_limit_release(pl, &a);		/* extra release: harmless */
	assert_int_equal(peer_limit_count(pl, &a), 0);
	assert_int_equal(peer_limit_peers(pl), 1);
	peer_limit_release(pl, &b);
	assert_int_equal(peer_limit_peers(pl), 0);
	peer_limit_destroy(pl);
}

static void
test_limit_many_peers_collide(void **state)
{
	struct peer_limit *pl;
	struct zerr err;

	assert_int_equal(peer_limit_create(1, &pl, &err), 0);
	for (uid_t u = 0; u < 5000; u++) {
		struct peer p = peer_uid(u, 1);

		assert_true(peer_limit_acquire(pl, &p));
		assert_false(peer_limit_acquire(pl, &p));
	}
	assert_int_equal(peer_limit_peers(pl), 5000);
	for (uid_t u = 0; u < 5000; u += 2) {
		struct peer p = peer_uid(u, 1);

		peer_limit_release(pl, &p);
	}
	assert_int_equal(peer_limit_peers(pl), 2500);
	peer_limit_destroy(pl);			/* frees the rest */
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds until the peer of `fd` sees EOF (the deadline shut it down). */
static double
wait_eof(int fd, double limit_s)
{
	double t0 = now_s();
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;

	while (now_s() - t0 < limit_s) {
		if (poll(&pfd, 1, 50) == 1 && read(fd, &c, 1) == 0)
			return now_s() - t0;
	}
	return -1;
}

static void
test_deadline_expires_armed_only(void **state)
{
	struct deadlines *d;
	struct deadline_entry a, b;
	struct zerr err;
	int sa[2], sb[2];
	double t0, waited;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sa), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sb), 0);
	assert_int_equal(deadline_start(300, &d, &err), 0);
	deadline_init(&a, sa[0], "a");
	deadline_init(&b, sb[0], "b");
	t0 = now_s();
	deadline_arm(d, &a);
	deadline_arm(d, &b);
	deadline_disarm(d, &b);			/* its request arrived */
	waited = wait_eof(sa[1], 30);
	assert_true(waited >= 0);
	/* takes the lock: the expiry that shut the socket is visible */
	assert_int_equal(deadline_expired_total(d), 1);
	/* never before the deadline, measured from the arming */
	assert_true(now_s() - t0 >= 0.29);
	assert_true(a.expired && !a.armed);
	assert_false(b.expired);
	/* b stays open well past a's deadline */
	assert_true(wait_eof(sb[1], 0.6) < 0);
	assert_int_equal(deadline_expired_total(d), 1);
	/* re-arming an expired entry does nothing */
	deadline_arm(d, &a);
	assert_false(a.armed);
	deadline_stop(d);
	close(sa[0]);
	close(sa[1]);
	close(sb[0]);
	close(sb[1]);
}

static void
test_deadline_rearm_restarts_clock(void **state)
{
	struct deadlines *d;
	struct deadline_entry a;
	struct zerr err;
	int s[2];
	double t_last;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	assert_int_equal(deadline_start(400, &d, &err), 0);
	deadline_init(&a, s[0], "a");
	deadline_arm(d, &a);
	/* a keep-alive client answered again and again: each response
	 * restarts the clock, so it lives 4 deadlines long */
	for (int i = 0; i < 16; i++) {
		usleep(100000);
		deadline_arm(d, &a);
	}
	t_last = now_s();
	/* under the lock: the thread writes a.expired */
	assert_int_equal(deadline_expired_total(d), 0);
	assert_true(wait_eof(s[1], 30) >= 0);
	assert_true(now_s() - t_last >= 0.39);
	deadline_stop(d);
	close(s[0]);
	close(s[1]);
}

static void
test_deadline_idle_thread_stops(void **state)
{
	struct deadlines *d;
	struct zerr err;

	/* nothing armed: the thread sleeps without a timer and still stops */
	assert_int_equal(deadline_start(10000, &d, &err), 0);
	deadline_stop(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identify_unix),
		cmocka_unit_test(test_pidfd_follows_the_process),
		cmocka_unit_test(test_own_groups),
		cmocka_unit_test(test_identify_v4_mapped),
		cmocka_unit_test(test_same_ignores_pid),
		cmocka_unit_test(test_same_loopback_is_one_peer),
		cmocka_unit_test(test_same_v6_prefix_v4_address),
		cmocka_unit_test(test_same_owned_loopback_is_its_user),
		cmocka_unit_test(test_loopback_tuple),
		cmocka_unit_test(test_limit_counts_per_peer),
		cmocka_unit_test(test_limit_many_peers_collide),
		cmocka_unit_test(test_deadline_expires_armed_only),
		cmocka_unit_test(test_deadline_rearm_restarts_clock),
		cmocka_unit_test(test_deadline_idle_thread_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
