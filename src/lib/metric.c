/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metric.c - Zeus's metric module (include/zeus/metric.h): the energy
 * histogram, the cumulative energy counter and the power gauge.
 *
 * Each metric keeps its series per window name in memory (like a
 * prometheus_client registry: a window name seen again keeps adding to the
 * same series), renders one window's series as exposition text and pushes
 * that text to the window's own Pushgateway group (push.c). Measuring goes
 * through the caller's monitor with internal window names
 * "__EnergyHistogram_<name>" / "__EnergyCumulativeCounter_<name>", as Zeus
 * does, so a metric's windows never collide with the user's.
 */
#include "zeus/metric.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib.h"
#include "prom.h"
#include "zeus/monitor.h"

/* Bounds per histogram; keeps a window's series in one small block. */
#define METRIC_MAX_BUCKETS 32

enum { K_GPU, K_CPU, K_DRAM, K_COUNT };

static const char *const metric_names[K_COUNT] = {
	"energy_monitor_gpu_energy_joules",
	"energy_monitor_cpu_energy_joules",
	"energy_monitor_dram_energy_joules",
};
static const char *const metric_help[K_COUNT] = {
	"GPU energy consumption",
	"CPU energy consumption",
	"DRAM energy consumption",
};
static const char *const metric_kind_upper[K_COUNT] = { "GPU", "CPU", "DRAM" };

static const double metric_default_buckets[K_COUNT][5] = {
	{ 50.0, 100.0, 200.0, 500.0, 1000.0 },
	{ 10.0, 50.0, 100.0, 500.0, 1000.0 },
	{ 5.0, 10.0, 20.0, 50.0, 150.0 },
};

/* One labelled series: histogram or counter or gauge. */
struct series {
	unsigned index;
	bool seen;			/* observed at least once */
	uint64_t counts[METRIC_MAX_BUCKETS + 1];
	double sum;			/* histogram sum, counter, gauge value */
	uint64_t count;
};

/* One window's series, per kind, by device slot. */
struct mwin {
	char name[ZEUS_NAME_MAX];
	struct series s[K_COUNT][ZEUS_MAX_DEVICES];
	/* counter and gauge windows: their thread */
	bool open;
	bool stop;
	bool push_failed;
	char push_error[ZEUS_ERR_MSG_MAX];
	pthread_t thread;
	struct mwin_set *set;
	struct zeus_measurement total;	/* counter only */
};

/* What the three metrics share: push target, windows, lock. */
struct mwin_set {
	struct zeus_monitor *monitor;
	struct zeus_push_options push;
	char url[2048], job[ZEUS_NAME_MAX], instance[ZEUS_NAME_MAX];
	bool has_instance;
	unsigned period_ms;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mwin **win;
	size_t nwin, capwin;
};

static int
metric_set_init(struct mwin_set *s, struct zeus_monitor *monitor,
    const struct zeus_push_options *push, unsigned period_ms,
    struct zeus_error *err)
{
	pthread_condattr_t ca;

	memset(s, 0, sizeof(*s));
	if (monitor == NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "a metric needs a monitor");
	if (push->url != NULL) {
		if (lib_check_name(push->url, sizeof(s->url)) != 0 ||
		    lib_check_name(push->job, sizeof(s->job)) != 0)
			return lib_err(err, ZEUS_ERR_INVALID,
			    "a Pushgateway URL needs a job name (1..%d bytes)",
			    ZEUS_NAME_MAX - 1);
		if (strncmp(push->url, "http://", 7) != 0 &&
		    strncmp(push->url, "https://", 8) != 0)
			return lib_err(err, ZEUS_ERR_INVALID,
			    "Pushgateway URL must start with http:// or "
			    "https://");
		if (push->instance != NULL && strnlen(push->instance,
		    sizeof(s->instance)) >= sizeof(s->instance))
			return lib_err(err, ZEUS_ERR_INVALID,
			    "instance too long");
		snprintf(s->url, sizeof(s->url), "%s", push->url);
		snprintf(s->job, sizeof(s->job), "%s", push->job);
		s->push.url = s->url;
		s->push.job = s->job;
		if (push->instance != NULL) {
			snprintf(s->instance, sizeof(s->instance), "%s",
			    push->instance);
			s->push.instance = s->instance;
		}
		s->push.timeout_ms = push->timeout_ms;
	}
	s->monitor = monitor;
	s->period_ms = period_ms ? period_ms : 1000u;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

static void
metric_set_free(struct mwin_set *s)
{
	for (size_t i = 0; i < s->nwin; i++)
		free(s->win[i]);
	free(s->win);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

/* The window named `name`, created when missing. Locked. */
static struct mwin *
metric_set_window(struct mwin_set *s, const char *name, struct zeus_error *err)
{
	struct mwin *w;

	for (size_t i = 0; i < s->nwin; i++)
		if (strcmp(s->win[i]->name, name) == 0)
			return s->win[i];
	if (s->nwin == s->capwin) {
		size_t cap = s->capwin ? s->capwin * 2 : 8;
		struct mwin **nw = realloc(s->win, cap * sizeof(*nw));

		if (nw == NULL)
			goto nomem;
		s->win = nw;
		s->capwin = cap;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		goto nomem;
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->set = s;
	s->win[s->nwin++] = w;
	return w;
nomem:
	lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	return NULL;
}

/*
 * Pushes text for window `name`; -1 and err on failure, not logged: the
 * caller returns it, or a thread logs its first one (metric_win_push_result).
 */
static int
metric_set_push(struct mwin_set *s, const char *name, const char *text,
    struct zeus_error *err)
{
	if (s->push.url == NULL)
		return 0;
	if (text == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	return zeus_push_text(&s->push, name, text, err);
}

static int
metric_check_name(const char *name, struct zeus_error *err)
{
	if (lib_check_name(name, ZEUS_NAME_MAX - 32) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "window name must be 1..%d bytes", ZEUS_NAME_MAX - 33);
	return 0;
}

/* Series of window `w`, kind k, for device `index`. Locked. */
static struct series *
metric_win_series(struct mwin *w, int k, unsigned index)
{
	struct series *s = w->s[k];

	for (size_t i = 0; i < ZEUS_MAX_DEVICES; i++) {
		if (s[i].seen && s[i].index == index)
			return &s[i];
		if (!s[i].seen) {
			s[i].seen = true;
			s[i].index = index;
			return &s[i];
		}
	}
	return NULL;
}

/* ---- energy histogram --------------------------------------------------------- */

struct zeus_energy_histogram {
	struct mwin_set set;
	double bounds[K_COUNT][METRIC_MAX_BUCKETS];
	size_t nbounds[K_COUNT];
	bool kind_on[K_COUNT];
};

static int
metric_hist_buckets(struct zeus_energy_histogram *h, int k, const double *b,
    size_t n, struct zeus_error *err)
{
	if (b == NULL) {
		b = metric_default_buckets[k];
		n = 5;
	}
	if (n == 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "%s bucket range cannot be empty. Please provide a valid "
		    "range or omit the argument to use defaults.",
		    metric_kind_upper[k]);
	if (n > METRIC_MAX_BUCKETS)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "%s bucket range has more than %d bounds",
		    metric_kind_upper[k], METRIC_MAX_BUCKETS);
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(b[i]) || (i > 0 && b[i] <= b[i - 1]))
			return lib_err(err, ZEUS_ERR_INVALID,
			    "%s bucket bounds must be finite and strictly "
			    "increasing", metric_kind_upper[k]);
		h->bounds[k][i] = b[i];
	}
	h->nbounds[k] = n;
	return 0;
}

int
zeus_energy_histogram_create(const struct zeus_histogram_options *opt,
    struct zeus_energy_histogram **out, struct zeus_error *err)
{
	struct zeus_energy_histogram *h;
	bool dram[ZEUS_MAX_DEVICES];
	size_t ncpu;

	*out = NULL;
	if (opt == NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "options are required");
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	if (metric_hist_buckets(h, K_GPU, opt->gpu_buckets,
	    opt->gpu_bucket_count, err) != 0 ||
	    metric_hist_buckets(h, K_CPU, opt->cpu_buckets,
	    opt->cpu_bucket_count, err) != 0 ||
	    metric_hist_buckets(h, K_DRAM, opt->dram_buckets,
	    opt->dram_bucket_count, err) != 0 ||
	    metric_set_init(&h->set, opt->monitor, &opt->push, 0, err) != 0) {
		free(h);
		return -1;
	}
	ncpu = zeus_monitor_cpus(opt->monitor, NULL, dram, ZEUS_MAX_DEVICES);
	h->kind_on[K_GPU] = zeus_monitor_gpus(opt->monitor, NULL, 0) > 0;
	h->kind_on[K_CPU] = ncpu > 0;
	for (size_t i = 0; i < ncpu; i++)
		h->kind_on[K_DRAM] |= dram[i];
	*out = h;
	return 0;
}

void
zeus_energy_histogram_destroy(struct zeus_energy_histogram *h)
{
	if (h == NULL)
		return;
	/* Close our monitor windows so the monitor is left clean. */
	for (size_t i = 0; i < h->set.nwin; i++) {
		char inner[ZEUS_NAME_MAX + 32];

		snprintf(inner, sizeof(inner), "__EnergyHistogram_%s",
		    h->set.win[i]->name);
		if (zeus_monitor_window_open(h->set.monitor, inner))
			zeus_monitor_end_window(h->set.monitor, inner, false,
			    NULL, NULL);
	}
	metric_set_free(&h->set);
	free(h);
}

int
zeus_energy_histogram_begin_window(struct zeus_energy_histogram *h,
    const char *name, bool sync, struct zeus_error *err)
{
	char inner[ZEUS_NAME_MAX + 32];
	struct mwin *w;

	if (metric_check_name(name, err) != 0)
		return -1;
	pthread_mutex_lock(&h->set.lock);
	w = metric_set_window(&h->set, name, err);
	pthread_mutex_unlock(&h->set.lock);
	if (w == NULL)
		return -1;
	snprintf(inner, sizeof(inner), "__EnergyHistogram_%s", name);
	return zeus_monitor_begin_window(h->set.monitor, inner, sync, err);
}

static void
metric_hist_observe(struct zeus_energy_histogram *h, struct mwin *w, int k,
    const struct zeus_energy *e, size_t n)
{
	size_t nb = h->nbounds[k];

	for (size_t i = 0; i < n; i++) {
		struct series *s = metric_win_series(w, k, e[i].index);
		double v = e[i].joules;
		size_t b;

		if (s == NULL)
			continue;
		for (b = 0; b < nb && v > h->bounds[k][b]; b++)
			;
		s->counts[b]++;
		s->sum += v;
		s->count++;
		if (v > h->bounds[k][nb - 1])
			lib_log(ZEUS_LOG_WARN, "%s %u energy %g exceeds the "
			    "maximum bucket value of %g", metric_kind_upper[k],
			    e[i].index, v, h->bounds[k][nb - 1]);
		if (v < h->bounds[k][0])
			lib_log(ZEUS_LOG_WARN, "%s %u energy %g exceeds the "
			    "minimum bucket value of %g", metric_kind_upper[k],
			    e[i].index, v, h->bounds[k][0]);
	}
}

/* Renders window w (NULL: all). Locked. */
static char *
metric_hist_render(struct zeus_energy_histogram *h, const struct mwin *only)
{
	struct zbuf b;

	zbuf_init(&b, 64u << 20);
	for (int k = 0; k < K_COUNT; k++) {
		if (!h->kind_on[k])
			continue;
		prom_header(&b, metric_names[k], metric_help[k], "histogram");
		for (size_t i = 0; i < h->set.nwin; i++) {
			const struct mwin *w = h->set.win[i];

			if (only != NULL && w != only)
				continue;
			for (size_t d = 0; d < ZEUS_MAX_DEVICES &&
			    w->s[k][d].seen; d++) {
				const struct series *s = &w->s[k][d];

				prom_histogram(&b, metric_names[k], w->name,
				    s->index, h->bounds[k], h->nbounds[k],
				    s->counts, s->sum, s->count);
			}
		}
	}
	if (b.failed) {
		zbuf_free(&b);
		return NULL;
	}
	return zbuf_take(&b);
}

int
zeus_energy_histogram_end_window(struct zeus_energy_histogram *h,
    const char *name, bool sync, struct zeus_measurement *out,
    struct zeus_error *err)
{
	char inner[ZEUS_NAME_MAX + 32];
	struct zeus_measurement *m;
	struct mwin *w;
	char *text;
	int rc;

	if (metric_check_name(name, err) != 0)
		return -1;
	m = malloc(sizeof(*m));
	if (m == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	snprintf(inner, sizeof(inner), "__EnergyHistogram_%s", name);
	if (zeus_monitor_end_window(h->set.monitor, inner, sync, m, err)) {
		free(m);
		return -1;
	}
	if (out != NULL)
		*out = *m;
	pthread_mutex_lock(&h->set.lock);
	w = metric_set_window(&h->set, name, NULL);	/* exists since begin */
	if (w != NULL) {
		metric_hist_observe(h, w, K_GPU, m->gpu, m->gpu_count);
		metric_hist_observe(h, w, K_CPU, m->cpu, m->cpu_count);
		metric_hist_observe(h, w, K_DRAM, m->dram, m->dram_count);
	}
	text = w != NULL ? metric_hist_render(h, w) : NULL;
	pthread_mutex_unlock(&h->set.lock);
	free(m);
	rc = metric_set_push(&h->set, name, text, err);
	free(text);
	return rc;
}

char *
zeus_energy_histogram_text(struct zeus_energy_histogram *h, const char *name)
{
	struct mwin *w = NULL;
	char *text = NULL;

	pthread_mutex_lock(&h->set.lock);
	for (size_t i = 0; name != NULL && i < h->set.nwin; i++)
		if (strcmp(h->set.win[i]->name, name) == 0)
			w = h->set.win[i];
	if (name == NULL || w != NULL)
		text = metric_hist_render(h, w);
	pthread_mutex_unlock(&h->set.lock);
	return text;
}

/* ---- thread helpers for counter and gauge ------------------------------------ */

/* Waits until `deadline` or w->stop. Locked. Returns true when stopping. */
static bool
metric_win_wait(struct mwin *w, struct timespec *deadline)
{
	while (!w->stop) {
		if (pthread_cond_timedwait(&w->set->cond, &w->set->lock,
		    deadline) == ETIMEDOUT)
			break;
	}
	return w->stop;
}

static void
metric_deadline_add(struct timespec *ts, unsigned ms)
{
	ts->tv_nsec += (long)(ms % 1000u) * 1000000L;
	ts->tv_sec += ms / 1000u + ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

/*
 * Records a thread's push failure in its window. Locked. Returns true for
 * the window's first failure, which the caller logs once unlocked: a dead
 * gateway would otherwise be reported at every period, and end_window
 * returns that first failure anyway.
 */
static bool
metric_win_push_result(struct mwin *w, int rc, const struct zeus_error *e)
{
	if (rc == 0 || w->push_failed)
		return false;
	w->push_failed = true;
	snprintf(w->push_error, sizeof(w->push_error), "%s", e->message);
	return true;
}

static void
metric_win_log_push_failure(const struct mwin *w, const struct zeus_error *e)
{
	lib_log(ZEUS_LOG_WARN, "push of window '%s' failed: %s", w->name,
	    e->message);
}

/* Opens a thread window; `fn` runs in the thread. */
static int
metric_win_start(struct mwin_set *s, const char *name, void *(*fn)(void *),
    struct mwin **out, struct zeus_error *err)
{
	struct mwin *w;
	int rc;

	pthread_mutex_lock(&s->lock);
	w = metric_set_window(s, name, err);
	if (w != NULL && w->open) {
		lib_err(err, ZEUS_ERR_INVALID, "window '%s' is already open",
		    name);
		w = NULL;
	}
	if (w != NULL) {
		w->open = true;
		w->stop = false;
		w->push_failed = false;
		rc = pthread_create(&w->thread, NULL, fn, w);
		if (rc != 0) {
			w->open = false;
			lib_err(err, ZEUS_ERR_INTERNAL,
			    "cannot start thread: %s", strerror(rc));
			w = NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	*out = w;
	return w != NULL ? 0 : -1;
}

/* Stops and joins a thread window; the push outcome goes to err. */
static int
metric_win_stop(struct mwin_set *s, const char *name, struct mwin **out,
    struct zeus_error *err)
{
	struct mwin *w = NULL;
	pthread_t t;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nwin; i++)
		if (strcmp(s->win[i]->name, name) == 0 && s->win[i]->open)
			w = s->win[i];
	if (w == NULL) {
		pthread_mutex_unlock(&s->lock);
		return lib_err(err, ZEUS_ERR_INVALID,
		    "window '%s' is not open", name);
	}
	w->stop = true;
	t = w->thread;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(t, NULL);
	pthread_mutex_lock(&s->lock);
	w->open = false;
	*out = w;
	pthread_mutex_unlock(&s->lock);
	if (w->push_failed)
		return lib_err(err, ZEUS_ERR_PUSH, "%s", w->push_error);
	return 0;
}

/* ---- cumulative energy counter ----------------------------------------------------- */

struct zeus_energy_counter {
	struct mwin_set set;	/* first: threads reach it through w->set */
	bool kind_on[K_COUNT];
};
static_assert(offsetof(struct zeus_energy_counter, set) == 0,
    "metric_counter_thread casts w->set to the counter");

int
zeus_energy_counter_create(const struct zeus_counter_options *opt,
    struct zeus_energy_counter **out, struct zeus_error *err)
{
	struct zeus_energy_counter *c;
	bool dram[ZEUS_MAX_DEVICES];
	size_t ncpu;

	*out = NULL;
	if (opt == NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "options are required");
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	if (metric_set_init(&c->set, opt->monitor, &opt->push,
	    opt->update_period_ms, err) != 0) {
		free(c);
		return -1;
	}
	ncpu = zeus_monitor_cpus(opt->monitor, NULL, dram, ZEUS_MAX_DEVICES);
	c->kind_on[K_GPU] = zeus_monitor_gpus(opt->monitor, NULL, 0) > 0;
	c->kind_on[K_CPU] = ncpu > 0;
	for (size_t i = 0; i < ncpu; i++)
		c->kind_on[K_DRAM] |= dram[i];
	*out = c;
	return 0;
}

static char *
metric_counter_render(const struct zeus_energy_counter *c,
    const struct mwin *only)
{
	struct zbuf b;
	char fam[128];

	zbuf_init(&b, 64u << 20);
	for (int k = 0; k < K_COUNT; k++) {
		if (!c->kind_on[k])
			continue;
		snprintf(fam, sizeof(fam), "%s_total", metric_names[k]);
		prom_header(&b, fam, metric_help[k], "counter");
		for (size_t i = 0; i < c->set.nwin; i++) {
			const struct mwin *w = c->set.win[i];

			if (only != NULL && w != only)
				continue;
			for (size_t d = 0; d < ZEUS_MAX_DEVICES &&
			    w->s[k][d].seen; d++)
				prom_sample(&b, fam, "", w->name,
				    w->s[k][d].index, w->s[k][d].sum);
		}
	}
	if (b.failed) {
		zbuf_free(&b);
		return NULL;
	}
	return zbuf_take(&b);
}

static void
metric_counter_add(struct mwin *w, int k, const struct zeus_energy *e, size_t n,
    struct zeus_energy *tot, size_t *ntot)
{
	for (size_t i = 0; i < n; i++) {
		struct series *s = metric_win_series(w, k, e[i].index);

		if (s != NULL)
			s->sum += e[i].joules;
		tot[i].index = e[i].index;
		tot[i].joules += e[i].joules;
	}
	*ntot = n;
}

/* End the inner window, start the next one, add what it measured. */
static void
metric_counter_period(struct zeus_energy_counter *c, struct mwin *w,
    const char *inner, bool last, struct zeus_measurement *m)
{
	struct zeus_error e;

	if (zeus_monitor_end_window(c->set.monitor, inner, false, m, &e)) {
		lib_log(ZEUS_LOG_WARN, "counter '%s': %s", w->name, e.message);
		return;
	}
	if (!last && zeus_monitor_begin_window(c->set.monitor, inner, false,
	    &e) != 0)
		lib_log(ZEUS_LOG_WARN, "counter '%s': %s", w->name, e.message);
	pthread_mutex_lock(&c->set.lock);
	metric_counter_add(w, K_GPU, m->gpu, m->gpu_count, w->total.gpu,
	    &w->total.gpu_count);
	metric_counter_add(w, K_CPU, m->cpu, m->cpu_count, w->total.cpu,
	    &w->total.cpu_count);
	metric_counter_add(w, K_DRAM, m->dram, m->dram_count, w->total.dram,
	    &w->total.dram_count);
	w->total.time_s += m->time_s;
	pthread_mutex_unlock(&c->set.lock);
}

static void *
metric_counter_thread(void *arg)
{
	struct mwin *w = arg;
	struct zeus_energy_counter *c = (struct zeus_energy_counter *)w->set;
	struct zeus_measurement *m = malloc(sizeof(*m));
	char inner[ZEUS_NAME_MAX + 32];
	struct timespec next;
	bool last = false;

	snprintf(inner, sizeof(inner), "__EnergyCumulativeCounter_%s",
	    w->name);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (m != NULL && !last) {
		struct zeus_error e;
		char *text;
		bool first;
		int rc;

		metric_deadline_add(&next, c->set.period_ms);
		pthread_mutex_lock(&c->set.lock);
		last = metric_win_wait(w, &next);
		pthread_mutex_unlock(&c->set.lock);
		metric_counter_period(c, w, inner, last, m);
		pthread_mutex_lock(&c->set.lock);
		text = metric_counter_render(c, w);
		pthread_mutex_unlock(&c->set.lock);
		rc = metric_set_push(&c->set, w->name, text, &e);
		free(text);
		pthread_mutex_lock(&c->set.lock);
		first = metric_win_push_result(w, rc, &e);
		pthread_mutex_unlock(&c->set.lock);
		if (first)
			metric_win_log_push_failure(w, &e);
	}
	if (m == NULL)
		lib_log(ZEUS_LOG_ERROR, "counter '%s': out of memory",
		    w->name);
	free(m);
	return NULL;
}

int
zeus_energy_counter_begin_window(struct zeus_energy_counter *c,
    const char *name, bool sync, struct zeus_error *err)
{
	char inner[ZEUS_NAME_MAX + 32];
	struct mwin *w;
	bool busy;

	if (metric_check_name(name, err) != 0)
		return -1;
	pthread_mutex_lock(&c->set.lock);
	w = metric_set_window(&c->set, name, err);
	busy = w != NULL && w->open;
	pthread_mutex_unlock(&c->set.lock);
	if (w == NULL)
		return -1;
	if (busy)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "window '%s' is already open", name);
	snprintf(inner, sizeof(inner), "__EnergyCumulativeCounter_%s", name);
	if (zeus_monitor_begin_window(c->set.monitor, inner, sync, err) != 0)
		return -1;
	memset(&w->total, 0, sizeof(w->total));
	if (metric_win_start(&c->set, name, metric_counter_thread, &w,
	    err) != 0) {
		zeus_monitor_end_window(c->set.monitor, inner, false, NULL,
		    NULL);
		return -1;
	}
	return 0;
}

int
zeus_energy_counter_end_window(struct zeus_energy_counter *c,
    const char *name, bool sync, struct zeus_measurement *total,
    struct zeus_error *err)
{
	struct zeus_monitor *mon = c->set.monitor;
	struct mwin *w = NULL;
	int rc;

	if (metric_check_name(name, err) != 0)
		return -1;
	if (sync)	/* the thread measures the tail; sync before it does */
		zeus_monitor_sync(mon);
	rc = metric_win_stop(&c->set, name, &w, err);
	if (w != NULL && total != NULL) {
		pthread_mutex_lock(&c->set.lock);
		*total = w->total;
		pthread_mutex_unlock(&c->set.lock);
	}
	return rc;
}

void
zeus_energy_counter_destroy(struct zeus_energy_counter *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->set.nwin; i++) {
		struct mwin *w = NULL;

		if (c->set.win[i]->open)
			metric_win_stop(&c->set, c->set.win[i]->name, &w, NULL);
	}
	metric_set_free(&c->set);
	free(c);
}

char *
zeus_energy_counter_text(struct zeus_energy_counter *c, const char *name)
{
	struct mwin *w = NULL;
	char *text = NULL;

	pthread_mutex_lock(&c->set.lock);
	for (size_t i = 0; name != NULL && i < c->set.nwin; i++)
		if (strcmp(c->set.win[i]->name, name) == 0)
			w = c->set.win[i];
	if (name == NULL || w != NULL)
		text = metric_counter_render(c, w);
	pthread_mutex_unlock(&c->set.lock);
	return text;
}

/* ---- power gauge ------------------------------------------------------------------------ */

#define GAUGE_NAME "power_monitor_gpu_power_watts"
#define GAUGE_HELP "Records power consumption for GPU over time"

struct zeus_power_gauge {
	struct mwin_set set;	/* first: threads reach it through w->set */
};
static_assert(offsetof(struct zeus_power_gauge, set) == 0,
    "metric_gauge_thread casts w->set to the gauge");

int
zeus_power_gauge_create(const struct zeus_gauge_options *opt,
    struct zeus_power_gauge **out, struct zeus_error *err)
{
	struct zeus_power_gauge *g;

	*out = NULL;
	if (opt == NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "options are required");
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	if (metric_set_init(&g->set, opt->monitor, &opt->push,
	    opt->update_period_ms, err) != 0) {
		free(g);
		return -1;
	}
	*out = g;
	return 0;
}

static char *
metric_gauge_render(const struct zeus_power_gauge *g, const struct mwin *only)
{
	struct zbuf b;

	zbuf_init(&b, 64u << 20);
	prom_header(&b, GAUGE_NAME, GAUGE_HELP, "gauge");
	for (size_t i = 0; i < g->set.nwin; i++) {
		const struct mwin *w = g->set.win[i];

		if (only != NULL && w != only)
			continue;
		for (size_t d = 0; d < ZEUS_MAX_DEVICES && w->s[K_GPU][d].seen;
		    d++)
			prom_sample(&b, GAUGE_NAME, "", w->name,
			    w->s[K_GPU][d].index, w->s[K_GPU][d].sum);
	}
	if (b.failed) {
		zbuf_free(&b);
		return NULL;
	}
	return zbuf_take(&b);
}

static void *
metric_gauge_thread(void *arg)
{
	struct mwin *w = arg;
	struct zeus_power_gauge *g = (struct zeus_power_gauge *)w->set;
	struct zeus_power *p = malloc(sizeof(*p));
	struct timespec next;
	bool stop = p == NULL;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!stop) {
		struct zeus_error e;
		char *text = NULL;
		bool first;
		int rc = 0;

		if (zeus_monitor_gpu_power(g->set.monitor, p, &e) != 0) {
			lib_log(ZEUS_LOG_WARN, "gauge '%s': %s", w->name,
			    e.message);
		} else {
			pthread_mutex_lock(&g->set.lock);
			for (size_t i = 0; i < p->gpu_count; i++) {
				struct series *s = metric_win_series(w, K_GPU,
				    p->gpu[i].index);

				if (s != NULL)
					s->sum = p->gpu[i].watts;
			}
			text = metric_gauge_render(g, w);
			pthread_mutex_unlock(&g->set.lock);
			rc = metric_set_push(&g->set, w->name, text, &e);
			free(text);
		}
		metric_deadline_add(&next, g->set.period_ms);
		pthread_mutex_lock(&g->set.lock);
		first = metric_win_push_result(w, rc, &e);
		pthread_mutex_unlock(&g->set.lock);
		if (first)
			metric_win_log_push_failure(w, &e);
		pthread_mutex_lock(&g->set.lock);
		stop = metric_win_wait(w, &next);
		pthread_mutex_unlock(&g->set.lock);
	}
	free(p);
	return NULL;
}

int
zeus_power_gauge_begin_window(struct zeus_power_gauge *g, const char *name,
    bool sync, struct zeus_error *err)
{
	struct mwin *w;

	if (metric_check_name(name, err) != 0)
		return -1;
	(void)sync;	/* power is instantaneous: nothing to wait for */
	return metric_win_start(&g->set, name, metric_gauge_thread, &w, err);
}

int
zeus_power_gauge_end_window(struct zeus_power_gauge *g, const char *name,
    bool sync, struct zeus_error *err)
{
	struct mwin *w = NULL;

	if (metric_check_name(name, err) != 0)
		return -1;
	return metric_win_stop(&g->set, name, &w, err);
}

void
zeus_power_gauge_destroy(struct zeus_power_gauge *g)
{
	if (g == NULL)
		return;
	for (size_t i = 0; i < g->set.nwin; i++) {
		struct mwin *w = NULL;

		if (g->set.win[i]->open)
			metric_win_stop(&g->set, g->set.win[i]->name, &w, NULL);
	}
	metric_set_free(&g->set);
	free(g);
}

char *
zeus_power_gauge_text(struct zeus_power_gauge *g, const char *name)
{
	struct mwin *w = NULL;
	char *text = NULL;

	pthread_mutex_lock(&g->set.lock);
	for (size_t i = 0; name != NULL && i < g->set.nwin; i++)
		if (strcmp(g->set.win[i]->name, name) == 0)
			w = g->set.win[i];
	if (name == NULL || w != NULL)
		text = metric_gauge_render(g, w);
	pthread_mutex_unlock(&g->set.lock);
	return text;
}
