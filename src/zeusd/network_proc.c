/* SPDX-License-Identifier: Apache-2.0 */
/*
 * network_proc.c - the network process (network_proc.h): serving HTTP,
 * and, in a split daemon, the confinement after the fork and the control
 * channel to the device process.
 *
 * Serving is the same code in the network process of a split daemon and in
 * the one-process daemon (--no-privsep); what differs is a wiring (struct
 * serve_wiring): the network process's starts its control thread once it
 * serves and leaves SIGHUP to the device process, the one process reloads
 * itself (main.c).
 *
 * Serving, in order: leases, streams, the loop and the shared readers on
 * it (a split daemon's), the server, READY=1, the watchdog; then the
 * signal loop (signals.h); then the stop: override commands first (a
 * request blocked in one gets its failed answer at once), then the server.
 * What was opened is torn down by main.c's one teardown, in its order.
 */
#include "zeusd/network_proc.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/audit.h"
#include "access/lease.h"
#include "api/streams.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/pool.h"
#include "common/procstat.h"
#include "http/server.h"
#include "node/remote_read.h"
#include "node/remote_write.h"
#include "overrides/reaper.h"
#include "access/auth.h"
#include "http/tokens.h"
#include "privsep/chan.h"
#include "privsep/control.h"
#include "privsep/remote_gpu.h"
#include "privsep/sandbox.h"
#include "zeusd/listen.h"
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

/* The network process of a split daemon: what its control thread needs. */
static struct {
	int ctl;			/* our end of the control channel */
	const struct zeusd_config *cfg;
	struct server *srv;
	struct node *node;
	struct node dev;		/* the device node as forked: kept
					 * reachable, never used or closed */
	struct pschan_pool *pool;	/* reachable too: lives to the exit */
} net = { .ctl = -1 };

/* ---- The network process of a split daemon -------------------------------- */

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

/* The network process's control thread: reloads, and the parent's end. */
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

void
network_proc_become(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, const struct split_ends *ends)
{
	const struct sandbox_user *user = ends->user;
	struct pschan_pool *pool = ends->pool;
	int listen_fd = ends->listen_fd;
	int keep[PSMSG_MAX_GPUS + PSMSG_MAX_PKGS + 16];
	unsigned nkeep = 0;
	struct zerr err;
	bool dropped = false, chrooted = false;

	keep[nkeep++] = 0;
	keep[nkeep++] = 1;
	keep[nkeep++] = 2;
	keep[nkeep++] = listen_fd;
	net.ctl = ends->ctl;
	keep[nkeep++] = net.ctl;
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
		network_fail("close_fds", &err);
	}
	reaper_disable();		/* no commands run here */
	listen_forget_socket();		/* the device process removes it */
	/*
	 * The signing key is the device process's alone: ours is wiped
	 * (auth_key_free) and tokens go there (PSMSG_TOKEN), their verdicts
	 * kept here (http/tokens.h).
	 */
	if (srv->ctx.key != NULL) {
		auth_key_free(srv->ctx.key);
		srv->ctx.key = NULL;
		if ((srv->ctx.tokens = tokens_create()) == NULL) {
			zerr_set(&err, ZERR_INTERNAL, "out of memory");
			network_fail("tokens", &err);
		}
	}
	notify_relay_to(network_relay);
	net.cfg = cfg;
	net.srv = srv;
	net.dev = *node;
	net.pool = pool;
	if (node_open_remote(node, &net.dev, pool, &err) != 0)
		network_fail("devices", &err);
	net.node = node;
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
		network_fail("chroot", &err);
	if (user != NULL && sandbox_drop(user, &dropped, &err) != 0)
		network_fail("drop", &err);
	if (sandbox_seccomp(&err) != 0)
		network_fail("seccomp", &err);
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

/* Once the server runs: reloads apply from here (network_proc.h). */
static void
network_serving(void)
{
	struct zerr err;
	pthread_t t;

	if (pthread_create(&t, NULL, network_ctl_main, NULL) != 0) {
		zerr_set(&err, ZERR_INTERNAL, "cannot start a thread");
		network_fail("control", &err);
	}
	pthread_detach(t);
}

const struct serve_wiring network_proc_wiring = {
	.serving = network_serving,
	.reload_elsewhere = "send it to the device process (the main PID)",
};

/* ---- Serving (the network process, and the one-process daemon) ------------ */

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

/* What the signal loop's SIGHUP handler needs. */
struct serve_state {
	const struct zeusd_config *cfg;
	struct server *srv;
	struct node *node;
	const struct serve_wiring *w;
	char where[300];
	char groups[80];
};

static void
serve_reload(void *arg)
{
	struct serve_state *st = arg;
	int rc;

	notify_send("RELOADING=1");
	notify_status("Reloading the signing key and overrides");
	rc = st->w->reload(st->cfg, st->srv, st->node);
	notify_send("READY=1");
	notify_status("Serving %s: %u GPUs, %u CPUs, groups %s, auth %s%s",
	    st->where, st->node->ngpu, st->node->ncpu, st->groups,
	    st->srv->ctx.auth ? "on" : "off", rc > 0 ? " (last reload failed, "
	    "see the log)" : "");
}

/* Leases, streams, the loop and its readers, the server; 0 or -1 (err). */
static int
serve_start(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int fd, struct remote_reads **rr,
    struct remote_writes **rw, struct zerr *err)
{
	if (cfg->gpu_leases && leases_create(node, &srv->ctx.leases,
	    err) != 0)
		return -1;
	if (cfg->gpu_leases && cfg->mode == MODE_TCP)
		zlog(ZLOG_WARN, "leases_on_tcp", "msg=\"TCP clients have no "
		    "process to watch: they never take a lease (see "
		    "docs/security.md)\"");
	if (serving_prepare(cfg, srv, node, LOOKUP_THREADS, LOOKUP_QUEUE,
	    err) != 0)
		return -1;
	/*
	 * a split daemon's reads, and the writes requests wait for, are
	 * answered on the network process's loop
	 */
	if (node->pool != NULL && (loop_create(&srv->ctx.loop, err) != 0 ||
	    remote_read_attach(node, srv->ctx.loop, rr, err) != 0 ||
	    remote_write_attach(node, cfg->gpu_leases, srv->ctx.loop, rw,
	    err) != 0))
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

int
network_proc_serve(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int *fd, const struct serve_wiring *w,
    const sigset_t *sigs, struct remote_reads **rr,
    struct remote_writes **rw, struct zerr *err)
{
	struct serve_state st = { .cfg = cfg, .srv = srv, .node = node,
	    .w = w };
	struct signals_handlers h = { .reload = w->reload != NULL ?
	    serve_reload : NULL, .reload_elsewhere = w->reload_elsewhere,
	    .ctx = &st };
	int sig;

	if (serve_start(cfg, srv, node, *fd, rr, rw, err) != 0)
		return -1;
	if (w->serving != NULL)
		w->serving();
	listen_describe(*fd, st.where, sizeof(st.where));
	*fd = -1;			/* the server's now */
	serving_log_listening(cfg, srv, node, st.where, st.groups,
	    sizeof(st.groups));
	/* devices open, socket accepting: systemd may start dependents */
	notify_send("READY=1");
	notify_status("Serving %s: %u GPUs, %u CPUs, groups %s, auth %s",
	    st.where, node->ngpu, node->ncpu, st.groups,
	    srv->ctx.auth ? "on" : "off");
	if (watchdog_start(srv, err) != 0)
		zlog(ZLOG_WARN, "watchdog_not_started", "error=\"%s\"",
		    err->msg);

	sig = signals_loop(sigs, &h);
	notify_stopping(sig);
	watchdog_stop();	/* the loop is about to stop answering */
	/*
	 * Overrides first: a request blocked in one gets its (failed)
	 * answer within the grace instead of holding shutdown until the
	 * command's own timeout, and no new command starts from here on.
	 */
	(void)reaper_shutdown(REAPER_GRACE_MS);
	if (server_stop(srv, SHUTDOWN_GRACE_MS, SHUTDOWN_STUCK_MS) != 0) {
		/*
		 * A device command never returned (a GPU fell off the bus, a
		 * hung driver): its worker cannot be joined, so leave without
		 * tearing anything down, but not before killing any command
		 * still registered and what any command left behind.
		 */
		(void)reaper_shutdown(REAPER_GRACE_MS);
		listen_remove_socket();
		_exit(1);
	}
	return 0;
}
