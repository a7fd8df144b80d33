/* SPDX-License-Identifier: Apache-2.0 */
/*
 * zeus_spank.c - the Slurm SPANK plugin zeus_spank.so (docs/slurm.md):
 * job options --zeus-power-limit=WATTS, --zeus-gpu-clocks=MIN:MAX and
 * --zeus-mem-clocks=MIN:MAX, applied by zeusd to the step's GPUs from each
 * task's own process, right before the user's program replaces it.
 *
 * So the task process is the one that opened the connection: zeusd
 * (--gpu-leases) gives it the lease, labelled "slurm:JOB.STEP", and
 * restores the GPUs when it ends, whether it exits, is cancelled
 * (scancel) or killed. The first task of the step on a node also starts
 * a small reporter process (spank_report.c) that waits for that task's
 * end and writes the step's GPU energy from zeusd's ledger on its stderr.
 *
 * And for every step with GPUs, options or not, slurmstepd (root) tells
 * zeusd which GPUs the step holds when its tasks are forked, and that it
 * ended when it exits (spank_step.c), so that the node policy's
 * slurm_jobs = "confine" can keep each job to its GPUs.
 *
 * plugstack.conf: required /path/zeus_spank.so [socket=PATH] [required]
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "common/cap_value.h"
#include "slurm/spank_parse.h"
#include "slurm/spank_report.h"
#include "slurm/spank_step.h"
#include "zeus/client.h"

SPANK_PLUGIN(zeus, 1);

#define SPANK_ENV_MAX 1024	/* longest GPU list read from the env */
#define SPANK_REPORT_WAIT_MS 10000	/* for the ledger after the task */
#define SPANK_STEP_WAIT_MS 5000	/* for zeusd to take a step's start */

_Static_assert(SPANK_GPUS_MAX == ZEUS_MAX_DEVICES,
    "a step's GPUs must fit libzeus's device lists");

static struct spank_conf conf;

/* slurmstepd's: whether zeusd took this step's start (its end follows). */
static struct {
	bool asked, told;
	uint32_t job, step;
	char label[48];
} step_told;

/* The job's settings, from its options (local and remote context). */
static struct {
	bool has_limit, has_gpu, has_mem;
	uint32_t limit_mw;
	uint32_t gpu[2], mem[2];
} set;

static int
opt_power(int val, const char *arg, int remote)
{
	(void)val;
	(void)remote;
	if (arg == NULL || cap_value_watts(arg, &set.limit_mw) != 0) {
		slurm_error("zeus: --zeus-power-limit=%s: not a power limit in "
		    "watts (a decimal number above 0, e.g. 250)",
		    arg ? arg : "");
		return -1;
	}
	set.has_limit = true;
	return 0;
}

static int
opt_clocks(const char *name, const char *arg, uint32_t out[2], bool *has)
{
	if (arg == NULL || cap_value_clocks(arg, out) != 0) {
		slurm_error("zeus: --%s=%s: not a clock range MIN:MAX in MHz "
		    "(two whole numbers, e.g. 900:1400)", name,
		    arg ? arg : "");
		return -1;
	}
	*has = true;
	return 0;
}

static int
opt_gpu_clocks(int val, const char *arg, int remote)
{
	(void)val;
	(void)remote;
	return opt_clocks("zeus-gpu-clocks", arg, set.gpu, &set.has_gpu);
}

static int
opt_mem_clocks(int val, const char *arg, int remote)
{
	(void)val;
	(void)remote;
	return opt_clocks("zeus-mem-clocks", arg, set.mem, &set.has_mem);
}

static struct spank_option opts[] = {
	{ "zeus-power-limit", "WATTS", "Cap the power of the job's GPUs at "
	    "WATTS while it runs (through zeusd)", 1, 0, opt_power },
	{ "zeus-gpu-clocks", "MIN:MAX", "Lock the GPU clocks of the job's "
	    "GPUs to MIN..MAX MHz while it runs (through zeusd)", 1, 0,
	    opt_gpu_clocks },
	{ "zeus-mem-clocks", "MIN:MAX", "Lock the memory clocks of the "
	    "job's GPUs to MIN..MAX MHz while it runs (through zeusd)", 1, 0,
	    opt_mem_clocks },
};

int
slurm_spank_init(spank_t sp, int ac, char **av)
{
	char why[SPANK_WHY_MAX];

	if (spank_parse_conf(ac, av, &conf, why) != 0) {
		slurm_error("zeus: plugstack.conf: %s", why);
		return -1;
	}
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (spank_option_register(sp, &opts[i]) != ESPANK_SUCCESS) {
			slurm_error("zeus: cannot register --%s", opts[i].name);
			return -1;
		}
	return 0;
}

/*
 * Whether Slurm's gres/gpu plugin is loaded in this process (slurmstepd,
 * or a task forked from it): /proc/self/maps names a file gres_gpu.so.
 * Only then does slurmstepd set or remove the step's GPU variable (below);
 * without it the variable is the user's own.
 */
static bool
gres_gpu_loaded(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		size_t len = strcspn(line, "\n");
		static const char name[] = "/gres_gpu.so";

		found = len >= sizeof(name) - 1 && memcmp(line + len -
		    (sizeof(name) - 1), name, sizeof(name) - 1) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The step's GPUs as Slurm gave them, as zeusd's indices: 0, or -1 with
 * `why`; *n == 0 when Slurm gave the step none. Read from the step's
 * environment as slurmstepd made it, before any of the user's code ran:
 * its gres/gpu plugin sets SLURM_STEP_GPUS for a step with GPUs and
 * removes it (whatever the user passed) for a step without, and does the
 * same with SLURM_JOB_GPUS for a batch script. The other variable of the
 * two, CUDA_VISIBLE_DEVICES and the like pass through from the user and
 * are never read.
 */
static int
step_gpus(spank_t sp, uint32_t step, unsigned *ids, size_t *n, char *why)
{
	const char *var = step == SPANK_STEP_BATCH ? "SLURM_JOB_GPUS" :
	    "SLURM_STEP_GPUS";
	char v[SPANK_ENV_MAX], w[SPANK_WHY_MAX];
	spank_err_t rc;

	*n = 0;
	if (!gres_gpu_loaded())
		return 0;
	rc = spank_getenv(sp, var, v, sizeof(v));
	if (rc == ESPANK_ENV_NOEXIST)
		return 0;
	if (rc != ESPANK_SUCCESS) {
		snprintf(why, SPANK_WHY_MAX, "%s cannot be read: %s", var,
		    spank_strerror(rc));
		return -1;
	}
	if (spank_parse_gpus(v, ids, n, w) != 0) {
		snprintf(why, SPANK_WHY_MAX, "%s: %.120s", var, w);
		return -1;
	}
	return 0;
}

/* "0,1,3" */
static void
gpus_text(char *buf, size_t size, const unsigned *ids, size_t n)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && len < size; i++) {
		int k = snprintf(buf + len, size - len, "%s%u", i ? "," : "",
		    ids[i]);

		if (k < 0)
			break;
		len += (size_t)k;
	}
}

/* Applies the settings to ids; 0, or -1 with `why` (ZEUS_ERR_MSG_MAX). */
static int
task_apply(const char *label, const unsigned *ids, size_t n, char *what,
    struct zeus_error *e)
{
	struct zeus_client_options o = { .socket_path = conf.socket };
	struct zeus_client *c;
	int rc = -1;

	snprintf(what, 64, "connecting");
	if (zeus_client_open(&o, &c, e) != 0)
		return -1;
	if (zeus_client_set_lease_label(c, label, e) != 0)
		goto out;
	snprintf(what, 64, "--zeus-power-limit");
	if (set.has_limit && zeus_client_gpu_set_power_limit(c, ids, n,
	    set.limit_mw, true, e) != 0)
		goto out;
	snprintf(what, 64, "--zeus-gpu-clocks");
	if (set.has_gpu && zeus_client_gpu_set_gpu_locked_clocks(c, ids, n,
	    set.gpu[0], set.gpu[1], true, e) != 0)
		goto out;
	snprintf(what, 64, "--zeus-mem-clocks");
	if (set.has_mem && zeus_client_gpu_set_mem_locked_clocks(c, ids, n,
	    set.mem[0], set.mem[1], true, e) != 0)
		goto out;
	rc = 0;
out:
	zeus_client_close(c);
	return rc;
}

/*
 * The reporter: a grandchild (so never a child the user's program could
 * wait for), watching this process through a pidfd taken before the
 * forks.
 */
static void
task_start_report(const char *label, const unsigned *ids, size_t n)
{
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	pid_t a;

	if (pidfd < 0)
		return;
	a = fork();
	if (a == 0) {
		if (fork() == 0) {
			int null = open("/dev/null", O_RDWR | O_CLOEXEC);

			if (null >= 0) {
				dup2(null, 0);
				dup2(null, 1);
			}
			/* nothing of the task's but its stderr and the pidfd
			 * (slurmstepd's pipes would stay open otherwise) */
			if (pidfd != 3 && dup2(pidfd, 3) == 3)
				pidfd = 3;
			if (pidfd == 3)
				close_range(4, ~0u, 0);
			prctl(PR_SET_NAME, "zeus-report");
			/* scancel signals the step's processes at once: the
			 * report outlives the task by the few ms it takes, and
			 * Slurm's SIGKILL after KillWait still ends it */
			signal(SIGTERM, SIG_IGN);
			signal(SIGINT, SIG_IGN);
			signal(SIGHUP, SIG_IGN);
			spank_report_run(conf.socket, pidfd, label, ids, n,
			    SPANK_REPORT_WAIT_MS);
		}
		_exit(0);
	}
	close(pidfd);
	if (a > 0)
		while (waitpid(a, NULL, 0) < 0 && errno == EINTR)
			;
}

/*
 * In each task, as the job's user, right before the user's program: the
 * settings through zeusd, from this very process, which then holds the
 * lease for as long as it (the user's program) runs.
 */
int
slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	unsigned ids[SPANK_GPUS_MAX];
	uint32_t job = 0, step = 0, task = 0;
	char label[48], why[SPANK_WHY_MAX], what[64], list[400];
	struct zeus_error e = { 0 };
	size_t n = 0;

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !(set.has_limit || set.has_gpu ||
	    set.has_mem))
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS) {
		fprintf(stderr, "zeus: %s: cannot read the job's ids\n",
		    conf.required ? "error" : "warning");
		return conf.required ? -1 : 0;
	}
	spank_step_label(label, sizeof(label), job, step);
	if (step_gpus(sp, step, ids, &n, why) != 0) {
		fprintf(stderr, "zeus: %s: %s: the step's GPUs are unknown "
		    "(%s); its GPU settings are not applied%s\n",
		    conf.required ? "error" : "warning", label, why,
		    conf.required ? " and it does not start" : "");
		return conf.required ? -1 : 0;
	}
	if (n == 0) {
		fprintf(stderr, "zeus: %s: %s: Slurm gave the step no GPUs "
		    "(--gpus or --gres=gpu gives it some); its --zeus-* "
		    "options are refused%s\n", conf.required ? "error" : "warning",
		    label, conf.required ? " and it does not start" : "");
		return conf.required ? -1 : 0;
	}
	gpus_text(list, sizeof(list), ids, n);
	if (task_apply(label, ids, n, what, &e) != 0) {
		fprintf(stderr, "zeus: %s: %s: %s on GPU %s through zeusd (%s) "
		    "failed: %s; %s\n", conf.required ? "error" : "warning",
		    label, what, list, conf.socket, e.message,
		    conf.required ? "the task does not start" :
		    "the job runs without the settings not applied");
		return conf.required ? -1 : 0;
	}
	if (task == 0)
		task_start_report(label, ids, n);
	return 0;
}

/*
 * In slurmstepd, as root, once the step's tasks are forked (they wait to
 * exec, no code of the user's ran yet): the step's GPUs, as Slurm gave
 * them, to zeusd. Once per step on the node. Never fails the step: a
 * zeusd that does not take it (none, one without the routes, a job not
 * tracked by cgroup) leaves its GPUs as any GPU no job holds, and says
 * why in slurmd's log.
 */
int
slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	unsigned ids[SPANK_GPUS_MAX];
	char why[SPANK_WHY_MAX], target[SPANK_STEP_TARGET_MAX], said[400];
	uint32_t job = 0, step = 0;
	uid_t uid = 0;
	size_t n = 0;

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || step_told.asked || geteuid() != 0)
		return 0;
	step_told.asked = true;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return 0;
	spank_step_label(step_told.label, sizeof(step_told.label), job, step);
	if (step_gpus(sp, step, ids, &n, why) != 0) {
		slurm_error("zeus: %s: the step's GPUs are unknown (%s); zeusd "
		    "is not told of them", step_told.label, why);
		return 0;
	}
	if (n == 0 || spank_step_target(target, sizeof(target), true, job,
	    step, uid, ids, n) != 0)
		return 0;
	switch (spank_step_tell(conf.socket, target, SPANK_STEP_WAIT_MS, said,
	    sizeof(said))) {
	case SPANK_STEP_DONE:
		step_told.told = true;
		step_told.job = job;
		step_told.step = step;
		break;
	case SPANK_STEP_NO_ZEUSD:
		break;
	case SPANK_STEP_REFUSED:
		slurm_error("zeus: %s: zeusd (%s) did not take the step's "
		    "GPUs: %s", step_told.label, conf.socket, said);
		break;
	}
	return 0;
}

/* In slurmstepd, as root, as it exits: the step ended. */
int
slurm_spank_exit(spank_t sp, int ac, char **av)
{
	char target[SPANK_STEP_TARGET_MAX], said[400];

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !step_told.told)
		return 0;
	step_told.told = false;
	if (spank_step_target(target, sizeof(target), false, step_told.job,
	    step_told.step, 0, NULL, 0) == 0 && spank_step_tell(conf.socket,
	    target, SPANK_STEP_WAIT_MS, said, sizeof(said)) ==
	    SPANK_STEP_REFUSED)
		slurm_error("zeus: %s: zeusd (%s) did not take the step's end: "
		    "%s", step_told.label, conf.socket, said);
	return 0;
}
