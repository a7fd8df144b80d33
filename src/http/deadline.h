/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deadline.h - a whole-request deadline for every connection.
 *
 * libmicrohttpd's connection timeout is an idle timer: every byte restarts
 * it, so a client that trickles one header byte every few seconds holds its
 * connection forever (slowloris). Here a connection is "armed" when it
 * starts waiting for a request (at accept, and again when the previous
 * response has been sent) and "disarmed" once the whole request (line,
 * headers, body) has arrived and is being handled. A connection still armed
 * when the deadline passes is shut down (shutdown(2), which the HTTP loop
 * then sees as the peer leaving), however many bytes it trickled.
 *
 * The timeout is the same for everyone, so arming order is expiry order:
 * the armed set is a FIFO list and every operation is O(1). One thread
 * sleeps until the oldest deadline and not at all while nothing is armed,
 * so an idle daemon gets no wake-ups from it. Arming wakes it only when it
 * sleeps with no timer: a new deadline is never earlier than the one it
 * sleeps until (even one disarmed since), so a busy keep-alive connection
 * costs it one wake-up per timeout, not one per request.
 *
 * Thread safety: arm/disarm come from the HTTP loop, expiry runs on
 * the deadline thread; one mutex covers both. The loop must call
 * deadline_disarm before the connection's fd is closed (libmicrohttpd's
 * "connection closed" notification comes before it closes the socket), so
 * the thread never shuts down a descriptor number that was reused.
 */
#ifndef ZEUS_DEADLINE_H
#define ZEUS_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#define DEADLINE_LABEL_MAX 64

struct deadline_entry {
	struct deadline_entry *prev, *next;
	uint64_t expires_ns;
	int fd;
	bool armed;
	bool expired;			/* shut down by the deadline thread */
	char label[DEADLINE_LABEL_MAX];	/* the peer, for the log line */
};

struct deadlines;

/* Starts the deadline thread; `timeout_ms` >= 1. */
int deadline_start(unsigned timeout_ms, struct deadlines **out,
    struct zerr *err);

/* Stops the thread and frees; every entry must have been forgotten. */
void deadline_stop(struct deadlines *d);

/* Prepares an entry for connection `fd` (not armed). */
void deadline_init(struct deadline_entry *e, int fd, const char *label);

/* (Re)starts the clock: the request must be complete within the timeout. */
void deadline_arm(struct deadlines *d, struct deadline_entry *e);

/* The request has arrived: stop the clock. */
void deadline_disarm(struct deadlines *d, struct deadline_entry *e);

/* Connections shut down so far because their deadline passed. */
uint64_t deadline_expired_total(struct deadlines *d);

#endif
