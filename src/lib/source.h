/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source.h - where a monitor's counters come from.
 *
 * A source reports, once, which devices exist (the inventory) and then
 * reads them in batches addressed by device id: physical NVML index (or
 * zeusd gpu id) for GPUs, RAPL package id for CPUs. The monitor maps its
 * own indices (CUDA_VISIBLE_DEVICES) onto these ids. Batches matter for the
 * zeusd source: one HTTP request per kind per read, whatever the count.
 */
#ifndef ZEUS_LIB_SOURCE_H
#define ZEUS_LIB_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "zeus/zeus.h"

struct mon_inventory {
	size_t ngpus;				/* ids 0..ngpus-1 */
	bool gpu_energy[ZEUS_MAX_DEVICES];	/* has an energy counter */
	size_t ncpus;
	unsigned cpu_id[ZEUS_MAX_DEVICES];
	bool cpu_dram[ZEUS_MAX_DEVICES];
	/*
	 * Devices that exist but that this caller may not read (a zeusd's node
	 * policy, as /auth/whoami says): left out of "every device", an error
	 * when named. gpu_denied by id, cpu_denied by inventory index.
	 */
	bool gpu_denied[ZEUS_MAX_DEVICES];
	bool cpu_denied[ZEUS_MAX_DEVICES];
};

struct mon_source_ops {
	/* Cumulative energy (mJ) of each GPU id in ids[0..n-1]. */
	int (*gpu_energy)(void *ctx, const unsigned *ids, size_t n,
	    uint64_t *mj, struct zeus_error *err);
	/* Instantaneous power (mW) of each GPU id. */
	int (*gpu_power)(void *ctx, const unsigned *ids, size_t n,
	    uint64_t *mw, struct zeus_error *err);
	/*
	 * Cumulative energy (µJ) of each package id; dram_uj[i] is left 0
	 * for a package without DRAM.
	 */
	int (*cpu_energy)(void *ctx, const unsigned *ids, size_t n,
	    uint64_t *cpu_uj, uint64_t *dram_uj, struct zeus_error *err);
	void (*destroy)(void *ctx);
};

struct mon_source {
	const struct mon_source_ops *ops;
	void *ctx;
};

/*
 * What to open. A kind that is not wanted is not opened at all; a kind
 * that is required must be present (an absent NVML or RAPL tree is an
 * error then, and zero devices otherwise).
 */
struct mon_source_want {
	bool gpus, gpus_required;
	bool cpus, cpus_required;
	const char *nvml_library;
	const char *rapl_dir;
	const struct zeus_client_options *zeusd;
};

int source_direct_open(const struct mon_source_want *w,
    struct mon_source *out, struct mon_inventory *inv,
    struct zeus_error *err);
int source_zeusd_open(const struct mon_source_want *w,
    struct mon_source *out, struct mon_inventory *inv,
    struct zeus_error *err);

#endif
