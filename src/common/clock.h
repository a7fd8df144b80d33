/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - CLOCK_MONOTONIC time as plain integers, and the conversions
 * back to the timespec that pthread_cond_timedwait and nanosleep take.
 *
 * Every timer here (request deadlines, stream ticks, the RAPL keepalive,
 * device command latency, override command timeouts, the reaper's grace)
 * runs on CLOCK_MONOTONIC, so setting the wall clock moves none of them.
 * Integers make the arithmetic plain (no carrying nanoseconds into
 * seconds): u64 nanoseconds last 584 years of uptime. A condition variable
 * waited on with zclock_ts must have been made with
 * pthread_condattr_setclock(CLOCK_MONOTONIC).
 *
 * Static inline, so libzeus and the daemon get it without another object.
 */
#ifndef ZEUS_CLOCK_H
#define ZEUS_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in ns. */
static inline uint64_t
zclock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC now, in whole ms. */
static inline uint64_t
zclock_now_ms(void)
{
	return zclock_now_ns() / 1000000u;
}

/* A CLOCK_MONOTONIC time in ns as an absolute timespec (timed waits). */
static inline struct timespec
zclock_ts(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u),
	    .tv_nsec = (long)(ns % 1000000000u) };
}

/*
 * CLOCK_REALTIME `ms` from now, as a timespec: the deadline of the waits
 * that only take that clock (pthread_timedjoin_np, a condition variable
 * made without pthread_condattr_setclock).
 */
static inline struct timespec
zclock_realtime_in(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Sleeps `ms`, going on with what is left after a signal. */
static inline void
zclock_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
	    .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

#endif
