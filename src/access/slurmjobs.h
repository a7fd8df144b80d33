/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurmjobs.h - the Slurm job steps running on this node that hold GPUs,
 * as zeus_spank.so tells zeusd (POST /slurm/step_start and step_end, from
 * root in slurmstepd), and the device process's decision on a GPU write
 * under the node policy's slurm_jobs = "confine" (docs/slurm.md,
 * "Confining jobs to their GPUs").
 *
 * A step is known by its cgroup, which this process finds itself: the
 * cgroup of the registering slurmstepd (its peer's pid) that has a
 * component job_JOB, with step_STEP put after it. That is Slurm's layout
 * for both cgroup versions (v1 .../uid_U/job_J/step_S, where slurmstepd
 * sits in job_J; v2 .../job_J/step_S/{slurm,user/task_T}). Only root can
 * place a process in it or make it, so a process inside it is the step's.
 *
 * The decision on a write to GPU g by a writer w: with S(w) the live steps
 * whose cgroup holds w and H(g) the live steps holding g, the write may go
 * on when S(w) and H(g) share a step, or when both are empty (a GPU no job
 * holds, changed from outside any job). So a job's GPUs are its own, and
 * its processes touch no other GPU. Root is never asked (warden.c); a TCP
 * client is in no step.
 *
 * An entry ends when the plugin says so (slurm_spank_exit), when the
 * step's cgroup directory is gone or holds no process (slurmstepd crashed,
 * the end never came), checked whenever the entry would refuse a write and
 * when the table is full; an entry younger than its grace
 * (SLURMJOBS_GRACE_S) counts as alive (its tasks may not be in the cgroup
 * yet). At most SLURMJOBS_MAX entries.
 */
#ifndef ZEUS_ACCESS_SLURMJOBS_H
#define ZEUS_ACCESS_SLURMJOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

#define SLURMJOBS_MAX 1024		/* steps known at once */
#define SLURMJOBS_GRACE_S 30		/* a new entry is alive meanwhile */
#define SLURMJOBS_PATH_MAX 512		/* a cgroup path, with its NUL */
#define SLURMJOBS_MAX_GPUS 64		/* bits of the GPU mask */

/* Slurm's special step ids (slurm.h) and their cgroup names. */
#define SLURMJOBS_STEP_BATCH 0xfffffffbu	/* step_batch */
#define SLURMJOBS_STEP_EXTERN 0xfffffffcu	/* step_extern */
#define SLURMJOBS_STEP_INTERACTIVE 0xfffffffau	/* step_interactive */

struct slurmjobs;

/*
 * A table; `root` is prepended to every /proc and cgroup path this reads
 * ("" for the system; a directory for tests), `grace_s` is how long a new
 * entry counts as alive (SLURMJOBS_GRACE_S). 0, or -1 with err.
 */
int slurmjobs_create(const char *root, unsigned grace_s,
    struct slurmjobs **out, struct zerr *err);
void slurmjobs_destroy(struct slurmjobs *t);

/*
 * Whether `step` is a step id Slurm gives a cgroup of its own: below
 * 0xfffffff0, or batch, extern, interactive.
 */
bool slurmjobs_step_ok(uint32_t step);

/*
 * Step JOB.STEP of `uid` holds `gpus` (not 0); `pid` is the registering
 * process (slurmstepd), whose cgroups name the job's. Replaces an entry of
 * the same step. 0, or -1 with err: ZERR_INVALID (no cgroup of that job:
 * Slurm does not track the step by cgroup), ZERR_BUSY (the table is full
 * of live steps).
 */
int slurmjobs_start(struct slurmjobs *t, uint32_t job, uint32_t step,
    uid_t uid, uint64_t gpus, pid_t pid, struct zerr *err);

/* The step ended; true when it was known. */
bool slurmjobs_end(struct slurmjobs *t, uint32_t job, uint32_t step);

/* Live entries now (dead ones are not looked for). */
unsigned slurmjobs_count(struct slurmjobs *t);

/*
 * Who writes: a Unix peer's process (pid; its start time when it was
 * recorded while the process lived, `known`), or no process (TCP).
 */
struct slurmjobs_writer {
	bool process;
	pid_t pid;
	bool known;
	uint64_t start;			/* procstat_start_ticks */
};

/*
 * The decision on a write to `gpu` (above). 0 when it may go on, or -1
 * with err ZERR_FORBIDDEN saying which step holds the GPU or which step
 * the writer runs in. A writer process whose cgroups cannot be read as
 * its own (not known, exited, its pid taken since) counts as in a step of
 * none only while no step holds `gpu` and no step is known at all.
 */
int slurmjobs_judge(struct slurmjobs *t, unsigned gpu,
    const struct slurmjobs_writer *w, struct zerr *err);

#endif
