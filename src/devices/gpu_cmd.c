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
};

const char *
gpu_cmd_name(const struct gpu_cmd *cmd)
{
	if (cmd->op == GPU_CMD_WRITE)
		return gpu_write_op_name(cmd->write.op);
	return gpu_cmd_read_names[cmd->op];
}

void
gpu_cmd_init(struct gpu_cmd *cmd, enum gpu_cmd_op op, unsigned gpu,
    void (*done)(struct gpu_cmd *cmd, void *arg), void *arg)
{
	cmd->op = op;
	cmd->gpu = gpu;
	cmd->done = done;
	cmd->arg = arg;
	cmd->work.run = gpu_cmd_run;
	cmd->work.what = NULL;
	zerr_clear(&cmd->err);
}

void
gpu_cmd_run(struct work *w, void *device)
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
	}
	if (cmd->rc != 0 && cmd->err.kind == ZERR_NONE)
		zerr_set(&cmd->err, ZERR_INTERNAL, "GPU %u: %s failed",
		    cmd->gpu, gpu_cmd_name(cmd));
	cmd->done(cmd, cmd->arg);	/* may free cmd */
}

void
gpu_cmd_submit(struct worker *wk, struct gpu_cmd *cmd)
{
	cmd->work.what = gpu_cmd_name(cmd);
	worker_submit(wk, &cmd->work);
}
