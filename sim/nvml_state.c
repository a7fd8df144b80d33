/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_state.c - the simulated NVIDIA GPUs' identities, settings and
 * energy counters (nvml_state.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_state.h"

#define SIM_DEFAULT_GPUS 4
#define SIM_MAX_PROFILES 16		/* entries of a ZEUS_SIM_PROFILE list */
#define SIM_MIXED "v100,a100,h100,rtx4090"

static struct {
	pthread_mutex_t lock;		/* guards every GPU's settings and
					 * energy counter */
	unsigned count;
	struct nvmlDevice_st gpus[SIM_MAX_GPUS];
	char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
} st = { .lock = PTHREAD_MUTEX_INITIALIZER };

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

int
sim_state_configure(const char *driver_version)
{
	int rc;

	pthread_mutex_lock(&st.lock);
	rc = sim_configure(driver_version);
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
	sim_view(g, out);
	pthread_mutex_unlock(&st.lock);
}

double
sim_state_energy(struct nvmlDevice_st *g)
{
	double mj;

	pthread_mutex_lock(&st.lock);
	sim_advance(g);
	mj = g->energy_mj;
	pthread_mutex_unlock(&st.lock);
	return mj;
}

int
sim_state_set_limit(struct nvmlDevice_st *g, unsigned mw)
{
	if (mw < g->prof->min_limit_mw || mw > g->prof->max_limit_mw)
		return -1;
	pthread_mutex_lock(&st.lock);
	sim_advance(g);
	g->set.limit_mw = mw;
	pthread_mutex_unlock(&st.lock);
	return 0;
}

void
sim_state_set_persistence(struct nvmlDevice_st *g, bool on)
{
	pthread_mutex_lock(&st.lock);
	g->set.persistence = on;
	pthread_mutex_unlock(&st.lock);
}

int
sim_state_lock_clocks(struct nvmlDevice_st *g, enum sim_domain d,
    unsigned min, unsigned max)
{
	if (min > max || max == 0)
		return -1;
	pthread_mutex_lock(&st.lock);
	sim_advance(g);
	if (d == SIM_DOMAIN_MEM) {
		g->set.mem_lock_min = min;
		g->set.mem_lock_max = max;
	} else {
		g->set.gpu_lock_min = min;
		g->set.gpu_lock_max = max;
	}
	pthread_mutex_unlock(&st.lock);
	return 0;
}

void
sim_state_unlock_clocks(struct nvmlDevice_st *g, enum sim_domain d)
{
	pthread_mutex_lock(&st.lock);
	sim_advance(g);
	if (d == SIM_DOMAIN_MEM)
		g->set.mem_lock_min = g->set.mem_lock_max = 0;
	else
		g->set.gpu_lock_min = g->set.gpu_lock_max = 0;
	pthread_mutex_unlock(&st.lock);
}
