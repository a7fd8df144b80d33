/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl_sim.h - simulated RAPL packages for `zeusd serve --simulate`.
 *
 * An in-memory counter source behind the same `struct rapl` as the sysfs
 * reader (rapl_open_source), so the wraparound and keepalive code that runs
 * on real hosts is the code that runs in simulation. Energy is the exact
 * integral of a smooth power curve over CLOCK_MONOTONIC time, so power
 * derived from two reads matches the curve. The counter ranges are small
 * (a few kJ) so wraps really happen every minute or two.
 */
#ifndef ZEUS_RAPL_SIM_H
#define ZEUS_RAPL_SIM_H

#include <stdint.h>

#include "rapl.h"

/* Default ranges: the CPU counter wraps after 6 kJ, DRAM after 1 kJ. */
#define RAPL_SIM_CPU_MAX_UJ 5999999999ull
#define RAPL_SIM_DRAM_MAX_UJ 999999999ull

struct rapl_sim_options {
	unsigned npkgs;		/* ids 0..npkgs-1; even ids have DRAM */
	/*
	 * > 0: constant power in W instead of the moving curves (CPU
	 * 40..120 W, DRAM 5..20 W). For tests that check derived power.
	 */
	double cpu_w;
	double dram_w;
	uint64_t cpu_max_uj;	/* 0: RAPL_SIM_CPU_MAX_UJ */
	uint64_t dram_max_uj;	/* 0: RAPL_SIM_DRAM_MAX_UJ */
};

/*
 * Opens simulated packages. `opt` NULL means two packages (cpu 0 with DRAM,
 * cpu 1 without) on moving curves and the default ranges.
 */
int rapl_sim_open(const struct rapl_sim_options *opt, struct rapl **out,
    struct zerr *err);

/* Instantaneous simulated power (W) of package index `pkg` at time t (s). */
double rapl_sim_curve_cpu_w(unsigned pkg, double t);
double rapl_sim_curve_dram_w(unsigned pkg, double t);

#endif
