/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_slurmjobs.c - the Slurm job steps that hold GPUs and the decision
 * on a write under slurm_jobs = "confine" (src/access/slurmjobs.c), on a
 * made-up /proc and cgroup tree under a temporary root: a step's cgroup
 * found from the registering process's, cgroup v1 and v2, who is inside,
 * what is refused and with which words, entries ending when their cgroup
 * is gone or empty, a full table; and the device process's check of the
 * message that carries a step (psmsg_slurm_step_check).
 *
 * The writer is this test's own process, whose start time is real (the
 * decision checks it): only its cgroup file is made up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "access/slurmjobs.h"
#include "common/log.h"
#include "common/procstat.h"
#include "privsep/msg.h"

#define STEPD 4242			/* the registering slurmstepd */

static char root[64];

static void
put(const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = path + strlen(root) + 1; (slash = strchr(slash, '/'));
	    slash++) {
		*slash = '\0';
		(void)mkdir(path, 0755);
		*slash = '/';
	}
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void
gone(const char *rel)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", root, rel);
	assert_int_equal(system(cmd), 0);
}

/* This process's made-up cgroups. */
static void
me_in(const char *cgroups)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "proc/%ld/cgroup", (long)getpid());
	put(rel, cgroups);
}

static struct slurmjobs_writer
me(void)
{
	struct slurmjobs_writer w = { .process = true, .pid = getpid(),
	    .known = true };

	assert_int_equal(procstat_start_ticks(getpid(), &w.start), 0);
	return w;
}

static const struct slurmjobs_writer tcp = { .process = false };

/* 0, or the refusal's message in msg. */
static int
judge(struct slurmjobs *t, unsigned gpu, const struct slurmjobs_writer *w,
    char *msg)
{
	struct zerr err = { 0 };
	int rc = slurmjobs_judge(t, gpu, w, &err);

	msg[0] = '\0';
	if (rc != 0) {
		assert_int_equal(err.kind, ZERR_FORBIDDEN);
		snprintf(msg, ZERR_MSG_MAX, "%s", err.msg);
	}
	return rc;
}

static void
expect_refused(struct slurmjobs *t, unsigned gpu,
    const struct slurmjobs_writer *w, const char *want)
{
	char msg[ZERR_MSG_MAX];

	assert_int_equal(judge(t, gpu, w, msg), -1);
	if (strstr(msg, want) == NULL)
		fail_msg("'%s' lacks '%s'", msg, want);
}

static void
expect_served(struct slurmjobs *t, unsigned gpu,
    const struct slurmjobs_writer *w)
{
	char msg[ZERR_MSG_MAX];

	if (judge(t, gpu, w, msg) != 0)
		fail_msg("refused: %s", msg);
}

static int
setup(void **state)
{
	(void)state;
	zlog_set_level(ZLOG_WARN);
	snprintf(root, sizeof(root), "/tmp/test-slurmjobs-XXXXXX");
	assert_non_null(mkdtemp(root));
	put("proc/self/mountinfo",
	    "25 1 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
	    "30 25 0:27 / /sys/fs/cgroup/freezer rw,nosuid - cgroup cgroup "
	    "rw,freezer\n"
	    "31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
	    "rw,cpu,cpuacct\n"
	    "32 25 0:29 / /sys/fs/cgroup/my\\040unified rw - cgroup2 cgroup2 "
	    "rw\n");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	gone("");
	return 0;
}

static struct slurmjobs *
table(unsigned grace)
{
	struct slurmjobs *t = NULL;
	struct zerr err = { 0 };

	assert_int_equal(slurmjobs_create(root, grace, &t, &err), 0);
	return t;
}

static int
start(struct slurmjobs *t, uint32_t job, uint32_t step, uint64_t gpus,
    struct zerr *err)
{
	return slurmjobs_start(t, job, step, 1001, gpus, STEPD, err);
}

/* cgroup v1: slurmstepd in job_7, the step's tasks in job_7/step_0. */
static void
test_v1_step(void **state)
{
	struct slurmjobs *t = table(SLURMJOBS_GRACE_S);
	struct slurmjobs_writer w = me();
	struct zerr err = { 0 };

	(void)state;
	put("proc/4242/cgroup", "3:cpu,cpuacct:/\n6:freezer:/slurm/uid_1001/"
	    "job_7\n0::/init.scope\n");
	assert_int_equal(start(t, 7, 0, 0x1, &err), 0);
	assert_int_equal(slurmjobs_count(t), 1);
	/* inside the step: its GPU, no other */
	me_in("6:freezer:/slurm/uid_1001/job_7/step_0\n0::/\n");
	expect_served(t, 0, &w);
	expect_refused(t, 1, &w, "Forbidden: the process that asked runs in "
	    "Slurm job 7 step 0, which holds GPU 0, not GPU 1; under the node "
	    "policy's slurm_jobs = \"confine\" it may change no other GPU");
	/* below it (a task's cgroup) is inside too */
	me_in("6:freezer:/slurm/uid_1001/job_7/step_0/task_3\n");
	expect_served(t, 0, &w);
	/* outside: the GPU is the step's, any other is free */
	me_in("6:freezer:/\n0::/user.slice\n");
	expect_refused(t, 0, &w, "Forbidden: GPU 0 is held by Slurm job 7 "
	    "step 0 of uid 1001");
	expect_served(t, 1, &w);
	/* a name that begins like it, and its path in another hierarchy */
	me_in("6:freezer:/slurm/uid_1001/job_7/step_00\n");
	expect_refused(t, 0, &w, "held by Slurm job 7 step 0");
	me_in("3:cpu,cpuacct:/slurm/uid_1001/job_7/step_0\n"
	    "0::/slurm/uid_1001/job_7/step_0\n");
	expect_refused(t, 0, &w, "held by Slurm job 7 step 0");
	/* slurmstepd's own cgroup (job_7) is not the step's */
	me_in("6:freezer:/slurm/uid_1001/job_7\n");
	expect_refused(t, 0, &w, "held by Slurm job 7 step 0");
	/* TCP: in no step */
	expect_refused(t, 0, &tcp, "held by Slurm job 7 step 0");
	expect_served(t, 1, &tcp);
	/* the end: every GPU is free again */
	assert_true(slurmjobs_end(t, 7, 0));
	assert_false(slurmjobs_end(t, 7, 0));
	expect_served(t, 0, &tcp);
	slurmjobs_destroy(t);
}

/* cgroup v2: slurmstepd in job_9/step_batch/slurm; a special step id. */
static void
test_v2_step(void **state)
{
	struct slurmjobs *t = table(SLURMJOBS_GRACE_S);
	struct slurmjobs_writer w = me();
	struct zerr err = { 0 };

	(void)state;
	put("proc/4242/cgroup", "0::/system.slice/slurmstepd.scope/job_9/"
	    "step_batch/slurm\n");
	assert_int_equal(start(t, 9, SLURMJOBS_STEP_BATCH, 0x6, &err), 0);
	me_in("0::/system.slice/slurmstepd.scope/job_9/step_batch/user/"
	    "task_0\n");
	expect_served(t, 1, &w);
	expect_served(t, 2, &w);
	expect_refused(t, 0, &w, "runs in Slurm job 9 step batch, which holds "
	    "GPU 1,2, not GPU 0");
	/* two steps of a job on one GPU: inside either one is enough */
	put("proc/4242/cgroup", "0::/system.slice/slurmstepd.scope/job_9/"
	    "step_0/slurm\n");
	assert_int_equal(start(t, 9, 0, 0x2, &err), 0);
	expect_served(t, 1, &w);
	me_in("0::/system.slice/slurmstepd.scope/job_9/step_0/user/task_0\n");
	expect_served(t, 1, &w);
	expect_refused(t, 2, &w, "held by Slurm job 9 step batch");
	/* the same step again replaces its entry */
	assert_int_equal(start(t, 9, 0, 0x4, &err), 0);
	assert_int_equal(slurmjobs_count(t), 2);
	expect_served(t, 2, &w);
	expect_refused(t, 1, &w, "held by Slurm job 9 step batch");
	slurmjobs_destroy(t);
}

static void
test_refused_steps(void **state)
{
	struct slurmjobs *t = table(SLURMJOBS_GRACE_S);
	struct zerr err = { 0 };

	(void)state;
	/* slurmstepd in no cgroup of the job (proctrack/linuxproc) */
	put("proc/4242/cgroup", "6:freezer:/\n"
	    "0::/system.slice/slurmd.service\n");
	assert_int_equal(start(t, 7, 0, 0x1, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "in no cgroup of job 7"));
	/* job_70 is not job_7 */
	put("proc/4242/cgroup", "6:freezer:/slurm/uid_1/job_70\n");
	assert_int_equal(start(t, 7, 0, 0x1, &err), -1);
	put("proc/4242/cgroup", "6:freezer:/slurm/uid_1/job_7\n");
	assert_int_equal(start(t, 7, 0, 0, &err), -1);
	assert_int_equal(start(t, 7, 0xfffffff1u, 0x1, &err), -1);
	assert_int_equal(start(t, 0, 0, 0x1, &err), -1);
	assert_int_equal(slurmjobs_start(t, 7, 0, 1, 0x1, 999999999, &err),
	    -1);
	assert_int_equal(slurmjobs_count(t), 0);
	assert_true(slurmjobs_step_ok(0) && slurmjobs_step_ok(0xffffffefu) &&
	    slurmjobs_step_ok(SLURMJOBS_STEP_EXTERN) &&
	    !slurmjobs_step_ok(0xfffffff0u) && !slurmjobs_step_ok(UINT32_MAX));
	slurmjobs_destroy(t);
}

/* Without its process's word: refused while steps are known. */
static void
test_unknown_writer(void **state)
{
	struct slurmjobs *t = table(SLURMJOBS_GRACE_S);
	struct slurmjobs_writer w = me();
	struct zerr err = { 0 };

	(void)state;
	me_in("0::/\n");
	w.known = false;
	expect_served(t, 0, &w);	/* no step at all */
	put("proc/4242/cgroup", "6:freezer:/slurm/uid_1001/job_7\n");
	assert_int_equal(start(t, 7, 0, 0x1, &err), 0);
	expect_refused(t, 1, &w, "cannot tell whether the process that asked "
	    "runs in a Slurm job step");
	expect_refused(t, 0, &w, "held by Slurm job 7");
	/* a start time that is not its process's: the pid was taken since */
	w = me();
	w.start++;
	expect_refused(t, 1, &w, "cannot tell whether");
	slurmjobs_destroy(t);
}

/* Entries whose cgroup is gone or empty end without the plugin's word. */
static void
test_dead_steps_end(void **state)
{
	struct slurmjobs *t = table(0);
	struct zerr err = { 0 };
	const char *v1 = "sys/fs/cgroup/freezer/slurm/uid_1001/job_7/step_0";
	const char *v2 = "sys/fs/cgroup/my unified/slurmstepd.scope/job_8/"
	    "step_1";
	char rel[256];

	(void)state;
	/* v1: a process in a task's cgroup below the step keeps it */
	put("proc/4242/cgroup", "6:freezer:/slurm/uid_1001/job_7\n");
	snprintf(rel, sizeof(rel), "%s/cgroup.procs", v1);
	put(rel, "");
	snprintf(rel, sizeof(rel), "%s/task_0/cgroup.procs", v1);
	put(rel, "31337\n");
	assert_int_equal(start(t, 7, 0, 0x1, &err), 0);
	expect_refused(t, 0, &tcp, "held by Slurm job 7 step 0");
	put(rel, "");			/* its last process left */
	expect_served(t, 0, &tcp);
	assert_int_equal(slurmjobs_count(t), 0);
	/* v2 (a mount point with a space): populated, then not, then gone */
	put("proc/4242/cgroup", "0::/slurmstepd.scope/job_8/step_1/slurm\n");
	snprintf(rel, sizeof(rel), "%s/cgroup.events", v2);
	put(rel, "populated 1\nfrozen 0\n");
	assert_int_equal(start(t, 8, 1, 0x2, &err), 0);
	expect_refused(t, 1, &tcp, "held by Slurm job 8 step 1");
	put(rel, "populated 0\nfrozen 0\n");
	expect_served(t, 1, &tcp);
	put(rel, "populated 1\nfrozen 0\n");
	assert_int_equal(start(t, 8, 1, 0x2, &err), 0);
	gone("sys/fs/cgroup/my unified/slurmstepd.scope/job_8");
	expect_served(t, 1, &tcp);
	assert_int_equal(slurmjobs_count(t), 0);
	/* a cgroup no mount shows: kept until its end */
	put("proc/4242/cgroup", "9:name=slurm:/job_5\n");
	assert_int_equal(start(t, 5, 0, 0x1, &err), 0);
	expect_refused(t, 0, &tcp, "held by Slurm job 5 step 0");
	slurmjobs_destroy(t);
	/* within the grace, an empty cgroup is a step whose tasks come */
	t = table(SLURMJOBS_GRACE_S);
	put("proc/4242/cgroup", "0::/slurmstepd.scope/job_8/step_1/slurm\n");
	assert_int_equal(start(t, 8, 1, 0x2, &err), 0);
	expect_refused(t, 1, &tcp, "held by Slurm job 8 step 1");
	slurmjobs_destroy(t);
}

static void
test_full_table(void **state)
{
	struct slurmjobs *t = table(SLURMJOBS_GRACE_S);
	struct zerr err = { 0 };
	char line[64];

	(void)state;
	for (uint32_t j = 1; j <= SLURMJOBS_MAX + 1; j++) {
		snprintf(line, sizeof(line), "0::/s/job_%u/step_0/slurm\n", j);
		put("proc/4242/cgroup", line);
		assert_int_equal(start(t, j, 0, 0x1, &err),
		    j <= SLURMJOBS_MAX ? 0 : -1);
	}
	assert_int_equal(err.kind, ZERR_BUSY);
	assert_int_equal(slurmjobs_count(t), SLURMJOBS_MAX);
	assert_true(slurmjobs_end(t, 1, 0));
	assert_int_equal(start(t, SLURMJOBS_MAX + 1, 0, 0x1, &err), 0);
	slurmjobs_destroy(t);
}

/* The device process's check of PSMSG_SLURM_STEP. */
static void
test_message_check(void **state)
{
	const struct psmsg_limits lim = { .ngpu = 4 };
	struct psmsg_slurm_step m, out;
	char why[128];

	(void)state;
	memset(&m, 0, sizeof(m));
	psmsg_request_init(&m.h, PSMSG_SLURM_STEP, 5);
	m.start = 1;
	m.job = 42;
	m.step = 0xfffffffbu;
	m.uid = 1001;
	m.gpus = 0x9;
	m.who = UINT64_C(0x100000003);
	assert_int_equal(psmsg_slurm_step_check(&m, sizeof(m), &lim, &out, why,
	    sizeof(why)), 0);
	assert_memory_equal(&m, &out, sizeof(m));
#define BAD(field, value) do { \
		struct psmsg_slurm_step b = m; \
		b.field = value; \
		assert_int_equal(psmsg_slurm_step_check(&b, sizeof(b), &lim, \
		    &out, why, sizeof(why)), -1); \
		assert_int_equal(out.h.magic, 0); \
	} while (0)
	BAD(start, 2);
	BAD(pad, 1);
	BAD(pad1, 1);
	BAD(job, 0);
	BAD(step, 0xfffffff1u);
	BAD(uid, UINT32_MAX);
	BAD(gpus, 0);
	BAD(gpus, 0x10);
	BAD(who, 0);
	BAD(h.auth, 1);
	BAD(h.dev, 1);
	BAD(h.op, PSMSG_TCP_OWNER);
	/* an end: job and step only */
	m.start = 0;
	BAD(uid, 1001);
	m.uid = 0;
	BAD(gpus, 0x1);
	m.gpus = 0;
	assert_int_equal(psmsg_slurm_step_check(&m, sizeof(m), &lim, &out, why,
	    sizeof(why)), 0);
#undef BAD
	assert_int_equal(psmsg_slurm_step_check(&m, sizeof(m) - 8, &lim, &out,
	    why, sizeof(why)), -1);
	/* as a plain request it is refused by its size */
	assert_int_equal(psmsg_request_check(&m.h, sizeof(m.h), &lim,
	    &out.h, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "slurm_step request"));
	assert_string_equal(psmsg_op_name(PSMSG_SLURM_STEP), "slurm_step");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_step),
		cmocka_unit_test(test_v2_step),
		cmocka_unit_test(test_refused_steps),
		cmocka_unit_test(test_unknown_writer),
		cmocka_unit_test(test_dead_steps_end),
		cmocka_unit_test(test_full_table),
		cmocka_unit_test(test_message_check),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
