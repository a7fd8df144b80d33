/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c - request counters (see stats.h).
 */
#include "http/stats.h"

#include "http/router.h"

static const unsigned stats_codes[STATS_STATUSES - 1] = {
	200, 400, 401, 403, 404, 405, 500, 503 };

static unsigned
stats_status_index(unsigned status)
{
	for (unsigned i = 0; i < STATS_STATUSES - 1; i++)
		if (stats_codes[i] == status)
			return i;
	return STATS_STATUSES - 1;
}

void
stats_record(struct stats *st, const struct routes *rt,
    const struct route *r, unsigned status)
{
	size_t n = rt->n, idx = STATS_MAX_ROUTES;
	const struct route *table = rt->table;

	if (r != NULL && r >= table && r < table + n &&
	    (size_t)(r - table) < STATS_MAX_ROUTES)
		idx = (size_t)(r - table);
	atomic_fetch_add_explicit(&st->requests[idx][stats_status_index(status)],
	    1, memory_order_relaxed);
}

void
stats_write(struct stats *st, const struct routes *rt, FILE *out)
{
	size_t n = rt->n;
	const struct route *table = rt->table;

	fputs("# HELP zeusd_http_requests_total HTTP requests answered, by "
	    "route (\"other\" for unknown paths) and status.\n"
	    "# TYPE zeusd_http_requests_total counter\n", out);
	for (size_t r = 0; r <= STATS_MAX_ROUTES; r++) {
		if (r != STATS_MAX_ROUTES && r >= n)
			continue;
		for (unsigned s = 0; s < STATS_STATUSES; s++) {
			unsigned long v = atomic_load_explicit(
			    &st->requests[r][s], memory_order_relaxed);
			char code[8] = "other";

			if (v == 0)
				continue;
			if (s < STATS_STATUSES - 1)
				snprintf(code, sizeof(code), "%u", stats_codes[s]);
			fprintf(out, "zeusd_http_requests_total{route=\"%s\","
			    "status=\"%s\"} %lu\n",
			    r == STATS_MAX_ROUTES ? "other" : table[r].path, code,
			    v);
		}
	}
}
