/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sockdiag.c - who owns a loopback TCP client's socket: the netlink
 * look-up (common/sockdiag.c) on real connections, and its privsep
 * message (PSMSG_TCP_OWNER: the device process's check in msg.c and the
 * executor in exec.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/sockdiag.h"
#include "privsep/exec.h"
#include "privsep/msg.h"

/* A listener, a client and the accepted end, on `family`'s loopback. */
struct conn3 {
	int l, c, s;
	struct sockdiag_tuple t;	/* the client's */
};

static void
end_of(const struct sockaddr_storage *ss, uint8_t *addr, uint16_t *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		memcpy(addr, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		memcpy(addr, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
	}
}

static void
conn3_open(struct conn3 *k, int family)
{
	struct sockaddr_storage ss, cs;
	socklen_t len = sizeof(ss);

	memset(k, 0, sizeof(*k));
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr =
		    htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	assert_true((k->l = socket(family, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(k->l, (struct sockaddr *)&ss, family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)), 0);
	assert_int_equal(listen(k->l, 4), 0);
	assert_int_equal(getsockname(k->l, (struct sockaddr *)&ss, &len), 0);
	assert_true((k->c = socket(family, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(connect(k->c, (struct sockaddr *)&ss, len), 0);
	assert_true((k->s = accept(k->l, NULL, NULL)) >= 0);
	len = sizeof(cs);
	assert_int_equal(getsockname(k->c, (struct sockaddr *)&cs, &len), 0);
	k->t.family = family == AF_INET ? 4 : 6;
	end_of(&cs, k->t.client, &k->t.client_port);
	end_of(&ss, k->t.server, &k->t.server_port);
}

static void
conn3_close(struct conn3 *k)
{
	if (k->s >= 0)
		close(k->s);
	if (k->c >= 0)
		close(k->c);
	close(k->l);
}

static void
test_tuple_loopback(void **state)
{
	struct sockdiag_tuple t = { .family = 4, .client = { 127, 0, 0, 2 },
	    .server = { 127, 0, 0, 1 }, .client_port = 40000,
	    .server_port = 4938 };
	struct sockdiag_tuple u;

	assert_true(sockdiag_tuple_loopback(&t));
	u = t;
	u.client[0] = 10;
	assert_false(sockdiag_tuple_loopback(&u));
	u = t;
	u.server[4] = 1;		/* bytes an IPv4 address does not use */
	assert_false(sockdiag_tuple_loopback(&u));
	u = t;
	u.client_port = 0;
	assert_false(sockdiag_tuple_loopback(&u));
	u = t;
	u.family = 5;
	assert_false(sockdiag_tuple_loopback(&u));
	memset(&u, 0, sizeof(u));
	u.family = 6;
	u.client[15] = u.server[15] = 1;
	u.client_port = u.server_port = 1;
	assert_true(sockdiag_tuple_loopback(&u));
	u.server[15] = 2;		/* ::2 */
	assert_false(sockdiag_tuple_loopback(&u));
	u.server[15] = 1;
	u.server[10] = u.server[11] = 0xff;	/* ::ffff:0.0.0.1 */
	assert_false(sockdiag_tuple_loopback(&u));
}

/* This process's own connection: owned by its euid, on IPv4 and IPv6. */
static void
test_owner_of_own_connection(void **state)
{
	int families[] = { AF_INET, AF_INET6 };

	for (unsigned i = 0; i < 2; i++) {
		struct conn3 k;
		struct sockdiag_tuple other;
		uint32_t uid = 12345;

		conn3_open(&k, families[i]);
		assert_int_equal(sockdiag_tcp_owner(&k.t, SOCKDIAG_TIMEOUT_MS,
		    &uid), 0);
		assert_int_equal(uid, geteuid());
		/* no such connection: a port one off */
		other = k.t;
		other.client_port = (uint16_t)(other.client_port == 65535 ? 1 :
		    other.client_port + 1);
		uid = 12345;
		assert_int_equal(sockdiag_tcp_owner(&other, SOCKDIAG_TIMEOUT_MS,
		    &uid), -1);
		assert_int_equal(uid, 12345);
		/* not loopback: not even asked */
		other = k.t;
		other.client[0] = other.family == 4 ? 10 : 0x20;
		assert_int_equal(sockdiag_tcp_owner(&other, SOCKDIAG_TIMEOUT_MS,
		    &uid), -1);
		conn3_close(&k);
	}
}

/*
 * The client closed first and the server after: the client's end lingers
 * in TIME_WAIT, whose kernel record says uid 0. It must not read as root.
 */
static void
test_time_wait_is_unknown(void **state)
{
	struct conn3 k;
	uint32_t uid = 12345;
	char b;

	conn3_open(&k, AF_INET);
	close(k.c);
	k.c = -1;
	assert_int_equal(read(k.s, &b, 1), 0);	/* the client's FIN */
	close(k.s);
	k.s = -1;
	usleep(50000);				/* the server's FIN, acked */
	assert_int_equal(sockdiag_tcp_owner(&k.t, SOCKDIAG_TIMEOUT_MS, &uid),
	    -1);
	assert_int_equal(uid, 12345);
	conn3_close(&k);
}

static struct psmsg_tcp_owner
owner_msg(const struct sockdiag_tuple *t)
{
	struct psmsg_tcp_owner o;

	memset(&o, 0, sizeof(o));
	psmsg_request_init(&o.h, PSMSG_TCP_OWNER, 42);
	o.family = t->family;
	o.client_port = t->client_port;
	o.server_port = t->server_port;
	memcpy(o.client, t->client, 16);
	memcpy(o.server, t->server, 16);
	return o;
}

static void
test_msg_check(void **state)
{
	struct sockdiag_tuple t = { .family = 4, .client = { 127, 0, 0, 2 },
	    .server = { 127, 0, 0, 1 }, .client_port = 40000,
	    .server_port = 4938 };
	struct psmsg_tcp_owner o = owner_msg(&t), m, out;
	struct psmsg_request r;
	char why[128];

	assert_int_equal(psmsg_tcp_owner_check(&o, sizeof(o), &out, why,
	    sizeof(why)), 0);
	assert_memory_equal(&o, &out, sizeof(o));
	assert_string_equal(psmsg_op_name(PSMSG_TCP_OWNER), "tcp_owner");
	/* ::1 to ::1 */
	memset(&m, 0, sizeof(m));
	psmsg_request_init(&m.h, PSMSG_TCP_OWNER, 1);
	m.family = 6;
	m.client[15] = m.server[15] = 1;
	m.client_port = 65535;
	m.server_port = 1;
	assert_int_equal(psmsg_tcp_owner_check(&m, sizeof(m), &out, why,
	    sizeof(why)), 0);
#define REFUSED(edit) do {						\
	m = o;								\
	edit;								\
	assert_int_equal(psmsg_tcp_owner_check(&m, sizeof(m), &out, why, \
	    sizeof(why)), -1);						\
	assert_int_equal(out.h.magic, 0);				\
	assert_int_equal(out.family, 0);				\
	assert_true(why[0] != '\0');					\
} while (0)
	REFUSED(m.client[0] = 10);		/* a remote client */
	REFUSED(m.server[0] = 192);		/* a routable address */
	REFUSED(m.client[7] = 1);		/* bytes v4 does not use */
	REFUSED(m.server[15] = 1);
	REFUSED(m.client_port = 0);
	REFUSED(m.server_port = 65536);
	REFUSED(m.family = 5);
	REFUSED(m.family = 6);			/* 127.x is no v6 address */
	REFUSED(m.pad = 1);
	REFUSED(m.h.dev = 1);
	REFUSED(m.h.auth = 9);
	REFUSED(m.h.op = PSMSG_PROC);
	REFUSED(m.h.magic = 0);
#undef REFUSED
	/* the wrong size, or the op in a plain request */
	assert_int_equal(psmsg_tcp_owner_check(&o, sizeof(o) - 1, &out, why,
	    sizeof(why)), -1);
	psmsg_request_init(&r, PSMSG_TCP_OWNER, 3);
	{
		struct psmsg_limits lim = { 1, 1, 0 };
		struct psmsg_request got;

		assert_int_equal(psmsg_request_check(&r, sizeof(r), &lim, &got,
		    why, sizeof(why)), -1);
	}
}

/* The executor's answer: the uid, or a failure the network side takes. */
static void
test_exec(void **state)
{
	struct psexec x;
	struct conn3 k;
	struct psmsg_tcp_owner o;
	struct psmsg_reply rep, back;
	char why[128];

	memset(&x, 0, sizeof(x));
	conn3_open(&k, AF_INET);
	o = owner_msg(&k.t);
	psexec_tcp_owner(&x, &o, &rep);
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 42,
	    PSMSG_TCP_OWNER, &back, why, sizeof(why)), 0);
	assert_int_equal(back.rc, 0);
	assert_int_equal(back.a, geteuid());
	o.client_port = (uint32_t)(k.t.client_port == 65535 ? 1 :
	    k.t.client_port + 1);
	psexec_tcp_owner(&x, &o, &rep);
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 42,
	    PSMSG_TCP_OWNER, &back, why, sizeof(why)), 0);
	assert_int_equal(back.rc, -1);
	assert_int_equal(back.err_kind, ZERR_NOT_FOUND);
	conn3_close(&k);
}

/*
 * A Unix stream socket as unix_diag tells it: open, its peer half-closed
 * (only no more receiving), its peer gone (both bits), and no such socket
 * once its last descriptor is closed; another cookie names nothing.
 */
static void
test_unix_state(void **state)
{
	int sv[2];
	uint32_t ino;
	uint64_t cookie;
	uint8_t sh = 0xff;

	(void)state;
	assert_true(sockdiag_unix_works());
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(sockdiag_unix_id(sv[0], &ino, &cookie), 0);
	assert_int_equal(sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
	    &sh), 0);
	assert_int_equal(sh, 0);
	assert_int_equal(sockdiag_unix_state(ino, cookie + 1,
	    SOCKDIAG_TIMEOUT_MS, &sh), -1);
	assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
	assert_int_equal(sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
	    &sh), 0);
	assert_int_equal(sh, 1);
	close(sv[1]);
	assert_int_equal(sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
	    &sh), 0);
	assert_int_equal(sh, 3);
	close(sv[0]);
	assert_int_equal(sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
	    &sh), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tuple_loopback),
		cmocka_unit_test(test_owner_of_own_connection),
		cmocka_unit_test(test_time_wait_is_unknown),
		cmocka_unit_test(test_msg_check),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_unix_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
