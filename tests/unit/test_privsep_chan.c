/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_privsep_chan.c - the network side's channels to the device process
 * (src/privsep/chan.c), the asynchronous ones above all: the channel the
 * HTTP loop watches (src/node/remote_read.c, remote_write.c) must never block, must take
 * only the reply to what it sent, and must stop the process on end of file
 * or on a reply nobody asked for (a level-triggered loop would otherwise
 * spin on it). The test plays the device process on the other end of the
 * socketpairs; the fatal cases run in a child whose exit status is checked.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
