/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pidwatch.c - a thread that says when watched processes exit
 * (pidwatch.h): one epoll set of pidfds, each armed once, and an eventfd
 * that stops it.
 */
#include "access/pidwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

/* the stop and kick eventfds' epoll data: no tag is this wide */
#define PIDWATCH_STOP (UINT64_C(1) << 32)
#define PIDWATCH_KICK (UINT64_C(1) << 33)

struct pidwatch {
	int epfd;
	int stopfd;
	int kickfd;
	void (*exited)(void *ctx, uint32_t tag);
	void (*tick)(void *ctx);
	void *ctx;
	uint64_t tick_ns;		/* CLOCK_MONOTONIC; 0: none (thread's) */
	pthread_t thread;
	bool started;
};

int
pidwatch_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

bool
pidwatch_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int n;

	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	return n != 0;		/* readable (or an error): gone */
}

int
pidwatch_create(void (*exited)(void *ctx, uint32_t tag),
    void (*tick)(void *ctx), void *ctx, struct pidwatch **out,
    struct zerr *err)
{
	struct pidwatch *pw = calloc(1, sizeof(*pw));
	struct epoll_event ev = { .events = EPOLLIN,
	    .data.u64 = PIDWATCH_STOP };
	struct epoll_event kick = { .events = EPOLLIN,
	    .data.u64 = PIDWATCH_KICK };

	if (pw == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pw->exited = exited;
	pw->tick = tick;
	pw->ctx = ctx;
	pw->stopfd = pw->kickfd = -1;
	if ((pw->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (pw->stopfd = eventfd(0, EFD_CLOEXEC)) < 0 ||
	    (pw->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    epoll_ctl(pw->epfd, EPOLL_CTL_ADD, pw->stopfd, &ev) != 0 ||
	    epoll_ctl(pw->epfd, EPOLL_CTL_ADD, pw->kickfd, &kick) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot make the holders' "
		    "watcher: %s", strerror(errno));
		pidwatch_destroy(pw);
		return -1;
	}
	*out = pw;
	return 0;
}

int
pidwatch_add(struct pidwatch *pw, int pidfd, uint32_t tag, struct zerr *err)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
	    .data.u64 = tag };

	if (epoll_ctl(pw->epfd, EPOLL_CTL_ADD, pidfd, &ev) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot watch a lease "
		    "holder: %s", strerror(errno));
	return 0;
}

void
pidwatch_remove(struct pidwatch *pw, int pidfd)
{
	/* ENOENT: never added (it failed), or told and closed already */
	(void)epoll_ctl(pw->epfd, EPOLL_CTL_DEL, pidfd, NULL);
}

void
pidwatch_tick_in(struct pidwatch *pw, unsigned ms)
{
	uint64_t at = zclock_now_ns() + (uint64_t)ms * 1000000u;

	if (pw->tick_ns == 0 || at < pw->tick_ns)
		pw->tick_ns = at;
}

void
pidwatch_kick(struct pidwatch *pw)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is full, so a kick is pending anyway */
	if (write(pw->kickfd, &one, sizeof(one)) != sizeof(one) &&
	    errno != EAGAIN)
		zlog(ZLOG_WARN, "holder_watcher_kick_failed", "error=\"%s\"",
		    strerror(errno));
}

/* epoll_wait's timeout: until the tick, or -1 without one. */
static int
pidwatch_timeout(const struct pidwatch *pw)
{
	uint64_t now = zclock_now_ns(), ms;

	if (pw->tick_ns == 0)
		return -1;
	if (pw->tick_ns <= now)
		return 0;
	ms = (pw->tick_ns - now + 999999u) / 1000000u;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static void *
pidwatch_thread(void *arg)
{
	struct pidwatch *pw = arg;
	struct epoll_event ev[16];

	for (;;) {
		int n = epoll_wait(pw->epfd, ev, 16, pidwatch_timeout(pw));
		bool kicked = false;
		uint64_t v;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			zlog(ZLOG_ERROR, "holder_watcher_failed", "error=\"%s\" "
			    "msg=\"lease restores wait for the network "
			    "process\"", strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 == PIDWATCH_STOP)
				return NULL;
			if (ev[i].data.u64 == PIDWATCH_KICK) {
				if (read(pw->kickfd, &v, sizeof(v)) > 0)
					kicked = true;
				continue;
			}
			pw->exited(pw->ctx, (uint32_t)ev[i].data.u64);
		}
		if (kicked || (pw->tick_ns != 0 &&
		    pw->tick_ns <= zclock_now_ns())) {
			pw->tick_ns = 0;
			if (pw->tick != NULL)
				pw->tick(pw->ctx);
		}
	}
}

int
pidwatch_start(struct pidwatch *pw, struct zerr *err)
{
	int rc = pthread_create(&pw->thread, NULL, pidwatch_thread, pw);

	if (rc != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot start the "
		    "holders' watcher: %s", strerror(rc));
	pw->started = true;
	return 0;
}

void
pidwatch_destroy(struct pidwatch *pw)
{
	uint64_t one = 1;

	if (pw == NULL)
		return;
	if (pw->started) {
		if (write(pw->stopfd, &one, sizeof(one)) != sizeof(one)) {
			/* it may still run: its memory stays until the exit */
			zlog(ZLOG_WARN, "holder_watcher_stop_failed", NULL);
			return;
		}
		pthread_join(pw->thread, NULL);
	}
	if (pw->stopfd >= 0)
		close(pw->stopfd);
	if (pw->kickfd >= 0)
		close(pw->kickfd);
	if (pw->epfd >= 0)
		close(pw->epfd);
	free(pw);
}
