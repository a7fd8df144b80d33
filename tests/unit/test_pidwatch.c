/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pidwatch.c - the holders' watcher (access/pidwatch.c): an exit is
 * told once, under its tag, only for a pidfd still watched; a tick comes
 * when it is due or when kicked; a stop joins the thread.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "access/pidwatch.h"

#define MAX_TAG 16

struct seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned told[MAX_TAG];
	unsigned ticks;
	bool tick_again;		/* the tick sets another, once */
	struct pidwatch *pw;
};

static void
on_exit_told(void *ctx, uint32_t tag)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	if (tag < MAX_TAG)
		s->told[tag]++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void
on_tick(void *ctx)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->ticks++;
	if (s->tick_again) {
		s->tick_again = false;
		pidwatch_tick_in(s->pw, 1);	/* from the thread: allowed */
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Waits (at most 30 s: a bound for a hung test, not a timing) for *v >= n. */
static bool
wait_for(struct seen *s, const unsigned *v, unsigned n)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&s->lock);
	while (*v < n && pthread_cond_timedwait(&s->cond, &s->lock,
	    &until) == 0)
		;
	ok = *v >= n;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static void
seen_init(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
}

/*
 * pidfd_open(2) works here: valgrind (the check's unit run under it)
 * does not know the call and answers ENOSYS, and those tests are skipped.
 */
static void
need_pidfd(void)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);

	if (fd < 0 && errno == ENOSYS)
		skip();
	assert_true(fd >= 0);
	close(fd);
}

/* A child that lives until its pipe closes; its pidfd in *fd. */
static pid_t
child(int *wr, int *fd)
{
	int p[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* no other child's write end: each exits when its own closes */
		for (int k = 3; k < 1024; k++)
			if (k != p[0])
				close(k);
		(void)read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	*wr = p[1];
	*fd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(*fd >= 0);
	return pid;
}

static void
test_exit_told_once_under_its_tag(void **state)
{
	struct seen s;
	struct pidwatch *pw;
	struct zerr err;
	int w7, w9, w11, fd7, fd9, fd11;
	pid_t p7, p9, p11;

	(void)state;
	need_pidfd();
	seen_init(&s);
	assert_int_equal(pidwatch_create(on_exit_told, on_tick, &s, &pw,
	    &err), 0);
	p7 = child(&w7, &fd7);
	p9 = child(&w9, &fd9);
	assert_int_equal(pidwatch_add(pw, fd7, 7, &err), 0);
	assert_int_equal(pidwatch_add(pw, fd9, 9, &err), 0);
	assert_int_equal(pidwatch_start(pw, &err), 0);
	close(w9);			/* 9 exits */
	assert_true(wait_for(&s, &s.told[9], 1));
	assert_int_equal(waitpid(p9, NULL, 0), p9);
	pthread_mutex_lock(&s.lock);
	assert_int_equal(s.told[7], 0);	/* still runs */
	pthread_mutex_unlock(&s.lock);
	close(w7);
	assert_true(wait_for(&s, &s.told[7], 1));
	assert_int_equal(waitpid(p7, NULL, 0), p7);
	/*
	 * Armed once: a pidfd stays readable after its exit, and the thread
	 * has waited again since (it told 11's exit after), yet 7 and 9 were
	 * told no more.
	 */
	p11 = child(&w11, &fd11);
	assert_int_equal(pidwatch_add(pw, fd11, 11, &err), 0);
	close(w11);
	assert_true(wait_for(&s, &s.told[11], 1));
	assert_int_equal(waitpid(p11, NULL, 0), p11);
	pidwatch_destroy(pw);
	assert_int_equal(s.told[7], 1);
	assert_int_equal(s.told[9], 1);
	assert_int_equal(s.told[11], 1);
	assert_int_equal(s.ticks, 0);
	close(fd7);
	close(fd9);
	close(fd11);
}

static void
test_removed_is_not_told(void **state)
{
	struct seen s;
	struct pidwatch *pw;
	struct zerr err;
	int w1, w2, fd1, fd2;
	pid_t p1, p2;

	(void)state;
	need_pidfd();
	seen_init(&s);
	assert_int_equal(pidwatch_create(on_exit_told, NULL, &s, &pw, &err),
	    0);
	assert_int_equal(pidwatch_start(pw, &err), 0);
	p1 = child(&w1, &fd1);
	p2 = child(&w2, &fd2);
	assert_int_equal(pidwatch_add(pw, fd1, 1, &err), 0);
	assert_int_equal(pidwatch_add(pw, fd2, 2, &err), 0);
	pidwatch_remove(pw, fd1);
	close(fd1);
	close(w1);
	assert_int_equal(waitpid(p1, NULL, 0), p1);
	close(w2);			/* told after 1's exit was not */
	assert_true(wait_for(&s, &s.told[2], 1));
	assert_int_equal(waitpid(p2, NULL, 0), p2);
	pidwatch_destroy(pw);
	assert_int_equal(s.told[1], 0);
	close(fd2);
	/* a pidfd that cannot be watched is said so */
	assert_int_equal(pidwatch_create(on_exit_told, NULL, &s, &pw, &err),
	    0);
	assert_int_equal(pidwatch_add(pw, -1, 3, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	pidwatch_destroy(pw);
}

static void
test_tick_comes_when_due(void **state)
{
	struct seen s;
	struct pidwatch *pw;
	struct zerr err;

	(void)state;
	seen_init(&s);
	s.tick_again = true;
	assert_int_equal(pidwatch_create(on_exit_told, on_tick, &s, &pw,
	    &err), 0);
	s.pw = pw;
	pidwatch_tick_in(pw, 5000);
	pidwatch_tick_in(pw, 1);	/* the earlier one wins */
	assert_int_equal(pidwatch_start(pw, &err), 0);
	assert_true(wait_for(&s, &s.ticks, 2));	/* and the one it set */
	pidwatch_destroy(pw);
	assert_int_equal(s.ticks, 2);
	/* a kick, from another thread: the tick runs at once */
	s.ticks = 0;
	assert_int_equal(pidwatch_create(on_exit_told, on_tick, &s, &pw,
	    &err), 0);
	s.pw = pw;
	assert_int_equal(pidwatch_start(pw, &err), 0);
	pidwatch_kick(pw);
	assert_true(wait_for(&s, &s.ticks, 1));
	pidwatch_destroy(pw);
	assert_int_equal(s.ticks, 1);
	/* a stop with nothing watched, never started */
	assert_int_equal(pidwatch_create(on_exit_told, on_tick, &s, &pw,
	    &err), 0);
	pidwatch_destroy(pw);
	pidwatch_destroy(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_told_once_under_its_tag),
		cmocka_unit_test(test_removed_is_not_told),
		cmocka_unit_test(test_tick_comes_when_due),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
