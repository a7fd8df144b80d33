/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor.h - energy windows over GPUs, CPU packages and DRAM.
 *
 * A monitor is created for chosen GPU and CPU indices (or all). Windows are
 * named, may nest and overlap, and are independent of each other:
 *
 *     zeus_monitor_begin_window(m, "step", false, &err);
 *     ...
 *     zeus_monitor_end_window(m, "step", false, &meas, &err);
 *     // meas.time_s, meas.gpu[i].joules, meas.cpu[i].joules, meas.dram[i]...
 *
 * Sources (docs/libzeus.md):
 *   direct  NVML (dlopen; ZEUS_NVML_LIBRARY or nvml_library selects the
 *           library) and RAPL (powercap tree; ZEUS_RAPL_DIR or rapl_dir)
 *   zeusd   a zeusd daemon (ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT, ZEUSD_TOKEN,
 *           or explicit client options)
 * ZEUS_SOURCE_AUTO picks zeusd when the environment points at one.
 *
 * GPU index i of a monitor is the i-th device visible to CUDA
 * (CUDA_VISIBLE_DEVICES as a list of integers). CPU indices are RAPL
 * package ids (N of intel-rapl:N), as zeusd's cpu ids.
 *
 * GPUs without an energy counter are measured by integrating sampled power
 * (trapezoids, one sample every power_sample_period_ms from a background
 * thread that runs while any window is open, plus one sample at every
 * window boundary).
 *
 * All calls are thread-safe.
 */
#ifndef ZEUS_MONITOR_H
#define ZEUS_MONITOR_H

#include "zeus.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zeus_monitor;
struct zeus_client_options;

enum zeus_source {
	ZEUS_SOURCE_AUTO = 0,	/* zeusd if the environment names one */
	ZEUS_SOURCE_DIRECT,	/* NVML + RAPL in this process */
	ZEUS_SOURCE_ZEUSD,	/* through a zeusd */
};

/*
 * Called at window boundaries when a begin/end asks for synchronisation
 * (e.g. cudaDeviceSynchronize on each GPU), before the counters are read.
 * `gpu_indices` are the monitor's (CUDA) indices.
 */
typedef void (*zeus_sync_fn)(const unsigned *gpu_indices, size_t n,
    void *user);

struct zeus_monitor_options {
	/*
	 * GPUs to measure (monitor/CUDA indices). NULL: all visible GPUs
	 * (none is fine); non-NULL with gpu_count 0: no GPU.
	 */
	const unsigned *gpu_indices;
	size_t gpu_count;
	/* CPU packages (RAPL ids). NULL: all; non-NULL with 0: none. */
	const unsigned *cpu_indices;
	size_t cpu_count;

	enum zeus_source source;
	const char *nvml_library;	/* NULL: ZEUS_NVML_LIBRARY, driver */
	const char *rapl_dir;		/* NULL: ZEUS_RAPL_DIR, detected */
	const struct zeus_client_options *zeusd;	/* NULL: environment */

	unsigned power_sample_period_ms;	/* 0: 100 */
	zeus_sync_fn sync;			/* NULL: none */
	void *sync_user;
};

struct zeus_energy {
	unsigned index;			/* GPU (monitor) index or RAPL id */
	double joules;
};

/* What end_window returns. Arrays are in the monitor's device order. */
struct zeus_measurement {
	double time_s;
	size_t gpu_count;
	struct zeus_energy gpu[ZEUS_MAX_DEVICES];
	size_t cpu_count;
	struct zeus_energy cpu[ZEUS_MAX_DEVICES];
	size_t dram_count;		/* packages with a DRAM zone only */
	struct zeus_energy dram[ZEUS_MAX_DEVICES];
};

/* opt NULL: all devices, ZEUS_SOURCE_AUTO. */
ZEUS_API int zeus_monitor_create(const struct zeus_monitor_options *opt,
    struct zeus_monitor **out, struct zeus_error *err);
/* Ends nothing: open windows are dropped. NULL is fine. */
ZEUS_API void zeus_monitor_destroy(struct zeus_monitor *m);

/* Which source the monitor ended up with. */
ZEUS_API enum zeus_source zeus_monitor_source(const struct zeus_monitor *m);

/* The measured devices: GPU indices, CPU ids, and whether each has DRAM. */
ZEUS_API size_t zeus_monitor_gpus(const struct zeus_monitor *m,
    unsigned *indices, size_t max);
ZEUS_API size_t zeus_monitor_cpus(const struct zeus_monitor *m,
    unsigned *ids, bool *has_dram, size_t max);
/* Whether monitor GPU slot i (0..gpus-1) has a hardware energy counter. */
ZEUS_API bool zeus_monitor_gpu_has_counter(const struct zeus_monitor *m,
    size_t slot);

/*
 * Opens window `name` (1..ZEUS_NAME_MAX-1 bytes). A name already open is
 * ZEUS_ERR_INVALID. `sync`: call the sync callback first.
 */
ZEUS_API int zeus_monitor_begin_window(struct zeus_monitor *m,
    const char *name, bool sync, struct zeus_error *err);

/*
 * Closes window `name` and fills `out` (may be NULL). A name not open is
 * ZEUS_ERR_INVALID. On a read error the window stays open.
 */
ZEUS_API int zeus_monitor_end_window(struct zeus_monitor *m,
    const char *name, bool sync, struct zeus_measurement *out,
    struct zeus_error *err);

/* Calls the sync callback now (nothing when there is none). */
ZEUS_API void zeus_monitor_sync(struct zeus_monitor *m);

/* Whether `name` is open. */
ZEUS_API bool zeus_monitor_window_open(struct zeus_monitor *m,
    const char *name);

/* Current power of each monitored GPU (W), in the monitor's GPU order. */
struct zeus_watts {
	unsigned index;
	double watts;
};
struct zeus_power {
	size_t gpu_count;
	struct zeus_watts gpu[ZEUS_MAX_DEVICES];
};
ZEUS_API int zeus_monitor_gpu_power(struct zeus_monitor *m,
    struct zeus_power *out, struct zeus_error *err);

#ifdef __cplusplus
}
#endif

#endif
