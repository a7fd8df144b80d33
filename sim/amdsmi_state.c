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
 * fails the version check): state_file.h's 48-byte header, then one
 * 64-byte record per GPU (below), nothing after. state_file.c opens,
 * locks, reads, writes and checks the file's framing; what is the AMD
 * simulator's own is here: the magic, the record, how a record is filled
 * from a GPU, checked against this configuration and loaded.
 */
#include <math.h>
#include <string.h>

#include "amdsmi_state.h"
#include "state_file.h"

#define SIM_FILE_MAGIC		"ZSIMAMD1"
#define SIM_FILE_VERSION	1u
#define SIM_FILE_MAX_UJ		1e20	/* ~4500 years at 700 W; its counts
					 * (/15.259) stay below 2^63 */

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

_Static_assert(sizeof(struct sim_file_record) == 64, "record layout");
_Static_assert(sizeof(double) == sizeof(uint64_t), "double layout");

/* The file's layout and callbacks (below). */
static const struct sim_state_file_def sim_file_def;

static struct {
	struct sim_state_file file;
	struct sim_gpu *gpus;
} sf = { .file = SIM_STATE_FILE_INIT(&sim_file_def) };

/* GPU i's record, into rec. */
static void
sim_encode(unsigned i, unsigned char *rec)
{
	const struct sim_gpu *g = &sf.gpus[i];
	const amdsmi_bdf_t *b = &g->bdf;
	struct sim_file_record r = {
		.index = i,
		.domain = (uint32_t)b->fields.domain_number,
		.bus = (uint32_t)b->fields.bus_number,
		.device = (uint32_t)b->fields.device_number,
		.function = (uint32_t)b->fields.function_number,
		.perf = (uint32_t)g->perf,
		.cap_uw = g->cap_uw,
		.energy_ns = g->t_ns,
	};

	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++)
			r.clk[d][m] = (uint32_t)g->clk[d][m];
	memcpy(&r.energy_bits, &g->e_uj, sizeof(r.energy_bits));
	memcpy(rec, &r, sizeof(r));
}

/* Whether a record's settings and energy are ones the simulator can be
 * at: each in its range, and AUTO with both domains' full ranges (what
 * setting AUTO does, and a clock limit leaves AUTO). */
static bool
sim_record_ok(unsigned i, const unsigned char *rec)
{
	static const uint32_t range[2][2] = {
		{ SIM_CLK_SYS_MIN, SIM_CLK_SYS_MAX },
		{ SIM_CLK_MEM_MIN, SIM_CLK_MEM_MAX },
	};
	struct sim_file_record r;
	double uj;

	(void)i;
	memcpy(&r, rec, sizeof(r));
	if (r.cap_uw < SIM_CAP_MIN || r.cap_uw > SIM_CAP_MAX ||
	    r.perf > AMDSMI_DEV_PERF_LEVEL_MANUAL)
		return false;
	for (int d = 0; d < 2; d++) {
		if (r.clk[d][0] < range[d][0] || r.clk[d][1] > range[d][1] ||
		    r.clk[d][0] > r.clk[d][1])
			return false;
		if (r.perf == AMDSMI_DEV_PERF_LEVEL_AUTO &&
		    (r.clk[d][0] != range[d][0] || r.clk[d][1] != range[d][1]))
			return false;
	}
	memcpy(&uj, &r.energy_bits, sizeof(uj));
	return isfinite(uj) && uj >= 0 && uj <= SIM_FILE_MAX_UJ;
}

/* Whether record i is GPU i at its PCI address in this configuration. */
static int
sim_identify(struct sim_state_file *f, unsigned i, const unsigned char *rec)
{
	const amdsmi_bdf_t *b = &sf.gpus[i].bdf;
	struct sim_file_record r;

	memcpy(&r, rec, sizeof(r));
	if (r.index == i &&
	    r.domain == b->fields.domain_number &&
	    r.bus == b->fields.bus_number &&
	    r.device == b->fields.device_number &&
	    r.function == b->fields.function_number)
		return 0;
	sim_state_file_complain(f, "GPU %u is at %04lx:%02lx:%02lx.%lx (index "
	    "%lu) there, at %04x:%02x:%02x.%x in this configuration "
	    "(ZEUS_SIM_PCI)", i, (unsigned long)r.domain,
	    (unsigned long)r.bus, (unsigned long)r.device,
	    (unsigned long)r.function, (unsigned long)r.index,
	    (unsigned)b->fields.domain_number, (unsigned)b->fields.bus_number,
	    (unsigned)b->fields.device_number,
	    (unsigned)b->fields.function_number);
	return -1;
}

/* Loads record i into GPU i; whether its energy base moved (a stored time
 * ahead of this process's clock, taken as now: the accumulator goes on
 * from its value, from now, and the open writes that back, as does a
 * reading, sim_state_moved). */
static bool
sim_load(unsigned i, const unsigned char *rec)
{
	struct sim_file_record r;
	struct sim_gpu *g = &sf.gpus[i];

	memcpy(&r, rec, sizeof(r));
	g->cap_uw = r.cap_uw;
	g->perf = (int)r.perf;
	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++)
			g->clk[d][m] = r.clk[d][m];
	memcpy(&g->e_uj, &r.energy_bits, sizeof(g->e_uj));
	return sim_state_file_time(r.energy_ns, &g->t_ns);
}

/* For state_file.c: the messages' words, the layout, the callbacks. */
static const struct sim_state_file_def sim_file_def = {
	.prefix = "amdsmi-sim", .what = "an AMD simulator",
	.count_hint = "(ZEUS_SIM_GPUS)",
	.magic = SIM_FILE_MAGIC, .version = SIM_FILE_VERSION,
	.record_size = sizeof(struct sim_file_record),
	.max_count = SIM_MAX_GPUS,
	.encode = sim_encode, .identify = sim_identify,
	.valid = sim_record_ok, .load = sim_load,
};

int
sim_state_begin(bool exclusive)
{
	return sim_state_file_begin(&sf.file, exclusive);
}

int
sim_state_end(bool write)
{
	return sim_state_file_end(&sf.file, write);
}

bool
sim_state_moved(void)
{
	return sim_state_file_changed(&sf.file);
}

void
sim_state_close(void)
{
	sim_state_file_close(&sf.file);
}

int
sim_state_open(const char *path, struct sim_gpu *gpus, unsigned count)
{
	sim_state_file_close(&sf.file);
	sf.gpus = gpus;
	return sim_state_file_open(&sf.file, path, count);
}
