/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the daemon's own counters for /metrics: requests by route and
 * status. Lock-free (atomics), updated once per finished request.
 */
#ifndef ZEUS_STATS_H
#define ZEUS_STATS_H

#include <stdatomic.h>
#include <stdio.h>

struct route;
struct routes;

#define STATS_MAX_ROUTES 32
#define STATS_STATUSES 9	/* 200 400 401 403 404 405 500 503 other */

struct stats {
	/* [route index, or STATS_MAX_ROUTES for unknown paths][status] */
	atomic_ulong requests[STATS_MAX_ROUTES + 1][STATS_STATUSES];
};

/*
 * Counts one answered request (`r`, a route of `rt`, the server's table;
 * NULL: no route matched).
 */
void stats_record(struct stats *st, const struct routes *rt,
    const struct route *r, unsigned status);

/* Writes zeusd_http_requests_total in the Prometheus text format. */
void stats_write(struct stats *st, const struct routes *rt, FILE *out);

#endif
