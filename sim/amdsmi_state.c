/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi_state.c - the AMD SMI simulator's state file (ZEUS_SIM_STATE,
 * amdsmi_state.h): each GPU's power cap, clock limits, performance level
 * and energy accumulator, shared by every process that names the file.
 * The file is the state and amdsmi_sim.c's GPUs a copy of it, loaded
 * before every use and written back after every change, under the file's
 * lock (sim_os_state_lock). Everything read from it is untrusted: a file
 * that fails any check is refused whole, never used in part.
 *
 * Layout (host byte order, so a file from a machine of the other order
 * fails the version check): a 48-byte header, then one 64-byte record per
 * GPU, nothing after.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "amdsmi_state.h"

#define SIM_FILE_MAGIC		"ZSIMAMD1"
#define SIM_FILE_VERSION	1u
#define SIM_FILE_MAX_UJ		1e20	/* ~4500 years at 700 W; its counts
					 * (/15.259) stay below 2^63 */

struct sim_file_header {
	char magic[8];			/* SIM_FILE_MAGIC */
	uint32_t version;		/* SIM_FILE_VERSION */
	uint32_t header_size;		/* sizeof(struct sim_file_header) */
	uint32_t record_size;		/* sizeof(struct sim_file_record) */
	uint32_t count;			/* GPUs (records) */
	uint64_t checksum;		/* FNV-1a 64 of the file, this 0 */
	uint64_t reserved[2];		/* 0 */
};

struct sim_file_record {
	/* Which GPU: must match this process's configuration. */
	uint32_t index;
	uint32_t domain, bus, device, function;
	/* Its settings. */
	uint32_t perf;			/* amdsmi_dev_perf_level_t */
	uint64_t cap_uw;
	uint32_t clk[2][2];		/* [SYS|MEM][MIN|MAX], MHz */
	/* The energy accumulator: uJ (an IEEE double's bits) counted up to
	 * energy_ns, CLOCK_MONOTONIC (one clock for a boot's processes). */
	uint64_t energy_bits;
	uint64_t energy_ns;
};

_Static_assert(sizeof(struct sim_file_header) == 48, "header layout");
_Static_assert(sizeof(struct sim_file_record) == 64, "record layout");
_Static_assert(sizeof(double) == sizeof(uint64_t), "double layout");

#define SIM_FILE_MAX (sizeof(struct sim_file_header) + \
	SIM_MAX_GPUS * sizeof(struct sim_file_record))

static struct {
	int fd;				/* -1: no file */
	char path[256];			/* for messages */
	struct sim_gpu *gpus;
	unsigned count;
	bool failing;			/* the last use of the file failed */
	bool moved;			/* the last load moved an energy base */
} sf = { .fd = -1 };

static uint64_t
sim_fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n-- > 0) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* One line on stderr about the file, for the first failure of a run of
 * them (a success clears sf.failing). */
static void
sim_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
sim_complain(const char *fmt, ...)
{
	char why[192];
	va_list ap;

	if (sf.failing)
		return;
	sf.failing = true;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "amdsmi-sim: ZEUS_SIM_STATE %.200s: %s\n", sf.path,
	    why);
}

/* The GPUs' image, into buf (SIM_FILE_MAX bytes); its size. */
static size_t
sim_encode(unsigned char *buf)
{
	struct sim_file_header h;
	size_t off = sizeof(h);

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SIM_FILE_MAGIC, sizeof(h.magic));
	h.version = SIM_FILE_VERSION;
	h.header_size = sizeof(struct sim_file_header);
	h.record_size = sizeof(struct sim_file_record);
	h.count = sf.count;
	for (unsigned i = 0; i < sf.count; i++) {
		const struct sim_gpu *g = &sf.gpus[i];
		struct sim_file_record r;

		memset(&r, 0, sizeof(r));
		r.index = i;
		r.domain = (uint32_t)g->bdf.fields.domain_number;
		r.bus = (uint32_t)g->bdf.fields.bus_number;
		r.device = (uint32_t)g->bdf.fields.device_number;
		r.function = (uint32_t)g->bdf.fields.function_number;
		r.perf = (uint32_t)g->perf;
		r.cap_uw = g->cap_uw;
		for (int d = 0; d < 2; d++)
			for (int m = 0; m < 2; m++)
				r.clk[d][m] = (uint32_t)g->clk[d][m];
		memcpy(&r.energy_bits, &g->e_uj, sizeof(r.energy_bits));
		r.energy_ns = g->t_ns;
		memcpy(buf + off, &r, sizeof(r));
		off += sizeof(r);
	}
	memcpy(buf, &h, sizeof(h));
	h.checksum = sim_fnv1a(buf, off);
	memcpy(buf, &h, sizeof(h));
	return off;
}

/* Whether a record's settings and energy are ones the simulator can be
 * at: each in its range, and AUTO with both domains' full ranges (what
 * setting AUTO does, and a clock limit leaves AUTO). */
static bool
sim_record_ok(const struct sim_file_record *r)
{
	static const uint32_t range[2][2] = {
		{ SIM_CLK_SYS_MIN, SIM_CLK_SYS_MAX },
		{ SIM_CLK_MEM_MIN, SIM_CLK_MEM_MAX },
	};
	double uj;

	if (r->cap_uw < SIM_CAP_MIN || r->cap_uw > SIM_CAP_MAX ||
	    r->perf > AMDSMI_DEV_PERF_LEVEL_MANUAL)
		return false;
	for (int d = 0; d < 2; d++) {
		if (r->clk[d][0] < range[d][0] || r->clk[d][1] > range[d][1] ||
		    r->clk[d][0] > r->clk[d][1])
			return false;
		if (r->perf == AMDSMI_DEV_PERF_LEVEL_AUTO &&
		    (r->clk[d][0] != range[d][0] || r->clk[d][1] != range[d][1]))
			return false;
	}
	memcpy(&uj, &r->energy_bits, sizeof(uj));
	return isfinite(uj) && uj >= 0 && uj <= SIM_FILE_MAX_UJ;
}

/*
 * Checks the file's image (len bytes) against this configuration and, if
 * every check passes, loads it into the GPUs. -1 after a complaint, the
 * GPUs untouched.
 */
static int
sim_decode(const unsigned char *buf, size_t len)
{
	struct sim_file_header h;
	struct sim_file_record r[SIM_MAX_GPUS];
	unsigned char tmp[SIM_FILE_MAX];
	size_t want = sizeof(h) + (size_t)sf.count * sizeof(r[0]);
	uint64_t now = sim_now_ns();

	if (len < sizeof(h)) {
		sim_complain("truncated (%zu bytes, shorter than its header)",
		    len);
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, SIM_FILE_MAGIC, sizeof(h.magic)) != 0) {
		sim_complain("not an AMD simulator state file (bad magic)");
		return -1;
	}
	if (h.version != SIM_FILE_VERSION ||
	    h.header_size != sizeof(struct sim_file_header) ||
	    h.record_size != sizeof(struct sim_file_record)) {
		sim_complain("unsupported version %lu or sizes %lu/%lu (want "
		    "%u, %zu/%zu, in this machine's byte order)",
		    (unsigned long)h.version, (unsigned long)h.header_size,
		    (unsigned long)h.record_size, SIM_FILE_VERSION,
		    sizeof(struct sim_file_header),
		    sizeof(struct sim_file_record));
		return -1;
	}
	if (h.count != sf.count) {
		sim_complain("made for %lu GPUs, this configuration has %u "
		    "(ZEUS_SIM_GPUS)", (unsigned long)h.count, sf.count);
		return -1;
	}
	if (len != want) {
		sim_complain("%s (%zu bytes, want %zu)", len < want ?
		    "truncated" : "has trailing bytes", len, want);
		return -1;
	}
	memcpy(tmp, buf, len);
	memset(tmp + offsetof(struct sim_file_header, checksum), 0,
	    sizeof(h.checksum));
	if (sim_fnv1a(tmp, len) != h.checksum) {
		sim_complain("checksum mismatch (garbled)");
		return -1;
	}
	if (h.reserved[0] != 0 || h.reserved[1] != 0) {
		sim_complain("reserved header fields set");
		return -1;
	}
	for (unsigned i = 0; i < sf.count; i++) {
		const amdsmi_bdf_t *b = &sf.gpus[i].bdf;

		memcpy(&r[i], buf + sizeof(h) + i * sizeof(r[0]),
		    sizeof(r[0]));
		if (r[i].index != i ||
		    r[i].domain != b->fields.domain_number ||
		    r[i].bus != b->fields.bus_number ||
		    r[i].device != b->fields.device_number ||
		    r[i].function != b->fields.function_number) {
			sim_complain("GPU %u is at %04lx:%02lx:%02lx.%lx (index "
			    "%lu) there, at %04x:%02x:%02x.%x in this "
			    "configuration (ZEUS_SIM_PCI)", i,
			    (unsigned long)r[i].domain,
			    (unsigned long)r[i].bus,
			    (unsigned long)r[i].device,
			    (unsigned long)r[i].function,
			    (unsigned long)r[i].index,
			    (unsigned)b->fields.domain_number,
			    (unsigned)b->fields.bus_number,
			    (unsigned)b->fields.device_number,
			    (unsigned)b->fields.function_number);
			return -1;
		}
		if (!sim_record_ok(&r[i])) {
			sim_complain("GPU %u's record holds values out of "
			    "range", i);
			return -1;
		}
	}
	sf.moved = false;
	for (unsigned i = 0; i < sf.count; i++) {
		struct sim_gpu *g = &sf.gpus[i];

		g->cap_uw = r[i].cap_uw;
		g->perf = (int)r[i].perf;
		for (int d = 0; d < 2; d++)
			for (int m = 0; m < 2; m++)
				g->clk[d][m] = r[i].clk[d][m];
		memcpy(&g->e_uj, &r[i].energy_bits, sizeof(g->e_uj));
		/* A time ahead of this process's clock: written before a
		 * reboot (or in another time namespace). The accumulator
		 * goes on from its value, from now. */
		g->t_ns = r[i].energy_ns;
		if (g->t_ns > now) {
			g->t_ns = now;
			sf.moved = true;
		}
	}
	return 0;
}

int
sim_state_begin(bool exclusive)
{
	unsigned char buf[SIM_FILE_MAX + 1];
	long n;

	if (sf.fd < 0)
		return 0;
	if (sim_os_state_lock(sf.fd, exclusive) != 0) {
		sim_complain("cannot lock: %s", strerror(errno));
		return -1;
	}
	n = sim_os_state_read(sf.fd, buf, sizeof(buf));
	if (n < 0) {
		sim_complain("cannot read: %s", strerror(errno));
	} else if (sim_decode(buf, (size_t)n) == 0) {
		sf.failing = false;
		return 0;
	}
	sim_os_state_unlock(sf.fd);
	return -1;
}

int
sim_state_end(bool write)
{
	unsigned char buf[SIM_FILE_MAX];
	int rc = 0;

	if (sf.fd < 0)
		return 0;
	if (write && sim_os_state_write(sf.fd, buf, sim_encode(buf)) != 0) {
		sim_complain("cannot write: %s", strerror(errno));
		rc = -1;
	}
	sim_os_state_unlock(sf.fd);
	return rc;
}

bool
sim_state_moved(void)
{
	return sf.fd >= 0 && sf.moved;
}

void
sim_state_close(void)
{
	sim_os_state_close(sf.fd);
	sf.fd = -1;
}

int
sim_state_open(const char *path, struct sim_gpu *gpus, unsigned count)
{
	unsigned char buf[SIM_FILE_MAX + 1];
	char why[128];
	long n;

	sim_state_close();
	sf.gpus = gpus;
	sf.count = count < SIM_MAX_GPUS ? count : SIM_MAX_GPUS;
	sf.failing = false;
	sf.moved = false;
	snprintf(sf.path, sizeof(sf.path), "%s", path);
	if (strlen(path) >= sizeof(sf.path)) {
		sim_complain("path too long (at most %zu bytes)",
		    sizeof(sf.path) - 1);
		return -1;
	}
	if ((sf.fd = sim_os_state_open(path, why, sizeof(why))) < 0) {
		sim_complain("%s", why);
		return -1;
	}
	if (sim_os_state_lock(sf.fd, true) != 0) {
		sim_complain("cannot lock: %s", strerror(errno));
		goto fail;
	}
	n = sim_os_state_read(sf.fd, buf, sizeof(buf));
	/* Empty: new, made here or by another process; it gets the power-on
	 * state. Else it must pass every check. */
	if (n == 0 || (n > 0 && sim_decode(buf, (size_t)n) == 0)) {
		if (sim_state_end(n == 0 || sf.moved) == 0)
			return 0;
		goto fail;		/* unlocked */
	}
	if (n < 0)
		sim_complain("cannot read: %s", strerror(errno));
	sim_os_state_unlock(sf.fd);
fail:
	sim_state_close();
	return -1;
}
