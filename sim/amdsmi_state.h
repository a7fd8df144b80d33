/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi_state.h - the AMD SMI simulator's GPUs (struct sim_gpu) and the
 * file that shares their settings and energy accumulators between
 * processes (ZEUS_SIM_STATE; the records and their checks in
 * amdsmi_state.c, the framing in state_file.c, the behaviour in
 * amdsmi_sim.c's header comment and docs/simulator.md).
 *
 * amdsmi_sim.c owns the GPUs and the mutex in front of the file's lock
 * (sim_mu): every function here but the constants is called under that
 * mutex, so only one thread of a process holds or waits for the file's
 * lock (a POSIX record lock, which belongs to the process).
 */
#ifndef ZEUS_SIM_AMDSMI_STATE_H
#define ZEUS_SIM_AMDSMI_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/amdsmi_api.h"
#include "sim_os.h"

#define SIM_MAX_GPUS	16
#define SIM_CAP_MIN	200000000ull	/* power cap, uW */
#define SIM_CAP_MAX	750000000ull
/* Clock limits in MHz: [SYS=0|MEM=1][MIN|MAX] of what may be set. */
#define SIM_CLK_SYS_MIN	500u
#define SIM_CLK_SYS_MAX	2100u
#define SIM_CLK_MEM_MIN	900u
#define SIM_CLK_MEM_MAX	1300u

struct sim_gpu {
	/* Fixed by amdsmi_init's configuration until the next one. */
	unsigned index;
	bool no_power;		/* reports no power (ZEUS_AMDSMI_SIM_NO_POWER) */
	char name[AMDSMI_MARKET_NAME_LEN];
	amdsmi_bdf_t bdf;
	/* The settings: what the state file keeps. */
	uint64_t cap_uw;
	uint64_t clk[2][2];	/* [SYS=0|MEM=1][MIN|MAX] */
	int perf;
	/* energy: e_uj counted up to t_ns (CLOCK_MONOTONIC), at the power
	 * drawn since then; also kept by the file */
	double e_uj;
	uint64_t t_ns;
};

/*
 * Opens the file `path` for gpus[0..count), which hold this process's
 * configuration at the power-on state: a missing or empty file gets that
 * state; an existing one is checked against the configuration and loaded.
 * -1 after one line on stderr ("amdsmi-sim: ZEUS_SIM_STATE <path>: why").
 */
SIM_HIDDEN int sim_state_open(const char *path, struct sim_gpu *gpus,
    unsigned count);
/*
 * Starts a use of the GPUs' settings: with a file, takes its lock
 * (exclusive when the use may write) and loads it into the GPUs. 0: go
 * on, and end with sim_state_end; -1: the file failed (one line on stderr
 * for the first of a run of failures; nothing held) and the GPUs hold the
 * last good copy. Without a file: 0 at once.
 */
SIM_HIDDEN int sim_state_begin(bool exclusive);
/*
 * Ends a use begun with 0: writes the GPUs back when `write` (under an
 * exclusive lock only), and unlocks. -1 when the write failed (one line).
 */
SIM_HIDDEN int sim_state_end(bool write);
/* Whether the last load moved an energy base (a stored time ahead of this
 * process's clock, taken as now): a reading writes that back. */
SIM_HIDDEN bool sim_state_moved(void);
/* Closes the file, if any (a full shutdown, or a new configuration). */
SIM_HIDDEN void sim_state_close(void);

#endif
