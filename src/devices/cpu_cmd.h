/*
 * cpu_cmd.h - a RAPL package command as plain data (the CPU twin of
 * gpu_cmd.h): read the cumulative counters, or measure average power over
 * one sampling period.
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

void cpu_cmd_init(struct cpu_cmd *cmd, enum cpu_cmd_op op, unsigned pkg,
    void (*done)(struct cpu_cmd *cmd, void *arg), void *arg);

/* Queues a command on a package's worker (whose device is a struct rapl). */
void cpu_cmd_submit(struct worker *wk, struct cpu_cmd *cmd);

#endif
