/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_proc.c - the device process of a split daemon (device_proc.h):
 * the parent of the fork, which keeps root and the devices.
 *
 * It answers the network process's device requests (privsep/device.c, one
 * thread per channel, psexec running each checked request on the real
 * backend), runs the RAPL keepalive, starts the janitor, and runs the
 * signal loop (signals.h): SIGHUP re-reads the key, the overrides, the
 * policy and the audit log here and passes what the network process needs
 * over the control channel (device_reload; the files' own re-reading is
 * reload.c's); SIGCHLD from the network process stops the daemon; SIGTERM
 * stops the network process gracefully first. Its control thread passes
 * the network process's systemd notifications on, as texts of its own
 * (the network process names a kind, control.h), and logs the results of
 * the reloads it sent.
 */
#include "zeusd/device_proc.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "access/auth.h"
#include "access/policy.h"
#include "access/warden.h"
#include "common/log.h"
#include "devices/rapl.h"
#include "node/groups.h"
#include "overrides/reaper.h"
#include "privsep/control.h"
#include "privsep/device.h"
#include "privsep/exec.h"
#include "privsep/remote_gpu.h"
#include "zeusd/janitor.h"
#include "zeusd/listen.h"
#include "zeusd/logrelay.h"
#include "zeusd/notify.h"
#include "zeusd/reload.h"
#include "zeusd/signals.h"

/*
 * After SIGTERM, how long the network process may take to stop: its own
 * grace for requests, for a stuck device command and for restoring
 * leased GPUs (network_proc.c, main.c), and a margin.
 */
#define SPLIT_STOP_MS (5000 + 30000 + 10000 + 5000)
#define SPLIT_DEVICE_STOP_MS 5000

static struct {
	int ctl;			/* our end of the control channel */
	pid_t net;			/* the network process */
	const struct zeusd_config *cfg;	/* for SIGHUP and STATUS= */
	int wstatus;			/* the network process's, once reaped */
	struct warden *warden;		/* decides every write */
	struct policy_holder *policy;	/* the warden's; NULL: none */
	struct auth_key *key;		/* the signing key: ours alone */
	pthread_mutex_t reload_lock;
	int reload_failed;		/* this side's failures of the last */
	unsigned reloads_sent;		/* PSCTL_RELOADs not yet answered */
	/* the control thread's */
	bool ready;			/* the network process's READY came */
	/* with cfg: what the STATUS= line at READY says (device_notify) */
	const struct server *srv;
	const struct node *node;
	char where[300];
} dev = { .ctl = -1, .reload_lock = PTHREAD_MUTEX_INITIALIZER };

/* psexec's RAPL read: the device process's own core, which tracks wraps. */
static int
device_rapl_read(void *ctx, unsigned pkg, uint64_t *cpu_uj, uint64_t *dram_uj,
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
device_refused(void *arg)
{
	(void)arg;
}

static void
device_kill_network(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "network_process_killed", "pid=%d reason=%s",
	    (int)dev.net, zlog_quote(q, sizeof(q), why));
	(void)kill(dev.net, SIGKILL);
}

/*
 * The network process's address for STATUS=, as listen_describe has it
 * ("unix:/run/zeusd/zeusd.sock", "tcp:127.0.0.1:4938").
 */
static void
device_describe_listen(const struct split_ends *ends)
{
	const struct sockaddr_un *un = (const void *)ends->listen_name;
	const char *path = listen_socket_path();

	snprintf(dev.where, sizeof(dev.where), "?");
	if (ends->listen_name_len <= offsetof(struct sockaddr_un, sun_path))
		return;
	if (un->sun_family != AF_UNIX)
		listen_format_inet(ends->listen_name, dev.where,
		    sizeof(dev.where));
	else if (path != NULL)
		snprintf(dev.where, sizeof(dev.where), "unix:%s", path);
	else
		snprintf(dev.where, sizeof(dev.where), "unix:%.*s",
		    (int)sizeof(un->sun_path), un->sun_path);
}

/*
 * A state the network process asked to pass on (control.h): the datagram
 * and its status line are this process's own texts. 0, or -1 with `why`
 * for a READY after the first (the network process sends one).
 */
static int
device_notify(enum psctl_notify kind, char *why, size_t whysz)
{
	char groups[80];

	switch (kind) {
	case PSCTL_N_READY:
		if (dev.ready) {
			snprintf(why, whysz, "a second READY notification");
			return -1;
		}
		dev.ready = true;
		group_set_format(dev.cfg->enabled, groups, sizeof(groups));
		notify_send("READY=1");
		notify_status("Serving %s: %u GPUs, %u CPUs, groups %s, auth %s",
		    dev.where, dev.node->ngpu, dev.node->ncpu, groups,
		    dev.srv->ctx.auth ? "on" : "off");
		return 0;
	case PSCTL_N_WATCHDOG:
		notify_send("WATCHDOG=1");
		return 0;
	case PSCTL_N_STOPPING:
		notify_send("STOPPING=1");
		return 0;
	}
	snprintf(why, whysz, "notification of kind %u", (unsigned)kind);
	return -1;
}

/*
 * A reload's result: logged and told systemd only when it answers a reload
 * this process sent (device_reload); its count of failures is checked
 * (control.c). 0, or -1 with `why`.
 */
static int
device_reloaded(uint32_t failed, char *why, size_t whysz)
{
	int rc;

	pthread_mutex_lock(&dev.reload_lock);
	if (dev.reloads_sent == 0) {
		pthread_mutex_unlock(&dev.reload_lock);
		snprintf(why, whysz, "a reload result without a reload");
		return -1;
	}
	dev.reloads_sent--;
	rc = dev.reload_failed + (int)failed;
	pthread_mutex_unlock(&dev.reload_lock);
	zlog(ZLOG_INFO, "reloaded", "failed=%d msg=\"only the signing "
	    "key, the GPU command overrides and the node policy are "
	    "re-read, and the audit log reopened; other changes need a "
	    "restart\"", rc);
	notify_send("READY=1");
	notify_status("Reloaded%s", rc > 0 ? " (some parts failed, "
	    "see the log)" : "");
	return 0;
}

/* The device process's control thread: notifications and reload results. */
static void *
device_ctl_main(void *arg)
{
	static struct psctl_msg m;
	int fds[PSCTL_MAX_FDS];
	unsigned nfds;
	char why[128];
	int rc;

	(void)arg;
	for (;;) {
		rc = psctl_recv(dev.ctl, &m, fds, &nfds, why, sizeof(why));
		if (rc == 0)
			return NULL;	/* the network process ended: SIGCHLD */
		if (rc > 0 && psctl_check_from_network(&m, nfds, why,
		    sizeof(why)) == 0)
			rc = m.type == PSCTL_NOTIFY ? device_notify(
			    (enum psctl_notify)m.value, why, sizeof(why)) :
			    device_reloaded(m.value, why, sizeof(why));
		else
			rc = -1;
		if (rc != 0) {
			for (unsigned i = 0; i < nfds; i++)
				close(fds[i]);
			device_kill_network(why);
			return NULL;
		}
	}
	return NULL;
}

static void
device_reload(const struct zeusd_config *cfg, struct node *node)
{
	int fds[RELOAD_NFDS], send[RELOAD_NFDS];
	unsigned nsend = 0;
	struct gpu_backend b = node->gpu;
	static struct psctl_msg m;
	bool key_changed;
	int failed;

	notify_send("RELOADING=1");
	notify_status("Reloading the signing key, overrides and policy");
	failed = reload_device(cfg, node, dev.policy, dev.key, &key_changed,
	    fds);
	if (key_changed)
		warden_key_reloaded(dev.warden);
	memset(&m, 0, sizeof(m));
	m.magic = PSCTL_MAGIC;
	m.type = PSCTL_RELOAD;
	m.value = node->overrides;
	if (key_changed)
		m.flags |= PSCTL_KEY_CHANGED;
	if (b.ops != NULL)
		psgpu_lacks_of(&b, &m.lacks);
	for (unsigned i = 0; i < RELOAD_NFDS; i++)
		if (fds[i] >= 0) {
			m.flags |= 1u << i;	/* PSCTL_FD_* follow RELOAD_FD_* */
			send[nsend++] = fds[i];
		}
	/* counted before it goes: the answer may come before we return */
	pthread_mutex_lock(&dev.reload_lock);
	dev.reload_failed = failed;
	dev.reloads_sent++;
	pthread_mutex_unlock(&dev.reload_lock);
	if (psctl_send(dev.ctl, &m, send, nsend) != 0) {
		zlog(ZLOG_WARN, "reload_not_sent", "error=\"%s\"",
		    strerror(errno));
		pthread_mutex_lock(&dev.reload_lock);
		dev.reloads_sent--;
		pthread_mutex_unlock(&dev.reload_lock);
	}
	for (unsigned i = 0; i < nsend; i++)
		close(send[i]);
}

/* Waits for the network process to end (or kills it at the deadline). */
static int
device_wait_network(const sigset_t *sigs, int timeout_ms, int *wstatus)
{
	struct timespec ts = { .tv_sec = timeout_ms / 1000,
	    .tv_nsec = (long)(timeout_ms % 1000) * 1000000L };
	struct timespec until, now;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ts.tv_sec;
	for (;;) {
		pid_t p = waitpid(dev.net, wstatus, WNOHANG);

		if (p == dev.net)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec &&
		    now.tv_nsec >= until.tv_nsec))
			break;
		ts.tv_sec = 0;
		ts.tv_nsec = 100000000L;	/* SIGCHLD wakes us sooner */
		(void)sigtimedwait(sigs, NULL, &ts);
	}
	device_kill_network("did not stop in time");
	(void)waitpid(dev.net, wstatus, 0);
	return -1;
}

static void
device_describe_exit(int wstatus, char *buf, size_t size)
{
	if (WIFEXITED(wstatus))
		snprintf(buf, size, "exit=%d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(buf, size, "signal=%d", WTERMSIG(wstatus));
	else
		snprintf(buf, size, "status=%d", wstatus);
}

/* SIGCHLD: an override command ended, or the network process died. */
static bool
device_child(void *arg)
{
	char how[48];

	(void)arg;
	if (waitpid(dev.net, &dev.wstatus, WNOHANG) != dev.net)
		return false;	/* an override command */
	device_describe_exit(dev.wstatus, how, sizeof(how));
	zlog(ZLOG_ERROR, "network_process_died", "pid=%d %s "
	    "msg=\"zeusd stops\"", (int)dev.net, how);
	notify_send("STOPPING=1");
	return true;
}

static void
device_reload_signal(void *arg)
{
	device_reload(dev.cfg, arg);
}

/* The signal loop, then the stop; the process's exit status. */
static int
device_loop(const struct zeusd_config *cfg, struct node *node,
    const sigset_t *sigs)
{
	struct signals_handlers h = { .reload = device_reload_signal,
	    .child = device_child, .ctx = node };
	char how[48];
	int sig, wstatus = 0;

	if ((sig = signals_loop(sigs, &h)) == SIGCHLD)
		return 1;
	notify_stopping(sig);
	/*
	 * Override commands first, as in one process (network_proc.c): a
	 * request blocked in one gets its (failed) answer at once instead of
	 * holding the network process's graceful stop, and no new command
	 * starts.
	 */
	(void)reaper_shutdown(REAPER_GRACE_MS);
	if (cfg->restore_on_shutdown)
		warden_stopping(dev.warden);	/* leases' restores may run */
	(void)kill(dev.net, SIGTERM);
	if (device_wait_network(sigs, SPLIT_STOP_MS, &wstatus) != 0)
		return 1;
	if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
		device_describe_exit(wstatus, how, sizeof(how));
		zlog(ZLOG_ERROR, "network_process_failed", "pid=%d %s",
		    (int)dev.net, how);
		return 1;
	}
	return 0;
}

/* The device process cannot start: the network process goes too. */
static void
device_failed(const struct zerr *err, int *status)
{
	char q[ZERR_MSG_MAX + 8];

	zlog(ZLOG_ERROR, "device_process_failed", "error=%s",
	    zlog_quote(q, sizeof(q), err->msg));
	(void)kill(dev.net, SIGKILL);
	(void)waitpid(dev.net, NULL, 0);
	*status = 1;
}

void
device_proc_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, const struct split_ends *ends, const sigset_t *sigs,
    int *status)
{
	const int *peer = ends->peer;
	unsigned nchan = ends->nchan;

	struct psmsg_limits lim = { .ngpu = node->ngpu, .npkg = node->ncpu };
	struct psexec x = { .gpu = &node->gpu, .ngpu = node->ngpu,
	    .npkg = node->ncpu, .rapl_read = device_rapl_read,
	    .rapl_ctx = node->rapl, .net = ends->net };
	struct warden_config wc = { .ngpu = node->ngpu,
	    .enabled = cfg->enabled, .unix_transport = cfg->mode == MODE_UDS,
	    .tcp_transport = cfg->mode == MODE_TCP, .leases = cfg->gpu_leases,
	    .audit_required = cfg->audit_required,
	    .policy = srv->ctx.policy, .net = ends->net,
	    .state_dir = cfg->state_dir };
	struct psexec_guard guard;
	struct logrelay *relay = NULL;
	struct psdev *ps = NULL;
	const struct sockaddr_un *un = (const void *)ends->listen_name;
	struct zerr err;
	pthread_t t;
	bool ctl_started;

	dev.net = ends->net;
	dev.ctl = ends->ctl;
	dev.cfg = cfg;
	dev.srv = srv;
	dev.node = node;
	device_describe_listen(ends);
	if (ends->listen_name_len > offsetof(struct sockaddr_un, sun_path) &&
	    un->sun_family == AF_UNIX)
		memcpy(wc.listen_path, un->sun_path, sizeof(wc.listen_path) <
		    sizeof(un->sun_path) ? sizeof(wc.listen_path) :
		    sizeof(un->sun_path));

	/* the key and the policy are the warden's (the network process
	 * wipes its copy of the key and asks here) */
	dev.key = srv->ctx.key;
	srv->ctx.key = NULL;
	wc.key = dev.key;
	dev.policy = srv->ctx.policy;
	srv->ctx.policy = NULL;
	if (warden_create(&wc, &dev.warden, &err) != 0) {
		close(ends->log_fd);
		device_failed(&err, status);
		return;
	}
	/* before any request: the journal's leases are taken back */
	(void)warden_recover(dev.warden, &node->gpu);
	warden_guard(dev.warden, &guard);
	x.guard = &guard;
	(void)reaper_spare(dev.net);	/* the first of two: cannot fail */
	/*
	 * Forks, so before any thread of ours; after the network process, so
	 * that it never holds the janitor's pipe (and stays our first child,
	 * which is how tools tell it from the janitor). Should the janitor not
	 * start, we stop: a daemon SIGKILLed without one would leave its
	 * socket file behind, which is what it is there for.
	 */
	if (janitor_start(&err) != 0) {
		close(ends->log_fd);
		device_failed(&err, status);
		return;
	}
	/*
	 * Wrap tracking is ours (the network process's RAPL core passes our
	 * totals through), so the keepalive that feeds it runs here: an idle
	 * pass wakes this process only. A thread, so after the janitor's fork.
	 */
	if (logrelay_start(ends->log_fd, &relay, &err) != 0) {
		device_failed(&err, status);
		return;
	}
	if (node->ncpu > 0 && rapl_start_keepalive(node->rapl, 0, &err) != 0) {
		device_failed(&err, status);
		return;
	}
	for (unsigned i = 0; i < node->ncpu; i++)
		if (rapl_has_dram(node->rapl, i)) {
			lim.dram_mask |= 1ull << i;
			x.dram_mask |= 1ull << i;
		}
	if (psdev_start(&x, &lim, peer, nchan, dev.net, device_refused, NULL,
	    &ps, &err) != 0) {
		device_failed(&err, status);
		return;
	}
	ctl_started = pthread_create(&t, NULL, device_ctl_main, NULL) == 0;
	zlog(ZLOG_INFO, "device_process", "pid=%d network_pid=%d channels=%u",
	    (int)getpid(), (int)dev.net, nchan);
	*status = device_loop(cfg, node, sigs);
	(void)kill(dev.net, SIGKILL);	/* no-op when it has exited */
	(void)waitpid(dev.net, NULL, WNOHANG);
	reaper_unspare(dev.net);	/* the last sweep reaps it if need be */
	shutdown(dev.ctl, SHUT_RDWR);
	if (ctl_started)
		pthread_join(t, NULL);
	if (psdev_stop(ps, SPLIT_DEVICE_STOP_MS) != 0) {
		/* a driver call never returned: leave the devices as they are */
		zlog(ZLOG_ERROR, "device_command_stuck", "msg=\"leaving "
		    "without closing the devices\"");
		(void)reaper_shutdown(REAPER_GRACE_MS);
		(void)listen_remove_socket();
		janitor_stop();
		_exit(1);
	}
	close(dev.ctl);
	logrelay_stop(relay, SPLIT_DEVICE_STOP_MS);	/* its last lines */
	warden_destroy(dev.warden);
	policy_holder_free(dev.policy);
	auth_key_free(dev.key);
}
