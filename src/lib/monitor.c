/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor.c - named energy windows (include/zeus/monitor.h).
 *
 * A window remembers a snapshot of every counter at its begin; its end
 * takes another and subtracts. Snapshots read each kind in one batch from
 * the source (source_direct.c or source_zeusd.c), so begin+end costs two
 * batches of raw reads and nothing else of note.
 *
 * GPUs without an energy counter get a virtual one: a sampler thread reads
 * their power every power_sample_period_ms while any window is open, and
 * every snapshot takes one more sample, each pair integrated as a
 * trapezoid into a per-GPU accumulator (mJ). A window's energy for such a
 * GPU is the accumulator's growth between its two snapshots.
 *
 * One lock guards windows, accumulators and source reads; the sync
 * callback runs outside it.
 */
#include "zeus/monitor.h"

#include <errno.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "source.h"
#include "zeus/client.h"

#define MON_DEFAULT_PERIOD_MS 100u

struct mon_gpu {
	unsigned index;		/* the monitor's (CUDA) index */
	unsigned dev;		/* source id */
	bool counter;
	/* virtual counter for GPUs without one */
	double acc_mj;
	uint64_t last_mw, last_ns;
	bool have_last;
};

struct mon_snap {
	uint64_t t_ns;
	double gpu_mj[ZEUS_MAX_DEVICES];
	uint64_t cpu_uj[ZEUS_MAX_DEVICES];
	uint64_t dram_uj[ZEUS_MAX_DEVICES];
};

struct mon_window {
	char name[ZEUS_NAME_MAX];
	struct mon_snap start;
};

struct zeus_monitor {
	pthread_mutex_t lock;
	struct mon_source src;
	enum zeus_source kind;

	size_t ngpu;
	struct mon_gpu gpu[ZEUS_MAX_DEVICES];
	unsigned counter_dev[ZEUS_MAX_DEVICES];	/* batch of counter GPUs */
	size_t ncounter;
	unsigned sampled_dev[ZEUS_MAX_DEVICES];	/* batch of power GPUs */
	size_t nsampled;

	size_t ncpu;
	unsigned cpu_id[ZEUS_MAX_DEVICES];
	bool cpu_dram[ZEUS_MAX_DEVICES];

	struct mon_window **win;
	size_t nwin, capwin;

	unsigned period_ms;
	pthread_cond_t cond;
	pthread_t sampler;
	bool sampler_running;
	uint64_t sampler_gen;	/* a sampler exits when this moves on */

	zeus_sync_fn sync;
	void *sync_user;
	unsigned sync_idx[ZEUS_MAX_DEVICES];
};

/* ---- index mapping ------------------------------------------------------- */

/* Canonical decimal below `limit`, with surrounding spaces allowed. */
static int
mon_parse_index(const char *s, size_t len, unsigned limit, unsigned *out)
{
	unsigned long v = 0;

	while (len > 0 && *s == ' ') {
		s++;
		len--;
	}
	while (len > 0 && s[len - 1] == ' ')
		len--;
	if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v >= limit)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/*
 * The physical GPUs CUDA would show, in CUDA order: CUDA_VISIBLE_DEVICES as
 * a comma-separated list of integer indices (UUIDs and MIG names are not
 * supported and are an error), or all of 0..ngpus-1 when unset.
 */
static int
mon_visible(size_t ngpus, unsigned *vis, size_t *nvis, struct zeus_error *err)
{
	const char *s = getenv("CUDA_VISIBLE_DEVICES");
	size_t n = 0;

	if (s == NULL) {
		for (size_t i = 0; i < ngpus; i++)
			vis[i] = (unsigned)i;
		*nvis = ngpus;
		return 0;
	}
	if (strnlen(s, 4096) >= 4096)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "CUDA_VISIBLE_DEVICES is too long");
	while (*s != '\0') {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		unsigned v;

		if (mon_parse_index(s, len, (unsigned)ngpus, &v) != 0)
			return lib_err(err, ZEUS_ERR_INVALID,
			    "CUDA_VISIBLE_DEVICES entry '%.*s' is not a GPU "
			    "index below %zu (UUID and MIG lists are not "
			    "supported)", (int)(len > 64 ? 64 : len), s,
			    ngpus);
		for (size_t i = 0; i < n; i++)
			if (vis[i] == v)
				return lib_err(err, ZEUS_ERR_INVALID,
				    "CUDA_VISIBLE_DEVICES lists GPU %u twice",
				    v);
		vis[n++] = v;
		s = comma ? comma + 1 : s + len;
	}
	*nvis = n;
	return 0;
}

/* A device the node policy does not let this caller read: zeusd's 403. */
static int
mon_denied(struct zeus_error *err, const char *kind, unsigned id,
    const char *why)
{
	lib_err(err, ZEUS_ERR_HTTP, "%s %u: zeusd's node policy does not let "
	    "this user read it (%s)", kind, id, why);
	if (err != NULL)
		err->http_status = 403;
	return -1;
}

/* Appends " N" to a list of left-out devices (cut when full). */
static void
mon_note_left_out(char *buf, size_t size, unsigned id)
{
	size_t len = strnlen(buf, size);

	if (len + 1 < size)
		snprintf(buf + len, size - len, "%s%u", len ? ", " : "", id);
}

static int
mon_pick_gpus(struct zeus_monitor *m, const struct zeus_monitor_options *o,
    const struct mon_inventory *inv, struct zeus_error *err)
{
	unsigned vis[ZEUS_MAX_DEVICES], pick[ZEUS_MAX_DEVICES];
	size_t nvis = 0, want = 0;
	char left[256] = "";

	if (mon_visible(inv->ngpus, vis, &nvis, err) != 0)
		return -1;
	if (o->gpu_indices != NULL) {
		if (o->gpu_count > ZEUS_MAX_DEVICES)
			return lib_err(err, ZEUS_ERR_INVALID, "too many GPUs");
		for (size_t i = 0; i < o->gpu_count; i++)
			pick[want++] = o->gpu_indices[i];
	} else {
		/* every visible GPU this caller may read; the rest said once */
		for (size_t i = 0; i < nvis; i++) {
			if (inv->gpu_denied[vis[i]])
				mon_note_left_out(left, sizeof(left),
				    (unsigned)i);
			else
				pick[want++] = (unsigned)i;
		}
		if (left[0] != '\0')
			lib_log(ZEUS_LOG_WARN, "left out GPU %s: zeusd's node "
			    "policy does not let this user read %s (measuring "
			    "the %zu it may)", left, strchr(left, ',') ?
			    "them" : "it", want);
	}
	for (size_t i = 0; i < want; i++) {
		unsigned idx = pick[i];
		struct mon_gpu *g = &m->gpu[i];

		if (idx >= nvis)
			return lib_err(err, ZEUS_ERR_NOT_FOUND,
			    "GPU %u does not exist (%zu visible)", idx, nvis);
		if (inv->gpu_denied[vis[idx]])
			return mon_denied(err, "GPU", idx, "GET /auth/whoami "
			    "lists the GPUs it may");
		for (size_t k = 0; k < i; k++)
			if (m->gpu[k].index == idx)
				return lib_err(err, ZEUS_ERR_INVALID,
				    "GPU %u listed twice", idx);
		g->index = idx;
		g->dev = vis[idx];
		g->counter = inv->gpu_energy[g->dev];
		if (g->counter)
			m->counter_dev[m->ncounter++] = g->dev;
		else
			m->sampled_dev[m->nsampled++] = g->dev;
		m->sync_idx[i] = idx;
	}
	m->ngpu = want;
	return 0;
}

static int
mon_pick_cpus(struct zeus_monitor *m, const struct zeus_monitor_options *o,
    const struct mon_inventory *inv, struct zeus_error *err)
{
	size_t want = o->cpu_indices != NULL ? o->cpu_count : 0;
	size_t pick[ZEUS_MAX_DEVICES];
	char left[256] = "";

	if (want > ZEUS_MAX_DEVICES)
		return lib_err(err, ZEUS_ERR_INVALID, "too many CPUs");
	if (o->cpu_indices == NULL) {
		/* every package this caller may read; the rest said once */
		for (size_t k = 0; k < inv->ncpus; k++) {
			if (inv->cpu_denied[k])
				mon_note_left_out(left, sizeof(left),
				    inv->cpu_id[k]);
			else
				pick[want++] = k;
		}
		if (left[0] != '\0')
			lib_log(ZEUS_LOG_WARN, "left out CPU %s: zeusd's node "
			    "policy does not let this user read %s (no "
			    "cpu-read grant)", left, strchr(left, ',') ?
			    "them" : "it");
	}
	for (size_t i = 0; i < want; i++) {
		size_t k = o->cpu_indices == NULL ? pick[i] : i;

		if (o->cpu_indices != NULL) {
			for (k = 0; k < inv->ncpus &&
			    inv->cpu_id[k] != o->cpu_indices[i]; k++)
				;
			if (k == inv->ncpus)
				return lib_err(err, ZEUS_ERR_NOT_FOUND,
				    "CPU package %u does not exist",
				    o->cpu_indices[i]);
			if (inv->cpu_denied[k])
				return mon_denied(err, "CPU",
				    o->cpu_indices[i], "no cpu-read grant");
			for (size_t j = 0; j < i; j++)
				if (m->cpu_id[j] == inv->cpu_id[k])
					return lib_err(err, ZEUS_ERR_INVALID,
					    "CPU %u listed twice",
					    inv->cpu_id[k]);
		}
		m->cpu_id[i] = inv->cpu_id[k];
		m->cpu_dram[i] = inv->cpu_dram[k];
	}
	m->ncpu = want;
	return 0;
}

/* ---- create / destroy ------------------------------------------------------ */

static int
mon_open_source(struct zeus_monitor *m, const struct zeus_monitor_options *o,
    struct mon_inventory *inv, struct zeus_error *err)
{
	struct mon_source_want w = {
		.gpus = o->gpu_indices == NULL || o->gpu_count > 0,
		.gpus_required = o->gpu_indices != NULL && o->gpu_count > 0,
		.cpus = o->cpu_indices == NULL || o->cpu_count > 0,
		.cpus_required = o->cpu_indices != NULL && o->cpu_count > 0,
		.nvml_library = o->nvml_library,
		.rapl_dir = o->rapl_dir,
		.zeusd = o->zeusd,
	};
	enum zeus_source kind = o->source;

	if (kind == ZEUS_SOURCE_AUTO)
		kind = o->zeusd != NULL || zeus_client_env_configured() ?
		    ZEUS_SOURCE_ZEUSD : ZEUS_SOURCE_DIRECT;
	m->kind = kind;
	if (kind == ZEUS_SOURCE_ZEUSD)
		return source_zeusd_open(&w, &m->src, inv, err);
	if (kind == ZEUS_SOURCE_DIRECT)
		return source_direct_open(&w, &m->src, inv, err);
	return lib_err(err, ZEUS_ERR_INVALID, "unknown source %d", (int)kind);
}

int
zeus_monitor_create(const struct zeus_monitor_options *opt,
    struct zeus_monitor **out, struct zeus_error *err)
{
	struct zeus_monitor_options o = { 0 };
	struct mon_inventory *inv;
	struct zeus_monitor *m;
	pthread_condattr_t ca;

	*out = NULL;
	if (opt != NULL)
		o = *opt;
	m = calloc(1, sizeof(*m));
	inv = calloc(1, sizeof(*inv));
	if (m == NULL || inv == NULL) {
		free(m);
		free(inv);
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	m->period_ms = o.power_sample_period_ms ? o.power_sample_period_ms :
	    MON_DEFAULT_PERIOD_MS;
	m->sync = o.sync;
	m->sync_user = o.sync_user;
	if (mon_open_source(m, &o, inv, err) != 0 ||
	    mon_pick_gpus(m, &o, inv, err) != 0 ||
	    mon_pick_cpus(m, &o, inv, err) != 0) {
		free(inv);
		zeus_monitor_destroy(m);
		return -1;
	}
	free(inv);
	*out = m;
	return 0;
}

static void mon_stop_sampler(struct zeus_monitor *m);

void
zeus_monitor_destroy(struct zeus_monitor *m)
{
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	mon_stop_sampler(m);	/* unlocks */
	for (size_t i = 0; i < m->nwin; i++)
		free(m->win[i]);
	free(m->win);
	if (m->src.ops != NULL)
		m->src.ops->destroy(m->src.ctx);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

enum zeus_source
zeus_monitor_source(const struct zeus_monitor *m)
{
	return m->kind;
}

size_t
zeus_monitor_gpus(const struct zeus_monitor *m, unsigned *indices,
    size_t max)
{
	for (size_t i = 0; indices != NULL && i < m->ngpu && i < max; i++)
		indices[i] = m->gpu[i].index;
	return m->ngpu;
}

size_t
zeus_monitor_cpus(const struct zeus_monitor *m, unsigned *ids,
    bool *has_dram, size_t max)
{
	for (size_t i = 0; i < m->ncpu && i < max; i++) {
		if (ids != NULL)
			ids[i] = m->cpu_id[i];
		if (has_dram != NULL)
			has_dram[i] = m->cpu_dram[i];
	}
	return m->ncpu;
}

bool
zeus_monitor_gpu_has_counter(const struct zeus_monitor *m, size_t slot)
{
	return slot < m->ngpu && m->gpu[slot].counter;
}

/* ---- power sampling for GPUs without a counter ----------------------------- */

/* One power sample of every sampled GPU into the accumulators. Locked. */
static int
mon_sample_power(struct zeus_monitor *m, struct zeus_error *err)
{
	uint64_t mw[ZEUS_MAX_DEVICES];
	uint64_t now;
	size_t k = 0;

	if (m->nsampled == 0)
		return 0;
	if (m->src.ops->gpu_power(m->src.ctx, m->sampled_dev, m->nsampled, mw,
	    err) != 0)
		return -1;
	now = lib_now_ns();
	for (size_t i = 0; i < m->ngpu; i++) {
		struct mon_gpu *g = &m->gpu[i];

		if (g->counter)
			continue;
		if (g->have_last && now > g->last_ns)
			g->acc_mj += ((double)g->last_mw + (double)mw[k]) / 2.0 *
			    (double)(now - g->last_ns) / 1e9;
		g->last_mw = mw[k];
		g->last_ns = now;
		g->have_last = true;
		k++;
	}
	return 0;
}

struct mon_sampler_arg {
	struct zeus_monitor *m;
	uint64_t gen;
};

static void *
mon_sampler(void *arg)
{
	struct mon_sampler_arg a = *(struct mon_sampler_arg *)arg;
	struct zeus_monitor *m = a.m;
	struct timespec ts;
	bool warned = false;

	free(arg);
	pthread_mutex_lock(&m->lock);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	while (m->sampler_gen == a.gen) {
		struct zeus_error e;

		ts.tv_nsec += (long)(m->period_ms % 1000u) * 1000000L;
		ts.tv_sec += m->period_ms / 1000u + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) !=
		    ETIMEDOUT)
			continue;	/* woken: re-check the generation */
		if (m->sampler_gen != a.gen)
			break;
		if (mon_sample_power(m, &e) != 0 && !warned) {
			lib_log(ZEUS_LOG_WARN, "power sampling failed: %s",
			    e.message);
			warned = true;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Starts the sampler if needed. Locked. */
static int
mon_start_sampler(struct zeus_monitor *m, struct zeus_error *err)
{
	struct mon_sampler_arg *a;
	int rc;

	if (m->nsampled == 0 || m->sampler_running)
		return 0;
	a = malloc(sizeof(*a));
	if (a == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	a->m = m;
	a->gen = ++m->sampler_gen;
	for (size_t i = 0; i < m->ngpu; i++)
		m->gpu[i].have_last = false;
	rc = pthread_create(&m->sampler, NULL, mon_sampler, a);
	if (rc != 0) {
		free(a);
		return lib_err(err, ZEUS_ERR_INTERNAL,
		    "cannot start the power sampler: %s", strerror(rc));
	}
	m->sampler_running = true;
	return 0;
}

/* Stops the sampler; called locked, returns unlocked. */
static void
mon_stop_sampler(struct zeus_monitor *m)
{
	pthread_t t = m->sampler;
	bool join = m->sampler_running;

	if (join) {
		m->sampler_running = false;
		m->sampler_gen++;
		pthread_cond_broadcast(&m->cond);
	}
	pthread_mutex_unlock(&m->lock);
	if (join)
		pthread_join(t, NULL);
}

/* ---- windows ---------------------------------------------------------------- */

/* Reads every counter. Locked. */
static int
mon_snapshot(struct zeus_monitor *m, struct mon_snap *s,
    struct zeus_error *err)
{
	uint64_t mj[ZEUS_MAX_DEVICES];
	size_t k = 0;

	if (m->ncounter > 0 && m->src.ops->gpu_energy(m->src.ctx,
	    m->counter_dev, m->ncounter, mj, err) != 0)
		return -1;
	if (mon_sample_power(m, err) != 0)
		return -1;
	for (size_t i = 0; i < m->ngpu; i++)
		s->gpu_mj[i] = m->gpu[i].counter ? (double)mj[k++] :
		    m->gpu[i].acc_mj;
	if (m->ncpu > 0 && m->src.ops->cpu_energy(m->src.ctx, m->cpu_id,
	    m->ncpu, s->cpu_uj, s->dram_uj, err) != 0)
		return -1;
	s->t_ns = lib_now_ns();
	return 0;
}

static ssize_t
mon_find(struct zeus_monitor *m, const char *name)
{
	for (size_t i = 0; i < m->nwin; i++)
		if (strcmp(m->win[i]->name, name) == 0)
			return (ssize_t)i;
	return -1;
}

static void
mon_sync(struct zeus_monitor *m, bool sync)
{
	if (sync && m->sync != NULL)
		m->sync(m->sync_idx, m->ngpu, m->sync_user);
}

void
zeus_monitor_sync(struct zeus_monitor *m)
{
	mon_sync(m, true);
}

int
zeus_monitor_begin_window(struct zeus_monitor *m, const char *name,
    bool sync, struct zeus_error *err)
{
	struct mon_window *w;
	int rc = -1;

	if (lib_check_name(name, ZEUS_NAME_MAX) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "window name must be 1..%d bytes", ZEUS_NAME_MAX - 1);
	mon_sync(m, sync);
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	snprintf(w->name, sizeof(w->name), "%s", name);
	pthread_mutex_lock(&m->lock);
	if (mon_find(m, name) >= 0) {
		lib_err(err, ZEUS_ERR_INVALID, "window '%s' is already open",
		    name);
		goto out;
	}
	if (m->nwin == m->capwin) {
		size_t cap = m->capwin ? m->capwin * 2 : 8;
		struct mon_window **nw = realloc(m->win, cap * sizeof(*nw));

		if (nw == NULL) {
			lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
			goto out;
		}
		m->win = nw;
		m->capwin = cap;
	}
	if (mon_start_sampler(m, err) != 0 ||
	    mon_snapshot(m, &w->start, err) != 0)
		goto out;
	m->win[m->nwin++] = w;
	w = NULL;
	rc = 0;
out:
	if (m->nwin == 0) {
		mon_stop_sampler(m);	/* a failed first begin */
	} else {
		pthread_mutex_unlock(&m->lock);
	}
	free(w);
	return rc;
}

static void
mon_fill(const struct zeus_monitor *m, const struct mon_snap *a,
    const struct mon_snap *b, struct zeus_measurement *out)
{
	memset(out, 0, sizeof(*out));
	out->time_s = (double)(b->t_ns - a->t_ns) / 1e9;
	out->gpu_count = m->ngpu;
	for (size_t i = 0; i < m->ngpu; i++) {
		double d = b->gpu_mj[i] - a->gpu_mj[i];

		out->gpu[i].index = m->gpu[i].index;
		out->gpu[i].joules = d > 0 ? d / 1000.0 : 0.0;
	}
	out->cpu_count = m->ncpu;
	for (size_t i = 0; i < m->ncpu; i++) {
		out->cpu[i].index = m->cpu_id[i];
		out->cpu[i].joules = b->cpu_uj[i] >= a->cpu_uj[i] ?
		    (double)(b->cpu_uj[i] - a->cpu_uj[i]) / 1e6 : 0.0;
		if (!m->cpu_dram[i])
			continue;
		out->dram[out->dram_count].index = m->cpu_id[i];
		out->dram[out->dram_count].joules =
		    b->dram_uj[i] >= a->dram_uj[i] ?
		    (double)(b->dram_uj[i] - a->dram_uj[i]) / 1e6 : 0.0;
		out->dram_count++;
	}
}

int
zeus_monitor_end_window(struct zeus_monitor *m, const char *name, bool sync,
    struct zeus_measurement *out, struct zeus_error *err)
{
	struct mon_snap *end;
	struct mon_window *w;
	ssize_t i;

	if (lib_check_name(name, ZEUS_NAME_MAX) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "window name must be 1..%d bytes", ZEUS_NAME_MAX - 1);
	end = malloc(sizeof(*end));
	if (end == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	mon_sync(m, sync);
	pthread_mutex_lock(&m->lock);
	i = mon_find(m, name);
	if (i < 0 || mon_snapshot(m, end, err) != 0) {
		if (i < 0)
			lib_err(err, ZEUS_ERR_INVALID,
			    "window '%s' is not open", name);
		pthread_mutex_unlock(&m->lock);
		free(end);
		return -1;
	}
	w = m->win[i];
	m->win[i] = m->win[--m->nwin];
	if (out != NULL)
		mon_fill(m, &w->start, end, out);
	if (m->nwin == 0)
		mon_stop_sampler(m);
	else
		pthread_mutex_unlock(&m->lock);
	free(w);
	free(end);
	return 0;
}

bool
zeus_monitor_window_open(struct zeus_monitor *m, const char *name)
{
	bool open;

	if (name == NULL)
		return false;
	pthread_mutex_lock(&m->lock);
	open = mon_find(m, name) >= 0;
	pthread_mutex_unlock(&m->lock);
	return open;
}

int
zeus_monitor_gpu_power(struct zeus_monitor *m, struct zeus_power *out,
    struct zeus_error *err)
{
	uint64_t mw[ZEUS_MAX_DEVICES];
	unsigned dev[ZEUS_MAX_DEVICES];
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < m->ngpu; i++)
		dev[i] = m->gpu[i].dev;
	pthread_mutex_lock(&m->lock);
	if (m->ngpu > 0)
		rc = m->src.ops->gpu_power(m->src.ctx, dev, m->ngpu, mw, err);
	pthread_mutex_unlock(&m->lock);
	if (rc != 0)
		return -1;
	out->gpu_count = m->ngpu;
	for (size_t i = 0; i < m->ngpu; i++) {
		out->gpu[i].index = m->gpu[i].index;
		out->gpu[i].watts = (double)mw[i] / 1000.0;
	}
	return 0;
}
