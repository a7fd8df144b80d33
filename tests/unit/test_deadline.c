/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_deadline.c - the request-deadline thread (deadline.h): it shuts down
 * connections still armed at their deadline, leaves disarmed ones alone,
 * and is not woken by a keep-alive connection's every request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "http/deadline.h"

static void
sleep_us(unsigned long us)
{
	struct timespec ts = { (time_t)(us / 1000000u),
	    (long)(us % 1000000u) * 1000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Thread ids of this process, up to max; returns how many. */
static unsigned
tids(pid_t *out, unsigned max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL && n < max)
		if (e->d_name[0] != '.')
			out[n++] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

/* Context switches of thread tid, voluntary or not. */
static unsigned long
switches(pid_t tid)
{
	char path[64], line[128];
	unsigned long n = 0, v;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "voluntary_ctxt_switches: %lu", &v) == 1 ||
		    sscanf(line, "nonvoluntary_ctxt_switches: %lu", &v) == 1)
			n += v;
	fclose(f);
	return n;
}

/* Starts a deadline thread and returns its thread id. */
static pid_t
start(unsigned timeout_ms, struct deadlines **d)
{
	pid_t before[64], after[64];
	unsigned nb = tids(before, 64), na;
	struct zerr err;

	assert_int_equal(deadline_start(timeout_ms, d, &err), 0);
	na = tids(after, 64);
	assert_int_equal(na, nb + 1);
	for (unsigned i = 0; i < na; i++) {
		bool old = false;

		for (unsigned j = 0; j < nb; j++)
			old = old || after[i] == before[j];
		if (!old)
			return after[i];
	}
	fail();
	return 0;
}

/* An armed connection that sends nothing is shut down at its deadline. */
static void
test_expired_connection_is_shut_down(void **state)
{
	struct deadline_entry e;
	struct deadlines *d;
	int sv[2];
	char c;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	(void)start(50, &d);
	deadline_init(&e, sv[0], "peer=test");
	deadline_arm(d, &e);
	/* shutdown(2) shows as end of file on our side of the pair */
	assert_int_equal(recv(sv[0], &c, 1, 0), 0);
	assert_true(e.expired);
	assert_int_equal(deadline_expired_total(d), 1);
	deadline_disarm(d, &e);
	deadline_stop(d);
	close(sv[0]);
	close(sv[1]);
}

/* Disarmed in time: never shut down, even long after the deadline. */
static void
test_disarmed_connection_survives(void **state)
{
	struct deadline_entry e;
	struct deadlines *d;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	(void)start(20, &d);
	deadline_init(&e, sv[0], "peer=test");
	deadline_arm(d, &e);
	deadline_disarm(d, &e);
	sleep_us(100000);
	assert_false(e.expired);
	assert_int_equal(deadline_expired_total(d), 0);
	assert_int_equal(send(sv[1], "x", 1, MSG_NOSIGNAL), 1);
	deadline_stop(d);
	close(sv[0]);
	close(sv[1]);
}

/*
 * A keep-alive connection arms at every response and disarms at every
 * request. The thread must not be woken for each: once it sleeps until an
 * earlier deadline, a later one needs no wake-up (every deadline is the
 * same timeout from its arming, so a newer one is never earlier). Before,
 * an arm on an empty list woke it every time: 300 requests, ~300 wakes.
 */
static void
test_keepalive_requests_do_not_wake_the_thread(void **state)
{
	struct deadline_entry e;
	struct deadlines *d;
	unsigned long before, woke;
	pid_t tid;

	(void)state;
	tid = start(60000, &d);
	deadline_init(&e, -1, "peer=test");
	deadline_arm(d, &e);		/* the first may wake it: it had no timer */
	sleep_us(50000);
	before = switches(tid);
	for (unsigned i = 0; i < 300; i++) {
		deadline_disarm(d, &e);
		sleep_us(200);	/* a request's turn: the thread may sleep */
		deadline_arm(d, &e);
	}
	deadline_disarm(d, &e);
	sleep_us(50000);
	woke = switches(tid) - before;
	/* a few at most (a scheduler tick can preempt it), never per request */
	assert_true(woke < 10);
	deadline_stop(d);
}

static void *
noop(void *arg)
{
	return arg;
}

int
main(void)
{
	pthread_t t;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expired_connection_is_shut_down),
		cmocka_unit_test(test_disarmed_connection_survives),
		cmocka_unit_test(test_keepalive_requests_do_not_wake_the_thread),
	};

	zlog_set_level(ZLOG_ERROR);
	/*
	 * A first thread before start() counts them: ThreadSanitizer's
	 * runtime adds a thread of its own at the first pthread_create.
	 */
	if (pthread_create(&t, NULL, noop, NULL) != 0 ||
	    pthread_join(t, NULL) != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
