/*
 * node.h - the devices of this node as the daemon sees them: the GPU backend
 * (NVML, possibly wrapped by command overrides) with one worker per GPU, and
 * the RAPL packages with one worker per package.
 */
#ifndef ZEUS_NODE_H
#define ZEUS_NODE_H

#include <stdbool.h>

#include "../common/err.h"
#include "../devices/gpu.h"
#include "config.h"

struct worker;
struct work_counters;
struct rapl;
struct overrides;
struct gpu_cmd;
struct cpu_cmd;

struct node {
	struct gpu_backend gpu;		/* ops NULL when there are no GPUs */
	unsigned ngpu;
	struct gpu_info *gpu_info;	/* [ngpu] */
	struct worker **gpu_workers;	/* [ngpu] */
	/*
	 * Instantaneous power reads of every GPU: one thread, so a request
	 * for N GPUs costs one thread hop, and never waits behind a slow
	 * write queued on a GPU's worker (NVML is thread-safe).
	 */
	struct worker *gpu_power_reader;
	struct rapl *rapl;		/* NULL when there are no packages */
	unsigned ncpu;
	struct worker **cpu_workers;	/* [ncpu] */
	/*
	 * Cumulative energy reads of every package: one thread, one hop per
	 * request, and never queued behind a /cpu/get_power that sleeps one
	 * sampling period on a package's worker.
	 */
	struct worker *cpu_energy_reader;
	/* commands run and failed per device, whatever thread ran them */
	struct work_counters *gpu_counters;	/* [ngpu] */
	struct work_counters *cpu_counters;	/* [ncpu] */
	unsigned overrides;		/* number of overridden operations */
};

/*
 * Opens the devices the configuration asks for. `ov` (may be NULL) are the
 * loaded command overrides; the node takes them over in every case.
 */
int node_open(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err);

/*
 * Queues a device command where it belongs: instantaneous GPU power on the
 * power reader, RAPL energy on the energy reader, everything else on the
 * device's own worker (in arrival order).
 */
void node_gpu_submit(struct node *node, struct gpu_cmd *cmd);
void node_cpu_submit(struct node *node, struct cpu_cmd *cmd);

/* Stops the workers (after finishing queued commands) and closes devices. */
void node_close(struct node *node);

#endif
