/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl.c - RAPL packages: wraparound compensation, keepalive, and the
 * powercap sysfs source.
 *
 * The first half is source-independent: a `struct rapl` holds, per package,
 * a mutex and the wrap state of its CPU and DRAM counters, and asks a source
 * (a table of function pointers) for raw counter values. The simulator
 * (rapl_sim.c) plugs in there, so simulated and real counters share every
 * line of wrap handling.
 *
 * The second half is the sysfs source: it discovers package zones under a
 * root directory, keeps each `energy_uj` open and re-reads it with pread.
 * Layout it expects (as on Linux):
 *
 *   <root>/intel-rapl:0/{name,energy_uj,max_energy_range_uj}
 *   <root>/intel-rapl:0/intel-rapl:0:1/{name="dram",energy_uj,...}
 */
#include "rapl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"

/* At most this many packages are taken from a tree (real hosts have <= 16). */
#define RAPL_MAX_PACKAGES 256

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
rapl_parse_u64(const char *buf, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned d;

		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		d = (unsigned)(buf[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

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

const char *
rapl_pick_root(const char *container, const char *host)
{
	struct stat st;

	if (stat(container, &st) == 0 && S_ISDIR(st.st_mode))
		return container;
	return host;
}

const char *
rapl_default_root(void)
{
	return rapl_pick_root(RAPL_ROOT_CONTAINER, RAPL_ROOT_HOST);
}

/* ---- The source-independent core ---------------------------------------- */

static uint64_t
rapl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

/* Reads both raw counters, then commits both states; p->mu is held. */
static int
rapl_read_locked(struct rapl *r, unsigned i, uint64_t *cpu_uj,
    uint64_t *dram_uj, struct zerr *err)
{
	struct rapl_pkg *p = &r->pkgs[i];
	struct rapl_counter_state cpu = p->cpu, dram = p->dram;
	uint64_t raw, cpu_total, dram_total = 0;

	if (r->ops->read(r->ctx, i, RAPL_ZONE_CPU, &raw, err) != 0)
		return -1;
	if (rapl_counter_update(&cpu, raw, &cpu_total) != 0)
		return rapl_range_error(r, i, RAPL_ZONE_CPU, raw, cpu.max,
		    err);
	if (p->desc.has_dram) {
		if (r->ops->read(r->ctx, i, RAPL_ZONE_DRAM, &raw, err) != 0)
			return -1;
		if (rapl_counter_update(&dram, raw, &dram_total) != 0)
			return rapl_range_error(r, i, RAPL_ZONE_DRAM, raw,
			    dram.max, err);
	}
	p->cpu = cpu;
	p->dram = dram;
	if (cpu_uj != NULL)
		*cpu_uj = cpu_total;
	if (dram_uj != NULL)
		*dram_uj = dram_total;
	return 0;
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
	out->mono_ns = rapl_now_ns();
	pthread_mutex_unlock(&p->mu);
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

static void
rapl_keepalive_pass(struct rapl *r)
{
	unsigned i;

	for (i = 0; i < r->npkgs; i++) {
		struct rapl_pkg *p = &r->pkgs[i];
		struct zerr err = { 0 };
		int rc;

		pthread_mutex_lock(&p->mu);
		rc = rapl_read_locked(r, i, NULL, NULL, &err);
		if (rc != 0 && !p->keepalive_failing) {
			char q[ZERR_MSG_MAX + 8];

			zlog(ZLOG_WARN, "rapl_keepalive_read_failed",
			    "cpu=%u error=%s", p->desc.id,
			    zlog_quote(q, sizeof(q), err.msg));
		} else if (rc == 0 && p->keepalive_failing) {
			zlog(ZLOG_INFO, "rapl_keepalive_read_recovered",
			    "cpu=%u", p->desc.id);
		}
		p->keepalive_failing = rc != 0;
		pthread_mutex_unlock(&p->mu);
	}
}

static void
rapl_deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *
rapl_keepalive_main(void *arg)
{
	struct rapl *r = arg;
	struct timespec deadline;

	pthread_mutex_lock(&r->ka_mu);
	for (;;) {
		rapl_deadline(&deadline, r->ka_interval_ms);
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

/* ---- The sysfs source --------------------------------------------------- */

struct sysfs_counter {
	int fd;
	char path[PATH_MAX];
};

struct sysfs_pkg {
	struct sysfs_counter cpu;
	struct sysfs_counter dram;	/* fd -1 without DRAM */
};

struct sysfs_ctx {
	unsigned npkgs;
	struct sysfs_pkg *pkgs;
};

/* Quotes a path for an error message or log line. */
#define QPATH(buf, p) zlog_quote((buf), sizeof(buf), (p))

static int
sysfs_join(char *out, size_t size, const char *dir, const char *name,
    struct zerr *err)
{
	int n = snprintf(out, size, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= size)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: path too long: %s/%s",
		    dir, name);
	return 0;
}

/*
 * Reads the whole of a small file through `fd` from offset 0. Sets *len;
 * fails when the content does not fit in size - 1 bytes.
 */
static int
sysfs_pread_all(int fd, char *buf, size_t size, size_t *len)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
		if (got == size) {
			errno = EFBIG;
			return -1;
		}
	}
	buf[got] = '\0';
	*len = got;
	return 0;
}

/*
 * Opens a file that must be a regular file (sysfs attributes are).
 * O_NONBLOCK keeps a FIFO planted in a tree from hanging startup.
 */
static int
sysfs_open_file(const char *path, struct zerr *err)
{
	char q[PATH_MAX + 8];
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, errno == EACCES || errno == EPERM ?
		    ZERR_FORBIDDEN : ZERR_INTERNAL,
		    "RAPL: cannot open %s: %s%s", QPATH(q, path),
		    strerror(errno), errno == EACCES || errno == EPERM ?
		    " (reading RAPL counters needs root)" : "");
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s is not a regular file", QPATH(q, path));
	}
	return fd;
}

/* Reads `path` whole (bounded) into buf; errors name the file. */
static int
sysfs_read_file(const char *path, char *buf, size_t size, size_t *len,
    struct zerr *err)
{
	char q[PATH_MAX + 8];
	int fd = sysfs_open_file(path, err);
	int rc;

	if (fd < 0)
		return -1;
	rc = sysfs_pread_all(fd, buf, size, len);
	if (rc != 0)
		zerr_set(err, ZERR_INTERNAL, "RAPL: cannot read %s: %s",
		    QPATH(q, path), errno == EFBIG ? "content too long" :
		    strerror(errno));
	close(fd);
	return rc;
}

static int
sysfs_read_u64_path(const char *path, uint64_t *v, struct zerr *err)
{
	char q[PATH_MAX + 8], buf[32];
	size_t len;

	if (sysfs_read_file(path, buf, sizeof(buf), &len, err) != 0)
		return -1;
	if (rapl_parse_u64(buf, len, v) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s does not hold a decimal counter", QPATH(q, path));
	return 0;
}

/* Reads a zone's `name` into out (trailing newline removed). */
static int
sysfs_read_name(const char *zone_dir, char *out, size_t size,
    struct zerr *err)
{
	char path[PATH_MAX], q[PATH_MAX + 8];
	size_t len;

	if (sysfs_join(path, sizeof(path), zone_dir, "name", err) != 0 ||
	    sysfs_read_file(path, out, size, &len, err) != 0)
		return -1;
	if (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	if (len == 0 || strlen(out) != len)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s holds no zone name", QPATH(q, path));
	return 0;
}

/*
 * Opens a zone's energy_uj (kept open) and reads max_energy_range_uj.
 */
static int
sysfs_open_zone(const char *zone_dir, struct sysfs_counter *c, uint64_t *max,
    struct zerr *err)
{
	char path[PATH_MAX];

	if (sysfs_join(path, sizeof(path), zone_dir, "max_energy_range_uj",
	    err) != 0 || sysfs_read_u64_path(path, max, err) != 0)
		return -1;
	if (sysfs_join(c->path, sizeof(c->path), zone_dir, "energy_uj",
	    err) != 0)
		return -1;
	c->fd = sysfs_open_file(c->path, err);
	return c->fd < 0 ? -1 : 0;
}

/*
 * Parses "<prefix><decimal u32>" exactly: no leading zeros (so
 * intel-rapl:01 cannot alias intel-rapl:1), no sign, nothing after.
 */
static bool
sysfs_parse_zone_name(const char *name, const char *prefix, unsigned *n)
{
	size_t plen = strlen(prefix), len;
	uint64_t v;

	if (strncmp(name, prefix, plen) != 0)
		return false;
	name += plen;
	len = strlen(name);
	if (len == 0 || len > 10 || (name[0] == '0' && len > 1))
		return false;
	if (rapl_parse_u64(name, len, &v) != 0 || name[len - 1] == '\n' ||
	    v > UINT32_MAX)
		return false;
	*n = (unsigned)v;
	return true;
}

static bool
sysfs_is_dir(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

	return n > 0 && (size_t)n < sizeof(path) && stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode);
}

/*
 * Finds the DRAM subzone of package `id` in pkg_dir: the lowest-numbered
 * intel-rapl:<id>:M whose name is "dram". Sets *found.
 */
static int
sysfs_find_dram(const char *pkg_dir, unsigned id, char *dram_dir, size_t size,
    bool *found, struct zerr *err)
{
	char prefix[32], sub[PATH_MAX], zname[64];
	unsigned m, best = 0;
	struct dirent *de;
	DIR *d;

	*found = false;
	snprintf(prefix, sizeof(prefix), "intel-rapl:%u:", id);
	d = opendir(pkg_dir);
	if (d == NULL) {
		char q[PATH_MAX + 8];

		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot list %s: %s",
		    QPATH(q, pkg_dir), strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (!sysfs_parse_zone_name(de->d_name, prefix, &m) ||
		    !sysfs_is_dir(pkg_dir, de->d_name))
			continue;
		if (sysfs_join(sub, sizeof(sub), pkg_dir, de->d_name,
		    err) != 0 || sysfs_read_name(sub, zname, sizeof(zname),
		    err) != 0) {
			closedir(d);
			return -1;
		}
		if (strcmp(zname, "dram") != 0)
			continue;
		if (*found) {
			zlog(ZLOG_WARN, "rapl_dram_duplicate", "cpu=%u "
			    "subzones=%u,%u using_lowest=true", id, best, m);
			if (m > best)
				continue;
		}
		*found = true;
		best = m;
		snprintf(dram_dir, size, "%s", sub);
	}
	closedir(d);
	return 0;
}

/* Opens package `id` (its directory is root/intel-rapl:<id>). */
static int
sysfs_open_pkg(const char *root, unsigned id, struct rapl_package_desc *desc,
    struct sysfs_pkg *sp, struct zerr *err)
{
	char dir[PATH_MAX], leaf[32], dram_dir[PATH_MAX];

	desc->id = id;
	snprintf(leaf, sizeof(leaf), "intel-rapl:%u", id);
	if (sysfs_join(dir, sizeof(dir), root, leaf, err) != 0 ||
	    sysfs_read_name(dir, desc->name, sizeof(desc->name), err) != 0 ||
	    sysfs_open_zone(dir, &sp->cpu, &desc->cpu_max_uj, err) != 0 ||
	    sysfs_find_dram(dir, id, dram_dir, sizeof(dram_dir),
	    &desc->has_dram, err) != 0)
		return -1;
	if (desc->has_dram &&
	    sysfs_open_zone(dram_dir, &sp->dram, &desc->dram_max_uj, err) != 0)
		return -1;
	return 0;
}

static int
sysfs_read(void *vctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct sysfs_ctx *ctx = vctx;
	struct sysfs_counter *c = zone == RAPL_ZONE_CPU ?
	    &ctx->pkgs[pkg].cpu : &ctx->pkgs[pkg].dram;
	char buf[32], q[PATH_MAX + 8];
	size_t len;

	if (sysfs_pread_all(c->fd, buf, sizeof(buf), &len) != 0)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot read %s: %s",
		    QPATH(q, c->path), errno == EFBIG ? "content too long" :
		    strerror(errno));
	if (rapl_parse_u64(buf, len, raw) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s does not hold a decimal counter",
		    QPATH(q, c->path));
	return 0;
}

static const char *
sysfs_label(void *vctx, unsigned pkg, enum rapl_zone zone)
{
	struct sysfs_ctx *ctx = vctx;

	return zone == RAPL_ZONE_CPU ? ctx->pkgs[pkg].cpu.path :
	    ctx->pkgs[pkg].dram.path;
}

static void
sysfs_destroy(void *vctx)
{
	struct sysfs_ctx *ctx = vctx;
	unsigned i;

	if (ctx == NULL)
		return;
	for (i = 0; i < ctx->npkgs; i++) {
		if (ctx->pkgs[i].cpu.fd >= 0)
			close(ctx->pkgs[i].cpu.fd);
		if (ctx->pkgs[i].dram.fd >= 0)
			close(ctx->pkgs[i].dram.fd);
	}
	free(ctx->pkgs);
	free(ctx);
}

static const struct rapl_source_ops sysfs_ops = {
	.name = "sysfs",
	.read = sysfs_read,
	.label = sysfs_label,
	.destroy = sysfs_destroy,
};

static int
sysfs_cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/*
 * Lists the package ids under root, sorted. A missing root gives zero ids.
 */
static int
sysfs_list_packages(const char *root, unsigned *ids, unsigned *n,
    struct zerr *err)
{
	char q[PATH_MAX + 8], qn[NAME_MAX * 4 + 8];
	struct dirent *de;
	unsigned id;
	DIR *d;

	*n = 0;
	d = opendir(root);
	if (d == NULL && errno == ENOENT)
		return 0;
	if (d == NULL)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot list %s: %s",
		    QPATH(q, root), strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (!sysfs_parse_zone_name(de->d_name, "intel-rapl:", &id))
			continue;
		if (!sysfs_is_dir(root, de->d_name)) {
			zlog(ZLOG_WARN, "rapl_skip_entry", "entry=%s "
			    "reason=not_a_directory",
			    zlog_quote(qn, sizeof(qn), de->d_name));
			continue;
		}
		if (*n == RAPL_MAX_PACKAGES) {
			closedir(d);
			return zerr_set(err, ZERR_INTERNAL,
			    "RAPL: more than %u packages under %s",
			    RAPL_MAX_PACKAGES, QPATH(q, root));
		}
		ids[(*n)++] = id;
	}
	closedir(d);
	qsort(ids, *n, sizeof(*ids), sysfs_cmp_unsigned);
	return 0;
}

static void
rapl_log_packages(const struct rapl *r, const char *root)
{
	char q[PATH_MAX + 8], qn[80];
	unsigned i;

	zlog(ZLOG_INFO, "rapl_open", "root=%s packages=%u", QPATH(q, root),
	    rapl_count(r));
	for (i = 0; i < rapl_count(r); i++)
		zlog(ZLOG_INFO, "rapl_package", "cpu=%u name=%s dram=%s "
		    "max_energy_range_uj=%llu", r->pkgs[i].desc.id,
		    zlog_quote(qn, sizeof(qn), r->pkgs[i].desc.name),
		    r->pkgs[i].desc.has_dram ? "true" : "false",
		    (unsigned long long)r->pkgs[i].desc.cpu_max_uj);
}

int
rapl_open(const char *root, struct rapl **out, struct zerr *err)
{
	struct rapl_package_desc *descs = NULL;
	struct sysfs_ctx *ctx;
	unsigned n, i;
	unsigned *idv;
	int rc;

	idv = calloc(RAPL_MAX_PACKAGES, sizeof(*idv));
	ctx = calloc(1, sizeof(*ctx));
	if (idv == NULL || ctx == NULL) {
		free(idv);
		free(ctx);
		return zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
	}
	if (sysfs_list_packages(root, idv, &n, err) != 0)
		goto fail;
	ctx->pkgs = calloc(n > 0 ? n : 1, sizeof(*ctx->pkgs));
	descs = calloc(n > 0 ? n : 1, sizeof(*descs));
	if (ctx->pkgs == NULL || descs == NULL) {
		zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		ctx->pkgs[i].cpu.fd = -1;
		ctx->pkgs[i].dram.fd = -1;
		ctx->npkgs = i + 1;
		if (sysfs_open_pkg(root, idv[i], &descs[i], &ctx->pkgs[i],
		    err) != 0)
			goto fail;
	}
	free(idv);
	rc = rapl_open_source(&sysfs_ops, ctx, descs, n, out, err);
	free(descs);
	if (rc == 0)
		rapl_log_packages(*out, root);
	return rc;
fail:
	free(idv);
	free(descs);
	sysfs_destroy(ctx);
	return -1;
}
