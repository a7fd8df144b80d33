/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_cmd.c - executing GPU commands on the worker thread (see gpu_cmd.h).
 */
#include "gpu_cmd.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

/* The worker hands back the struct work it ran: it is the command. */
static_assert(offsetof(struct gpu_cmd, work) == 0,
    "struct gpu_cmd: work must stay first");

/* What each read returns, for its place in the queue (worker.h). */
static const unsigned gpu_cmd_read_depends[] = {
	[GPU_CMD_GET_POWER_LIMIT] = GPU_SETTING_POWER_LIMIT,
	[GPU_CMD_GET_PERSISTENCE] = GPU_SETTING_PERSISTENCE,
	/*
	 * The snapshot reads the limit and persistence too, but a scrape is a
	 * sample, not a read-back of a write: it goes ahead of queued writes
	 * rather than wait for a backlog (docs/metrics.md).
	 */
	[GPU_CMD_SNAPSHOT] = 0,
};

static const char *const gpu_cmd_read_names[] = {
	[GPU_CMD_GET_POWER] = "get_power",
	[GPU_CMD_GET_ENERGY] = "get_cumulative_energy",
	[GPU_CMD_GET_POWER_LIMIT] = "get_power_limit",
	[GPU_CMD_GET_CONSTRAINTS] = "get_power_limit_constraints",
	[GPU_CMD_GET_PERSISTENCE] = "get_persistence_mode",
	[GPU_CMD_SNAPSHOT] = "snapshot",
};

int
gpu_cmd_read_op(enum gpu_cmd_op op)
{
	switch (op) {
	case GPU_CMD_GET_POWER:
		return GPU_GET_POWER;
	case GPU_CMD_GET_ENERGY:
		return GPU_GET_CUMULATIVE_ENERGY;
	case GPU_CMD_GET_POWER_LIMIT:
		return GPU_GET_POWER_LIMIT;
	case GPU_CMD_GET_CONSTRAINTS:
		return GPU_GET_POWER_LIMIT_CONSTRAINTS;
	case GPU_CMD_GET_PERSISTENCE:
		return GPU_GET_PERSISTENCE_MODE;
	case GPU_CMD_WRITE:
	case GPU_CMD_SNAPSHOT:
		break;
	}
	return -1;
}

const char *
gpu_cmd_name(const struct gpu_cmd *cmd)
{
	if (cmd->op == GPU_CMD_WRITE)
		return gpu_write_op_name(cmd->write.op);
	return gpu_cmd_read_names[cmd->op];
}

unsigned
gpu_write_touches(enum gpu_write_op op)
{
	switch (op) {
	case GPU_SET_POWER_LIMIT:
		return GPU_SETTING_POWER_LIMIT;
	case GPU_SET_PERSISTENCE_MODE:
		return GPU_SETTING_PERSISTENCE;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_RESET_GPU_LOCKED_CLOCKS:
		return GPU_SETTING_GPU_CLOCKS;
	case GPU_SET_MEM_LOCKED_CLOCKS:
	case GPU_RESET_MEM_LOCKED_CLOCKS:
		return GPU_SETTING_MEM_CLOCKS;
	case GPU_RESET_LOCKED_CLOCKS:
		return GPU_SETTING_GPU_CLOCKS | GPU_SETTING_MEM_CLOCKS;
	case GPU_WRITE_OP_COUNT:
		break;
	}
	return GPU_SETTING_ALL;
}

static int gpu_cmd_exec(struct work *w, void *device);
static int gpu_cmd_power_many(struct work **items, unsigned n, void *device,
    int *rc);

static void
gpu_cmd_complete(struct work *w)
{
	struct gpu_cmd *cmd = (struct gpu_cmd *)w;

	cmd->done(cmd, cmd->arg);	/* may free cmd */
}

static void
gpu_cmd_drop(struct work *w)
{
	struct gpu_cmd *cmd = (struct gpu_cmd *)w;

	cmd->dropped(cmd, cmd->arg);	/* may free cmd */
}

/*
 * Merging (worker.h): two reads of one GPU by the same operation ask the
 * same thing (no read takes arguments beyond the GPU).
 */
static bool
gpu_cmd_same(const struct work *queued, const struct work *w)
{
	const struct gpu_cmd *q = (const struct gpu_cmd *)queued;
	const struct gpu_cmd *c = (const struct gpu_cmd *)w;

	return q->op == c->op && q->gpu == c->gpu;
}

static void
gpu_cmd_share(struct work *w, const struct work *from, int rc)
{
	struct gpu_cmd *c = (struct gpu_cmd *)w;
	const struct gpu_cmd *f = (const struct gpu_cmd *)from;

	c->out = f->out;
	c->rc = rc;
	zerr_copy(&c->err, &f->err);
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
	cmd->work.exec_many = op == GPU_CMD_GET_POWER ? gpu_cmd_power_many :
	    NULL;
	cmd->work.complete = gpu_cmd_complete;
	cmd->work.unbounded = false;
	cmd->work.what = op == GPU_CMD_WRITE ? "write" :
	    gpu_cmd_read_names[op];
	if (op == GPU_CMD_WRITE) {
		cmd->work.kind = WORK_WRITE;
		cmd->work.touches = GPU_SETTING_ALL;
	} else {
		cmd->work.kind = WORK_READ;
		cmd->work.depends = gpu_cmd_read_depends[op];
		cmd->work.same = gpu_cmd_same;
		cmd->work.share = gpu_cmd_share;
	}
	zerr_clear(&cmd->err);
}

void
gpu_cmd_set_write(struct gpu_cmd *cmd, const struct gpu_write *w,
    void (*dropped)(struct gpu_cmd *cmd, void *arg))
{
	cmd->write = *w;
	cmd->work.what = gpu_write_op_name(w->op);
	cmd->work.touches = gpu_write_touches(w->op);
	cmd->dropped = dropped;
	cmd->work.supersedable = dropped != NULL;
	cmd->work.drop = dropped != NULL ? gpu_cmd_drop : NULL;
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

/*
 * The power reader's queued get_power commands (worker.h, exec_many): one
 * backend call for all when the backend can (a split daemon's network
 * process: one round trip), else one call each, in order.
 */
static int
gpu_cmd_power_many(struct work **items, unsigned n, void *device, int *rc)
{
	struct gpu_backend *b = device;
	unsigned gpus[WORKER_BATCH_MAX] = { 0 };
	uint32_t mw[WORKER_BATCH_MAX];
	struct zerr *errs[WORKER_BATCH_MAX] = { NULL };

	assert(n <= WORKER_BATCH_MAX);
	if (b->ops->get_power_many == NULL) {
		for (unsigned i = 0; i < n; i++)
			rc[i] = gpu_cmd_exec(items[i], device);
		return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		struct gpu_cmd *cmd = (struct gpu_cmd *)items[i];

		assert(cmd->op == GPU_CMD_GET_POWER);
		gpus[i] = cmd->gpu;
		errs[i] = &cmd->err;
	}
	b->ops->get_power_many(b, gpus, n, mw, rc, errs);
	for (unsigned i = 0; i < n; i++) {
		struct gpu_cmd *cmd = (struct gpu_cmd *)items[i];

		cmd->rc = rc[i];
		if (rc[i] == 0)
			cmd->out.power_mw = mw[i];
	}
	return 0;
}

/*
 * A GPU worker's queued writes (worker.h, exec_many; gpu_cmd_write_together
 * chose it): one backend call for all, in order, when none needs its
 * before-value read here; else one call each, in order.
 */
static int
gpu_cmd_write_many(struct work **items, unsigned n, void *device, int *rc)
{
	struct gpu_backend *b = device;
	const struct gpu_write *w[WORKER_BATCH_MAX];
	struct zerr *errs[WORKER_BATCH_MAX];
	unsigned gpu = ((struct gpu_cmd *)items[0])->gpu;
	bool alone = n < 2 || b->ops->write_many == NULL;

	assert(n <= WORKER_BATCH_MAX);
	for (unsigned i = 0; i < n && !alone; i++) {
		struct gpu_cmd *cmd = (struct gpu_cmd *)items[i];

		/* one GPU's worker queues that GPU's commands only */
		assert(cmd->op == GPU_CMD_WRITE &&
		    cmd->work.exec == gpu_cmd_exec && cmd->gpu == gpu);
		w[i] = &cmd->write;
		errs[i] = &cmd->err;
	}
	if (alone) {
		for (unsigned i = 0; i < n; i++)
			rc[i] = gpu_cmd_exec(items[i], device);
		return 0;
	}
	b->ops->write_many(b, gpu, w, n, rc, errs);
	for (unsigned i = 0; i < n; i++)
		(void)gpu_cmd_set_result((struct gpu_cmd *)items[i], rc[i]);
	return 0;
}

int
gpu_cmd_set_result(struct gpu_cmd *cmd, int rc)
{
	cmd->rc = rc;
	if (rc != 0 && cmd->err.kind == ZERR_NONE)
		zerr_set(&cmd->err, ZERR_INTERNAL, "GPU %u: %s failed",
		    cmd->gpu, gpu_cmd_name(cmd));
	return rc;
}

bool
gpu_cmd_is_waited_write(const struct work *w)
{
	const struct gpu_cmd *cmd = (const struct gpu_cmd *)w;

	return w->exec == gpu_cmd_exec && cmd->op == GPU_CMD_WRITE &&
	    cmd->dropped == NULL;
}

static unsigned
gpu_cmd_write_max(const struct work *first, void *device)
{
	struct gpu_backend *b = device;

	return b->ops->write_batch(b, ((const struct gpu_cmd *)first)->gpu);
}

void
gpu_cmd_write_together(struct gpu_cmd *cmd)
{
	/*
	 * Not a command whose exec was replaced: such a command runs alone,
	 * after the writes ahead of it were completed, as the worker runs an
	 * item without exec_many.
	 */
	if (cmd->op == GPU_CMD_WRITE && cmd->work.exec == gpu_cmd_exec) {
		cmd->work.exec_many = gpu_cmd_write_many;
		cmd->work.many_max = gpu_cmd_write_max;
	}
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
	return gpu_cmd_set_result(cmd, cmd->rc);
}
