/* SPDX-License-Identifier: Apache-2.0 */
/*
 * network_proc.c - zeusd's network process (network_proc.h): its whole
 * life, from the exec (netstart.h) to its exit; network_proc_main never
 * returns.
 *
 * Start, in order: refuse unless started by zeusd's device process (the
 * control channel at fd 3 is a socket whose other end is our parent, the
 * start record at fd 4 is ours); parse the flags again; keep only the fds
 * of netstart.h; take the policy, the audit log and the channels; open the
 * node over the device process (node_open_remote); lose the filesystem
 * (chroot), drop to the network user and install the seccomp filter
 * (privsep/sandbox.c).
 *
 * Serving, in order: streams, the loop and the shared readers on it, the
 * server, the control thread, READY=1 (relayed: the device process sends
 * it), the watchdog; then the signal loop (signals.h; SIGHUP is the
 * device process's, and SIGUSR2 from it is a restart); then the stop: the
 * server, streams, the node, and exit. GPU leases are the device
 * process's alone (its lease record, restored at the stop by it): this
 * process only asks about them (GET /gpu/leases, POST /gpu/release).
 */
#include "zeusd/network_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access/audit.h"
#include "access/policy.h"
#include "api/streams.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/pool.h"
#include "common/procstat.h"
#include "http/server.h"
#include "http/tokens.h"
#include "node/node.h"
#include "node/node_remote.h"
#include "node/remote_read.h"
#include "node/remote_write.h"
#include "privsep/chan.h"
#include "privsep/control.h"
#include "privsep/remote_gpu.h"
#include "privsep/sandbox.h"
#include "zeusd/cli.h"
#include "zeusd/listen.h"
#include "zeusd/netstart.h"
#include "zeusd/notify.h"
#include "zeusd/reload.h"
#include "zeusd/serving.h"
#include "zeusd/signals.h"
#include "zeusd/watchdog.h"

#define SHUTDOWN_GRACE_MS 5000	/* in-flight requests finish */
#define SHUTDOWN_STUCK_MS 30000	/* then device commands, at most */
/*
 * Look-ups off the loop (common/pool.h): a Unix peer's identity, the
 * device process's figures. As many slow NSS answers as threads can be
 * waited on at once before the others queue; at most LOOKUP_QUEUE wait.
 */
#define LOOKUP_THREADS 4
#define LOOKUP_QUEUE 1024

/* What the control thread needs. */
static struct {
	int ctl;			/* our end of the control channel */
	const struct zeusd_config *cfg;
	struct server *srv;
	struct node *node;
	pthread_t main;			/* the signal loop's thread */
} net = { .ctl = -1 };

/* The start record: its node part is 40 KiB, not for a stack. */
static struct netstart_info info;

/* ---- The control channel ------------------------------------------------- */

/*
 * A state for systemd, as the device process's kind of it (control.h):
 * the device process writes the datagram, and the STATUS= line that goes
 * with READY=1. Others (RELOADING=1 is the one process's) are not sent.
 */
static void
network_relay(const char *state)
{
	static const struct { const char *state; enum psctl_notify kind; }
	    kinds[] = { { "READY=1", PSCTL_N_READY },
	    { "WATCHDOG=1", PSCTL_N_WATCHDOG },
	    { "STOPPING=1", PSCTL_N_STOPPING } };
	struct psctl_msg m;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(state, kinds[i].state) != 0)
			continue;
		memset(&m, 0, sizeof(m));
		m.magic = PSCTL_MAGIC;
		m.type = PSCTL_NOTIFY;
		m.value = kinds[i].kind;
		(void)psctl_send(net.ctl, &m, NULL, 0);
		return;
	}
}

static _Noreturn void
network_parent_gone(const char *why)
{
	char q[160];

	zlog(ZLOG_ERROR, "device_process_gone", "reason=%s msg=\"the device "
	    "process is gone; the network process stops\"",
	    zlog_quote(q, sizeof(q), why));
	_exit(1);
}

/* Applies a reload the device process sent. */
static void
network_apply_reload(const struct psctl_msg *m, const int *got, unsigned ngot)
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
	r.value = (uint32_t)reload_network(net.cfg, net.srv, fds,
	    (m->flags & PSCTL_KEY_CHANGED) != 0);
	if (fds[RELOAD_FD_KEY] >= 0)
		close(fds[RELOAD_FD_KEY]);
	if (fds[RELOAD_FD_POLICY] >= 0)
		close(fds[RELOAD_FD_POLICY]);
	if (net.node->gpu.ops != NULL)
		psgpu_set_lacks(&net.node->gpu, &m->lacks);
	net.node->overrides = m->value;
	(void)psctl_send(net.ctl, &r, NULL, 0);
}

/*
 * The network process's control thread: reloads, the device process's stop,
 * and its end.
 */
static void *
network_ctl_main(void *arg)
{
	static struct psctl_msg m;	/* 2 KiB: not on a thread's stack */
	int fds[PSCTL_MAX_FDS];
	unsigned nfds;
	char why[128];
	int rc;

	(void)arg;
	for (;;) {
		rc = psctl_recv(net.ctl, &m, fds, &nfds, why, sizeof(why));
		if (rc == 0)
			network_parent_gone("end of file on the control channel");
		if (rc < 0)
			network_parent_gone(why);
		if (m.type == PSCTL_STOP) {
			/* to the signal loop, as the signal would have come */
			(void)pthread_kill(net.main, m.value ==
			    PSCTL_STOP_RESTART ? SIGUSR2 : SIGTERM);
			continue;
		}
		if (m.type != PSCTL_RELOAD) {
			for (unsigned i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		network_apply_reload(&m, fds, nfds);
	}
	return NULL;
}

static _Noreturn void
network_fail(const char *what, const struct zerr *err)
{
	char q[2 * ZERR_MSG_MAX];

	zlog(ZLOG_ERROR, "network_process_failed", "step=%s error=%s", what,
	    zlog_quote(q, sizeof(q), err->msg));
	_exit(1);
}

/* ---- Start ---------------------------------------------------------------- */

/* Run by hand, or by anything but zeusd's device process: exit 2. */
static _Noreturn void
network_refuse(const char *why)
{
	fprintf(stderr, "zeusd: %s is the internal entry point of zeusd's "
	    "network process, which `zeusd serve` starts with its channels "
	    "open; it does not run by hand (%s)\n", NETSTART_ARG, why);
	exit(2);
}

/*
 * Started by zeusd's device process: the control channel is a
 * SOCK_SEQPACKET socket made by our parent, as our user, and the start
 * record is one of this binary's. Reads the record.
 */
static void
network_check_start(void)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int type;
	socklen_t tlen = sizeof(type);

	if (getsockopt(NETSTART_FD_CTL, SOL_SOCKET, SO_TYPE, &type,
	    &tlen) != 0 || type != SOCK_SEQPACKET)
		network_refuse("fd 3 is not its control channel");
	if (getsockopt(NETSTART_FD_CTL, SOL_SOCKET, SO_PEERCRED, &cr,
	    &len) != 0 || cr.pid != getppid() || cr.uid != geteuid())
		network_refuse("the control channel does not come from its "
		    "parent");
	if (pread(NETSTART_FD_INFO, &info, sizeof(info), 0) !=
	    (ssize_t)sizeof(info) || info.magic != NETSTART_MAGIC ||
	    info.size != sizeof(info) || info.nchan == 0 ||
	    info.nchan > 4 * (PSMSG_MAX_GPUS + PSMSG_MAX_PKGS))
		network_refuse("no start record at fd 4");
	close(NETSTART_FD_INFO);
}

/*
 * Only the fds of netstart.h stay (a device library's fd leaked without
 * close-on-exec into the exec would go here too); the policy, the audit
 * log and the channels are taken.
 */
static struct pschan_pool *
network_take_fds(const struct zeusd_config *cfg, struct server *srv)
{
	int keep[NETSTART_FD_CHAN + 4 * (PSMSG_MAX_GPUS + PSMSG_MAX_PKGS)];
	int chan[4 * (PSMSG_MAX_GPUS + PSMSG_MAX_PKGS)];
	unsigned nkeep = 0;
	struct pschan_pool *pool;
	struct policy *p;
	struct zerr err;

	for (int fd = 0; fd < NETSTART_FD_CHAN; fd++)
		if (fd != NETSTART_FD_INFO)
			keep[nkeep++] = fd;
	for (unsigned i = 0; i < info.nchan; i++)
		keep[nkeep++] = chan[i] = NETSTART_FD_CHAN + (int)i;
	if (fileio_close_all_but(keep, nkeep) != 0) {
		zerr_set(&err, ZERR_INTERNAL, "cannot list /proc/self/fd");
		network_fail("close_fds", &err);
	}
	(void)fcntl(NETSTART_FD_CTL, F_SETFD, FD_CLOEXEC);
	(void)fcntl(NETSTART_FD_LISTEN, F_SETFD, FD_CLOEXEC);
	net.ctl = NETSTART_FD_CTL;
	if (info.policy) {
		if (policy_read_fd(NETSTART_FD_POLICY, cfg->policy_file, &p,
		    &err) != 0)
			network_fail("policy", &err);
		if (policy_holder_new(p, &srv->ctx.policy) != 0) {
			policy_free(p);
			zerr_set(&err, ZERR_INTERNAL, "out of memory");
			network_fail("policy", &err);
		}
		close(NETSTART_FD_POLICY);
	}
	/* the audit log is written by the device process only */
	if (info.audit) {
		(void)fcntl(NETSTART_FD_AUDIT, F_SETFD, FD_CLOEXEC);
		audit_set_readonly(cfg->audit_log, NETSTART_FD_AUDIT);
	}
	if (pschan_pool_adopt(chan, info.nchan, &pool, &err) != 0)
		network_fail("channels", &err);
	return pool;
}

/*
 * Everything up to serving: the configuration again, the fds, the node
 * over the device process, then the confinement. On any failure it logs
 * and exits 1.
 */
static void
network_start(int argc, char **argv, struct zeusd_config *cfg,
    struct server *srv, struct node *node)
{
	struct pschan_pool *pool;
	struct zerr err;
	bool dropped = false, chrooted = false;

	/* the same flags, the same parser: the same configuration */
	if (cli_parse_serve(argc - 1, argv + 1, cfg, stderr, &err) != 0)
		network_fail("flags", &err);
	cli_own_host_names(cfg);
	memset(srv, 0, sizeof(*srv));
	srv->ctx.cfg = cfg;
	if (server_configure(srv, &err) != 0)
		network_fail("environment", &err);
	pool = network_take_fds(cfg, srv);
	/*
	 * The signing key is the device process's alone: tokens go there
	 * (PSMSG_TOKEN), their verdicts kept here (http/tokens.h).
	 */
	srv->ctx.auth = info.auth;
	if (info.auth && (srv->ctx.tokens = tokens_create()) == NULL) {
		zerr_set(&err, ZERR_INTERNAL, "out of memory");
		network_fail("tokens", &err);
	}
	if (info.notify)
		notify_relay_from(info.watchdog_usec, network_relay);
	net.cfg = cfg;
	net.srv = srv;
	if (node_open_remote(node, &info.node, pool, &err) != 0)
		network_fail("devices", &err);
	net.node = node;
	/*
	 * What is read from files later is opened now: /proc/self for
	 * /metrics, and jansson's hash seed (/dev/urandom on the first JSON
	 * object).
	 */
	if (procstat_keep() != 0)
		zlog(ZLOG_WARN, "procstat_not_kept", "error=\"%s\" "
		    "msg=\"/metrics will lack this process's figures\"",
		    strerror(errno));
	json_object_seed(0);
	if (sandbox_lose_fs(&chrooted, &err) != 0)
		network_fail("chroot", &err);
	if (info.drop && sandbox_drop(&info.user, &dropped, &err) != 0)
		network_fail("drop", &err);
	if (sandbox_seccomp(&err) != 0)
		network_fail("seccomp", &err);
	if (info.drop)
		zlog(ZLOG_INFO, "network_process", "pid=%d user=%s uid=%u "
		    "gid=%u chroot=%s seccomp=on", (int)getpid(),
		    info.user.name, (unsigned)info.user.uid,
		    (unsigned)info.user.gid, chrooted ? "on" : "off");
	else
		zlog(ZLOG_WARN, "network_process_not_dropped", "pid=%d uid=%u "
		    "seccomp=on msg=\"zeusd does not run as root: the network "
		    "process keeps this user\"", (int)getpid(),
		    (unsigned)getuid());
}

/* ---- Serving ---------------------------------------------------------------- */

/* The server's shutdown hooks (server.h): the streams end with it. */
static void
serve_streams_quiesce(void *ctx)
{
	serving_streams_quiesce(ctx);
}

static void
serve_streams_stopping(void *ctx)
{
	serving_streams_stopping(ctx);
}

/* streams.c's nudge after the sampler resumed subscribers */
static void
serve_loop_nudge(void *ctx)
{
	loop_nudge(ctx);
}

/* Streams, the loop and its readers, the server; 0 or -1 (err). */
static int
serve_start(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int fd, struct remote_reads **rr,
    struct remote_writes **rw, struct zerr *err)
{
	srv->ctx.leases = cfg->gpu_leases;	/* the device process's record */
	if (cfg->gpu_leases && cfg->mode == MODE_TCP)
		zlog(ZLOG_WARN, "leases_on_tcp", "msg=\"TCP clients have no "
		    "process to watch: they never take a lease (see "
		    "docs/security.md)\"");
	if (serving_prepare(cfg, srv, node, LOOKUP_THREADS, LOOKUP_QUEUE,
	    err) != 0)
		return -1;
	/* the reads, and the writes requests wait for, answered on the loop */
	if (loop_create(&srv->ctx.loop, err) != 0 ||
	    remote_read_attach(node, srv->ctx.loop, rr, err) != 0 ||
	    remote_write_attach(node, srv->ctx.loop, rw,
	    err) != 0)
		return -1;
	srv->hooks = (struct server_hooks){ .quiesce = serve_streams_quiesce,
	    .stopping = serve_streams_stopping, .ctx = srv };
	if (server_start(srv, fd, err) != 0)
		return -1;
	/* the sampler resumes subscribers from its thread: it nudges the loop */
	if (loop_running(srv->ctx.loop) && srv->ctx.streams != NULL)
		streams_set_nudge(srv->ctx.streams, serve_loop_nudge,
		    srv->ctx.loop);
	return 0;
}

/*
 * Serves until a signal stops it, then stops the server. The signal once
 * stopped (SIGUSR2: a restart, from the device process), -1 with err when
 * it could not start. A device command stuck at the stop ends the process
 * (exit 1) without teardown.
 */
static int
network_serve(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int fd, const sigset_t *sigs,
    struct remote_reads **rr, struct remote_writes **rw, struct zerr *err)
{
	struct signals_handlers h = { .reload_elsewhere = "send it to the "
	    "device process (the main PID)", .usr2_restarts = true };
	char groups[80];
	pthread_t t;
	int sig;

	if (serve_start(cfg, srv, node, fd, rr, rw, err) != 0)
		return -1;
	/* reloads and the device process's stop apply from here */
	net.main = pthread_self();
	if (pthread_create(&t, NULL, network_ctl_main, NULL) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot start a thread");
	pthread_detach(t);
	serving_log_listening(cfg, srv, node, info.where, groups,
	    sizeof(groups));
	/* devices open, socket accepting: systemd may start dependents */
	notify_send("READY=1");
	if (watchdog_start(srv, err) != 0)
		zlog(ZLOG_WARN, "watchdog_not_started", "error=\"%s\"",
		    err->msg);

	sig = signals_loop(sigs, &h);
	notify_stopping(sig);
	watchdog_stop();	/* the loop is about to stop answering */
	if (server_stop(srv, SHUTDOWN_GRACE_MS, SHUTDOWN_STUCK_MS) != 0) {
		/*
		 * A device command never returned (a GPU fell off the bus, a
		 * hung driver): its worker cannot be joined, so leave without
		 * tearing anything down.
		 */
		_exit(1);
	}
	return sig;
}

void
network_proc_main(int argc, char **argv)
{
	static struct zeusd_config cfg;
	struct remote_reads *rr = NULL;	/* the shared readers on the loop */
	struct remote_writes *rw = NULL;	/* the GPU writers on the loop */
	struct server srv;
	struct node node;
	struct zerr err;
	sigset_t sigs;
	struct pschan_pool *pool;
	bool served = false;
	int sig;

	/* the name exec through an fd gave us ("4") is no name for tools */
	(void)prctl(PR_SET_NAME, "zeusd", 0, 0, 0);
	network_check_start();
	/* lines through the log pipe, in the device process's format */
	if (zlog_init_from_env() != 0)
		exit(2);
	(void)zlog_detect_journal();
	signals_block(&sigs);
	memset(&node, 0, sizeof(node));
	network_start(argc, argv, &cfg, &srv, &node);
	sig = network_serve(&cfg, &srv, &node, NETSTART_FD_LISTEN, &sigs,
	    &rr, &rw, &err);
	served = sig > 0;
	/*
	 * The teardown: the HTTP side has let go; the streams, then the node
	 * and its workers. The leases are the device process's to restore
	 * (--restore-on-shutdown), end or hand over, once we are gone.
	 */
	loop_free(srv.ctx.loop);	/* stopped with the server */
	pool_destroy(srv.ctx.lookups);	/* nothing waits on it now */
	streams_destroy(srv.ctx.streams);	/* after the HTTP side let go */
	pool = node.pool;	/* node_close forgets it */
	node_close(&node);
	remote_read_free(rr);	/* the readers are stopped */
	remote_write_free(rw);	/* and the GPU workers */
	pschan_pool_destroy(pool);	/* nothing calls the device process now */
	tokens_destroy(srv.ctx.tokens);
	policy_holder_free(srv.ctx.policy);
	audit_close();
	if (!served)
		network_fail("serve", &err);
	zlog(ZLOG_INFO, "stopped", NULL);
	exit(0);
}
