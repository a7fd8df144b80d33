/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_cmd.h - a GPU device command as plain data: an operation, its
 * arguments, a result slot and a completion callback. Handlers build these
 * and queue them on the GPU's worker; only gpu_cmd.c touches the backend.
 * This seam is what would let the device side live in its own privileged
 * process later.
 *
 * Each command also says how it may be ordered on the GPU's bounded queue
 * (worker.h): a write names the settings it changes, a read the settings it
 * returns (get_power_limit and get_persistence_mode; energy, constraints and
 * the /metrics snapshot depend on none, so they never wait behind writes).
 */
#ifndef ZEUS_GPU_CMD_H
#define ZEUS_GPU_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu.h"
#include "worker.h"

enum gpu_cmd_op {
	GPU_CMD_WRITE,
	GPU_CMD_GET_POWER,
	GPU_CMD_GET_ENERGY,
	GPU_CMD_GET_POWER_LIMIT,
	GPU_CMD_GET_CONSTRAINTS,
	GPU_CMD_GET_PERSISTENCE,
	GPU_CMD_SNAPSHOT,		/* every read above, for /metrics */
};

/*
 * The settings of a GPU, as bits of work.touches / work.depends. The locked
 * clocks of each domain are one setting whether set or reset.
 */
enum {
	GPU_SETTING_POWER_LIMIT = 1u << 0,
	GPU_SETTING_PERSISTENCE = 1u << 1,
	GPU_SETTING_GPU_CLOCKS = 1u << 2,
	GPU_SETTING_MEM_CLOCKS = 1u << 3,
	GPU_SETTING_ALL = (1u << 4) - 1,
};

/* The settings a write changes (reset_locked_clocks: both clock domains). */
unsigned gpu_write_touches(enum gpu_write_op op);

/* Which fields of a snapshot were read (the others failed). */
enum {
	GPU_SNAP_POWER = 1u << 0,
	GPU_SNAP_ENERGY = 1u << 1,
	GPU_SNAP_LIMIT = 1u << 2,
	GPU_SNAP_CONSTRAINTS = 1u << 3,
	GPU_SNAP_PERSISTENCE = 1u << 4,
};

struct gpu_snapshot {
	unsigned ok;			/* GPU_SNAP_* bits */
	uint32_t power_mw, limit_mw, min_mw, max_mw;
	uint64_t energy_mj;
	bool persistence;
};

struct gpu_cmd {
	struct work work;		/* must stay first */
	enum gpu_cmd_op op;
	unsigned gpu;
	struct gpu_write write;		/* GPU_CMD_WRITE */
	union {
		uint32_t power_mw;
		uint64_t energy_mj;
		uint32_t limit_mw;
		struct { uint32_t min_mw, max_mw; } constraints;
		bool persistence;
		struct gpu_snapshot snap;
	} out;
	int rc;				/* 0 or -1 with err */
	struct zerr err;
	/* Called on the worker thread after the command ran. */
	void (*done)(struct gpu_cmd *cmd, void *arg);
	/* A superseded write: called instead of `done`, may free cmd. */
	void (*dropped)(struct gpu_cmd *cmd, void *arg);
	void *arg;
};

/*
 * Prepares `cmd` (zeroed by the caller). A GPU_CMD_WRITE then needs
 * gpu_cmd_set_write (until then it counts as touching every setting).
 */
void gpu_cmd_init(struct gpu_cmd *cmd, enum gpu_cmd_op op, unsigned gpu,
    void (*done)(struct gpu_cmd *cmd, void *arg), void *arg);

/*
 * Makes `cmd` the write `w`. With `dropped` set the write is supersedable
 * (block=false: nobody waits for it): while still queued it may be replaced
 * by a newer write covering its settings, and then `dropped` runs instead of
 * `done`, on the thread that queued the newer one.
 */
void gpu_cmd_set_write(struct gpu_cmd *cmd, const struct gpu_write *w,
    void (*dropped)(struct gpu_cmd *cmd, void *arg));

/*
 * For a backend with write_many (a split daemon's network process): a
 * write queued right behind other writes on its GPU's worker is sent
 * with them as one call, each still decided and answered alone. Nothing
 * for other commands, nor for a write whose work.exec was replaced (call
 * this after setting exec: it then stays alone).
 */
void gpu_cmd_write_together(struct gpu_cmd *cmd);

/*
 * Whether `w` (a GPU worker's item) is a write that a request waits for
 * (block=true, so the request's connection stays suspended until it is
 * answered), run as itself (its exec not replaced) with nothing to read
 * before it (no audit line or lease of this process needs the value): all
 * a driver call would do for it is the write. Such writes may be sent and
 * answered without the worker's thread (node/remote_write.h).
 */
bool gpu_cmd_is_waited_write(const struct work *w);

/*
 * A write's outcome, set as running it would have: cmd->rc = rc, and a
 * failure that carries no error of its own gets a generic one. Returns rc.
 */
int gpu_cmd_set_result(struct gpu_cmd *cmd, int rc);


/*
 * The API read a read command is (enum gpu_read_op), or -1 for a write and
 * the /metrics snapshot: what to ask gpu_backend_ops.read_lacks.
 */
int gpu_cmd_read_op(enum gpu_cmd_op op);

/* Name of the operation for logs ("get_power", "set_power_limit", ...). */
const char *gpu_cmd_name(const struct gpu_cmd *cmd);

#endif
