/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watchdog.c - the systemd watchdog (see watchdog.h).
 *
 * libmicrohttpd runs its epoll loop in its own internal thread and offers no
 * hook that runs on every iteration, so nothing inside the loop can send
 * WATCHDOG=1. A timer thread that pinged unconditionally would prove only
 * that the timer thread lives. Instead, every half interval this thread asks
 * the loop for a sign of life (server_loop_alive: a socketpair connection
 * handed to libmicrohttpd, which only the loop thread can accept and close;
 * no HTTP request, no access-log line, no address or network needed, so it
 * works the same for a Unix socket, TCP or a socket from systemd) and pings
 * only when it gets one. A loop stuck in a callback, deadlocked or starved
 * misses the pings, and systemd restarts zeusd after WatchdogSec (Restart=).
 *
 * Timing: the probe is given up to half an interval. A healthy loop answers
 * in microseconds, so pings go out every WatchdogSec/2 (as sd_watchdog_
 * enabled(3) recommends); a loop stuck for more than about WatchdogSec/2
 * makes the next ping late.
 */
#include "zeusd/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "zeusd/notify.h"
#include "http/server.h"

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* signalled by watchdog_stop */
	bool started, stop;
	struct server *srv;
	uint64_t period_usec;		/* WatchdogSec / 2 */
} wd = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void
watchdog_add_usec(struct timespec *ts, uint64_t usec)
{
	ts->tv_sec += (time_t)(usec / 1000000u);
	ts->tv_nsec += (long)(usec % 1000000u) * 1000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *
watchdog_main(void *arg)
{
	unsigned timeout_ms = (unsigned)(wd.period_usec / 1000u);
	unsigned long misses = 0;
	struct timespec next;
	bool stop;

	(void)arg;
	if (timeout_ms == 0)
		timeout_ms = 1;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		if (server_loop_alive(wd.srv, timeout_ms)) {
			notify_send("WATCHDOG=1");
			if (misses > 0)
				zlog(ZLOG_INFO, "watchdog_recovered",
				    "missed=%lu", misses);
			misses = 0;
		} else if (misses++ == 0) {
			zlog(ZLOG_WARN, "watchdog_missed", "msg=\"the HTTP "
			    "loop did not answer within %u ms; not pinging "
			    "systemd\"", timeout_ms);
		}
		watchdog_add_usec(&next, wd.period_usec);
		pthread_mutex_lock(&wd.lock);
		while (!wd.stop && pthread_cond_timedwait(&wd.cond, &wd.lock,
		    &next) != ETIMEDOUT)
			;
		stop = wd.stop;
		pthread_mutex_unlock(&wd.lock);
		if (stop)
			return NULL;
		/* a probe that used its whole timeout must not pile up */
		clock_gettime(CLOCK_MONOTONIC, &next);
	}
}

int
watchdog_start(struct server *srv, struct zerr *err)
{
	pthread_condattr_t ca;
	int rc;

	if (notify_watchdog_usec() == 0)
		return 0;
	wd.srv = srv;
	wd.period_usec = notify_watchdog_usec() / 2;
	wd.stop = false;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd.cond, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&wd.thread, NULL, watchdog_main, NULL)) != 0) {
		pthread_cond_destroy(&wd.cond);
		return zerr_set(err, ZERR_INTERNAL, "cannot start the watchdog "
		    "thread: %s", strerror(rc));
	}
	wd.started = true;
	zlog(ZLOG_INFO, "watchdog_started", "interval_ms=%llu",
	    (unsigned long long)(notify_watchdog_usec() / 1000u));
	return 0;
}

void
watchdog_stop(void)
{
	if (!wd.started)
		return;
	pthread_mutex_lock(&wd.lock);
	wd.stop = true;
	pthread_cond_signal(&wd.cond);
	pthread_mutex_unlock(&wd.lock);
	pthread_join(wd.thread, NULL);
	pthread_cond_destroy(&wd.cond);
	wd.started = false;
}
