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
struct rapl;
struct overrides;

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
	unsigned overrides;		/* number of overridden operations */
};

/*
 * Opens the devices the configuration asks for. `ov` (may be NULL) are the
 * loaded command overrides; the node takes them over in every case.
 */
int node_open(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err);

/* Stops the workers (after finishing queued commands) and closes devices. */
void node_close(struct node *node);

#endif
