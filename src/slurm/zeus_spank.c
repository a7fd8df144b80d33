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
#include "zeus/client.h"

SPANK_PLUGIN(zeus, 1);

#define SPANK_ENV_MAX 1024	/* longest GPU list read from the env */
#define SPANK_REPORT_WAIT_MS 10000	/* for the ledger after the task */

_Static_assert(SPANK_GPUS_MAX == ZEUS_MAX_DEVICES,
    "a step's GPUs must fit libzeus's device lists");

static struct spank_conf conf;

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

/* The step's GPUs, as zeusd's indices: 0, or -1 with `why`. */
static int
task_gpus(spank_t sp, unsigned *ids, size_t *n, char *why)
{
	static const char *const vars[] = { "SLURM_STEP_GPUS",
	    "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES" };
	char v[SPANK_ENV_MAX], w[SPANK_WHY_MAX];

	*n = 0;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		spank_err_t rc = spank_getenv(sp, vars[i], v, sizeof(v));

		if (rc == ESPANK_ENV_NOEXIST)
			continue;
		if (rc != ESPANK_SUCCESS) {
			snprintf(why, SPANK_WHY_MAX, "%s cannot be read: %s",
			    vars[i], spank_strerror(rc));
			return -1;
		}
		if (spank_parse_gpus(v, ids, n, w) != 0) {
			snprintf(why, SPANK_WHY_MAX, "%s: %.120s", vars[i], w);
			return -1;
		}
		return 0;
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
	if (task_gpus(sp, ids, &n, why) != 0) {
		fprintf(stderr, "zeus: %s: %s: the step's GPUs are unknown "
		    "(%s); its GPU settings are not applied%s\n",
		    conf.required ? "error" : "warning", label, why,
		    conf.required ? " and it does not start" : "");
		return conf.required ? -1 : 0;
	}
	if (n == 0) {
		fprintf(stderr, "zeus: warning: %s: the step has no GPUs; its "
		    "--zeus-* options do nothing\n", label);
		return 0;
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
