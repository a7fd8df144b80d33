/*
 * gpu_cmd.c - executing GPU commands on the worker thread (see gpu_cmd.h).
 */
#include "gpu_cmd.h"

#include <string.h>

static const char *const gpu_cmd_read_names[] = {
	[GPU_CMD_GET_POWER] = "get_power",
	[GPU_CMD_GET_ENERGY] = "get_cumulative_energy",
	[GPU_CMD_GET_POWER_LIMIT] = "get_power_limit",
	[GPU_CMD_GET_CONSTRAINTS] = "get_power_limit_constraints",
	[GPU_CMD_GET_PERSISTENCE] = "get_persistence_mode",
	[GPU_CMD_SNAPSHOT] = "snapshot",
};

const char *
gpu_cmd_name(const struct gpu_cmd *cmd)
{
	if (cmd->op == GPU_CMD_WRITE)
		return gpu_write_op_name(cmd->write.op);
	return gpu_cmd_read_names[cmd->op];
}

static int gpu_cmd_exec(struct work *w, void *device);

static void
gpu_cmd_complete(struct work *w)
{
	struct gpu_cmd *cmd = (struct gpu_cmd *)w;

	cmd->done(cmd, cmd->arg);	/* may free cmd */
}

void
gpu_cmd_init(struct gpu_cmd *cmd, enum gpu_cmd_op op, unsigned gpu,
    void (*done)(struct gpu_cmd *cmd, void *arg), void *arg)
{
	cmd->op = op;
	cmd->gpu = gpu;
	cmd->done = done;
	cmd->arg = arg;
	cmd->work.exec = gpu_cmd_exec;
	cmd->work.complete = gpu_cmd_complete;
	cmd->work.what = NULL;
	zerr_clear(&cmd->err);
}

/*
 * Reads everything /metrics shows. A field that fails is left out (its bit
 * stays clear); the command fails only when every field failed, with the
 * first error.
 */
static int
gpu_cmd_snapshot(struct gpu_backend *b, unsigned gpu, struct gpu_snapshot *s,
    struct zerr *err)
{
	const struct gpu_backend_ops *ops = b->ops;
	struct zerr e;
	bool first = true;

	memset(s, 0, sizeof(*s));
#define SNAP(bit, call) do {						\
	zerr_clear(&e);							\
	if ((call) == 0)						\
		s->ok |= (bit);						\
	else if (first) {						\
		*err = e;						\
		first = false;						\
	}								\
} while (0)
	SNAP(GPU_SNAP_POWER, ops->get_power_mw(b, gpu, &s->power_mw, &e));
	SNAP(GPU_SNAP_ENERGY, ops->get_energy_mj(b, gpu, &s->energy_mj, &e));
	SNAP(GPU_SNAP_LIMIT, ops->get_power_limit_mw(b, gpu, &s->limit_mw, &e));
	SNAP(GPU_SNAP_CONSTRAINTS, ops->get_power_limit_constraints(b, gpu,
	    &s->min_mw, &s->max_mw, &e));
	SNAP(GPU_SNAP_PERSISTENCE, ops->get_persistence_mode(b, gpu,
	    &s->persistence, &e));
#undef SNAP
	return s->ok != 0 ? 0 : -1;
}

static int
gpu_cmd_exec(struct work *w, void *device)
{
	struct gpu_cmd *cmd = (struct gpu_cmd *)w;
	struct gpu_backend *b = device;
	const struct gpu_backend_ops *ops = b->ops;

	switch (cmd->op) {
	case GPU_CMD_WRITE:
		cmd->rc = ops->write(b, cmd->gpu, &cmd->write, &cmd->err);
		break;
	case GPU_CMD_GET_POWER:
		cmd->rc = ops->get_power_mw(b, cmd->gpu, &cmd->out.power_mw,
		    &cmd->err);
		break;
	case GPU_CMD_GET_ENERGY:
		cmd->rc = ops->get_energy_mj(b, cmd->gpu, &cmd->out.energy_mj,
		    &cmd->err);
		break;
	case GPU_CMD_GET_POWER_LIMIT:
		cmd->rc = ops->get_power_limit_mw(b, cmd->gpu,
		    &cmd->out.limit_mw, &cmd->err);
		break;
	case GPU_CMD_GET_CONSTRAINTS:
		cmd->rc = ops->get_power_limit_constraints(b, cmd->gpu,
		    &cmd->out.constraints.min_mw, &cmd->out.constraints.max_mw,
		    &cmd->err);
		break;
	case GPU_CMD_GET_PERSISTENCE:
		cmd->rc = ops->get_persistence_mode(b, cmd->gpu,
		    &cmd->out.persistence, &cmd->err);
		break;
	case GPU_CMD_SNAPSHOT:
		cmd->rc = gpu_cmd_snapshot(b, cmd->gpu, &cmd->out.snap,
		    &cmd->err);
		break;
	}
	if (cmd->rc != 0 && cmd->err.kind == ZERR_NONE)
		zerr_set(&cmd->err, ZERR_INTERNAL, "GPU %u: %s failed",
		    cmd->gpu, gpu_cmd_name(cmd));
	return cmd->rc;
}

void
gpu_cmd_submit(struct worker *wk, struct gpu_cmd *cmd)
{
	cmd->work.what = gpu_cmd_name(cmd);
	worker_submit(wk, &cmd->work);
}
