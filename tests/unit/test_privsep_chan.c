/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_privsep_chan.c - the network side's channels to the device process
 * (src/privsep/chan.c), the asynchronous ones above all: the channel the
 * HTTP loop watches (src/node/remote_read.c, remote_write.c) must never block, must take
 * only the reply to what it sent, and must stop the process on end of file
 * or on a reply nobody asked for (a level-triggered loop would otherwise
 * spin on it). The lease record's calls (pschan_call_leases, _ledger)
 * take their large replies whole and checked. The test plays the device
 * process on the other end of the socketpairs; the fatal cases (and the
 * blocking calls) run in a child whose exit status is checked.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "privsep/chan.h"
#include "privsep/msg.h"

#define NCHAN 3

struct fixture {
	struct pschan_pool *pool;
	int peer[NCHAN];
};

static int
setup(void **state)
{
	static struct fixture f;
	struct zerr err;

	assert_int_equal(pschan_pool_create(NCHAN, &f.pool, f.peer, &err), 0);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	pschan_pool_destroy(f->pool);
	for (unsigned i = 0; i < NCHAN; i++)
		if (f->peer[i] >= 0)
			close(f->peer[i]);
	return 0;
}

/* The device process's end of the pool's channel that has fd `fd`. */
static int
peer_of(const struct fixture *f, int fd)
{
	for (unsigned i = 0; i < NCHAN; i++)
		if (pschan_pool_fd(f->pool, i) == fd)
			return f->peer[i];
	fail_msg("fd %d is none of the pool's", fd);
	return -1;
}

/* Reads one request on `peer` and answers it (a valid, empty reply). */
static void
answer(int peer, struct psmsg_request *got, int64_t id_delta)
{
	struct psmsg_reply rep;

	assert_int_equal(recv(peer, got, sizeof(*got), 0), sizeof(*got));
	memset(&rep, 0, sizeof(rep));
	rep.magic = PSMSG_MAGIC;
	rep.op = got->op;
	rep.id = got->id + (uint64_t)id_delta;
	assert_int_equal(send(peer, &rep, sizeof(rep), 0), sizeof(rep));
}

/*
 * Reads `a` in a child, which is to exit (the parent set the channel up),
 * as a reader (pschan_async_recv) or as a GPU writer does
 * (pschan_async_recv_writes): its exit status, or -1 when it was killed.
 */
static int
recv_in_child_as(struct pschan_async *a, bool writes)
{
	static struct psmsg_writes_reply out;
	struct psmsg_reply rep;
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (writes)
			(void)pschan_async_recv_writes(a, &out);
		else
			(void)pschan_async_recv(a, &rep);
		_exit(99);	/* that was to be fatal */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
recv_in_child(struct pschan_async *a)
{
	return recv_in_child_as(a, false);
}

/* The pool keeps one channel for the blocking callers. */
static void
test_async_open_leaves_one(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a, b, c;
	struct zerr err;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	assert_int_equal(pschan_async_open(f->pool, &b, &err), 0);
	assert_int_not_equal(a.fd, b.fd);
	assert_int_equal(pschan_async_open(f->pool, &c, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
}

/* Sent without waiting; nothing to read until the reply is there. */
static void
test_async_round_trip(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_request req, got;
	struct psmsg_reply rep;
	struct zerr err;
	int peer;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	peer = peer_of(f, a.fd);
	/* nothing out, nothing there: not ready, not fatal */
	assert_int_equal(pschan_async_recv(&a, &rep), -1);
	for (unsigned round = 0; round < 3; round++) {
		psmsg_request_init(&req, PSMSG_SAMPLE, 0);
		req.gpu_mask = 0x5;
		pschan_async_send(&a, &req);
		/* the reply has not come yet */
		assert_int_equal(pschan_async_recv(&a, &rep), -1);
		answer(peer, &got, 0);
		assert_int_equal(got.op, PSMSG_SAMPLE);
		assert_int_equal(got.gpu_mask, 0x5);
		assert_true(got.id == req.id);
		assert_int_equal(pschan_async_recv(&a, &rep), 0);
		assert_true(rep.id == req.id);
		/* taken: nothing more until the next request */
		assert_int_equal(pschan_async_recv(&a, &rep), -1);
	}
}

/*
 * Readable with nothing out (end of file, or a datagram nobody asked for)
 * and a reply that does not match its request stop the process with
 * PSCHAN_EXIT_PEER, as a blocking call's failure does.
 */
static void
test_async_eof_while_idle_is_fatal(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct zerr err;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	for (unsigned i = 0; i < NCHAN; i++)
		if (f->peer[i] == peer_of(f, a.fd)) {
			close(f->peer[i]);	/* the device process is gone */
			f->peer[i] = -1;
		}
	assert_int_equal(recv_in_child(&a), PSCHAN_EXIT_PEER);
}

static void
test_async_unasked_reply_is_fatal(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_reply rep;
	struct zerr err;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	memset(&rep, 0, sizeof(rep));
	rep.magic = PSMSG_MAGIC;
	rep.op = PSMSG_SAMPLE;
	assert_int_equal(send(peer_of(f, a.fd), &rep, sizeof(rep), 0),
	    sizeof(rep));
	assert_int_equal(recv_in_child(&a), PSCHAN_EXIT_PEER);
}

static void
test_async_reply_to_another_request_is_fatal(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_request req, got;
	struct zerr err;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	psmsg_request_init(&req, PSMSG_SAMPLE, 0);
	req.pkg_mask = 0x1;
	pschan_async_send(&a, &req);
	answer(peer_of(f, a.fd), &got, 1);	/* the wrong id */
	assert_int_equal(recv_in_child(&a), PSCHAN_EXIT_PEER);
}

/* Reads a PSMSG_GPU_WRITES on `peer` and answers it with `n` results. */
static void
answer_writes(int peer, struct psmsg_writes *got, uint32_t n)
{
	struct psmsg_writes_reply rep;

	assert_int_equal(recv(peer, got, sizeof(*got), 0), sizeof(*got));
	memset(&rep, 0, sizeof(rep));
	rep.magic = PSMSG_MAGIC;
	rep.op = got->h.op;
	rep.id = got->h.id;
	rep.n = n;
	for (uint32_t i = 0; i < n; i++)
		if (i % 2 == 1) {
			rep.r[i].rc = -1;
			rep.r[i].err_kind = ZERR_FORBIDDEN;
			snprintf(rep.r[i].err_msg, sizeof(rep.r[i].err_msg),
			    "write %u refused", (unsigned)i);
		}
	rep.r[n - 1].lost = 1;
	assert_int_equal(send(peer, &rep, psmsg_writes_reply_size(n), 0),
	    (ssize_t)psmsg_writes_reply_size(n));
}

/*
 * A GPU writer's channel (src/node/remote_write.c): a single write's reply
 * and a batch's both come back as write results, each as sent.
 */
static void
test_async_writes_round_trip(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_request one, got;
	struct psmsg_writes many, gotw;
	struct psmsg_writes_reply out;
	struct psmsg_reply rep;
	struct zerr err;
	int peer;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	peer = peer_of(f, a.fd);
	assert_int_equal(pschan_async_recv_writes(&a, &out), -1);

	/* one write: its reply's outcome as the one result */
	psmsg_request_init(&one, PSMSG_GPU_WRITE, 0);
	one.dev = 2;
	pschan_async_send(&a, &one);
	assert_int_equal(pschan_async_recv_writes(&a, &out), -1);
	assert_int_equal(recv(peer, &got, sizeof(got), 0), sizeof(got));
	assert_int_equal(got.op, PSMSG_GPU_WRITE);
	assert_int_equal(got.dev, 2);
	memset(&rep, 0, sizeof(rep));
	rep.magic = PSMSG_MAGIC;
	rep.op = got.op;
	rep.id = got.id;
	rep.rc = -1;
	rep.err_kind = ZERR_UNAVAILABLE;
	rep.lost = 1;
	snprintf(rep.err_msg, sizeof(rep.err_msg), "not on this GPU");
	assert_int_equal(send(peer, &rep, sizeof(rep), 0), sizeof(rep));
	assert_int_equal(pschan_async_recv_writes(&a, &out), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.r[0].rc, -1);
	assert_int_equal(out.r[0].err_kind, ZERR_UNAVAILABLE);
	assert_int_equal(out.r[0].lost, 1);
	assert_string_equal(out.r[0].err_msg, "not on this GPU");
	assert_int_equal(pschan_async_recv_writes(&a, &out), -1);

	/* five writes in one message, their five results in order */
	psmsg_writes_init(&many, 5, 1);
	for (unsigned i = 0; i < 5; i++)
		many.w[i].w_power_limit_mw = 100000 + i;
	pschan_async_send_writes(&a, &many);
	assert_int_equal(pschan_async_recv_writes(&a, &out), -1);
	answer_writes(peer, &gotw, 5);
	assert_int_equal(gotw.h.op, PSMSG_GPU_WRITES);
	assert_int_equal(gotw.n, 5);
	assert_int_equal(gotw.w[4].w_power_limit_mw, 100004);
	assert_true(gotw.h.id == many.h.id && many.h.id > one.id);
	assert_int_equal(pschan_async_recv_writes(&a, &out), 0);
	assert_int_equal(out.n, 5);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(out.r[i].rc, i % 2 == 1 ? -1 : 0);
	assert_string_equal(out.r[3].err_msg, "write 3 refused");
	assert_int_equal(out.r[4].lost, 1);
	/* the channel takes a plain request again afterwards */
	psmsg_request_init(&one, PSMSG_GPU_WRITE, 0);
	pschan_async_send(&a, &one);
	answer(peer, &got, 0);
	assert_int_equal(pschan_async_recv_writes(&a, &out), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.r[0].rc, 0);
}

/* A batch's reply with fewer results than writes sent stops the process. */
static void
test_async_writes_short_reply_is_fatal(void **state)
{
	struct fixture *f = *state;
	struct pschan_async a;
	struct psmsg_writes many, got;
	struct zerr err;

	assert_int_equal(pschan_async_open(f->pool, &a, &err), 0);
	psmsg_writes_init(&many, 3, 0);
	pschan_async_send_writes(&a, &many);
	answer_writes(peer_of(f, a.fd), &got, 2);
	assert_int_equal(recv_in_child_as(&a, true), PSCHAN_EXIT_PEER);
}

/* ---- The lease record's blocking calls ---------------------------------- */

/*
 * How the "device process" spoils its answer to a lease record's request:
 * not at all, another request's id, a byte too many or too few, or a
 * record the reply check refuses.
 */
enum lease_bad { LB_NONE, LB_ID, LB_LONG, LB_SHORT, LB_CHECK };

/* Answers the one request that comes on any of the pool's channels. */
static void
answer_lease(const struct fixture *f, enum lease_bad bad)
{
	struct pollfd pf[NCHAN];
	struct psmsg_request got;
	unsigned char *buf;
	size_t size;
	int peer = -1;

	for (unsigned i = 0; i < NCHAN; i++)
		pf[i] = (struct pollfd){ .fd = f->peer[i], .events = POLLIN };
	assert_int_equal(poll(pf, NCHAN, 5000), 1);
	for (unsigned i = 0; i < NCHAN; i++)
		if (pf[i].revents & POLLIN)
			peer = f->peer[i];
	assert_int_equal(recv(peer, &got, sizeof(got), 0), sizeof(got));
	size = got.op == PSMSG_LEDGER ? sizeof(struct psmsg_ledger_reply) :
	    sizeof(struct psmsg_leases_reply);
	assert_non_null(buf = calloc(1, size + 1));
	if (got.op == PSMSG_LEDGER) {
		struct psmsg_ledger_reply *r = (void *)buf;

		assert_int_equal(got.dev, 1);	/* the first user asked */
		r->magic = PSMSG_MAGIC;
		r->op = got.op;
		r->id = got.id + (bad == LB_ID);
		r->nusers = 3;
		r->n = 2;
		r->u[0].uid = 1000;
		snprintf(r->u[0].user, sizeof(r->u[0].user), "alice");
		r->u[0].mj[1] = 42;
		r->u[1].uid = UINT32_MAX;
		snprintf(r->u[1].user, sizeof(r->u[1].user), "(other)");
		if (bad == LB_CHECK)
			r->u[1].mj[2] = 1;	/* a GPU the node lacks */
	} else {
		struct psmsg_leases_reply *r = (void *)buf;

		r->magic = PSMSG_MAGIC;
		r->op = got.op;
		r->id = got.id + (bad == LB_ID);
		r->nopen = 1;
		r->rec[0].gpu = 1;
		r->rec[0].uid = 1000;
		r->rec[0].state = got.op == PSMSG_RELEASE ? PSMSG_LEASE_ENDED :
		    PSMSG_LEASE_HELD;
		snprintf(r->rec[0].user, sizeof(r->rec[0].user), "alice");
		if (got.op == PSMSG_RELEASE) {
			assert_int_equal(got.gpu_mask, 0x3);
			r->rec[0].end_ms = 1;
			r->rec[0].reason = PSMSG_REASON_RELEASE;
			r->not_leased = 0x1;
		} else {
			r->unleased_ok = 0x1;
			r->unleased_mj[0] = 99;
		}
		if (bad == LB_CHECK)
			r->rec[0].gpu = 2;	/* a GPU the node lacks */
	}
	if (bad == LB_LONG)
		size++;
	else if (bad == LB_SHORT)
		size--;
	assert_int_equal(send(peer, buf, size, 0), (ssize_t)size);
	free(buf);
}

/*
 * Calls `op` (LEASES, RELEASE or LEDGER) in a child, as the look-up pool
 * does, against a node of 2 GPUs, and answers it here: the child's exit
 * status (0: the reply came back as sent; PSCHAN_EXIT_PEER: fatal).
 */
static int
lease_call_in_child(const struct fixture *f, uint32_t op, enum lease_bad bad)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct psmsg_leases_reply *l = malloc(sizeof(*l));
		struct psmsg_ledger_reply *d = malloc(sizeof(*d));
		struct psmsg_request req;
		int rc = 96;

		if (l == NULL || d == NULL) {
			free(l);
			free(d);
			_exit(98);
		}
		psmsg_request_init(&req, (enum psmsg_op)op, 0);
		if (op == PSMSG_LEDGER) {
			req.dev = 1;
			if (pschan_call_ledger(f->pool, &req, 2, d) != 0)
				rc = 97;
			else if (d->n == 2 && d->nusers == 3 &&
			    d->u[0].mj[1] == 42 &&
			    strcmp(d->u[1].user, "(other)") == 0)
				rc = 0;
		} else {
			if (op == PSMSG_RELEASE) {
				req.gpu_mask = 0x3;
				req.w_from = PSMSG_FROM_TCP;
			}
			if (pschan_call_leases(f->pool, &req, 2, l) != 0)
				rc = 97;
			else if (l->nopen == 1 && l->rec[0].gpu == 1 &&
			    strcmp(l->rec[0].user, "alice") == 0 &&
			    (op == PSMSG_RELEASE ? l->not_leased == 0x1 :
			    l->unleased_mj[0] == 99))
				rc = 0;
		}
		/* Freed: valgrind checks the child for leaks at _exit too. */
		free(l);
		free(d);
		_exit(rc);
	}
	answer_lease(f, bad);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
test_lease_calls(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(lease_call_in_child(f, PSMSG_LEASES, LB_NONE), 0);
	assert_int_equal(lease_call_in_child(f, PSMSG_RELEASE, LB_NONE), 0);
	assert_int_equal(lease_call_in_child(f, PSMSG_LEDGER, LB_NONE), 0);
}

/* A reply a byte too long, too short, to another request or broken. */
static void
test_lease_bad_replies_are_fatal(void **state)
{
	static const uint32_t ops[] = { PSMSG_LEASES, PSMSG_RELEASE,
		PSMSG_LEDGER };
	static const enum lease_bad bads[] = { LB_ID, LB_LONG, LB_SHORT,
		LB_CHECK };
	struct fixture *f = *state;

	for (unsigned o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (unsigned b = 0; b < sizeof(bads) / sizeof(bads[0]); b++)
			if (lease_call_in_child(f, ops[o], bads[b]) !=
			    PSCHAN_EXIT_PEER)
				fail_msg("op %u, spoilt %u: not fatal", ops[o],
				    (unsigned)bads[b]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_async_open_leaves_one,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_async_round_trip, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_async_eof_while_idle_is_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_async_unasked_reply_is_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_async_reply_to_another_request_is_fatal, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_async_writes_round_trip,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_async_writes_short_reply_is_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_calls, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_lease_bad_replies_are_fatal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
