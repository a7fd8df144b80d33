/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metric.h - Zeus's metric module in C: an energy histogram, a cumulative
 * energy counter and a GPU power gauge, exported in the Prometheus text
 * exposition format and pushed to a Prometheus Pushgateway.
 *
 * Names and labels are Zeus's: energy_monitor_{gpu,cpu,dram}_energy_joules
 * (histogram; the counter is the same name with _total) and
 * power_monitor_gpu_power_watts (gauge), labels `window` and `index`.
 *
 * Pushes go to <url>/metrics/job/<job>/window/<window>[/instance/<inst>]
 * with POST, so each window (and each host, or whatever `instance` says)
 * owns its own group and a push never wipes another window's series
 * (docs/libzeus.md, "Pushgateway grouping").
 *
 * A failed push never loses data: the metric keeps its state, the call
 * returns -1 with code ZEUS_ERR_PUSH (its measurement output still valid).
 * The next push sends everything again. A push that fails in a counter's
 * or gauge's thread is logged as a warning, the first failure of a window
 * only, and end_window returns it; a failure returned by the call itself
 * is not logged.
 *
 * Each metric measures through a monitor the caller owns (borrowed; it must
 * outlive the metric and cover the devices the metric is asked about).
 */
#ifndef ZEUS_METRIC_H
#define ZEUS_METRIC_H

#include "zeus.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zeus_monitor;
struct zeus_measurement;

/* Where pushes go. */
struct zeus_push_options {
	const char *url;		/* "http://127.0.0.1:9091"; NULL: no push */
	const char *job;		/* required with url */
	/*
	 * Extra grouping-key label `instance`. NULL: the host name, so runs
	 * on one host reuse one group per window (the gateway keeps groups
	 * until deleted); processes that run at the same time on one host
	 * and push the same window pass their own (a rank, a pid). "" leaves
	 * the label out.
	 */
	const char *instance;
	unsigned timeout_ms;		/* per push; 0: 3000 */
};

/* ---- energy histogram ---------------------------------------------------- */

struct zeus_energy_histogram;

/*
 * Bucket upper bounds (J), strictly increasing and finite. A NULL list
 * means Zeus's defaults (GPU 50,100,200,500,1000; CPU 10,50,100,500,1000;
 * DRAM 5,10,20,50,150); a non-NULL list with count 0 is an error.
 */
struct zeus_histogram_options {
	struct zeus_monitor *monitor;
	struct zeus_push_options push;
	const double *gpu_buckets;
	size_t gpu_bucket_count;
	const double *cpu_buckets;
	size_t cpu_bucket_count;
	const double *dram_buckets;
	size_t dram_bucket_count;
};

ZEUS_API int zeus_energy_histogram_create(
    const struct zeus_histogram_options *opt,
    struct zeus_energy_histogram **out, struct zeus_error *err);
ZEUS_API void zeus_energy_histogram_destroy(struct zeus_energy_histogram *h);

ZEUS_API int zeus_energy_histogram_begin_window(
    struct zeus_energy_histogram *h, const char *name, bool sync,
    struct zeus_error *err);
/*
 * Ends the window, observes each GPU's, CPU's and DRAM's energy (a warning
 * through the log handler when a value is above the largest or below the
 * smallest bucket), and pushes this window's group. `out` may be NULL.
 */
ZEUS_API int zeus_energy_histogram_end_window(
    struct zeus_energy_histogram *h, const char *name, bool sync,
    struct zeus_measurement *out, struct zeus_error *err);

/* The exposition text of window `name` (NULL: all). Free with free(). */
ZEUS_API char *zeus_energy_histogram_text(struct zeus_energy_histogram *h,
    const char *name);

/* ---- cumulative energy counter ------------------------------------------- */

struct zeus_energy_counter;

struct zeus_counter_options {
	struct zeus_monitor *monitor;
	struct zeus_push_options push;
	unsigned update_period_ms;	/* 0: 1000 */
};

ZEUS_API int zeus_energy_counter_create(const struct zeus_counter_options *opt,
    struct zeus_energy_counter **out, struct zeus_error *err);
/* Ends every open window first. */
ZEUS_API void zeus_energy_counter_destroy(struct zeus_energy_counter *c);

/*
 * Starts a thread that every update period measures the energy since its
 * last measurement, adds it to the window's counters and pushes.
 */
ZEUS_API int zeus_energy_counter_begin_window(struct zeus_energy_counter *c,
    const char *name, bool sync, struct zeus_error *err);
/*
 * Stops the thread (it wakes at once, measures the last partial period,
 * pushes once more and exits; a dead gateway costs at most the push
 * timeout). `total` (may be NULL) gets the window's totals. Returns -1 with
 * ZEUS_ERR_PUSH when any push of the window failed (totals still valid).
 */
ZEUS_API int zeus_energy_counter_end_window(struct zeus_energy_counter *c,
    const char *name, bool sync, struct zeus_measurement *total,
    struct zeus_error *err);
ZEUS_API char *zeus_energy_counter_text(struct zeus_energy_counter *c,
    const char *name);

/* ---- power gauge ----------------------------------------------------------- */

struct zeus_power_gauge;

struct zeus_gauge_options {
	struct zeus_monitor *monitor;	/* GPUs measured: the monitor's */
	struct zeus_push_options push;
	unsigned update_period_ms;	/* 0: 1000 */
};

ZEUS_API int zeus_power_gauge_create(const struct zeus_gauge_options *opt,
    struct zeus_power_gauge **out, struct zeus_error *err);
ZEUS_API void zeus_power_gauge_destroy(struct zeus_power_gauge *g);
/* Starts a thread that sets and pushes each GPU's power every period. */
ZEUS_API int zeus_power_gauge_begin_window(struct zeus_power_gauge *g,
    const char *name, bool sync, struct zeus_error *err);
/* Stops it (within one period). -1/ZEUS_ERR_PUSH when a push failed. */
ZEUS_API int zeus_power_gauge_end_window(struct zeus_power_gauge *g,
    const char *name, bool sync, struct zeus_error *err);
ZEUS_API char *zeus_power_gauge_text(struct zeus_power_gauge *g,
    const char *name);

/* ---- plumbing, exposed for tools -------------------------------------------- */

/*
 * Pushes exposition `text` with POST to the group
 * <url>/metrics/job/<job>/window/<window>[/instance/<instance>]
 * (window NULL: no window label). Values that contain '/' or are empty are
 * sent base64url-encoded with the @base64 suffix, as the gateway documents.
 */
ZEUS_API int zeus_push_text(const struct zeus_push_options *push,
    const char *window, const char *text, struct zeus_error *err);

#ifdef __cplusplus
}
#endif

#endif
