/*
 * model.h - the simulated NVIDIA GPU models: each part's facts (a profile,
 * chosen by ZEUS_SIM_PROFILE) and how a GPU of that part behaves over time
 * (load, power, energy, clocks, memory use, temperature) as functions of
 * the part, the GPU's index, its settings and CLOCK_MONOTONIC time. No
 * state and no locks: nvml_state.c keeps the settings and the energy
 * counter, nvml_sim.c answers the NVML calls from both.
 *
 * The behaviour, per GPU: power follows a 20 s cycle of 4 s idle and 16 s
 * busy with a slow wobble and +-2 % noise that changes every 25 ms, the GPUs
 * staggered so they do not move in lockstep; it never exceeds the power
 * limit (a capped GPU hovers just below it) and falls with locked clocks
 * (dynamic power with the square of the locked maximum GPU clock out of
 * the part's highest, and a little with the locked maximum memory clock;
 * a high locked minimum keeps an idle GPU warmer). The driver's "power
 * usage" is the average over the last second. The energy counter (mJ)
 * integrates power in 50 ms steps. Busy GPUs run at their clock ceiling,
 * idle ones at the floor; utilization is the load; memory in use grows
 * with it; 30 C idle, warming with the power drawn above idle.
 */
#ifndef ZEUS_SIM_MODEL_H
#define ZEUS_SIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/nvml_api.h"
#include "sim_os.h"

/*
 * What a part lacks (the calls that need it answer NOT_SUPPORTED): the
 * energy counter, locked GPU clocks (Volta+), locked memory clocks
 * (Ampere+), the instantaneous power field 186 (a 1 s average only).
 */
#define SIM_LACKS_ENERGY	(1u << 0)
#define SIM_LACKS_GPU_LOCK	(1u << 1)
#define SIM_LACKS_MEM_LOCK	(1u << 2)
#define SIM_LACKS_INSTANT_POWER	(1u << 3)

#define SIM_MEM_CLKS 6		/* entries of sim_profile.mem_clks */

/*
 * A GPU model. Values are plausible for the part, not its datasheet: the
 * point is the shape (which limits, which clocks, what is supported) that
 * code above NVML has to cope with.
 */
struct sim_profile {
	const char *key;		/* ZEUS_SIM_PROFILE name */
	const char *name;		/* nvmlDeviceGetName */
	nvmlDeviceArchitecture_t arch;
	unsigned pci_id;		/* pciDeviceId: device << 16 | 0x10de */
	unsigned tdp_mw;		/* default limit; busy draw at full clocks */
	unsigned min_limit_mw, max_limit_mw;
	unsigned idle_mw;
	unsigned gpu_clk_min, gpu_clk_max, gpu_clk_step;	/* MHz */
	unsigned mem_clks[SIM_MEM_CLKS];	/* supported, descending,
						 * 0-ended */
	unsigned video_clk;
	unsigned mem_gib;
	unsigned lacks;			/* SIM_LACKS_* */
};

/* A GPU's settings: what an NVML client can change. */
struct sim_settings {
	unsigned limit_mw;
	bool persistence;
	unsigned gpu_lock_min, gpu_lock_max;	/* 0, 0: not locked */
	unsigned mem_lock_min, mem_lock_max;
};

/* A GPU as the model sees it at one moment. */
struct sim_model_gpu {
	const struct sim_profile *prof;
	unsigned index;			/* GPUs differ a little by index */
	struct sim_settings set;
};

/* Current clocks in MHz. */
struct sim_clocks {
	unsigned gpu;			/* graphics and SM */
	unsigned mem;
	unsigned video;
};

/* The profile named by the first `len` bytes of `key`, or NULL. */
SIM_HIDDEN const struct sim_profile *sim_model_profile(const char *key,
    size_t len);

/* The number of supported memory clocks, and the lowest and highest. */
SIM_HIDDEN unsigned sim_model_mem_clk_count(const struct sim_profile *p);
SIM_HIDDEN unsigned sim_model_mem_clk_min(const struct sim_profile *p);
SIM_HIDDEN unsigned sim_model_mem_clk_max(const struct sim_profile *p);

/* Load in [0, 1] at t_ns: the idle/busy cycle. */
SIM_HIDDEN double sim_model_load(unsigned index, uint64_t t_ns);
/* Power in mW at t_ns, and the driver's average over the second before. */
SIM_HIDDEN unsigned sim_model_power(const struct sim_model_gpu *g,
    uint64_t t_ns);
SIM_HIDDEN unsigned sim_model_power_avg(const struct sim_model_gpu *g,
    uint64_t t_ns);
/*
 * Integrates power into an energy counter (*mj, counted up to *ns) up to
 * now, with the settings in g: call it before every change that alters
 * power, so each stretch of time counts with the settings then in force.
 */
SIM_HIDDEN void sim_model_energy(const struct sim_model_gpu *g, double *mj,
    uint64_t *ns, uint64_t now);
SIM_HIDDEN void sim_model_clocks(const struct sim_model_gpu *g, uint64_t t_ns,
    struct sim_clocks *out);
/* Memory in bytes: the whole, the driver's reserve, and in use. */
SIM_HIDDEN void sim_model_memory(const struct sim_profile *p, unsigned index,
    uint64_t t_ns, unsigned long long *total, unsigned long long *reserved,
    unsigned long long *used);
/* GPU and memory utilization in percent. */
SIM_HIDDEN void sim_model_utilization(unsigned index, uint64_t t_ns,
    unsigned *gpu, unsigned *mem);
/* Degrees C. */
SIM_HIDDEN unsigned sim_model_temperature(const struct sim_model_gpu *g,
    uint64_t t_ns);

#endif
