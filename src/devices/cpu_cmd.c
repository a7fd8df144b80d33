/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu_cmd.c - executing RAPL commands on a package's worker thread.
 *
 * get_power reads the counters, sleeps one sampling period on the worker and
 * reads again, dividing by the measured gap (not the nominal one). The sleep
 * holds only that package's worker.
 */
#include "cpu_cmd.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"

/* The worker hands back the struct work it ran: it is the command. */
static_assert(offsetof(struct cpu_cmd, work) == 0,
    "struct cpu_cmd: work must stay first");

/*
 * Values go out as JSON integers, which are signed 64-bit in jansson: a
 * counter (a fake tree can hold any u64 below its range) or total beyond
 * INT64_MAX would print as a negative number, so it is an error instead.
 */
static int
cpu_cmd_check_range(struct cpu_cmd *cmd, struct rapl *r)
{
	if (cmd->cpu <= INT64_MAX && (!cmd->has_dram || cmd->dram <= INT64_MAX))
		return 0;
	return zerr_set(&cmd->err, ZERR_INTERNAL,
	    "CPU %u: %s beyond what the API can represent (2^63-1)",
	    rapl_package_id(r, cmd->pkg), cmd->op == CPU_CMD_GET_ENERGY ?
	    "energy" : "power");
}

static int
cpu_cmd_exec(struct work *w, void *device)
{
	struct cpu_cmd *cmd = (struct cpu_cmd *)w;
	struct rapl *r = device;

	cmd->has_dram = rapl_has_dram(r, cmd->pkg);
	if (cmd->op == CPU_CMD_GET_ENERGY) {
		cmd->rc = rapl_read(r, cmd->pkg, &cmd->cpu,
		    cmd->has_dram ? &cmd->dram : NULL, &cmd->err);
	} else {
		struct rapl_sample a, b;

		cmd->rc = rapl_sample(r, cmd->pkg, &a, &cmd->err);
		if (cmd->rc == 0) {
			zclock_sleep_ms(cmd->period_ms);
			cmd->rc = rapl_sample(r, cmd->pkg, &b, &cmd->err);
		}
		if (cmd->rc == 0 &&
		    rapl_power_mw(&a, &b, &cmd->cpu, &cmd->dram) != 0)
			cmd->rc = zerr_set(&cmd->err, ZERR_INTERNAL,
			    "CPU %u: samples not ordered in time",
			    rapl_package_id(r, cmd->pkg));
	}
	if (cmd->rc == 0)
		cmd->rc = cpu_cmd_check_range(cmd, r);
	return cmd->rc;
}

int
cpu_cmd_energy_result(struct cpu_cmd *cmd, struct rapl *r, uint64_t cpu_uj,
    uint64_t dram_uj)
{
	cmd->has_dram = rapl_has_dram(r, cmd->pkg);
	cmd->cpu = cpu_uj;
	cmd->dram = cmd->has_dram ? dram_uj : 0;
	cmd->rc = cpu_cmd_check_range(cmd, r);
	return cmd->rc;
}

/*
 * The energy reader's queued commands (worker.h, exec_many): one read of
 * every package asked for when the counter source can (a split daemon's
 * network process: one round trip), else one read each.
 */
static int
cpu_cmd_energy_many(struct work **items, unsigned n, void *device, int *rc)
{
	struct rapl *r = device;
	unsigned pkgs[WORKER_BATCH_MAX] = { 0 };
	uint64_t cpu[WORKER_BATCH_MAX], dram[WORKER_BATCH_MAX];
	struct zerr *errs[WORKER_BATCH_MAX] = { NULL };

	assert(n <= WORKER_BATCH_MAX);
	for (unsigned i = 0; i < n; i++) {
		struct cpu_cmd *cmd = (struct cpu_cmd *)items[i];

		assert(cmd->op == CPU_CMD_GET_ENERGY);
		pkgs[i] = cmd->pkg;
		errs[i] = &cmd->err;
	}
	rapl_read_many(r, pkgs, n, cpu, dram, rc, errs);
	for (unsigned i = 0; i < n; i++) {
		struct cpu_cmd *cmd = (struct cpu_cmd *)items[i];

		if (rc[i] == 0)
			rc[i] = cpu_cmd_energy_result(cmd, r, cpu[i], dram[i]);
		else {
			cmd->has_dram = rapl_has_dram(r, cmd->pkg);
			cmd->rc = rc[i];
		}
	}
	return 0;
}

static void
cpu_cmd_complete(struct work *w)
{
	struct cpu_cmd *cmd = (struct cpu_cmd *)w;

	cmd->done(cmd, cmd->arg);	/* may free cmd */
}

/*
 * Merging (worker.h): reads of one package by the same operation, and for
 * power over the same sampling period, ask the same thing.
 */
static bool
cpu_cmd_same(const struct work *queued, const struct work *w)
{
	const struct cpu_cmd *q = (const struct cpu_cmd *)queued;
	const struct cpu_cmd *c = (const struct cpu_cmd *)w;

	return q->op == c->op && q->pkg == c->pkg &&
	    (c->op == CPU_CMD_GET_ENERGY || q->period_ms == c->period_ms);
}

static void
cpu_cmd_share(struct work *w, const struct work *from, int rc)
{
	struct cpu_cmd *c = (struct cpu_cmd *)w;
	const struct cpu_cmd *f = (const struct cpu_cmd *)from;

	c->has_dram = f->has_dram;
	c->cpu = f->cpu;
	c->dram = f->dram;
	c->rc = rc;
	zerr_copy(&c->err, &f->err);
}

void
cpu_cmd_init(struct cpu_cmd *cmd, enum cpu_cmd_op op, unsigned pkg,
    void (*done)(struct cpu_cmd *cmd, void *arg), void *arg)
{
	cmd->op = op;
	cmd->pkg = pkg;
	cmd->done = done;
	cmd->arg = arg;
	cmd->work.exec = cpu_cmd_exec;
	cmd->work.exec_many = op == CPU_CMD_GET_ENERGY ? cpu_cmd_energy_many :
	    NULL;
	cmd->work.complete = cpu_cmd_complete;
	cmd->work.unbounded = false;
	cmd->work.what = op == CPU_CMD_GET_ENERGY ? "get_cumulative_energy" :
	    "get_power";
	cmd->work.kind = WORK_READ;
	cmd->work.depends = 0;
	cmd->work.same = cpu_cmd_same;
	cmd->work.share = cpu_cmd_share;
	zerr_clear(&cmd->err);
}
