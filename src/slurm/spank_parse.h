/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spank_parse.h - what the Slurm plugin (zeus_spank.c, docs/slurm.md)
 * reads from untrusted text: its plugstack.conf arguments, a job's GPU
 * list from its environment, and the lease label it gives a job step.
 * Pure functions: no Slurm, no I/O.
 */
#ifndef ZEUS_SPANK_PARSE_H
#define ZEUS_SPANK_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPANK_SOCKET_DEFAULT "/run/zeusd/zeusd.sock"
#define SPANK_SOCKET_MAX 108		/* sun_path, with its terminator */
#define SPANK_GPUS_MAX 64		/* ZEUS_MAX_DEVICES */
#define SPANK_GPU_ID_MAX 65535		/* largest index taken */
#define SPANK_WHY_MAX 160
#define SPANK_STEP_BATCH 0xfffffffbu	/* slurm.h: SLURM_BATCH_SCRIPT */

/* The plugstack.conf line's arguments. */
struct spank_conf {
	char socket[SPANK_SOCKET_MAX];	/* zeusd's Unix socket */
	bool required;			/* a setting not applied fails the task */
};

/*
 * Arguments after the plugin's path: "socket=PATH" (absolute, at most 107
 * bytes), "required"; each at most once. Fills `c` (defaults first).
 * 0, or -1 with `why` (SPANK_WHY_MAX bytes) saying which and why.
 */
int spank_parse_conf(int ac, char *const *av, struct spank_conf *c,
    char *why);

/*
 * A GPU list as Slurm puts it in a step's environment (SLURM_STEP_GPUS,
 * SLURM_JOB_GPUS): comma-separated decimal indices, each
 * 0..SPANK_GPU_ID_MAX without sign or leading zeros (but "0"),
 * spaces around elements allowed, duplicates collapsed, at most
 * SPANK_GPUS_MAX distinct; "" is no GPU. ids[] in their first order.
 * 0, or -1 with `why` (a UUID, MIG name, "NoDevFiles", ...).
 */
int spank_parse_gpus(const char *s, unsigned *ids, size_t *n, char *why);

/*
 * The lease label of a job step: "slurm:JOB.STEP", STEP a number or,
 * for Slurm's special steps, "batch", "extern", "interactive" (or
 * "special-N"). `buf` of at least 40 bytes.
 */
void spank_step_label(char *buf, size_t size, uint32_t job, uint32_t step);

#endif
