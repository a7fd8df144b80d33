/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_state.c - the simulated NVIDIA GPUs' identities, settings and
 * energy counters (nvml_state.h).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_state.h"
#include "state_file.h"

#define SIM_DEFAULT_GPUS 4
#define SIM_MAX_PROFILES 16		/* entries of a ZEUS_SIM_PROFILE list */
#define SIM_MIXED "v100,a100,h100,rtx4090"

/* The state file's layout and callbacks (below). */
static const struct sim_state_file_def sim_file_def;

static struct {
	pthread_mutex_t lock;		/* guards every GPU's settings and
					 * energy counter, and the file */
	unsigned count;
	struct nvmlDevice_st gpus[SIM_MAX_GPUS];
	char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	/* ZEUS_SIM_STATE: the file, if any (below). */
	struct sim_state_file file;
} st = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.file = SIM_STATE_FILE_INIT(&sim_file_def),
};

/* ------------------------------------------------------------------------
 * Parsing of settings. Everything here is untrusted input.
 */

static bool
sim_parse_uint(const char *s, int base, unsigned long max,
    unsigned long *out)
{
	char *end;
	unsigned long v;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* Parses "DDDD:BB:DD.F" (hex). The function part is checked, then unused:
 * nvmlPciInfo_t has no function field. */
static bool
sim_parse_pci(const char *s, unsigned *domain, unsigned *bus, unsigned *dev)
{
	char buf[32], *p[4], *q;
	unsigned long v[4];
	const unsigned long max[4] = { 0xffffffffUL, 0xff, 0x1f, 0x7 };

	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	p[0] = buf;
	if ((q = strchr(p[0], ':')) == NULL)
		return false;
	*q = '\0';
	p[1] = q + 1;
	if ((q = strchr(p[1], ':')) == NULL)
		return false;
	*q = '\0';
	p[2] = q + 1;
	if ((q = strchr(p[2], '.')) == NULL)
		return false;
	*q = '\0';
	p[3] = q + 1;
	for (int i = 0; i < 4; i++)
		if (!sim_parse_uint(p[i], 16, max[i], &v[i]))
			return false;
	*domain = (unsigned)v[0];
	*bus = (unsigned)v[1];
	*dev = (unsigned)v[2];
	return true;
}

static int
sim_configure_pci(const char *list)
{
	unsigned i = 0;

	while (list != NULL && *list != '\0' && i < SIM_MAX_GPUS) {
		char item[64];
		size_t len = strcspn(list, ",");
		struct nvmlDevice_st *g = &st.gpus[i];

		if (len >= sizeof(item))
			len = sizeof(item) - 1;
		memcpy(item, list, len);
		item[len] = '\0';
		if (!sim_parse_pci(item, &g->domain, &g->bus, &g->device)) {
			fprintf(stderr, "nvml-sim: bad ZEUS_SIM_PCI entry "
			    "%.40s (want DDDD:BB:DD.F)\n", item);
			return -1;
		}
		list += strcspn(list, ",");
		if (*list == ',')
			list++;
		i++;
	}
	return 0;
}

/*
 * Parses ZEUS_SIM_PROFILE ("a100", "v100,h100", "mixed") into `out`;
 * returns the number of entries, or 0 after a line on stderr.
 */
static unsigned
sim_parse_profiles(const char *list, const struct sim_profile **out)
{
	unsigned n = 0;

	if (list == NULL || *list == '\0')
		list = "a100";
	if (strcmp(list, "mixed") == 0)
		list = SIM_MIXED;
	while (*list != '\0') {
		size_t len = strcspn(list, ",");
		const struct sim_profile *p = sim_model_profile(list, len);

		if (p == NULL || n == SIM_MAX_PROFILES) {
			fprintf(stderr, "nvml-sim: bad ZEUS_SIM_PROFILE entry "
			    "%.*s (want at most %d of mixed, a100, v100, h100, "
			    "h200, rtx4090, p100)\n", (int)(len < 40 ? len : 40),
			    list, SIM_MAX_PROFILES);
			return 0;
		}
		out[n++] = p;
		list += len;
		if (*list == ',' && *++list == '\0') {
			fprintf(stderr, "nvml-sim: ZEUS_SIM_PROFILE ends with "
			    "a comma\n");
			return 0;
		}
	}
	return n;
}

/* A stable, unique "GPU-8-4-4-4-12" UUID from the GPU's place. */
static void
sim_make_uuid(struct nvmlDevice_st *g)
{
	uint64_t a = 0x5a3e0000u + g->index, b;

	a = (a ^ ((uint64_t)g->domain << 32) ^ ((uint64_t)g->bus << 8)) *
	    0x9e3779b97f4a7c15ULL;
	a ^= a >> 29;
	b = (a ^ g->prof->pci_id) * 0xbf58476d1ce4e5b9ULL;
	b ^= b >> 31;
	snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-%04x-%04x-%04x-%012llx",
	    (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffffu,
	    (unsigned)a & 0xffffu, (unsigned)(b >> 48),
	    (unsigned long long)(b & 0xffffffffffffULL));
}

/* Under st.lock. */
static int
sim_configure(const char *driver_version)
{
	const struct sim_profile *profs[SIM_MAX_PROFILES];
	const char *s, *name;
	unsigned long n = SIM_DEFAULT_GPUS;
	unsigned nprof;
	uint64_t now = sim_now_ns();

	if ((nprof = sim_parse_profiles(getenv("ZEUS_SIM_PROFILE"),
	    profs)) == 0)
		return -1;
	if (nprof > 1)
		n = nprof;
	s = getenv("ZEUS_SIM_GPUS");
	if (s != NULL && !sim_parse_uint(s, 10, SIM_MAX_GPUS, &n)) {
		fprintf(stderr, "nvml-sim: ZEUS_SIM_GPUS must be 0..%d\n",
		    SIM_MAX_GPUS);
		return -1;
	}
	st.count = (unsigned)n;
	name = getenv("ZEUS_SIM_GPU_NAME");
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++) {
		struct nvmlDevice_st *g = &st.gpus[i];

		memset(g, 0, sizeof(*g));
		g->index = i;
		g->prof = profs[i % nprof];
		snprintf(g->name, sizeof(g->name), "%s",
		    name != NULL && *name != '\0' ? name : g->prof->name);
		g->bus = (i + 1) & 0xff;
		g->set.limit_mw = g->prof->tdp_mw;
		/* The counter counts since driver load: start it somewhere. */
		g->energy_mj = (double)(i + 1) * 3600000000.0;
		g->energy_ns = now;
	}
	s = getenv("ZEUS_SIM_DRIVER_VERSION");
	snprintf(st.driver_version, sizeof(st.driver_version), "%s",
	    s != NULL && *s != '\0' ? s : driver_version);
	if (sim_configure_pci(getenv("ZEUS_SIM_PCI")) != 0)
		return -1;
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++)
		sim_make_uuid(&st.gpus[i]);
	return 0;
}


/* ------------------------------------------------------------------------
 * The state file (ZEUS_SIM_STATE), shared by every process that names it:
 * each GPU's settings and energy counter, read before and written after
 * every use under the file's lock (sim_os_state_lock), so the file is the
 * state and st.gpus a copy of it. Its content is untrusted: a file that
 * fails any check is refused, never used in part. The lock is a POSIX
 * record lock: one per process (threads take st.lock first), not inherited
 * by a fork, and dropped when the process closes any descriptor of the
 * file (so a process that loads the simulator must not open the file
 * itself while it runs).
 *
 * Layout (host byte order, so a file from a machine of the other order
 * fails the version check): state_file.h's 48-byte header, then one 64-byte
 * record per GPU, nothing after. state_file.c opens, locks, reads, writes
 * and checks the file's framing; what is the NVML simulator's own is here:
 * the magic, the record, how a record is filled from a GPU, checked
 * against this configuration and loaded.
 */

#define SIM_FILE_MAGIC "ZSIMNVS1"
#define SIM_FILE_VERSION 1u
#define SIM_FILE_MAX_MJ 1e18		/* about 31 years at 1 MW */

struct sim_file_record {
	/* Which GPU: must match this process's configuration. */
	uint32_t index, pci_id, domain, bus, device;
	/* Its settings, as struct sim_settings. */
	uint32_t limit_mw, persistence;
	uint32_t gpu_lock_min, gpu_lock_max, mem_lock_min, mem_lock_max;
	uint32_t reserved;		/* 0 */
	/* The energy counter: mJ (an IEEE double's bits) up to energy_ns,
	 * CLOCK_MONOTONIC (sim_now_ns, the model's clock, which every
	 * process of one boot shares). */
	uint64_t energy_bits;
	uint64_t energy_ns;
};

_Static_assert(sizeof(struct sim_file_record) == 64, "record layout");
_Static_assert(sizeof(double) == sizeof(uint64_t), "double layout");

/* GPU i's record, into rec (its reserved field 0). Under st.lock. */
static void
sim_file_encode(unsigned i, unsigned char *rec)
{
	const struct nvmlDevice_st *g = &st.gpus[i];
	const struct sim_settings *set = &g->set;
	struct sim_file_record r = {
		.index = i, .pci_id = g->prof->pci_id,
		.domain = g->domain, .bus = g->bus, .device = g->device,
		.limit_mw = set->limit_mw, .persistence = set->persistence,
		.gpu_lock_min = set->gpu_lock_min,
		.gpu_lock_max = set->gpu_lock_max,
		.mem_lock_min = set->mem_lock_min,
		.mem_lock_max = set->mem_lock_max,
		.energy_ns = g->energy_ns,
	};

	memcpy(&r.energy_bits, &g->energy_mj, sizeof(r.energy_bits));
	memcpy(rec, &r, sizeof(r));
}

static bool
sim_lock_ok(uint32_t min, uint32_t max)
{
	return (min == 0 && max == 0) || (min <= max && max != 0);
}

/* Whether record i is GPU i of its model at its PCI address in this
 * configuration. Under st.lock. */
static int
sim_file_identify(struct sim_state_file *f, unsigned i,
    const unsigned char *rec)
{
	const struct nvmlDevice_st *g = &st.gpus[i];
	uint32_t pci_id = g->prof->pci_id;
	struct sim_file_record r;

	memcpy(&r, rec, sizeof(r));
	if (r.index == i && r.pci_id == pci_id && r.domain == g->domain &&
	    r.bus == g->bus && r.device == g->device)
		return 0;
	sim_state_file_complain(f, "GPU %u is a %08lx at %04lx:%02lx:%02lx.0 "
	    "there, this configuration's a %08x at %04x:%02x:%02x.0 "
	    "(ZEUS_SIM_PROFILE, ZEUS_SIM_PCI)", i, (unsigned long)r.pci_id,
	    (unsigned long)r.domain, (unsigned long)r.bus,
	    (unsigned long)r.device, pci_id, g->domain, g->bus, g->device);
	return -1;
}

/* Whether record i's values are in range for GPU i's model. */
static bool
sim_file_valid(unsigned i, const unsigned char *rec)
{
	const struct sim_profile *p = st.gpus[i].prof;
	struct sim_file_record r;
	double mj;

	memcpy(&r, rec, sizeof(r));
	memcpy(&mj, &r.energy_bits, sizeof(mj));
	return r.limit_mw >= p->min_limit_mw &&
	    r.limit_mw <= p->max_limit_mw && r.persistence <= 1 &&
	    r.reserved == 0 && sim_lock_ok(r.gpu_lock_min, r.gpu_lock_max) &&
	    sim_lock_ok(r.mem_lock_min, r.mem_lock_max) && isfinite(mj) &&
	    mj >= 0 && mj <= SIM_FILE_MAX_MJ;
}

/* Loads record i's settings and counter into GPU i. A stored time ahead
 * of this process's clock is taken as now (the counter goes on from its
 * value, from now), but not written back for that: false. Under st.lock. */
static bool
sim_file_load(unsigned i, const unsigned char *rec)
{
	struct nvmlDevice_st *g = &st.gpus[i];
	struct sim_file_record r;

	memcpy(&r, rec, sizeof(r));
	g->set = (struct sim_settings){
		.limit_mw = r.limit_mw,
		.persistence = r.persistence != 0,
		.gpu_lock_min = r.gpu_lock_min,
		.gpu_lock_max = r.gpu_lock_max,
		.mem_lock_min = r.mem_lock_min,
		.mem_lock_max = r.mem_lock_max,
	};
	memcpy(&g->energy_mj, &r.energy_bits, sizeof(g->energy_mj));
	(void)sim_state_file_time(r.energy_ns, &g->energy_ns);
	return false;
}

/* The file for state_file.c: its layout, how its records are filled,
 * checked and loaded, and the words of its messages. */
static const struct sim_state_file_def sim_file_def = {
	.magic = SIM_FILE_MAGIC, .version = SIM_FILE_VERSION,
	.record_size = sizeof(struct sim_file_record),
	.max_count = SIM_MAX_GPUS,
	.encode = sim_file_encode, .identify = sim_file_identify,
	.valid = sim_file_valid, .load = sim_file_load,
	.prefix = "nvml-sim", .what = "a simulator",
	.count_hint = "(ZEUS_SIM_GPUS, ZEUS_SIM_PROFILE)",
};

/*
 * Starts a use of the state: with a file, takes its lock (exclusive when
 * the use writes) and loads it into st.gpus. 0: go on, and end with
 * sim_file_end; -1: the file failed (complained; nothing held), st.gpus
 * holds the last state read or written. Under st.lock.
 */
static int
sim_file_begin(bool exclusive)
{
	return sim_state_file_begin(&st.file, exclusive);
}

/* Ends a use: writes st.gpus back when `write`, and unlocks. -1 when the
 * write failed (complained). Under st.lock. */
static int
sim_file_end(bool write)
{
	return sim_state_file_end(&st.file, write);
}

/*
 * Opens ZEUS_SIM_STATE, if set, after st.gpus holds the power-on state: a
 * new (empty) file gets that state, an existing one is checked and loaded.
 * -1 after a line on stderr. Under st.lock.
 */
static int
sim_file_open(void)
{
	const char *path = getenv("ZEUS_SIM_STATE");

	if (path == NULL || *path == '\0')
		return 0;
	return sim_state_file_open(&st.file, path, st.count);
}

void
sim_state_release(void)
{
	pthread_mutex_lock(&st.lock);
	sim_state_file_close(&st.file);
	pthread_mutex_unlock(&st.lock);
}

int
sim_state_configure(const char *driver_version)
{
	int rc;

	pthread_mutex_lock(&st.lock);
	sim_state_file_close(&st.file);
	rc = sim_configure(driver_version);
	if (rc == 0)
		rc = sim_file_open();
	pthread_mutex_unlock(&st.lock);
	return rc;
}

unsigned
sim_state_count(void)
{
	return st.count;
}

struct nvmlDevice_st *
sim_state_gpu(unsigned index)
{
	return index < SIM_MAX_GPUS ? &st.gpus[index] : NULL;
}

int
sim_state_index(const struct nvmlDevice_st *g)
{
	uintptr_t p = (uintptr_t)g, base = (uintptr_t)st.gpus;
	unsigned i;

	if (p < base || (p - base) % sizeof(st.gpus[0]) != 0)
		return -1;
	i = (unsigned)((p - base) / sizeof(st.gpus[0]));
	if (i >= SIM_MAX_GPUS)
		return -1;
	return (int)i;
}

void
sim_state_driver_version(char *buf, size_t size)
{
	pthread_mutex_lock(&st.lock);
	snprintf(buf, size, "%s", st.driver_version);
	pthread_mutex_unlock(&st.lock);
}

/* ------------------------------------------------------------------------
 * Settings and the energy counter.
 */

/* Under st.lock. */
static void
sim_view(const struct nvmlDevice_st *g, struct sim_model_gpu *out)
{
	out->prof = g->prof;
	out->index = g->index;
	out->set = g->set;
}

/* Counts energy up to now at the settings in force: before a change that
 * alters power. Under st.lock. */
static void
sim_advance(struct nvmlDevice_st *g)
{
	struct sim_model_gpu v;

	sim_view(g, &v);
	sim_model_energy(&v, &g->energy_mj, &g->energy_ns, sim_now_ns());
}

void
sim_state_view(const struct nvmlDevice_st *g, struct sim_model_gpu *out)
{
	pthread_mutex_lock(&st.lock);
	if (sim_file_begin(false) == 0)
		sim_file_end(false);
	sim_view(g, out);
	pthread_mutex_unlock(&st.lock);
}

double
sim_state_energy(struct nvmlDevice_st *g)
{
	double mj;

	pthread_mutex_lock(&st.lock);
	if (sim_file_begin(true) == 0) {
		sim_advance(g);
		sim_file_end(true);
	} else {
		sim_advance(g);
	}
	mj = g->energy_mj;
	pthread_mutex_unlock(&st.lock);
	return mj;
}

/*
 * A change of settings: `apply` under the file's lock, the energy counted
 * up to now first (at the settings then in force), written through.
 */
struct sim_change {
	enum { CH_LIMIT, CH_PERSIST, CH_LOCK, CH_UNLOCK } what;
	enum sim_domain d;
	unsigned a, b;
};

static int
sim_change(struct nvmlDevice_st *g, const struct sim_change *ch)
{
	int rc = 0;

	pthread_mutex_lock(&st.lock);
	if (sim_file_begin(true) != 0) {
		pthread_mutex_unlock(&st.lock);
		return SIM_STATE_EFILE;
	}
	sim_advance(g);
	switch (ch->what) {
	case CH_LIMIT:
		g->set.limit_mw = ch->a;
		break;
	case CH_PERSIST:
		g->set.persistence = ch->a != 0;
		break;
	case CH_LOCK:
	case CH_UNLOCK:
		if (ch->d == SIM_DOMAIN_MEM) {
			g->set.mem_lock_min = ch->a;
			g->set.mem_lock_max = ch->b;
		} else {
			g->set.gpu_lock_min = ch->a;
			g->set.gpu_lock_max = ch->b;
		}
		break;
	}
	if (sim_file_end(true) != 0)
		rc = SIM_STATE_EFILE;
	pthread_mutex_unlock(&st.lock);
	return rc;
}

int
sim_state_set_limit(struct nvmlDevice_st *g, unsigned mw)
{
	if (mw < g->prof->min_limit_mw || mw > g->prof->max_limit_mw)
		return SIM_STATE_EINVAL;
	return sim_change(g, &(struct sim_change){ CH_LIMIT, 0, mw, 0 });
}

int
sim_state_set_persistence(struct nvmlDevice_st *g, bool on)
{
	return sim_change(g, &(struct sim_change){ CH_PERSIST, 0, on, 0 });
}

int
sim_state_lock_clocks(struct nvmlDevice_st *g, enum sim_domain d,
    unsigned min, unsigned max)
{
	if (min > max || max == 0)
		return SIM_STATE_EINVAL;
	return sim_change(g, &(struct sim_change){ CH_LOCK, d, min, max });
}

int
sim_state_unlock_clocks(struct nvmlDevice_st *g, enum sim_domain d)
{
	return sim_change(g, &(struct sim_change){ CH_UNLOCK, d, 0, 0 });
}
