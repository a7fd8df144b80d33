/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prom.c - Prometheus text exposition and Pushgateway URLs (see prom.h).
 */
#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
prom_double(char *buf, size_t size, double v)
{
	if (isnan(v)) {
		snprintf(buf, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, size, "%sInf", v > 0 ? "+" : "-");
		return;
	}
	/* The shortest %g that reads back exactly. */
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

int
prom_header(struct zbuf *b, const char *name, const char *help,
    const char *type)
{
	return zbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

int
prom_label_value(struct zbuf *b, const char *v)
{
	for (; *v != '\0'; v++) {
		const char *e = NULL;

		if (*v == '\\')
			e = "\\\\";
		else if (*v == '"')
			e = "\\\"";
		else if (*v == '\n')
			e = "\\n";
		if (e != NULL ? zbuf_append(b, e, 2) : zbuf_append(b, v, 1))
			return -1;
	}
	return 0;
}

static int
prom_labels(struct zbuf *b, const char *window, unsigned index,
    const char *le)
{
	zbuf_printf(b, "{window=\"");
	prom_label_value(b, window);
	zbuf_printf(b, "\",index=\"%u\"", index);
	if (le != NULL)
		zbuf_printf(b, ",le=\"%s\"", le);
	return zbuf_append(b, "}", 1);
}

int
prom_sample(struct zbuf *b, const char *name, const char *suffix,
    const char *window, unsigned index, double value)
{
	char num[64];

	prom_double(num, sizeof(num), value);
	zbuf_printf(b, "%s%s", name, suffix);
	prom_labels(b, window, index, NULL);
	return zbuf_printf(b, " %s\n", num);
}

int
prom_histogram(struct zbuf *b, const char *name, const char *window,
    unsigned index, const double *bounds, size_t nbounds,
    const uint64_t *counts, double sum, uint64_t count)
{
	uint64_t cum = 0;
	char le[64];

	for (size_t i = 0; i <= nbounds; i++) {
		cum += counts[i];
		if (i < nbounds)
			prom_double(le, sizeof(le), bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		zbuf_printf(b, "%s_bucket", name);
		prom_labels(b, window, index, le);
		zbuf_printf(b, " %llu\n", (unsigned long long)cum);
	}
	prom_sample(b, name, "_sum", window, index, sum);
	return prom_sample(b, name, "_count", window, index, (double)count);
}

int
prom_base64url(struct zbuf *b, const char *s)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789-_";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	if (n == 0)	/* the gateway's spelling of an empty value */
		return zbuf_append(b, "=", 1);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		char o[4];

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		o[0] = tab[(v >> 18) & 63];
		o[1] = tab[(v >> 12) & 63];
		o[2] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		o[3] = i + 2 < n ? tab[v & 63] : '=';
		if (zbuf_append(b, o, 4) != 0)
			return -1;
	}
	return 0;
}

/*
 * Base64 for what a plain path segment cannot carry: empty, '/', and the
 * dot segments "." and "..", which libcurl (like any HTTP client) folds
 * away, so that "job/./window/w" would become the group {job="window"}.
 */
static int
prom_key(struct zbuf *b, const char *label, const char *value)
{
	if (*value == '\0' || strchr(value, '/') != NULL ||
	    strcmp(value, ".") == 0 || strcmp(value, "..") == 0) {
		zbuf_printf(b, "/%s@base64/", label);
		return prom_base64url(b, value);
	}
	zbuf_printf(b, "/%s/", label);
	return http_escape(b, value);
}

int
prom_push_url(struct zbuf *b, const char *url, const char *job,
    const char *window, const char *instance)
{
	size_t n = strlen(url);

	while (n > 0 && url[n - 1] == '/')
		n--;
	zbuf_append(b, url, n);
	zbuf_printf(b, "/metrics");
	prom_key(b, "job", job);
	if (window != NULL)
		prom_key(b, "window", window);
	if (instance != NULL && *instance != '\0')
		prom_key(b, "instance", instance);
	return b->failed ? -1 : 0;
}
