/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu_cmd.h - a RAPL package command as plain data (the CPU twin of
 * gpu_cmd.h): read the cumulative counters, or measure average power over
 * one sampling period. Both are reads with nothing to order them against
 * (RAPL has no writes), queued on bounded queues like every device command.
 */
#ifndef ZEUS_CPU_CMD_H
#define ZEUS_CPU_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "rapl.h"
#include "worker.h"

enum cpu_cmd_op { CPU_CMD_GET_ENERGY, CPU_CMD_GET_POWER };

struct cpu_cmd {
	struct work work;		/* must stay first */
	enum cpu_cmd_op op;
	unsigned pkg;			/* index into the rapl set */
	unsigned period_ms;		/* CPU_CMD_GET_POWER */
	bool has_dram;
	uint64_t cpu, dram;		/* µJ (energy) or mW (power) */
	int rc;
	struct zerr err;
	void (*done)(struct cpu_cmd *cmd, void *arg);
	void *arg;
};

/* Prepares `cmd` (zeroed by the caller); node.c queues it. */
void cpu_cmd_init(struct cpu_cmd *cmd, enum cpu_cmd_op op, unsigned pkg,
    void (*done)(struct cpu_cmd *cmd, void *arg), void *arg);

/*
 * A CPU_CMD_GET_ENERGY read elsewhere (remote_read.c): sets the command's
 * result from package and DRAM totals as its own read would have; returns
 * its rc (-1 when a total is beyond what the API can represent).
 */
int cpu_cmd_energy_result(struct cpu_cmd *cmd, struct rapl *r,
    uint64_t cpu_uj, uint64_t dram_uj);

#endif
