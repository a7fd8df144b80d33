/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl.c - RAPL packages: wraparound compensation and the keepalive, for
 * any source of raw counters.
 *
 * A `struct rapl` holds, per package, a mutex and the wrap state of its CPU
 * and DRAM counters, and asks a source (a table of function pointers) for
 * raw counter values. The powercap sysfs reader (rapl_sysfs.c) and the
 * simulator (rapl_sim.c) plug in there, so simulated and real counters
 * share every line of wrap handling.
 */
#include "rapl.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

struct rapl_pkg {
	struct rapl_package_desc desc;
	pthread_mutex_t mu;
	struct rapl_counter_state cpu;
	struct rapl_counter_state dram;
	bool keepalive_failing;		/* log a failing streak once */
};

struct rapl {
	const struct rapl_source_ops *ops;
	void *ctx;
	unsigned npkgs;
	struct rapl_pkg *pkgs;

	/* keepalive */
	pthread_mutex_t ka_mu;
	pthread_cond_t ka_cond;		/* CLOCK_MONOTONIC */
	pthread_t ka_thread;
	bool ka_started;
	bool ka_stop;
	unsigned ka_interval_ms;
	uint64_t ka_passes;
};

/* ---- Pure helpers ------------------------------------------------------- */


int
rapl_counter_update(struct rapl_counter_state *s, uint64_t raw,
    uint64_t *total)
{
	uint64_t offset = s->offset;

	if (raw > s->max || s->max == UINT64_MAX)
		return -1;
	/* Below the previous reading: exactly one wrap of max + 1 values. */
	if (s->primed && raw < s->last_raw &&
	    __builtin_add_overflow(offset, s->max + 1, &offset))
		return -1;
	if (__builtin_add_overflow(offset, raw, total))
		return -1;
	s->offset = offset;
	s->last_raw = raw;
	s->primed = true;
	return 0;
}

int
rapl_power_mw(const struct rapl_sample *a, const struct rapl_sample *b,
    uint64_t *cpu_mw, uint64_t *dram_mw)
{
	double ns;

	if (b->mono_ns <= a->mono_ns || b->cpu_uj < a->cpu_uj ||
	    b->dram_uj < a->dram_uj)
		return -1;
	ns = (double)(b->mono_ns - a->mono_ns);
	/* µJ/ns = kW, so mW = µJ * 1e6 / ns. Counters never go backwards. */
	*cpu_mw = (uint64_t)((double)(b->cpu_uj - a->cpu_uj) * 1e6 / ns + 0.5);
	*dram_mw = 0;
	if (a->has_dram && b->has_dram)
		*dram_mw = (uint64_t)((double)(b->dram_uj - a->dram_uj) *
		    1e6 / ns + 0.5);
	return 0;
}

/* ---- The source-independent core ---------------------------------------- */

static int
rapl_check_desc(const struct rapl_package_desc *pkgs, unsigned i,
    struct zerr *err)
{
	const struct rapl_package_desc *d = &pkgs[i];
	unsigned j;

	if (d->cpu_max_uj == 0 || d->cpu_max_uj == UINT64_MAX)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL package %u: bad max_energy_range_uj %llu", d->id,
		    (unsigned long long)d->cpu_max_uj);
	if (d->has_dram && (d->dram_max_uj == 0 ||
	    d->dram_max_uj == UINT64_MAX))
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL package %u: bad DRAM max_energy_range_uj %llu",
		    d->id, (unsigned long long)d->dram_max_uj);
	for (j = 0; j < i; j++)
		if (pkgs[j].id == d->id)
			return zerr_set(err, ZERR_INTERNAL,
			    "RAPL package id %u appears twice", d->id);
	return 0;
}

static int
rapl_range_error(struct rapl *r, unsigned i, enum rapl_zone zone,
    uint64_t raw, uint64_t max, struct zerr *err)
{
	const char *label = r->ops->label != NULL ?
	    r->ops->label(r->ctx, i, zone) : NULL;
	char q[PATH_MAX + 8];

	return zerr_set(err, ZERR_INTERNAL, "RAPL package %u: %s %s holds "
	    "%llu, above max_energy_range_uj %llu", r->pkgs[i].desc.id,
	    zone == RAPL_ZONE_CPU ? "package" : "DRAM",
	    zlog_quote(q, sizeof(q), label != NULL ? label : r->ops->name),
	    (unsigned long long)raw, (unsigned long long)max);
}

/*
 * A source that tracks wraps itself: its totals pass through, and one below
 * the previous is refused (the package's state does not move).
 */
static int
rapl_apply_total_locked(struct rapl *r, unsigned i, uint64_t cpu,
    uint64_t dram, uint64_t *cpu_uj, uint64_t *dram_uj, struct zerr *err)
{
	struct rapl_pkg *p = &r->pkgs[i];
	bool has_dram = p->desc.has_dram;
	const struct rapl_counter_state *back = NULL;
	uint64_t now = cpu;

	if (p->cpu.primed && cpu < p->cpu.last_raw)
		back = &p->cpu;
	else if (has_dram && p->dram.primed && dram < p->dram.last_raw) {
		back = &p->dram;
		now = dram;
	}
	if (back != NULL)
		return zerr_set(err, ZERR_INTERNAL, "RAPL package %u: %s energy "
		    "from the %s source went backwards (%llu after %llu)",
		    p->desc.id, back == &p->cpu ? "package" : "DRAM",
		    r->ops->name, (unsigned long long)now,
		    (unsigned long long)back->last_raw);
	p->cpu.last_raw = cpu;
	p->cpu.primed = true;
	if (has_dram) {
		p->dram.last_raw = dram;
		p->dram.primed = true;
	}
	if (cpu_uj != NULL)
		*cpu_uj = cpu;
	if (dram_uj != NULL)
		*dram_uj = has_dram ? dram : 0;
	return 0;
}

/* Applies raw counters read at one moment to package i's wrap tracking. */
static int
rapl_apply_locked(struct rapl *r, unsigned i, uint64_t cpu_raw,
    uint64_t dram_raw, uint64_t *cpu_uj, uint64_t *dram_uj, struct zerr *err)
{
	struct rapl_pkg *p = &r->pkgs[i];
	struct rapl_counter_state cpu = p->cpu, dram = p->dram;
	uint64_t cpu_total, dram_total = 0;

	if (r->ops->tracks_wraps)
		return rapl_apply_total_locked(r, i, cpu_raw, dram_raw, cpu_uj,
		    dram_uj, err);
	if (rapl_counter_update(&cpu, cpu_raw, &cpu_total) != 0)
		return rapl_range_error(r, i, RAPL_ZONE_CPU, cpu_raw, cpu.max,
		    err);
	if (p->desc.has_dram && rapl_counter_update(&dram, dram_raw,
	    &dram_total) != 0)
		return rapl_range_error(r, i, RAPL_ZONE_DRAM, dram_raw,
		    dram.max, err);
	p->cpu = cpu;
	p->dram = dram;
	if (cpu_uj != NULL)
		*cpu_uj = cpu_total;
	if (dram_uj != NULL)
		*dram_uj = dram_total;
	return 0;
}

static int
rapl_read_locked(struct rapl *r, unsigned i, uint64_t *cpu_uj,
    uint64_t *dram_uj, struct zerr *err)
{
	uint64_t cpu_raw, dram_raw = 0;

	if (r->ops->read(r->ctx, i, RAPL_ZONE_CPU, &cpu_raw, err) != 0)
		return -1;
	if (r->pkgs[i].desc.has_dram && r->ops->read(r->ctx, i,
	    RAPL_ZONE_DRAM, &dram_raw, err) != 0)
		return -1;
	return rapl_apply_locked(r, i, cpu_raw, dram_raw, cpu_uj, dram_uj,
	    err);
}

static void
rapl_free(struct rapl *r)
{
	unsigned i;

	if (r->ops != NULL && r->ops->destroy != NULL)
		r->ops->destroy(r->ctx);
	for (i = 0; i < r->npkgs; i++)
		pthread_mutex_destroy(&r->pkgs[i].mu);
	free(r->pkgs);
	pthread_cond_destroy(&r->ka_cond);
	pthread_mutex_destroy(&r->ka_mu);
	free(r);
}

static int
rapl_init_keepalive_sync(struct rapl *r)
{
	pthread_condattr_t ca;

	if (pthread_mutex_init(&r->ka_mu, NULL) != 0)
		return -1;
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&r->ka_cond, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		return -1;
	}
	pthread_condattr_destroy(&ca);
	return 0;
}

int
rapl_open_source(const struct rapl_source_ops *ops, void *ctx,
    const struct rapl_package_desc *pkgs, unsigned npkgs, struct rapl **out,
    struct zerr *err)
{
	struct rapl *r;
	unsigned i;

	r = calloc(1, sizeof(*r));
	if (r == NULL || rapl_init_keepalive_sync(r) != 0) {
		free(r);
		if (ops->destroy != NULL)
			ops->destroy(ctx);
		return zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
	}
	r->ops = ops;
	r->ctx = ctx;
	r->pkgs = calloc(npkgs > 0 ? npkgs : 1, sizeof(*r->pkgs));
	if (r->pkgs == NULL) {
		rapl_free(r);
		return zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
	}
	for (i = 0; i < npkgs; i++) {
		struct rapl_pkg *p = &r->pkgs[i];

		if (rapl_check_desc(pkgs, i, err) != 0) {
			rapl_free(r);
			return -1;
		}
		if (pthread_mutex_init(&p->mu, NULL) != 0) {
			rapl_free(r);
			return zerr_set(err, ZERR_INTERNAL, "RAPL: mutex init");
		}
		r->npkgs = i + 1;
		p->desc = pkgs[i];
		p->cpu.max = pkgs[i].cpu_max_uj;
		p->dram.max = pkgs[i].dram_max_uj;
	}
	/* Prime wrap tracking now, so a broken counter fails startup. */
	for (i = 0; i < r->npkgs; i++) {
		if (rapl_read_locked(r, i, NULL, NULL, err) != 0) {
			rapl_free(r);
			return -1;
		}
	}
	*out = r;
	return 0;
}

void
rapl_close(struct rapl *r)
{
	if (r == NULL)
		return;
	if (r->ka_started) {
		pthread_mutex_lock(&r->ka_mu);
		r->ka_stop = true;
		pthread_cond_broadcast(&r->ka_cond);
		pthread_mutex_unlock(&r->ka_mu);
		pthread_join(r->ka_thread, NULL);
	}
	rapl_free(r);
}

unsigned
rapl_count(const struct rapl *r)
{
	return r != NULL ? r->npkgs : 0;
}

unsigned
rapl_package_id(const struct rapl *r, unsigned i)
{
	return r->pkgs[i].desc.id;
}

const char *
rapl_package_name(const struct rapl *r, unsigned i)
{
	return r->pkgs[i].desc.name;
}

bool
rapl_has_dram(const struct rapl *r, unsigned i)
{
	return r->pkgs[i].desc.has_dram;
}

int
rapl_index_of(const struct rapl *r, unsigned package_id)
{
	unsigned i;

	for (i = 0; i < rapl_count(r); i++)
		if (r->pkgs[i].desc.id == package_id)
			return (int)i;
	return -1;
}

int
rapl_read(struct rapl *r, unsigned i, uint64_t *cpu_uj, uint64_t *dram_uj,
    struct zerr *err)
{
	struct rapl_pkg *p;
	int rc;

	if (i >= rapl_count(r))
		return zerr_set(err, ZERR_INVALID, "no RAPL package at index %u",
		    i);
	p = &r->pkgs[i];
	if (dram_uj != NULL && !p->desc.has_dram)
		return zerr_set(err, ZERR_INVALID,
		    "RAPL package %u has no DRAM zone", p->desc.id);
	pthread_mutex_lock(&p->mu);
	rc = rapl_read_locked(r, i, cpu_uj, dram_uj, err);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int
rapl_sample(struct rapl *r, unsigned i, struct rapl_sample *out,
    struct zerr *err)
{
	struct rapl_pkg *p;
	int rc;

	if (i >= rapl_count(r))
		return zerr_set(err, ZERR_INVALID, "no RAPL package at index %u",
		    i);
	p = &r->pkgs[i];
	memset(out, 0, sizeof(*out));
	out->has_dram = p->desc.has_dram;
	pthread_mutex_lock(&p->mu);
	rc = rapl_read_locked(r, i, &out->cpu_uj, &out->dram_uj, err);
	out->mono_ns = zclock_now_ns();
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void
rapl_describe(const struct rapl *r, unsigned i, struct rapl_package_desc *out)
{
	*out = r->pkgs[i].desc;
}

const char *
rapl_zone_label(const struct rapl *r, unsigned i, enum rapl_zone zone)
{
	return r->ops->label != NULL ? r->ops->label(r->ctx, i, zone) : NULL;
}

struct rapl_fetch_many {
	struct rapl *r;
	uint64_t mask;
	const unsigned *idx;
	unsigned n;
	struct zerr *err;
};

/* rapl_sample_batch's fetch over the source's read_many. */
static int
rapl_fetch_many(void *arg, struct rapl_raw_sample *raw)
{
	struct rapl_fetch_many *f = arg;
	struct rapl_raw_sample all[64];

	memset(all, 0, sizeof(all));
	if (f->r->ops->read_many(f->r->ctx, f->mask, all, f->err) != 0)
		return -1;
	for (unsigned k = 0; k < f->n; k++)
		raw[k] = all[f->idx[k]];
	return 0;
}

/* rapl_read of one package, DRAM where it has it (else *dram_uj = 0). */
static int
rapl_read_one(struct rapl *r, unsigned pkg, uint64_t *cpu_uj,
    uint64_t *dram_uj, struct zerr *err)
{
	*dram_uj = 0;
	return rapl_read(r, pkg, cpu_uj, pkg < rapl_count(r) &&
	    rapl_has_dram(r, pkg) ? dram_uj : NULL, err);
}

void
rapl_read_many(struct rapl *r, const unsigned *pkgs, unsigned n,
    uint64_t *cpu_uj, uint64_t *dram_uj, int *rc, struct zerr *const *errs)
{
	unsigned idx[64], m = 0;
	struct rapl_raw_sample raw[64] = { { 0 } };
	struct rapl_sample s[64];
	int src[64];
	struct zerr err;
	struct rapl_fetch_many f = { .r = r, .idx = idx, .err = &err };

	for (unsigned k = 0; k < n; k++)
		if (pkgs[k] < rapl_count(r) && pkgs[k] < 64)
			f.mask |= UINT64_C(1) << pkgs[k];
	if (r->ops->read_many == NULL || f.mask == 0 || rapl_count(r) > 64) {
		for (unsigned k = 0; k < n; k++)
			rc[k] = rapl_read_one(r, pkgs[k], &cpu_uj[k],
			    &dram_uj[k], errs[k]);
		return;
	}
	for (unsigned i = 0; i < rapl_count(r); i++)
		if (f.mask >> i & 1)
			idx[m++] = i;
	f.n = m;
	zerr_clear(&err);
	(void)rapl_sample_batch(r, idx, m, rapl_fetch_many, &f, raw, s, src,
	    &err);
	for (unsigned k = 0; k < n; k++) {
		unsigned j = 0;

		while (j < m && idx[j] != pkgs[k])
			j++;
		if (j < m && src[j] == 0) {
			cpu_uj[k] = s[j].cpu_uj;
			dram_uj[k] = s[j].has_dram ? s[j].dram_uj : 0;
			rc[k] = 0;
		} else		/* its own error, from its own read */
			rc[k] = rapl_read_one(r, pkgs[k], &cpu_uj[k],
			    &dram_uj[k], errs[k]);
	}
}

int
rapl_sample_batch(struct rapl *r, const unsigned *idx, unsigned n,
    int (*fetch)(void *arg, struct rapl_raw_sample *raw), void *arg,
    struct rapl_raw_sample *raw, struct rapl_sample *out, int *rc,
    struct zerr *err)
{
	int frc;

	for (unsigned k = 0; k < n; k++) {
		assert(idx[k] < rapl_count(r));
		assert(k == 0 || idx[k] > idx[k - 1]);	/* the lock order */
		pthread_mutex_lock(&r->pkgs[idx[k]].mu);
	}
	frc = fetch(arg, raw);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = idx[k];

		memset(&out[k], 0, sizeof(out[k]));
		out[k].has_dram = r->pkgs[i].desc.has_dram;
		out[k].mono_ns = raw[k].mono_ns;
		rc[k] = frc != 0 || !raw[k].ok ? -1 : rapl_apply_locked(r, i,
		    raw[k].cpu_raw, raw[k].dram_raw, &out[k].cpu_uj,
		    &out[k].dram_uj, err);
	}
	for (unsigned k = n; k-- > 0;)
		pthread_mutex_unlock(&r->pkgs[idx[k]].mu);
	return frc;
}

int
rapl_apply_try(struct rapl *r, unsigned i, const struct rapl_raw_sample *raw,
    uint64_t *cpu_uj, uint64_t *dram_uj)
{
	struct zerr err;
	int rc;

	if (i >= rapl_count(r) || !raw->ok ||
	    pthread_mutex_trylock(&r->pkgs[i].mu) != 0)
		return -1;
	rc = rapl_apply_locked(r, i, raw->cpu_raw, raw->dram_raw, cpu_uj,
	    dram_uj, &err);
	pthread_mutex_unlock(&r->pkgs[i].mu);
	return rc;
}

/* ---- Keepalive ---------------------------------------------------------- */

unsigned
rapl_keepalive_auto_ms(const struct rapl *r)
{
	uint64_t ms = RAPL_KEEPALIVE_MAX_MS;
	unsigned i;

	for (i = 0; i < rapl_count(r); i++) {
		const struct rapl_package_desc *d = &r->pkgs[i].desc;
		/* µJ per ms at the zone's highest power (1 W = 1000 µJ/ms) */
		uint64_t cpu_rate = (uint64_t)(d->cpu_max_w ? d->cpu_max_w :
		    RAPL_KEEPALIVE_WORST_W) * 1000u;
		uint64_t dram_rate = (uint64_t)(d->dram_max_w ? d->dram_max_w :
		    RAPL_KEEPALIVE_WORST_W) * 1000u;
		uint64_t m = d->cpu_max_uj / cpu_rate / 2;

		if (m < ms)
			ms = m;
		if (d->has_dram && d->dram_max_uj / dram_rate / 2 < ms)
			ms = d->dram_max_uj / dram_rate / 2;
	}
	if (ms < RAPL_KEEPALIVE_MIN_MS)
		ms = RAPL_KEEPALIVE_MIN_MS;
	return (unsigned)ms;
}

/* A keepalive read's outcome: a failing streak is logged once. */
static void
rapl_keepalive_note_locked(struct rapl_pkg *p, int rc, const struct zerr *err)
{
	if (rc != 0 && !p->keepalive_failing) {
		char q[ZERR_MSG_MAX + 8];

		zlog(ZLOG_WARN, "rapl_keepalive_read_failed", "cpu=%u error=%s",
		    p->desc.id, zlog_quote(q, sizeof(q), err->msg));
	} else if (rc == 0 && p->keepalive_failing) {
		zlog(ZLOG_INFO, "rapl_keepalive_read_recovered", "cpu=%u",
		    p->desc.id);
	}
	p->keepalive_failing = rc != 0;
}

static void
rapl_keepalive_pass(struct rapl *r)
{
	for (unsigned i = 0; i < r->npkgs; i++) {
		struct rapl_pkg *p = &r->pkgs[i];
		struct zerr err = { 0 };
		int rc;

		pthread_mutex_lock(&p->mu);
		rc = rapl_read_locked(r, i, NULL, NULL, &err);
		rapl_keepalive_note_locked(p, rc, &err);
		pthread_mutex_unlock(&p->mu);
	}
}

static void *
rapl_keepalive_main(void *arg)
{
	struct rapl *r = arg;
	struct timespec deadline;

	pthread_mutex_lock(&r->ka_mu);
	for (;;) {
		deadline = zclock_ts(zclock_now_ns() +
		    (uint64_t)r->ka_interval_ms * 1000000u);
		while (!r->ka_stop && pthread_cond_timedwait(&r->ka_cond,
		    &r->ka_mu, &deadline) != ETIMEDOUT)
			;
		if (r->ka_stop)
			break;
		pthread_mutex_unlock(&r->ka_mu);
		rapl_keepalive_pass(r);
		pthread_mutex_lock(&r->ka_mu);
		r->ka_passes++;
	}
	pthread_mutex_unlock(&r->ka_mu);
	return NULL;
}

int
rapl_start_keepalive(struct rapl *r, unsigned interval_ms, struct zerr *err)
{
	int rc;

	if (r->ka_started)
		return zerr_set(err, ZERR_INVALID,
		    "RAPL keepalive already started");
	if (r->ops->tracks_wraps)
		return 0;	/* the source keeps its own counters alive */
	r->ka_interval_ms = interval_ms != 0 ? interval_ms :
	    rapl_keepalive_auto_ms(r);
	rc = pthread_create(&r->ka_thread, NULL, rapl_keepalive_main, r);
	if (rc != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL keepalive thread: %s", strerror(rc));
	r->ka_started = true;
	zlog(ZLOG_INFO, "rapl_keepalive_started", "interval_ms=%u packages=%u",
	    r->ka_interval_ms, r->npkgs);
	return 0;
}

uint64_t
rapl_keepalive_passes(struct rapl *r)
{
	uint64_t n;

	pthread_mutex_lock(&r->ka_mu);
	n = r->ka_passes;
	pthread_mutex_unlock(&r->ka_mu);
	return n;
}
