/* SPDX-License-Identifier: Apache-2.0 */
/* spank_report.c - a job step's GPU energy line (spank_report.h). */
#include "slurm/spank_report.h"

#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REPORT_POLL_MS 50	/* between two GET /gpu/leases */

size_t
spank_report_find(const struct zeus_leases *v, const char *label,
    const unsigned *ids, size_t n, const struct zeus_lease **found)
{
	size_t got = 0;

	for (size_t i = 0; i < n; i++) {
		found[i] = NULL;
		/* ended: newest first */
		for (size_t k = 0; k < v->ended_count && k <
		    ZEUS_LEASES_ENDED_MAX; k++) {
			const struct zeus_lease *r = &v->ended[k];

			if (r->gpu == ids[i] && strcmp(r->label, label) == 0) {
				found[i] = r;
				got++;
				break;
			}
		}
	}
	return got;
}

/* Appends to buf (always terminated, cut when full). */
static void
report_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
report_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*len >= size)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (k > 0)
		*len = *len + (size_t)k < size ? *len + (size_t)k : size - 1;
}

void
spank_report_line(char *buf, size_t size, const char *label,
    const unsigned *ids, size_t n, const struct zeus_lease *const *found)
{
	double sum = 0, span = 0;
	bool any = false;
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const struct zeus_lease *r = found[i];

		if (r == NULL || r->energy != ZEUS_LEASE_ENERGY_OK)
			continue;
		sum += r->energy_j;
		if (r->duration_s > span)
			span = r->duration_s;
		any = true;
	}
	report_add(buf, size, &len, "zeus: %s: GPU energy ", label);
	if (any && span > 0)
		report_add(buf, size, &len, "%.1f J over %.1f s (avg %.1f W "
		    "in all)", sum, span, sum / span);
	else if (any)
		report_add(buf, size, &len, "%.1f J", sum);
	else
		report_add(buf, size, &len, "unavailable");
	for (size_t i = 0; i < n; i++) {
		const struct zeus_lease *r = found[i];

		report_add(buf, size, &len, "%s GPU %u: ", i ? "," : " on",
		    ids[i]);
		if (r == NULL)
			report_add(buf, size, &len, "no lease in zeusd's "
			    "ledger");
		else if (r->energy != ZEUS_LEASE_ENERGY_OK)
			report_add(buf, size, &len, "unavailable");
		else
			report_add(buf, size, &len, "%.1f J", r->energy_j);
	}
}

static long
report_ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	    (t.tv_nsec - t0->tv_nsec) / 1000000;
}

void
spank_report_run(const char *socket, int pidfd, const char *label,
    const unsigned *ids, size_t n, unsigned wait_ms)
{
	struct zeus_client_options o = { .socket_path = socket,
	    .timeout_ms = 5000 };
	const struct zeus_lease *found[ZEUS_MAX_DEVICES];
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	struct zeus_leases *v = calloc(1, sizeof(*v));
	struct zeus_client *c = NULL;
	struct zeus_error e = { 0 };
	struct timespec t0;
	char line[1024];
	size_t got = 0;

	if (n > ZEUS_MAX_DEVICES)
		n = ZEUS_MAX_DEVICES;
	while (poll(&p, 1, -1) < 0)
		;			/* EINTR: the task still runs */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (v == NULL || zeus_client_open(&o, &c, &e) != 0) {
		fprintf(stderr, "zeus: %s: GPU energy unavailable: %s\n", label,
		    v == NULL ? "out of memory" : e.message);
		_exit(0);
	}
	/* the lease ends once zeusd saw the exit and restored the GPUs */
	for (;;) {
		if (zeus_client_gpu_leases(c, v, &e) != 0) {
			fprintf(stderr, "zeus: %s: GPU energy unavailable: "
			    "%s\n", label, e.message);
			_exit(0);
		}
		got = spank_report_find(v, label, ids, n, found);
		if (got == n || report_ms_since(&t0) >= (long)wait_ms)
			break;
		usleep(REPORT_POLL_MS * 1000);
	}
	spank_report_line(line, sizeof(line), label, ids, n, found);
	fprintf(stderr, "%s\n", line);
	_exit(0);
}
