/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prom.h - the Prometheus text exposition format (version 0.0.4), as much
 * of it as libzeus writes: HELP/TYPE headers and samples labelled
 * {window="...",index="..."} (plus le="..." for histogram buckets), and the
 * Pushgateway URL with its grouping key.
 */
#ifndef ZEUS_PROM_H
#define ZEUS_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "lib.h"

/* "# HELP name help\n# TYPE name type\n" */
int prom_header(struct zbuf *b, const char *name, const char *help,
    const char *type);

/* name{window="w",index="i"} value\n (suffix appended to name). */
int prom_sample(struct zbuf *b, const char *name, const char *suffix,
    const char *window, unsigned index, double value);

/*
 * One histogram series: cumulative _bucket lines for each bound and +Inf,
 * then _sum and _count. counts[i] is the number of observations in bucket
 * i alone (i == nbounds: above the last bound).
 */
int prom_histogram(struct zbuf *b, const char *name, const char *window,
    unsigned index, const double *bounds, size_t nbounds,
    const uint64_t *counts, double sum, uint64_t count);

/* A float as Prometheus reads it: shortest exact, +Inf, -Inf, NaN. */
void prom_double(char *buf, size_t size, double v);

/* Label value with \\, \" and \n escaped. */
int prom_label_value(struct zbuf *b, const char *v);

/* RFC 4648 §5 base64url with padding, as the Pushgateway decodes it. */
int prom_base64url(struct zbuf *b, const char *s);

/*
 * <url>/metrics/job/<job>[/window/<w>][/instance/<i>], each value either
 * percent-escaped or, when empty, containing '/' or "." or "..",
 * "<label>@base64/<b64>".
 * A trailing '/' of url is dropped.
 */
int prom_push_url(struct zbuf *b, const char *url, const char *job,
    const char *window, const char *instance);

/* The `instance` used when none is given: the host name (push.c). */
void push_default_instance(char *buf, size_t size);

#endif
