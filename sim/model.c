/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model.c - the simulated NVIDIA GPU models and how they behave (model.h).
 */
#include <string.h>

#include "model.h"

#define SIM_CYCLE_MS 20000u		/* idle + busy period */
#define SIM_IDLE_MS 4000u		/* idle part of each cycle */
#define SIM_NOISE_SLOT_NS 25000000u	/* noise changes every 25 ms */
#define SIM_ENERGY_STEP_NS 50000000u	/* integration step */
#define SIM_MAX_STEPS 100000u

static const struct sim_profile sim_profiles[] = {
	{ "a100", "NVIDIA A100-SXM4-80GB", NVML_DEVICE_ARCH_AMPERE,
	    0x20b510de, 400000, 100000, 400000, 55000, 210, 1410, 15,
	    { 1593, 1512, 810, 405 }, 1275, 80, 0 },
	{ "v100", "Tesla V100-SXM2-32GB", NVML_DEVICE_ARCH_VOLTA,
	    0x1db510de, 300000, 150000, 300000, 40000, 135, 1530, 15,
	    { 877 }, 1372, 32, SIM_LACKS_MEM_LOCK },
	{ "h100", "NVIDIA H100 80GB HBM3", NVML_DEVICE_ARCH_HOPPER,
	    0x233010de, 700000, 200000, 700000, 70000, 345, 1980, 15,
	    { 2619 }, 1755, 80, 0 },
	{ "h200", "NVIDIA H200", NVML_DEVICE_ARCH_HOPPER,
	    0x233510de, 700000, 200000, 700000, 75000, 345, 1980, 15,
	    { 3201 }, 1755, 141, 0 },
	{ "rtx4090", "NVIDIA GeForce RTX 4090", NVML_DEVICE_ARCH_ADA,
	    0x268410de, 450000, 150000, 600000, 20000, 210, 3105, 15,
	    { 10501, 10251, 5001, 810, 405 }, 1965, 24,
	    SIM_LACKS_INSTANT_POWER },
	{ "p100", "Tesla P100-PCIE-16GB", NVML_DEVICE_ARCH_PASCAL,
	    0x15f810de, 250000, 125000, 250000, 30000, 545, 1325, 15,
	    { 715 }, 1240, 16, SIM_LACKS_ENERGY | SIM_LACKS_GPU_LOCK |
	    SIM_LACKS_MEM_LOCK | SIM_LACKS_INSTANT_POWER },
};

#define SIM_NPROFILES (sizeof(sim_profiles) / sizeof(sim_profiles[0]))

const struct sim_profile *
sim_model_profile(const char *key, size_t len)
{
	for (size_t k = 0; k < SIM_NPROFILES; k++)
		if (strlen(sim_profiles[k].key) == len &&
		    strncmp(sim_profiles[k].key, key, len) == 0)
			return &sim_profiles[k];
	return NULL;
}

unsigned
sim_model_mem_clk_count(const struct sim_profile *p)
{
	unsigned n = 0;

	while (n < SIM_MEM_CLKS && p->mem_clks[n] != 0)
		n++;
	return n;
}

unsigned
sim_model_mem_clk_max(const struct sim_profile *p)
{
	return p->mem_clks[0];
}

unsigned
sim_model_mem_clk_min(const struct sim_profile *p)
{
	unsigned i = 0;

	while (i + 1 < SIM_MEM_CLKS && p->mem_clks[i + 1] != 0)
		i++;
	return p->mem_clks[i];
}

/* A smooth wave in [-1, 1] over phase [0, 1), without libm. */
static double
sim_wave(double phase)
{
	double tri = 4.0 * (phase < 0.5 ? phase : 1.0 - phase) - 1.0;

	return tri * (1.5 - 0.5 * tri * tri);
}

/* Deterministic noise in [-1, 1] for (gpu, slot): splitmix64. */
static double
sim_noise(unsigned gpu, uint64_t slot)
{
	uint64_t z = slot * 0x9e3779b97f4a7c15ULL + gpu * 0xbf58476d1ce4e5b9ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ULL << 52) - 1.0;
}

static unsigned
sim_clamp(unsigned v, unsigned lo, unsigned hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

double
sim_model_load(unsigned index, uint64_t t_ns)
{
	/* Stagger the GPUs so they do not move in lockstep. */
	uint64_t ms = t_ns / 1000000u + (uint64_t)index * 2750u;
	unsigned in_cycle = (unsigned)(ms % SIM_CYCLE_MS);

	if (in_cycle < SIM_IDLE_MS)
		return 0.03;
	return 0.80 + 0.12 * sim_wave((double)(ms % 3000u) / 3000.0);
}

/* The GPU clock ceiling in force: the locked maximum, clamped. */
static unsigned
sim_gpu_clk(const struct sim_model_gpu *g)
{
	const struct sim_profile *p = g->prof;

	if (g->set.gpu_lock_max == 0)
		return p->gpu_clk_max;
	return sim_clamp(g->set.gpu_lock_max, p->gpu_clk_min, p->gpu_clk_max);
}

static unsigned
sim_mem_clk(const struct sim_model_gpu *g)
{
	const struct sim_profile *p = g->prof;

	if (g->set.mem_lock_max == 0)
		return sim_model_mem_clk_max(p);
	return sim_clamp(g->set.mem_lock_max, sim_model_mem_clk_min(p),
	    sim_model_mem_clk_max(p));
}

unsigned
sim_model_power(const struct sim_model_gpu *g, uint64_t t_ns)
{
	const struct sim_profile *pr = g->prof;
	double load = sim_model_load(g->index, t_ns), fclk, fmem, idle, p,
	    noise;

	/* Locked clocks: dynamic power falls with the clock ceiling. */
	fclk = (double)sim_gpu_clk(g) / pr->gpu_clk_max;
	fclk *= fclk;
	fmem = 0.8 + 0.2 * (double)sim_mem_clk(g) / sim_model_mem_clk_max(pr);
	idle = pr->idle_mw + 1500.0 * (g->index % 4);
	/* A high locked minimum clock keeps an idle GPU warmer. */
	if (g->set.gpu_lock_min != 0) {
		double fmin = (double)sim_clamp(g->set.gpu_lock_min,
		    pr->gpu_clk_min, pr->gpu_clk_max) / pr->gpu_clk_max;

		idle += 30000.0 * fmin * fmin;
	}
	noise = sim_noise(g->index, t_ns / SIM_NOISE_SLOT_NS);
	p = idle + (pr->tdp_mw - idle) * load * fclk * fmem;
	p *= 1.0 + 0.02 * noise;
	/* The power limit caps power; capped GPUs hover just below it. */
	if (p > g->set.limit_mw)
		p = g->set.limit_mw * (0.985 + 0.01 * noise);
	if (p < 1000.0)
		p = 1000.0;
	return (unsigned)p;
}

unsigned
sim_model_power_avg(const struct sim_model_gpu *g, uint64_t t_ns)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < 8; i++) {
		uint64_t back = (uint64_t)(2 * i + 1) * 62500000u;

		sum += sim_model_power(g, t_ns > back ? t_ns - back : 0);
	}
	return (unsigned)(sum / 8);
}

void
sim_model_energy(const struct sim_model_gpu *g, double *mj, uint64_t *ns,
    uint64_t now)
{
	uint64_t step = SIM_ENERGY_STEP_NS;

	if (now <= *ns)
		return;
	if ((now - *ns) / step > SIM_MAX_STEPS)
		step = (now - *ns) / SIM_MAX_STEPS + 1;
	while (*ns < now) {
		uint64_t dt = now - *ns < step ? now - *ns : step;
		unsigned p = sim_model_power(g, *ns + dt / 2);

		*mj += (double)p * (double)dt / 1e9;
		*ns += dt;
	}
}

/*
 * Busy GPUs run at their ceiling (the locked maximum), idle ones at the
 * floor (the locked minimum, else the lowest clock).
 */
void
sim_model_clocks(const struct sim_model_gpu *g, uint64_t t_ns,
    struct sim_clocks *out)
{
	const struct sim_profile *p = g->prof;

	out->mem = sim_mem_clk(g);
	if (sim_model_load(g->index, t_ns) > 0.5) {
		out->gpu = sim_gpu_clk(g);
		out->video = p->video_clk;
	} else {
		out->gpu = g->set.gpu_lock_min != 0 ? sim_clamp(
		    g->set.gpu_lock_min, p->gpu_clk_min, sim_gpu_clk(g)) :
		    p->gpu_clk_min;
		out->video = p->gpu_clk_min;
	}
}

/* A reserve, plus half when busy. */
void
sim_model_memory(const struct sim_profile *p, unsigned index, uint64_t t_ns,
    unsigned long long *total, unsigned long long *reserved,
    unsigned long long *used)
{
	double load = sim_model_load(index, t_ns);

	*total = (unsigned long long)p->mem_gib << 30;
	*reserved = *total / 64;
	*used = (unsigned long long)((double)(*total / 2) * load) + (1u << 28);
}

void
sim_model_utilization(unsigned index, uint64_t t_ns, unsigned *gpu,
    unsigned *mem)
{
	double load = sim_model_load(index, t_ns);

	*gpu = (unsigned)(load * 100.0 + 0.5);
	*mem = (unsigned)(load * 60.0 + 0.5);
}

unsigned
sim_model_temperature(const struct sim_model_gpu *g, uint64_t t_ns)
{
	double p = sim_model_power(g, t_ns), idle = g->prof->idle_mw,
	    span = g->prof->tdp_mw - idle;

	return 30u + (unsigned)(p > idle ? 50.0 * (p - idle) / span : 0.0);
}
