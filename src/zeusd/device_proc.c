/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_proc.c - zeusd's device process (device_proc.h): the whole life
 * of the process `zeusd serve` starts, the PID systemd knows, from the end
 * of flag parsing (main.c) to its exit.
 *
 * Startup, in order (a failure at any step prints one line and exits
 * non-zero before a socket is left behind; docs/configuration.md,
 * "Startup refusals"): block the signals (so that no thread, not even one
 * a device library starts, can take one), open zeusd's own binary
 * (/proc/self/exe, for the network process), check the environment, read
 * the systemd environment (notify socket, watchdog, a socket passed by
 * socket activation), load overrides, signing key, policy and audit log,
 * refuse root-only groups without root, become a child subreaper, open
 * the devices, open the socket (or take systemd's); then start the
 * network process (device_spawn_network: fork, then fexecve of zeusd
 * with its fds by number, netstart.h), then the janitor, the log relay,
 * the RAPL keepalive and the device channels' threads (privsep/device.c,
 * psexec running each checked request on the real backend).
 *
 * It then runs the signal loop (signals.h): SIGHUP re-reads the key, the
 * overrides, the policy and the audit log here and passes what the network
 * process needs over the control channel (device_reload; the files' own
 * re-reading is reload.c's); SIGCHLD from the network process stops the
 * daemon; SIGTERM stops the override commands, then the network process
 * gracefully; SIGUSR2 too, but as a restart: the leases are handed over
 * through the journal (never restored) and the exit status is
 * ZEUSD_EXIT_RESTART. Its control thread passes the network process's systemd
 * notifications on, as texts of its own (the network process names a
 * kind, control.h), and logs the results of the reloads it sent.
 *
 * Then the one teardown: the socket file, the devices, the children (no
 * child of zeusd outlives it, on any exit path after the subreaper is set:
 * its children are root's processes too), the key, the policy, the audit
 * log.
 */
#include "zeusd/device_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "access/audit.h"
#include "access/auth.h"
#include "access/policy.h"
#include "access/warden.h"
#include "api/streams.h"
#include "common/log.h"
#include "devices/rapl.h"
#include "http/server.h"
#include "node/groups.h"
#include "node/node.h"
#include "node/node_remote.h"
#include "node/remote_write.h"
#include "overrides/overrides.h"
#include "overrides/reaper.h"
#include "privsep/chan.h"
#include "privsep/control.h"
#include "privsep/device.h"
#include "privsep/exec.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"
#include "privsep/sandbox.h"
#include "zeusd/cli.h"
#include "zeusd/janitor.h"
#include "zeusd/listen.h"
#include "zeusd/logrelay.h"
#include "zeusd/netstart.h"
#include "zeusd/notify.h"
#include "zeusd/reload.h"
#include "zeusd/signals.h"

/*
 * After SIGTERM, how long the network process may take to stop: its own
 * grace for requests and for a stuck device command (network_proc.c),
 * and a margin. Leased GPUs are restored after it, here
 * (DEVICE_RESTORE_MS).
 */
#define SPLIT_STOP_MS (5000 + 30000 + 5000)
#define DEVICE_RESTORE_MS 10000	/* --restore-on-shutdown, at most */
#define SPLIT_DEVICE_STOP_MS 5000

/*
 * Channels: one per network-side thread that may call the device process
 * at the same time: a worker per GPU and per package, the GPU power
 * reader, the CPU energy reader, the stream sampler and the HTTP thread
 * (PSMSG_PROC for /metrics, PSMSG_PEER at a Unix connection's first
 * request); one more so a burst never waits for one; and one each that
 * the two readers keep for the batches answered on the HTTP loop
 * (remote_read.h; their threads still run the batches that come back to
 * them); one per GPU that its worker keeps for the writes answered on
 * the HTTP loop (remote_write.h; the worker's thread keeps its own for
 * the rest); and, with --gpu-leases, the loop's own for a write request's
 * early 409 (node_lease_check). (The RAPL keepalive runs in the device
 * process, next to the counters.)
 */
#define SPLIT_SHARED_CHANNELS 7

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
	const struct node *node;
	char where[300];
	/* the policy for the network process, until it is started */
	char *policy_text;
	size_t policy_len;
	/* the network process broke the protocol: zeusd stops (exit 1) */
	atomic_bool broken;
} dev = { .ctl = -1, .reload_lock = PTHREAD_MUTEX_INITIALIZER };

/* What the start of the network process leaves this process. */
struct device_net {
	int *peer;			/* our ends of the device channels */
	unsigned nchan;
	int log_fd;			/* its stderr, read end (logrelay.h) */
	/* the listening socket's address (getsockname; len 0: unknown) */
	struct sockaddr_storage name;
	socklen_t name_len;
};

/* ---- Startup --------------------------------------------------------------- */

/*
 * Refuses root-only groups without root (docs/configuration.md), unless
 * simulated.
 */
static int
device_check_privileges(const struct zeusd_config *cfg,
    const struct overrides *ov, struct zerr *err)
{
	if (cfg->simulate || geteuid() == 0)
		return 0;
	if (cfg->enabled & GROUP_BIT(GROUP_CPU_READ))
		return zerr_set(err, ZERR_FORBIDDEN,
		    "API group 'cpu-read' needs root (reading RAPL energy "
		    "counters is root-only); run as root or drop it from "
		    "--enable");
	if (cfg->enabled & GROUP_BIT(GROUP_GPU_CONTROL)) {
		if (ov == NULL || overrides_count(ov) == 0)
			return zerr_set(err, ZERR_FORBIDDEN,
			    "API group 'gpu-control' needs root (or GPU command "
			    "overrides); run as root, configure "
			    "--gpu-command-overrides, or drop it from --enable");
		zlog(ZLOG_WARN, "gpu_control_without_root",
		    "overridden=%u msg=\"GPU writes without an override will "
		    "fail with driver permission errors\"",
		    overrides_count(ov));
	}
	return 0;
}

/* --policy-file: loaded whole before anything is opened. */
static int
device_open_policy(const struct zeusd_config *cfg, struct zerr *err)
{
	struct policy *p;

	if (cfg->policy_file == NULL)
		return 0;
	if (policy_load(cfg->policy_file, &p, err) != 0)
		return -1;
	/* the network process's copy: numeric text (no NSS there) */
	if (policy_format_numeric(p, &dev.policy_text, &dev.policy_len,
	    err) != 0) {
		policy_free(p);
		return -1;
	}
	if (policy_holder_new(p, &dev.policy) != 0) {
		policy_free(p);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (cfg->mode == MODE_TCP)
		zlog(ZLOG_WARN, "policy_on_tcp", "msg=\"--policy-file applies "
		    "to Unix-socket peers only; on TCP the token's scopes "
		    "decide\"");
	zlog(ZLOG_INFO, "policy_loaded", "grants=%u", policy_grants(p));
	return 0;
}

static void
device_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * The environment the network process checks again: refused here, before
 * anything is opened.
 */
static int
device_check_env(struct zerr *err)
{
	struct server check;

	memset(&check, 0, sizeof(check));
	return server_configure(&check, err) != 0 ||
	    streams_check_env(err) != 0 ? -1 : 0;
}

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

/*
 * The network process broke the protocol, and was sent SIGKILL: zeusd
 * stops (exit 1) whether or not that kill could be sent. Root without
 * CAP_KILL (the packaged unit's bounding set) may not signal a process of
 * another user: the end of its control channel ends it instead
 * (network_parent_gone), and this process's signal loop is woken as the
 * network process's SIGCHLD would have woken it (device_child).
 */
static void
device_break(void)
{
	atomic_store(&dev.broken, true);
	shutdown(dev.ctl, SHUT_RDWR);
	(void)kill(getpid(), SIGCHLD);
}

/* A refused request: psdev already sent the network process SIGKILL. */
static void
device_refused(void *arg)
{
	(void)arg;
	device_break();
}

static void
device_kill_network(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "network_process_killed", "pid=%d reason=%s",
	    (int)dev.net, zlog_quote(q, sizeof(q), why));
	if (kill(dev.net, SIGKILL) != 0 && errno != ESRCH)
		zlog(ZLOG_WARN, "network_process_kill_refused", "pid=%d "
		    "errno=%d msg=\"no CAP_KILL: its control channel is "
		    "closed instead\"", (int)dev.net, errno);
	device_break();
}

/*
 * Asks the network process to stop (SIGTERM's stop) or restart
 * (SIGUSR2's), through the control channel: kill(2) would need CAP_KILL,
 * the network process being another user. Sent from the signal loop, as
 * the reloads are; a network process already gone is SIGCHLD's.
 */
static void
device_stop_network(bool restart)
{
	struct psctl_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = PSCTL_MAGIC;
	m.type = PSCTL_STOP;
	m.value = restart ? PSCTL_STOP_RESTART : PSCTL_STOP_STOP;
	if (psctl_send(dev.ctl, &m, NULL, 0) != 0)
		zlog(ZLOG_WARN, "network_stop_unsent", "pid=%d errno=%d",
		    (int)dev.net, errno);
}

/*
 * The network process's address for STATUS=, as listen_describe has it
 * ("unix:/run/zeusd/zeusd.sock", "tcp:127.0.0.1:4938").
 */
static void
device_describe_listen(const struct sockaddr_storage *name,
    socklen_t name_len)
{
	const struct sockaddr_un *un = (const void *)name;
	const char *path = listen_socket_path();

	snprintf(dev.where, sizeof(dev.where), "?");
	if (name_len <= offsetof(struct sockaddr_un, sun_path))
		return;
	if (un->sun_family != AF_UNIX)
		listen_format_inet(name, dev.where, sizeof(dev.where));
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
		    dev.key != NULL ? "on" : "off");
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
	if (waitpid(dev.net, &dev.wstatus, WNOHANG) != dev.net) {
		if (!atomic_load(&dev.broken))
			return false;	/* an override command */
		/* device_break's: the network process may live on */
		zlog(ZLOG_ERROR, "network_process_broke", "pid=%d "
		    "msg=\"zeusd stops\"", (int)dev.net);
		notify_send("STOPPING=1");
		return true;
	}
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
	    .child = device_child, .ctx = node, .usr2_restarts = true };
	char how[48];
	int sig, rc, wstatus = 0;
	bool handover = false;

	if ((sig = signals_loop(sigs, &h)) == SIGCHLD)
		return 1;
	notify_stopping(sig);
	if (sig == SIGUSR2) {
		/*
		 * A restart, which SIGTERM cannot say (systemctl stop and
		 * restart both send it): with a lease journal the leases are
		 * handed over as they are, for the next zeusd to take back,
		 * even with --restore-on-shutdown; without one nothing could
		 * take them back, so they end as at any stop.
		 */
		handover = cfg->gpu_leases && cfg->state_dir != NULL;
		if (handover)
			zlog(ZLOG_INFO, "restart_requested", "leases=handed_over "
			    "msg=\"leased GPUs keep their settings; the next "
			    "zeusd takes the leases back from the journal\"");
		else
			zlog(ZLOG_INFO, "restart_requested", "leases=not_kept "
			    "msg=\"no lease journal (--gpu-leases --state-dir): "
			    "leases end as at a stop, %s\"",
			    cfg->restore_on_shutdown ? "their GPUs restored "
			    "(--restore-on-shutdown)" : "their GPUs left as "
			    "they are");
	}
	/*
	 * Override commands first: a request blocked in one gets its
	 * (failed) answer at once instead of holding the network process's
	 * graceful stop, and no new command starts.
	 */
	(void)reaper_shutdown(REAPER_GRACE_MS);
	if (cfg->restore_on_shutdown && !handover)
		warden_stopping(dev.warden);	/* leases' restores may run */
	/* a restart: the network process stops without restoring leases */
	device_stop_network(handover);
	rc = device_wait_network(sigs, SPLIT_STOP_MS, &wstatus);
	/*
	 * The leases, this process's alone: restored (--restore-on-shutdown,
	 * not a restart that hands them over), kept in the journal for the
	 * next zeusd, or ended with their settings left as they are.
	 */
	warden_leases_stop(dev.warden, cfg->restore_on_shutdown && !handover,
	    cfg->state_dir != NULL, DEVICE_RESTORE_MS);
	if (rc != 0)
		return 1;
	if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
		device_describe_exit(wstatus, how, sizeof(how));
		zlog(ZLOG_ERROR, "network_process_failed", "pid=%d %s",
		    (int)dev.net, how);
		return 1;
	}
	/* a supervisor starts us again (systemd: RestartForceExitStatus=) */
	return sig == SIGUSR2 ? ZEUSD_EXIT_RESTART : 0;
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

/*
 * The device process's judge of every write (access/warden.h), made before
 * the network process starts so that the lease journal is read first: its
 * leases are taken back (restored when their holder is gone). 0, or -1
 * with err.
 */
static int
device_warden(const struct zeusd_config *cfg, struct node *node,
    struct zerr *err)
{
	struct warden_config wc = { .ngpu = node->ngpu,
	    .enabled = cfg->enabled, .unix_transport = cfg->mode == MODE_UDS,
	    .tcp_transport = cfg->mode == MODE_TCP, .leases = cfg->gpu_leases,
	    .audit_required = cfg->audit_required,
	    .policy = dev.policy, .key = dev.key,
	    .state_dir = cfg->state_dir };

	if (warden_create(&wc, &dev.warden, err) != 0)
		return -1;
	(void)warden_recover(dev.warden, &node->gpu);
	return warden_watch(dev.warden, &node->gpu, err);
}

/* ---- Starting the network process ----------------------------------------- */

/* The fds the network process is started with: netstart.h's numbers. */
#define DEVICE_NET_FDS_MAX 512

extern char **environ;

/*
 * The network process's environment: ours (notify_init and
 * listen_from_systemd took systemd's variables out), with JOURNAL_STREAM
 * naming its stderr, the log pipe, when our lines are in the journal
 * format: the relay expects its lines in the same format as ours.
 */
static char **
device_net_env(int log_fd)
{
	static char journal[64];
	struct stat st;
	size_t n = 0, k = 0;
	char **env;

	while (environ[n] != NULL)
		n++;
	if ((env = calloc(n + 2, sizeof(*env))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "JOURNAL_STREAM=", 15) != 0)
			env[k++] = environ[i];
	if (zlog_journal_format() && fstat(log_fd, &st) == 0) {
		snprintf(journal, sizeof(journal), "JOURNAL_STREAM=%llu:%llu",
		    (unsigned long long)st.st_dev,
		    (unsigned long long)st.st_ino);
		env[k++] = journal;
	}
	env[k] = NULL;
	return env;
}

static void
device_child_say(const char *what)
{
	static const char pre[] = "ts=- level=error event=network_process_failed "
	    "step=exec error=\"";
	int e = errno;
	const char *why = strerror(e);

	(void)!write(STDERR_FILENO, pre, sizeof(pre) - 1);
	(void)!write(STDERR_FILENO, what, strlen(what));
	(void)!write(STDERR_FILENO, ": ", 2);
	(void)!write(STDERR_FILENO, why, strlen(why));
	(void)!write(STDERR_FILENO, "\"\n", 2);
}

/*
 * The child of the fork, until exec: only calls that are safe after a fork
 * of a process that may have threads (a device library's). Puts want[t] at
 * fd t (-1: t closed; 0 and 1 stay), closes every other fd and executes
 * zeusd (exe) again. Never returns.
 */
static _Noreturn void
device_exec_network(int exe, const int *want, unsigned n, char *const *argv,
    char *const *envp)
{
	int tmp[DEVICE_NET_FDS_MAX];
	int x;

	/* first out of the way of the numbers, then into them */
	if ((x = fcntl(exe, F_DUPFD, (int)n + 1)) < 0) {
		device_child_say("dup");
		_exit(127);
	}
	for (unsigned t = NETSTART_FD_LOG; t < n; t++)
		if ((tmp[t] = want[t] >= 0 ? fcntl(want[t], F_DUPFD,
		    (int)n + 1) : -1) < 0 && want[t] >= 0) {
			device_child_say("dup");
			_exit(127);
		}
	for (unsigned t = NETSTART_FD_LOG; t < n; t++)
		if (tmp[t] < 0)
			(void)close((int)t);
		else if (dup2(tmp[t], (int)t) < 0) {
			device_child_say("dup2");
			_exit(127);
		}
	if (dup2(x, (int)n) < 0 || fcntl((int)n, F_SETFD, FD_CLOEXEC) != 0) {
		device_child_say("dup2");
		_exit(127);
	}
	/* the network process checks again what is left (fileio.h) */
	(void)close_range(n + 1, ~0U, 0);
	fexecve((int)n, argv, envp);
	device_child_say("fexecve of /proc/self/exe");
	_exit(127);
}

/*
 * The start record (netstart.h) in a sealed memfd, or -1 with err.
 */
static int
device_net_info(const struct zeusd_config *cfg, const struct node *node,
    int listen_fd, unsigned nchan, bool audit, bool policy,
    struct zerr *err)
{
	struct netstart_info *info = calloc(1, sizeof(*info));
	int fd;

	if (info == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	info->magic = NETSTART_MAGIC;
	info->size = sizeof(*info);
	info->nchan = nchan;
	info->auth = dev.key != NULL;
	info->audit = audit;
	info->policy = policy;
	info->notify = notify_enabled();
	info->watchdog_usec = notify_watchdog_usec();
	listen_describe(listen_fd, info->where, sizeof(info->where));
	if (geteuid() == 0) {
		if (sandbox_resolve_user(cfg->user, &info->user, err) != 0)
			goto fail;
		info->drop = true;
		/*
		 * Non-dumpable stops ptrace, not signals or prlimit: every
		 * process of a shared user may kill, stop or starve ours
		 * (docs/security.md).
		 */
		if (strcmp(info->user.name, "nobody") == 0)
			zlog(ZLOG_WARN, "network_process_user_shared", "user=%s "
			    "uid=%u msg=\"any process of this user can kill, "
			    "stop or starve the network process; create a "
			    "'zeusd' system user or name one with --user\"",
			    info->user.name, (unsigned)info->user.uid);
	}
	if (node_remote_describe(node, &info->node, err) != 0)
		goto fail;
	info->node.device_apart = true;	/* this process, not the network's */
	if ((fd = reload_memfd("zeusd-netstart", (const char *)info,
	    sizeof(*info))) < 0) {
		zerr_set(err, ZERR_INTERNAL, "the network process's start "
		    "record: %s", strerror(errno));
		goto fail;
	}
	free(info);
	return fd;
fail:
	free(info);
	return -1;
}

/*
 * Starts the network process (netstart.h): its fds, fork, fexecve of exe.
 * Takes listen_fd (closed here either way). 0 with dev.net, dev.ctl and
 * *out set; -1 with err.
 */
static int
device_spawn_network(const struct zeusd_config *cfg, const struct node *node,
    int listen_fd, int exe, int argc, char **argv, struct device_net *out,
    struct zerr *err)
{
	unsigned nchan = node->ngpu + node->ncpu + SPLIT_SHARED_CHANNELS +
	    remote_write_channels(node) + (cfg->gpu_leases ? 1 : 0);
	unsigned nfds = NETSTART_FD_CHAN + nchan;
	struct pschan_pool *pool = NULL;
	int want[DEVICE_NET_FDS_MAX];
	int ctl[2] = { -1, -1 }, logp[2] = { -1, -1 };
	int info = -1, audit_ro = -1, policy = -1, rc = -1;
	char **nargv = NULL, **env = NULL;
	sigset_t sigs;
	pid_t pid;

	out->peer = NULL;
	out->log_fd = -1;
	if (node->ngpu > PSMSG_MAX_GPUS || node->ncpu > PSMSG_MAX_PKGS ||
	    nfds + 1 >= DEVICE_NET_FDS_MAX) {
		zerr_set(err, ZERR_INVALID, "%u GPUs and %u RAPL packages: "
		    "privilege separation handles at most %d of each",
		    node->ngpu, node->ncpu, PSMSG_MAX_GPUS);
		goto out;
	}
	if ((out->peer = calloc(nchan, sizeof(*out->peer))) == NULL) {
		zerr_set(err, ZERR_INTERNAL, "out of memory");
		goto out;
	}
	if (pschan_pool_create(nchan, &pool, out->peer, err) != 0) {
		free(out->peer);
		out->peer = NULL;
		goto out;
	}
	out->nchan = nchan;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0 ||
	    pipe2(logp, O_CLOEXEC) != 0) {
		zerr_set(err, ZERR_INTERNAL, "socketpair or pipe: %s",
		    strerror(errno));
		goto out;
	}
	/* the network process's view of the audit log: read-only */
	if (audit_enabled() && (audit_ro = audit_open_readonly()) < 0) {
		zerr_set(err, ZERR_INTERNAL, "the audit log, read-only: %s",
		    strerror(errno));
		goto out;
	}
	if (dev.policy_text != NULL && (policy = reload_memfd("zeusd-policy",
	    dev.policy_text, dev.policy_len)) < 0) {
		zerr_set(err, ZERR_INTERNAL, "the policy for the network "
		    "process: %s", strerror(errno));
		goto out;
	}
	if ((info = device_net_info(cfg, node, listen_fd, nchan, audit_ro >= 0,
	    policy >= 0, err)) < 0)
		goto out;
	/* everything the child needs, made before the fork */
	if ((nargv = calloc((size_t)argc + 2, sizeof(*nargv))) == NULL ||
	    (env = device_net_env(logp[1])) == NULL) {
		zerr_set(err, ZERR_INTERNAL, "out of memory");
		goto out;
	}
	nargv[0] = "zeusd";
	nargv[1] = NETSTART_ARG;
	for (int i = 1; i < argc; i++)
		nargv[i + 1] = argv[i];
	for (unsigned t = 0; t < nfds; t++)
		want[t] = -1;
	want[NETSTART_FD_LOG] = logp[1];
	want[NETSTART_FD_CTL] = ctl[1];
	want[NETSTART_FD_INFO] = info;
	want[NETSTART_FD_LISTEN] = listen_fd;
	want[NETSTART_FD_AUDIT] = audit_ro;
	want[NETSTART_FD_POLICY] = policy;
	for (unsigned i = 0; i < nchan; i++)
		want[NETSTART_FD_CHAN + i] = pschan_pool_fd(pool, i);
	/* before the fork: no SIGCHLD of the network process is lost */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		zerr_set(err, ZERR_INTERNAL, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		device_exec_network(exe, want, nfds, nargv, env);
	dev.net = pid;
	dev.ctl = ctl[0];
	ctl[0] = -1;
	out->log_fd = logp[0];
	logp[0] = -1;
	/* the warden's proof that a peer's socket is one of ours */
	out->name_len = sizeof(out->name);
	memset(&out->name, 0, sizeof(out->name));
	if (getsockname(listen_fd, (struct sockaddr *)&out->name,
	    &out->name_len) != 0)
		out->name_len = 0;
	rc = 0;
out:
	if (rc != 0 && out->peer != NULL) {
		for (unsigned i = 0; i < out->nchan; i++)
			close(out->peer[i]);
		free(out->peer);
		out->peer = NULL;
	}
	pschan_pool_destroy(pool);	/* the network process has its ends */
	for (unsigned i = 0; i < 2; i++) {
		if (ctl[i] >= 0)
			close(ctl[i]);
		if (logp[i] >= 0)
			close(logp[i]);
	}
	if (info >= 0)
		close(info);
	if (audit_ro >= 0)
		close(audit_ro);
	if (policy >= 0)
		close(policy);
	close(listen_fd);
	free(nargv);
	free(env);
	free(dev.policy_text);
	dev.policy_text = NULL;
	return rc;
}

/* ---- Running --------------------------------------------------------------- */

/*
 * The network process runs: the warden, the janitor, the log relay, the
 * RAPL keepalive and the device channels' threads, then the signal loop
 * and the stop. The process's exit status.
 */
static int
device_run(const struct zeusd_config *cfg, struct node *node,
    struct device_net *net, const sigset_t *sigs)
{
	struct psmsg_limits lim = { .ngpu = node->ngpu, .npkg = node->ncpu };
	struct psexec x = { .gpu = &node->gpu, .ngpu = node->ngpu,
	    .npkg = node->ncpu, .rapl_read = device_rapl_read,
	    .rapl_ctx = node->rapl, .net = dev.net };
	char listen_path[sizeof(((struct warden_config *)0)->listen_path)];
	struct psexec_guard guard;
	struct logrelay *relay = NULL;
	struct psdev *ps = NULL;
	const struct sockaddr_un *un = (const void *)&net->name;
	struct zerr err;
	sigset_t all = *sigs;
	pthread_t t;
	bool ctl_started;
	int status = 1;

	dev.node = node;
	device_describe_listen(&net->name, net->name_len);
	memset(listen_path, 0, sizeof(listen_path));
	if (net->name_len > offsetof(struct sockaddr_un, sun_path) &&
	    un->sun_family == AF_UNIX)
		memcpy(listen_path, un->sun_path, sizeof(listen_path) - 1 <
		    sizeof(un->sun_path) ? sizeof(listen_path) - 1 :
		    sizeof(un->sun_path));
	sigaddset(&all, SIGCHLD);
	warden_set_network(dev.warden, dev.net, listen_path);
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
		close(net->log_fd);
		device_failed(&err, &status);
		return status;
	}
	/*
	 * Wrap tracking is ours (the network process's RAPL core passes our
	 * totals through), so the keepalive that feeds it runs here: an idle
	 * pass wakes this process only. A thread, so after the janitor's fork.
	 */
	if (logrelay_start(net->log_fd, &relay, &err) != 0) {
		device_failed(&err, &status);
		return status;
	}
	if (node->ncpu > 0 && rapl_start_keepalive(node->rapl, 0, &err) != 0) {
		device_failed(&err, &status);
		return status;
	}
	for (unsigned i = 0; i < node->ncpu; i++)
		if (rapl_has_dram(node->rapl, i)) {
			lim.dram_mask |= 1ull << i;
			x.dram_mask |= 1ull << i;
		}
	if (psdev_start(&x, &lim, net->peer, net->nchan, dev.net,
	    device_refused, NULL, &ps, &err) != 0) {
		device_failed(&err, &status);
		return status;
	}
	ctl_started = pthread_create(&t, NULL, device_ctl_main, NULL) == 0;
	zlog(ZLOG_INFO, "device_process", "pid=%d network_pid=%d channels=%u",
	    (int)getpid(), (int)dev.net, net->nchan);
	status = device_loop(cfg, node, &all);
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
	dev.ctl = -1;
	logrelay_stop(relay, SPLIT_DEVICE_STOP_MS);	/* its last lines */
	warden_destroy(dev.warden);
	dev.warden = NULL;
	return status;
}

int
device_proc_main(struct zeusd_config *cfg, int argc, char **argv)
{
	struct overrides *ov = NULL;	/* ours until node_open takes it */
	struct device_net net = { .log_fd = -1 };
	struct node node;
	struct zerr err;
	sigset_t sigs;
	bool reaping = false;		/* reaper_enable done */
	int fd = -1, exe = -1, rc, status = -1;

	/* Every thread created from here on inherits this mask. */
	signals_block(&sigs);
	/*
	 * From here every exit goes through `out`, whose steps all accept
	 * what was never opened: a zeroed node, NULL pointers, no socket.
	 */
	memset(&node, 0, sizeof(node));
	dev.cfg = cfg;
	/*
	 * The binary this process runs, whatever is at its path later (an
	 * upgrade replaces the file, not the inode we run): the network
	 * process is started from it (docs/design.md, "Two processes").
	 */
	if ((exe = open("/proc/self/exe", O_PATH | O_CLOEXEC)) < 0) {
		zerr_set(&err, ZERR_INTERNAL, "cannot open /proc/self/exe "
		    "(%s): zeusd starts its network process from its own "
		    "binary, through /proc", strerror(errno));
		goto out;
	}
	/* every configuration error stops startup before anything is opened */
	if (device_check_env(&err) != 0)
		goto out;
	/* Before any thread: both unset environment variables. */
	notify_init();
	if (listen_from_systemd(cfg, &fd, &err) < 0)
		goto out;
	if (cfg->gpu_command_overrides != NULL) {
		if (!(cfg->enabled & GROUP_BIT(GROUP_GPU_CONTROL)))
			zlog(ZLOG_WARN, "overrides_ignored",
			    "msg=\"--gpu-command-overrides given but gpu-control "
			    "is not enabled; the file is ignored\"");
		else if (overrides_load(cfg->gpu_command_overrides, &ov,
		    &err) != 0)
			goto out;
	}
	if (device_check_privileges(cfg, ov, &err) != 0 ||
	    (cfg->signing_key_path != NULL &&
	    auth_key_load_trusted(cfg->signing_key_path, &dev.key,
	    &err) != 0) ||
	    device_open_policy(cfg, &err) != 0 ||
	    audit_open(cfg->audit_log, &err) != 0)
		goto out;
	cli_own_host_names(cfg);
	cli_log_host_names(cfg);
	if (cfg->mode == MODE_TCP && dev.key == NULL)
		zlog(ZLOG_WARN, "tcp_without_auth", "msg=\"TCP without "
		    "--signing-key-path: anyone who can reach the port can use "
		    "every enabled API group\"");

	device_raise_fd_limit();
	/* Before any device thread exists, so no override can run first. */
	if (reaper_enable(&err) != 0)
		goto out;
	reaping = true;

	rc = node_open_devices(&node, cfg, ov, &err);
	ov = NULL;			/* the node took it over either way */
	if (rc != 0)
		goto out;
	if (fd >= 0)
		zlog(ZLOG_INFO, "socket_activated", "fd=%d msg=\"listening "
		    "socket passed by systemd; its path, mode and owner come "
		    "from the .socket unit\"", fd);
	else if ((fd = listen_open(cfg, &err)) < 0)
		goto out;
	/*
	 * The warden before the network process: the journal's leases are
	 * taken back first, and those that hold again go to the network
	 * process with its start (netstart.h).
	 */
	if (device_warden(cfg, &node, &err) != 0)
		goto out;
	rc = device_spawn_network(cfg, &node, fd, exe, argc, argv, &net,
	    &err);
	fd = -1;			/* the network process's, closed here */
	if (rc != 0)
		goto out;
	status = device_run(cfg, &node, &net, &sigs);
	free(net.peer);
	/*
	 * The socket file now, before the janitor hears the end: the janitor
	 * only acts when the file is still there, which would log that it
	 * was left.
	 */
	(void)listen_remove_socket();
	janitor_stop();
out:
	/*
	 * The one teardown, for a startup failure at any step and for the
	 * stop alike: the socket, the devices, the children, the key, the
	 * policy, the audit log.
	 */
	if (fd >= 0)
		close(fd);	/* opened but never handed over */
	if (exe >= 0)
		close(exe);
	listen_remove_socket();	/* only if still the socket we created */
	warden_destroy(dev.warden);	/* when the network never started */
	dev.warden = NULL;
	node_close(&node);
	overrides_free(ov);
	if (reaping)
		(void)reaper_shutdown(REAPER_GRACE_MS);
	auth_key_free(dev.key);
	policy_holder_free(dev.policy);
	free(dev.policy_text);
	audit_close();
	if (status < 0) {
		fprintf(stderr, "zeusd: %s\n", err.msg);
		return 1;
	}
	zlog(ZLOG_INFO, "stopped", "status=%d", status);
	return status;
}
