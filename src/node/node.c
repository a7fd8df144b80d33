/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node.c - opening this node's devices for the daemon (see node.h).
 *
 * GPU: `--simulate` loads the NVML simulator (built next to zeusd, or
 * installed), `--nvml-library` a given library, otherwise the driver's NVML;
 * `--gpu-backend amdsmi` ROCm's AMD SMI (docs/amd.md), or with `--simulate`
 * the AMD SMI simulator of one ABI; `--gpu-backend auto`
 * takes whichever of NVML and AMD SMI reports GPUs, NVML first, and a node
 * with neither simply has zero GPUs. The
 * backend is wrapped by the command overrides when they are configured.
 * CPU: simulated packages with `--simulate`, else the powercap tree
 * (`--rapl-dir`, or /zeus_sys/... when present, or /sys/...).
 * Devices of a disabled API group are not opened at all.
 *
 * Queue bounds: each device worker takes ZEUSD_DEVICE_QUEUE_MAX reads and
 * as many writes; a shared reader serves every GPU (or package), so its
 * bound is that times their number: a burst that each device's own queue
 * would take is never refused there.
 */
#include "node/node.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "devices/nvml.h"
#include "overrides/overrides.h"
#include "devices/rapl.h"
#include "devices/rapl_sim.h"
#include "devices/worker.h"
#include "common/env.h"
#include "node/node_os.h"

/* No GPUs with `--gpu-backend auto`: logged, not an error. */
static int
node_no_gpus(struct node *node, struct zerr *err)
{
	char q[ZERR_MSG_MAX + 8];

	zlog(ZLOG_INFO, "no_gpus", "reason=%s",
	    zlog_quote(q, sizeof(q), err->msg));
	node->gpu.ops = NULL;
	zerr_clear(err);
	return 0;
}

/*
 * `--gpu-backend auto` without --simulate or --nvml-library: NVML when it
 * loads and reports GPUs, else AMD SMI when it does, else no GPUs. A
 * library that loads but fails otherwise is still an error: a broken
 * driver should not read as "no GPUs here".
 */
static int
node_open_auto(struct node *node, struct zerr *err)
{
	struct gpu_backend amd;

	if (nvml_backend_open(NULL, &node->gpu, err) == 0) {
		if (node->gpu.ops->count(&node->gpu) > 0)
			return 0;
		node->gpu.ops->destroy(&node->gpu);
		node->gpu.ops = NULL;
		zerr_set(err, ZERR_NOT_FOUND, "NVML reports no GPUs");
	} else if (err->kind != ZERR_NOT_FOUND)
		return -1;
	zlog(ZLOG_DEBUG, "gpu_probe", "backend=nvml result=none");
	if (node_os_amd_open(&amd, err) == 0) {
		if (amd.ops->count(&amd) > 0) {
			node->gpu = amd;
			return 0;
		}
		amd.ops->destroy(&amd);
		zerr_set(err, ZERR_NOT_FOUND, "neither NVML nor AMD SMI "
		    "reports GPUs");
	} else if (err->kind != ZERR_NOT_FOUND)
		return -1;
	return node_no_gpus(node, err);
}

static int
node_open_gpu_backend(struct node *node, const struct zeusd_config *cfg,
    struct zerr *err)
{
	char simbuf[PATH_MAX];
	const char *lib = cfg->nvml_library;

	if (cfg->gpu_backend == GPU_BACKEND_AMDSMI) {
		char why[ZERR_MSG_MAX];

		if (node_os_amd_explicit(&node->gpu, cfg->simulate, err) == 0)
			return 0;
		/* explicit: fail fast, whatever the reason */
		snprintf(why, sizeof(why), "%s", err->msg);
		return zerr_set(err, err->kind == ZERR_NOT_FOUND ?
		    ZERR_INVALID : err->kind, "--gpu-backend amdsmi: %s", why);
	}
	if (cfg->gpu_backend == GPU_BACKEND_AUTO && lib == NULL &&
	    !cfg->simulate)
		return node_open_auto(node, err);
	if (lib == NULL && cfg->simulate)
		lib = node_os_sim_library(simbuf, sizeof(simbuf));
	return nvml_backend_open(lib, &node->gpu, err);
}

static int
node_wrap_overrides(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err)
{
	struct gpu_backend wrapped;

	if (ov == NULL)
		return 0;
	node->overrides = overrides_count(ov);
	if (overrides_wrap(ov, node->gpu, &wrapped) != 0) {
		overrides_free(ov);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	node->gpu = wrapped;
	return 0;
}

static int
node_open_gpus(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err)
{
	if (node_open_gpu_backend(node, cfg, err) != 0) {
		overrides_free(ov);
		return -1;
	}
	if (node_wrap_overrides(node, cfg, ov, err) != 0)
		return -1;
	if (node->gpu.ops == NULL)
		return 0;
	node->ngpu = node->gpu.ops->count(&node->gpu);
	node->gpu_info = calloc(node->ngpu ? node->ngpu : 1,
	    sizeof(*node->gpu_info));
	if (node->gpu_info == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	for (unsigned i = 0; i < node->ngpu; i++)
		if (node->gpu.ops->info(&node->gpu, i, &node->gpu_info[i],
		    err) != 0)
			return -1;
	zlog(ZLOG_INFO, "gpus_opened", "backend=%s count=%u overrides=%u",
	    node->gpu.ops->name, node->ngpu, node->overrides);
	return 0;
}

static int
node_open_cpus(struct node *node, const struct zeusd_config *cfg,
    struct zerr *err)
{
	const char *root;
	char q[600];

	if (cfg->simulate && cfg->rapl_dir == NULL) {
		if (rapl_sim_open(NULL, &node->rapl, err) != 0)
			return -1;
		root = "simulated";
	} else {
		root = cfg->rapl_dir ? cfg->rapl_dir : rapl_default_root();
		if (rapl_open(root, &node->rapl, err) != 0)
			return -1;
	}
	node->ncpu = rapl_count(node->rapl);
	zlog(ZLOG_INFO, "cpus_opened", "root=%s count=%u",
	    zlog_quote(q, sizeof(q), root), node->ncpu);
	return 0;
}

int
node_open_devices(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err)
{
	uint64_t max;

	memset(node, 0, sizeof(*node));
	/* checked before anything is opened, whatever the groups */
	if (env_uint(NODE_QUEUE_MAX_ENV, 1, NODE_QUEUE_MAX_LIMIT,
	    NODE_QUEUE_MAX_DEFAULT, &max, err) != 0) {
		overrides_free(ov);
		return -1;
	}
	node->queue_max = (unsigned)max;
	if (!(cfg->enabled & (GROUP_BIT(GROUP_GPU_READ) |
	    GROUP_BIT(GROUP_GPU_CONTROL) | GROUP_BIT(GROUP_METRICS))))
		overrides_free(ov);
	else if (node_open_gpus(node, cfg, ov, err) != 0)
		goto fail;
	if ((cfg->enabled & GROUP_BIT(GROUP_CPU_READ)) &&
	    node_open_cpus(node, cfg, err) != 0)
		goto fail;
	return 0;
fail:
	node_close(node);
	return -1;
}

int
node_start(struct node *node, struct zerr *err)
{
	unsigned ng = node->ngpu ? node->ngpu : 1;
	unsigned nc = node->ncpu ? node->ncpu : 1;
	char label[32];

	node->gpu_workers = calloc(ng, sizeof(*node->gpu_workers));
	node->gpu_counters = calloc(ng, sizeof(*node->gpu_counters));
	node->cpu_workers = calloc(nc, sizeof(*node->cpu_workers));
	node->cpu_counters = calloc(nc, sizeof(*node->cpu_counters));
	if (node->gpu_workers == NULL || node->gpu_counters == NULL ||
	    node->cpu_workers == NULL || node->cpu_counters == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	for (unsigned i = 0; i < node->ngpu; i++) {
		snprintf(label, sizeof(label), "gpu%u", i);
		if (worker_start(label, &node->gpu, node->queue_max,
		    &node->gpu_workers[i], err) != 0)
			return -1;
	}
	if (node->ngpu > 0 && worker_start("gpu-power", &node->gpu,
	    node->queue_max * node->ngpu, &node->gpu_power_reader, err) != 0)
		return -1;
	if (node->ncpu > 0 && rapl_start_keepalive(node->rapl, 0, err) != 0)
		return -1;
	for (unsigned i = 0; i < node->ncpu; i++) {
		snprintf(label, sizeof(label), "cpu%u",
		    rapl_package_id(node->rapl, i));
		if (worker_start(label, node->rapl, node->queue_max,
		    &node->cpu_workers[i], err) != 0)
			return -1;
	}
	if (node->ncpu > 0 && worker_start("cpu-energy", node->rapl,
	    node->queue_max * node->ncpu, &node->cpu_energy_reader, err) != 0)
		return -1;
	return 0;
}

/* The 503 message: the queue (a device's, or a shared reader's) and bound. */
static int
node_full(const char *kind, const char *reader, unsigned id,
    const struct worker *wk, struct zerr *err)
{
	if (reader != NULL)
		return zerr_set(err, ZERR_BUSY, "%s %s queue is full (%u "
		    "queued); retry later", kind, reader, worker_max(wk));
	return zerr_set(err, ZERR_BUSY, "%s %u command queue is full (%u "
	    "queued); retry later", kind, id, worker_max(wk));
}

int
node_gpu_reserve(struct node *node, struct worker_batch *batch,
    struct gpu_cmd *cmd, struct zerr *err)
{
	bool shared = cmd->op == GPU_CMD_GET_POWER;
	struct worker *wk;

	/* ids from a request were checked against the node before this */
	assert(cmd->gpu < node->ngpu);
	wk = shared ? node->gpu_power_reader : node->gpu_workers[cmd->gpu];
	cmd->work.counters = &node->gpu_counters[cmd->gpu];
	/* one round trip for the writes queued together (gpu.h) */
	if (node->gpu.ops->write_many != NULL &&
	    node->gpu.ops->write_batch != NULL)
		gpu_cmd_write_together(cmd);
	if (worker_batch_reserve(batch, wk, &cmd->work) != 0)
		return node_full("GPU", shared ? "power reader" : NULL,
		    cmd->gpu, wk, err);
	return 0;
}

int
node_cpu_reserve(struct node *node, struct worker_batch *batch,
    struct cpu_cmd *cmd, struct zerr *err)
{
	bool shared = cmd->op == CPU_CMD_GET_ENERGY;
	struct worker *wk;

	assert(cmd->pkg < node->ncpu);	/* as for GPUs */
	wk = shared ? node->cpu_energy_reader : node->cpu_workers[cmd->pkg];
	cmd->work.counters = &node->cpu_counters[cmd->pkg];
	if (worker_batch_reserve(batch, wk, &cmd->work) != 0)
		return node_full("CPU", shared ? "energy reader" : NULL,
		    rapl_package_id(node->rapl, cmd->pkg), wk, err);
	return 0;
}

bool
node_gpu_lost(const struct node *node, unsigned gpu)
{
	struct gpu_backend b = node->gpu;	/* ops take it non-const */

	return b.ops != NULL && gpu < node->ngpu && b.ops->lost(&b, gpu);
}

void
node_close(struct node *node)
{
	for (unsigned i = 0; node->gpu_workers != NULL && i < node->ngpu; i++)
		worker_stop(node->gpu_workers[i]);
	worker_stop(node->gpu_power_reader);
	worker_stop(node->cpu_energy_reader);
	for (unsigned i = 0; node->cpu_workers != NULL && i < node->ncpu; i++)
		worker_stop(node->cpu_workers[i]);
	if (node->gpu.ops != NULL)
		node->gpu.ops->destroy(&node->gpu);
	if (node->rapl != NULL)
		rapl_close(node->rapl);
	free(node->gpu_workers);
	free(node->cpu_workers);
	free(node->gpu_counters);
	free(node->cpu_counters);
	free(node->gpu_info);
	free(node->lease_chan);		/* its fd is the pool's */
	memset(node, 0, sizeof(*node));
}
