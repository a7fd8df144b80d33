/* SPDX-License-Identifier: Apache-2.0 */
/*
 * split.c - zeusd as a device process and a network process (see split.h).
 */
#include "split.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/procstat.h"
#include "devices/rapl.h"
#include "overrides/reaper.h"
#include "privsep/chan.h"
#include "privsep/control.h"
#include "privsep/device.h"
#include "privsep/exec.h"
#include "privsep/remote_gpu.h"
#include "privsep/sandbox.h"
#include "audit.h"
#include "auth.h"
#include "janitor.h"
#include "listen.h"
#include "notify.h"
#include "policy.h"
#include "reload.h"

/*
 * Channels: one per network-side thread that may call the device process
 * at the same time: a worker per GPU and per package, the GPU power
 * reader, the CPU energy reader, the stream sampler and the HTTP thread
 * (PSMSG_PROC for /metrics, PSMSG_PEER at a Unix connection's first
 * request); one more so a burst never waits for one; and one each that
 * the two readers keep for the batches answered on the HTTP loop
 * (remote_read.h; their threads still run the batches that come back to
 * them). (The RAPL keepalive runs in the device process, next to the
 * counters.)
 */
#define SPLIT_SHARED_CHANNELS 7
/*
 * After SIGTERM, how long the network process may take to stop: its own
 * grace for requests, for a stuck device command and for restoring
 * leased GPUs (main.c), and a margin.
 */
#define SPLIT_STOP_MS (5000 + 30000 + 10000 + 5000)
#define SPLIT_DEVICE_STOP_MS 5000

static struct {
	int ctl;			/* our end of the control channel */
	pid_t net;			/* device process: the network process */
	/* network process */
	const struct zeusd_config *cfg;
	struct server *srv;
	struct node *node;
	struct node dev;		/* the device node as forked: kept
					 * reachable, never used or closed */
	struct pschan_pool *pool;	/* reachable too: lives to the exit */
	/* device process */
	pthread_mutex_t reload_lock;
	int reload_failed;		/* this side's failures of the last */
	const char *status_where;
} split = { .ctl = -1, .reload_lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- The network process -------------------------------------------------- */

static void
split_relay(const char *state)
{
	struct psctl_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = PSCTL_MAGIC;
	m.type = PSCTL_NOTIFY;
	snprintf(m.text, sizeof(m.text), "%s", state);
	(void)psctl_send(split.ctl, &m, NULL, 0);
}

static _Noreturn void
split_parent_gone(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "device_process_gone", "reason=%s msg=\"the device "
	    "process is gone; the network process stops\"",
	    zlog_quote(q, sizeof(q), why));
	_exit(1);
}

/* Applies a reload the device process sent. */
static void
split_apply_reload(const struct psctl_msg *m, const int *got, unsigned ngot)
{
	int fds[RELOAD_NFDS] = { -1, -1, -1 };
	unsigned k = 0;
	struct psctl_msg r;

	/* fds come in flag-bit order */
	if ((m->flags & PSCTL_FD_KEY) && k < ngot)
		fds[RELOAD_FD_KEY] = got[k++];
	if ((m->flags & PSCTL_FD_POLICY) && k < ngot)
		fds[RELOAD_FD_POLICY] = got[k++];
	if ((m->flags & PSCTL_FD_AUDIT) && k < ngot)
		fds[RELOAD_FD_AUDIT] = got[k++];
	while (k < ngot)
		close(got[k++]);
	memset(&r, 0, sizeof(r));
	r.magic = PSCTL_MAGIC;
	r.type = PSCTL_RELOADED;
	r.value = (uint32_t)reload_network(split.cfg, split.srv, fds);
	if (fds[RELOAD_FD_KEY] >= 0)
		close(fds[RELOAD_FD_KEY]);
	if (fds[RELOAD_FD_POLICY] >= 0)
		close(fds[RELOAD_FD_POLICY]);
	if (split.node->gpu.ops != NULL)
		psgpu_set_lacks(&split.node->gpu, &m->lacks);
	split.node->overrides = m->value;
	(void)psctl_send(split.ctl, &r, NULL, 0);
}

/* The network process's control thread: reloads, and the parent's end. */
static void *
split_net_ctl_main(void *arg)
{
	static struct psctl_msg m;	/* 2 KiB: not on a thread's stack */
	int fds[PSCTL_MAX_FDS];
	unsigned nfds;
	char why[128];
	int rc;

	(void)arg;
	for (;;) {
		rc = psctl_recv(split.ctl, &m, fds, &nfds, why, sizeof(why));
		if (rc == 0)
			split_parent_gone("end of file on the control channel");
		if (rc < 0)
			split_parent_gone(why);
		if (m.type != PSCTL_RELOAD) {
			for (unsigned i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		split_apply_reload(&m, fds, nfds);
	}
	return NULL;
}

static _Noreturn void
split_child_fail(const char *what, const struct zerr *err)
{
	char q[2 * ZERR_MSG_MAX];

	zlog(ZLOG_ERROR, "network_process_failed", "step=%s error=%s", what,
	    zlog_quote(q, sizeof(q), err->msg));
	_exit(1);
}

static void
split_become_network(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, struct pschan_pool *pool, int listen_fd,
    const struct sandbox_user *user)
{
	int keep[PSMSG_MAX_GPUS + PSMSG_MAX_PKGS + 16];
	unsigned nkeep = 0;
	struct zerr err;
	bool dropped = false, chrooted = false;

	keep[nkeep++] = 0;
	keep[nkeep++] = 1;
	keep[nkeep++] = 2;
	keep[nkeep++] = listen_fd;
	keep[nkeep++] = split.ctl;
	if (audit_fileno() >= 0)
		keep[nkeep++] = audit_fileno();
	for (unsigned i = 0; i < pschan_pool_size(pool); i++)
		keep[nkeep++] = pschan_pool_fd(pool, i);
	/*
	 * Every other fd goes: the device files, RAPL counters, the key,
	 * anything a driver library opened. A memory image of the device
	 * side remains (fork copies it), but nothing to reach a device
	 * through.
	 */
	if (fileio_close_all_but(keep, nkeep) != 0) {
		zerr_set(&err, ZERR_INTERNAL, "cannot list /proc/self/fd");
		split_child_fail("close_fds", &err);
	}
	reaper_disable();		/* no commands run here */
	listen_forget_socket();		/* the device process removes it */
	notify_relay_to(split_relay);
	split.cfg = cfg;
	split.srv = srv;
	split.dev = *node;
	split.pool = pool;
	if (node_open_remote(node, &split.dev, pool, &err) != 0)
		split_child_fail("devices", &err);
	split.node = node;
	/*
	 * What is read from files later is opened now: /proc/self for
	 * /metrics, and jansson's hash seed (/dev/urandom on the first JSON
	 * object, unless the device side drew it before the fork).
	 */
	if (procstat_keep() != 0)
		zlog(ZLOG_WARN, "procstat_not_kept", "error=\"%s\" "
		    "msg=\"/metrics will lack this process's figures\"",
		    strerror(errno));
	json_object_seed(0);
	if (sandbox_lose_fs(&chrooted, &err) != 0)
		split_child_fail("chroot", &err);
	if (user != NULL && sandbox_drop(user, &dropped, &err) != 0)
		split_child_fail("drop", &err);
	if (sandbox_seccomp(&err) != 0)
		split_child_fail("seccomp", &err);
	if (user != NULL)
		zlog(ZLOG_INFO, "network_process", "pid=%d user=%s uid=%u "
		    "gid=%u chroot=%s seccomp=on", (int)getpid(), user->name,
		    (unsigned)user->uid, (unsigned)user->gid,
		    chrooted ? "on" : "off");
	else
		zlog(ZLOG_WARN, "network_process_not_dropped", "pid=%d uid=%u "
		    "seccomp=on msg=\"zeusd does not run as root: the network "
		    "process keeps this user\"", (int)getpid(),
		    (unsigned)getuid());
}

void
split_network_serving(void)
{
	struct zerr err;
	pthread_t t;

	if (pthread_create(&t, NULL, split_net_ctl_main, NULL) != 0) {
		zerr_set(&err, ZERR_INTERNAL, "cannot start a thread");
		split_child_fail("control", &err);
	}
	pthread_detach(t);
}

/* ---- The device process --------------------------------------------------- */

/* psexec's RAPL read: the device process's own core, which tracks wraps. */
static int
split_rapl_read(void *ctx, unsigned pkg, uint64_t *cpu_uj, uint64_t *dram_uj,
    uint64_t *mono_ns, struct zerr *err)
{
	struct rapl_sample s;

	if (rapl_sample(ctx, pkg, &s, err) != 0)
		return -1;
	*cpu_uj = s.cpu_uj;
	if (dram_uj != NULL)
		*dram_uj = s.dram_uj;
	*mono_ns = s.mono_ns;
	return 0;
}

/* A refused request: psdev already killed the network process. */
static void
split_refused(void *arg)
{
	(void)arg;
}

static void
split_kill_network(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "network_process_killed", "pid=%d reason=%s",
	    (int)split.net, zlog_quote(q, sizeof(q), why));
	(void)kill(split.net, SIGKILL);
}

/* The device process's control thread: notifications and reload results. */
static void *
split_dev_ctl_main(void *arg)
{
	static struct psctl_msg m;
	int fds[PSCTL_MAX_FDS];
	unsigned nfds;
	char why[128];
	int rc;

	(void)arg;
	for (;;) {
		rc = psctl_recv(split.ctl, &m, fds, &nfds, why, sizeof(why));
		if (rc == 0)
			return NULL;	/* the network process ended: SIGCHLD */
		if (rc < 0 || psctl_check_from_network(&m, nfds, why,
		    sizeof(why)) != 0) {
			for (unsigned i = 0; i < nfds; i++)
				close(fds[i]);
			split_kill_network(why);
			return NULL;
		}
		if (m.type == PSCTL_NOTIFY) {
			notify_send(m.text);
			continue;
		}
		/* PSCTL_RELOADED */
		pthread_mutex_lock(&split.reload_lock);
		rc = split.reload_failed + (int)(m.value > 16 ? 16 : m.value);
		pthread_mutex_unlock(&split.reload_lock);
		zlog(ZLOG_INFO, "reloaded", "failed=%d msg=\"only the signing "
		    "key, the GPU command overrides and the node policy are "
		    "re-read, and the audit log reopened; other changes need a "
		    "restart\"", rc);
		notify_send("READY=1");
		notify_status("Reloaded%s", rc > 0 ? " (some parts failed, "
		    "see the log)" : "");
	}
	return NULL;
}

static void
split_reload(const struct zeusd_config *cfg, struct node *node)
{
	int fds[RELOAD_NFDS], send[RELOAD_NFDS];
	unsigned nsend = 0;
	struct gpu_backend b = node->gpu;
	static struct psctl_msg m;
	int failed;

	notify_send("RELOADING=1");
	notify_status("Reloading the signing key, overrides and policy");
	failed = reload_device(cfg, node, fds);
	memset(&m, 0, sizeof(m));
	m.magic = PSCTL_MAGIC;
	m.type = PSCTL_RELOAD;
	m.value = node->overrides;
	if (b.ops != NULL)
		psgpu_lacks_of(&b, &m.lacks);
	for (unsigned i = 0; i < RELOAD_NFDS; i++)
		if (fds[i] >= 0) {
			m.flags |= 1u << i;	/* PSCTL_FD_* follow RELOAD_FD_* */
			send[nsend++] = fds[i];
		}
	pthread_mutex_lock(&split.reload_lock);
	split.reload_failed = failed;
	pthread_mutex_unlock(&split.reload_lock);
	if (psctl_send(split.ctl, &m, send, nsend) != 0)
		zlog(ZLOG_WARN, "reload_not_sent", "error=\"%s\"",
		    strerror(errno));
	for (unsigned i = 0; i < nsend; i++)
		close(send[i]);
}

/* Waits for the network process to end (or kills it at the deadline). */
static int
split_wait_network(const sigset_t *sigs, int timeout_ms, int *wstatus)
{
	struct timespec ts = { .tv_sec = timeout_ms / 1000,
	    .tv_nsec = (long)(timeout_ms % 1000) * 1000000L };
	struct timespec until, now;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ts.tv_sec;
	for (;;) {
		pid_t p = waitpid(split.net, wstatus, WNOHANG);

		if (p == split.net)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec &&
		    now.tv_nsec >= until.tv_nsec))
			break;
		ts.tv_sec = 0;
		ts.tv_nsec = 100000000L;	/* SIGCHLD wakes us sooner */
		(void)sigtimedwait(sigs, NULL, &ts);
	}
	split_kill_network("did not stop in time");
	(void)waitpid(split.net, wstatus, 0);
	return -1;
}

static void
split_describe_exit(int wstatus, char *buf, size_t size)
{
	if (WIFEXITED(wstatus))
		snprintf(buf, size, "exit=%d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(buf, size, "signal=%d", WTERMSIG(wstatus));
	else
		snprintf(buf, size, "status=%d", wstatus);
}

static int
split_device_loop(const struct zeusd_config *cfg, struct node *node,
    const sigset_t *sigs)
{
	char how[48];
	int sig, wstatus = 0;

	for (;;) {
		if (sigwait(sigs, &sig) != 0)
			continue;
		if (sig == SIGCHLD) {
			if (waitpid(split.net, &wstatus, WNOHANG) != split.net)
				continue;	/* an override command */
			split_describe_exit(wstatus, how, sizeof(how));
			zlog(ZLOG_ERROR, "network_process_died", "pid=%d %s "
			    "msg=\"zeusd stops\"", (int)split.net, how);
			notify_send("STOPPING=1");
			return 1;
		}
		if (sig == SIGHUP) {
			split_reload(cfg, node);
			continue;
		}
		if (sig == SIGUSR1 || sig == SIGUSR2) {
			zlog(ZLOG_INFO, "signal_ignored", "signal=%s",
			    sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
			continue;
		}
		break;
	}
	notify_stopping(sig);
	/*
	 * Override commands first, as in one process (main.c): a request
	 * blocked in one gets its (failed) answer at once instead of holding
	 * the network process's graceful stop, and no new command starts.
	 */
	(void)reaper_shutdown(REAPER_GRACE_MS);
	(void)kill(split.net, SIGTERM);
	if (split_wait_network(sigs, SPLIT_STOP_MS, &wstatus) != 0)
		return 1;
	if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
		split_describe_exit(wstatus, how, sizeof(how));
		zlog(ZLOG_ERROR, "network_process_failed", "pid=%d %s",
		    (int)split.net, how);
		return 1;
	}
	return 0;
}

/* The device process cannot start: the network process goes too. */
static void
split_device_failed(const struct zerr *err, int *status)
{
	char q[ZERR_MSG_MAX + 8];

	zlog(ZLOG_ERROR, "device_process_failed", "error=%s",
	    zlog_quote(q, sizeof(q), err->msg));
	(void)kill(split.net, SIGKILL);
	(void)waitpid(split.net, NULL, 0);
	*status = 1;
}

static void
split_become_device(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, const int *peer, unsigned nchan, const sigset_t *sigs,
    int *status)
{
	struct psmsg_limits lim = { .ngpu = node->ngpu, .npkg = node->ncpu };
	struct psexec x = { .gpu = &node->gpu, .ngpu = node->ngpu,
	    .npkg = node->ncpu, .rapl_read = split_rapl_read,
	    .rapl_ctx = node->rapl, .net = split.net };
	struct psdev *dev = NULL;
	struct zerr err;
	pthread_t t;
	bool ctl_started;

	/* the network process holds these now: ours go */
	auth_key_free(srv->key);
	srv->key = NULL;
	policy_holder_free(srv->policy);
	srv->policy = NULL;
	(void)reaper_spare(split.net);	/* the first of two: cannot fail */
	/*
	 * Forks, so before any thread of ours; after the network process, so
	 * that it never holds the janitor's pipe (and stays our first child,
	 * which is how tools tell it from the janitor). Should the janitor not
	 * start, we stop: a daemon SIGKILLed without one would leave its
	 * socket file behind, which is what it is there for.
	 */
	if (janitor_start(&err) != 0) {
		split_device_failed(&err, status);
		return;
	}
	/*
	 * Wrap tracking is ours (the network process's RAPL core passes our
	 * totals through), so the keepalive that feeds it runs here: an idle
	 * pass wakes this process only. A thread, so after the janitor's fork.
	 */
	if (node->ncpu > 0 && rapl_start_keepalive(node->rapl, 0, &err) != 0) {
		split_device_failed(&err, status);
		return;
	}
	for (unsigned i = 0; i < node->ncpu; i++)
		if (rapl_has_dram(node->rapl, i)) {
			lim.dram_mask |= 1ull << i;
			x.dram_mask |= 1ull << i;
		}
	if (psdev_start(&x, &lim, peer, nchan, split.net, split_refused, NULL,
	    &dev, &err) != 0) {
		split_device_failed(&err, status);
		return;
	}
	ctl_started = pthread_create(&t, NULL, split_dev_ctl_main, NULL) == 0;
	zlog(ZLOG_INFO, "device_process", "pid=%d network_pid=%d channels=%u",
	    (int)getpid(), (int)split.net, nchan);
	*status = split_device_loop(cfg, node, sigs);
	(void)kill(split.net, SIGKILL);	/* no-op when it has exited */
	(void)waitpid(split.net, NULL, WNOHANG);
	reaper_unspare(split.net);	/* the last sweep reaps it if need be */
	shutdown(split.ctl, SHUT_RDWR);
	if (ctl_started)
		pthread_join(t, NULL);
	if (psdev_stop(dev, SPLIT_DEVICE_STOP_MS) != 0) {
		/* a driver call never returned: leave the devices as they are */
		zlog(ZLOG_ERROR, "device_command_stuck", "msg=\"leaving "
		    "without closing the devices\"");
		(void)reaper_shutdown(REAPER_GRACE_MS);
		(void)listen_remove_socket();
		janitor_stop();
		_exit(1);
	}
	close(split.ctl);
}

int
split_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int listen_fd, int *status, struct zerr *err)
{
	unsigned nchan = node->ngpu + node->ncpu + SPLIT_SHARED_CHANNELS;
	struct sandbox_user user, *u = NULL;
	struct pschan_pool *pool;
	sigset_t sigs;
	int ctl[2], *peer;
	pid_t pid;

	if (node->ngpu > PSMSG_MAX_GPUS || node->ncpu > PSMSG_MAX_PKGS)
		return zerr_set(err, ZERR_INVALID, "%u GPUs and %u RAPL "
		    "packages: privilege separation handles at most %d of "
		    "each; run with --no-privsep", node->ngpu, node->ncpu,
		    PSMSG_MAX_GPUS);
	if (geteuid() == 0) {
		if (sandbox_resolve_user(cfg->user, &user, err) != 0)
			return -1;
		u = &user;
		/*
		 * Non-dumpable stops ptrace, not signals or prlimit: every
		 * process of a shared user may kill, stop or starve ours
		 * (docs/security.md).
		 */
		if (strcmp(user.name, "nobody") == 0)
			zlog(ZLOG_WARN, "network_process_user_shared", "user=%s "
			    "uid=%u msg=\"any process of this user can kill, "
			    "stop or starve the network process; create a "
			    "'zeusd' system user or name one with --user\"",
			    user.name, (unsigned)user.uid);
	}
	if ((peer = calloc(nchan, sizeof(*peer))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	if (pschan_pool_create(nchan, &pool, peer, err) != 0) {
		free(peer);
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
		pschan_pool_destroy(pool);
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		return zerr_set(err, ZERR_INTERNAL, "socketpair: %s",
		    strerror(errno));
	}
	/* before the fork: no SIGCHLD of the network process is lost */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		int e = errno;

		pschan_pool_destroy(pool);
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		close(ctl[0]);
		close(ctl[1]);
		return zerr_set(err, ZERR_INTERNAL, "fork: %s", strerror(e));
	}
	if (pid == 0) {
		split.ctl = ctl[1];
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		close(ctl[0]);
		split_become_network(cfg, srv, node, pool, listen_fd, u);
		return 0;
	}
	split.net = pid;
	split.ctl = ctl[0];
	close(ctl[1]);
	close(listen_fd);
	pschan_pool_destroy(pool);	/* the network process has its ends */
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	split_become_device(cfg, srv, node, peer, nchan, &sigs, status);
	free(peer);
	/*
	 * The socket file now, before the janitor hears the end (main.c's
	 * removal after us then finds nothing to do): the janitor only acts
	 * when the file is still there, which would log that it was left.
	 */
	(void)listen_remove_socket();
	janitor_stop();
	return 1;
}
