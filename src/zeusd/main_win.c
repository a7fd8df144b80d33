/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main_win.c - zeusd's entry point on Windows (main.c on Linux): the same
 * subcommands, the same flags less the Linux-only features' (cli.c, with
 * cli_os_win.c's transports), and the same two halves as Linux in one
 * process.
 *
 * The halves: the device half is the node's devices (node/), the warden
 * that decides every write (access/warden.h) and the executor of the
 * boundary table (privsep/boundary.h, exec.h); the network half is the
 * HTTP server (http/), the handlers and streams (api/) and a node that
 * reaches the devices through that table (node_open_remote). On Linux
 * the halves are two processes and the table is reached over socket
 * pairs; Windows has neither fork, seccomp nor SCM_RIGHTS, so here the
 * network half calls the table directly (privsep/chan_direct.c): each
 * request is checked by its row and judged by the same warden, and each
 * reply is checked as one from a socket, but both run on the caller's
 * thread. What the split gives Linux (a network half without the
 * signing key's bytes or the devices' rights) does not exist here: one
 * process has the account it is started as, an administrator (or a
 * service account with that right) for GPU writes, and everything that
 * parses network input runs with that account's rights; docs/windows.md
 * says what an administrator must know.
 *
 * Transports: the named pipe (http/pipe_win.h, the default) or TCP
 * (listen_win.c), both served by the same HTTP server.
 *
 * Startup refuses (one line, non-zero exit) what this build does not do:
 * cpu-read (RAPL is Linux-only) here, exit 1; the flags of the Linux-only
 * features (node policy, GPU leases, audit log, privilege separation,
 * --rapl-dir) are cli.c's usage errors, exit 2, and not in the help. There is
 * no administrator check at startup, as upstream: a write the driver
 * refuses answers 403 naming the account.
 *
 * Run by the Service Control Manager, `serve` is the service
 * (service_win.h), its status reported to the SCM.
 *
 * Stopping: the console control handler (console_win.h) takes Ctrl-C,
 * Ctrl-Break, console close, logoff and shutdown, and the service's stop
 * and shutdown controls come the same way; then, as on Linux, the
 * server stops accepting, streams end, in-flight requests get their answer
 * within a grace, the device workers stop (what is still queued is
 * answered 503) and zeusd exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/auth.h"
#include "access/warden.h"
#include "api/streams.h"
#include "common/log.h"
#include "common/pool.h"
#include "common/sock.h"
#include "http/pipe_win.h"
#include "http/server.h"
#include "http/tokens.h"
#include "node/node.h"
#include "node/node_remote.h"
#include "overrides/overrides.h"
#include "privsep/chan.h"
#include "privsep/exec.h"
#include "zeusd/cli.h"
#include "zeusd/console_win.h"
#include "zeusd/listen.h"
#include "zeusd/service_win.h"
#include "zeusd/serving.h"
#include "zeusd/token.h"

#define SHUTDOWN_GRACE_MS 3000	/* in-flight requests finish */
#define SHUTDOWN_STUCK_MS 30000	/* then device commands, at most (Linux's) */
#define SHUTDOWN_STUCK_CLOSE_MS 1000	/* after a console close: Windows
					 * leaves about 5 s in all */
#define LOOKUP_THREADS 2	/* the server's look-up pool (no NSS here) */
#define LOOKUP_QUEUE 256
#define SHARED_CALLERS 8	/* callers of the device half besides the
				 * GPUs' workers: the shared readers, the
				 * stream sampler, the HTTP thread, the
				 * look-up pool's threads */

/* What this build cannot serve: one line, exit 1. */
static int
serve_refuse_startup(const struct zeusd_config *cfg, struct zerr *err)
{
	if (cfg->enabled & GROUP_BIT(GROUP_CPU_READ))
		return zerr_set(err, ZERR_INVALID, "API group 'cpu-read' is "
		    "only supported on Linux. Remove it from --enable (the "
		    "default on Windows is gpu-control,gpu-read,metrics)");
	return 0;
}

/*
 * The device half: the devices, the signing key, the warden that judges
 * every write and the executor of the boundary table over them.
 */
struct device_half {
	struct node node;		/* opened, never started: its backends
					 * run on the callers' threads */
	struct auth_key *key;
	struct warden *warden;
	struct psexec_guard guard;
	struct psexec x;
	struct psmsg_limits lim;
	struct node_remote_desc desc;	/* what the network half is told */
};

/* What serving holds: the server, the pipe feeding it (or NULL), the
 * device half and the calls between the halves. */
struct serve {
	struct server srv;
	struct pipe_listener *pipe;
	struct device_half dev;
	struct pschan_pool *calls;
};

/*
 * The server's shutdown hooks (server.h): the pipe stops accepting as
 * the TCP listener does, and the streams end with the server.
 */
static void
serve_streams_quiesce(void *ctx)
{
	struct serve *sv = ctx;

	pipe_listen_quiesce(sv->pipe);
	serving_streams_quiesce(&sv->srv);
}

static void
serve_streams_stopping(void *ctx)
{
	struct serve *sv = ctx;

	serving_streams_stopping(&sv->srv);
}

/* The transport: the named pipe's first instance, or the TCP socket. */
static int
serve_listen(const struct zeusd_config *cfg, struct serve *sv, int *fd,
    struct zerr *err)
{
	if (cfg->mode == MODE_PIPE) {
		*fd = -1;
		return pipe_listen_open(cfg->pipe_name, cfg->pipe_sddl,
		    &sv->pipe, err);
	}
	return (*fd = listen_open(cfg, err)) < 0 ? -1 : 0;
}

/*
 * The device half, as device_proc.c makes Linux's device process: the
 * devices (taking ov), the warden (no policy, leases or audit log here:
 * cli.c refuses their flags), the executor; then the calls the network
 * half makes to it. 0, or -1 with err.
 */
static int
serve_device_half(const struct zeusd_config *cfg, struct serve *sv,
    struct overrides *ov, struct zerr *err)
{
	struct device_half *d = &sv->dev;
	struct warden_config wc = { .enabled = cfg->enabled,
	    .tcp_transport = cfg->mode == MODE_TCP,
	    .pipe_transport = cfg->mode == MODE_PIPE };

	if (node_open_devices(&d->node, cfg, ov, err) != 0)
		return -1;
	wc.ngpu = d->node.ngpu;
	wc.key = d->key;
	if (warden_create(&wc, &d->warden, err) != 0)
		return -1;
	warden_guard(d->warden, &d->guard);
	d->x = (struct psexec){ .guard = &d->guard, .gpu = &d->node.gpu,
	    .ngpu = d->node.ngpu };
	d->lim = (struct psmsg_limits){ .ngpu = d->node.ngpu };
	if (node_remote_describe(&d->node, &d->desc, err) != 0)
		return -1;
	return pschan_pool_direct(&d->x, &d->lim, d->node.ngpu +
	    SHARED_CALLERS, &sv->calls, err);
}

/* Socket or pipe, key, overrides, the two halves, server; 0, or -1 (err). */
static int
serve_open(struct zeusd_config *cfg, struct serve *sv, struct node *node,
    int *fd, struct zerr *err)
{
	struct server *srv = &sv->srv;
	struct overrides *ov = NULL;

	/* the transport first: its refusal (a bad SDDL, a pipe or port in
	 * use) is the one line, before any device is opened */
	if (server_configure(srv, err) != 0 || streams_check_env(err) != 0 ||
	    sock_startup(err) != 0 || console_arm(err) != 0 ||
	    serve_listen(cfg, sv, fd, err) != 0)
		return -1;
	if (cfg->gpu_command_overrides != NULL) {
		if (!(cfg->enabled & GROUP_BIT(GROUP_GPU_CONTROL)))
			zlog(ZLOG_WARN, "overrides_ignored",
			    "msg=\"--gpu-command-overrides given but gpu-control "
			    "is not enabled; the file is ignored\"");
		else if (overrides_load(cfg->gpu_command_overrides, &ov,
		    err) != 0)
			return -1;
	}
	if (cfg->signing_key_path != NULL &&
	    auth_key_load_trusted(cfg->signing_key_path, &sv->dev.key,
	    err) != 0) {
		overrides_free(ov);
		return -1;
	}
	/* the key is the device half's: tokens go there (PSMSG_TOKEN), and
	 * the network half keeps their verdicts (http/tokens.h) */
	srv->ctx.auth = sv->dev.key != NULL;
	if (srv->ctx.auth && (srv->ctx.tokens = tokens_create()) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	if (serve_device_half(cfg, sv, ov, err) != 0 ||	/* takes ov */
	    node_open_remote(node, &sv->dev.desc, sv->calls, err) != 0)
		return -1;
	/* once nothing can refuse startup: a refusal is its one line */
	cli_log_host_names(cfg);
	zlog(ZLOG_INFO, "device_half", "calls=%u msg=\"the network half "
	    "reaches the devices, the key and the warden through the boundary "
	    "table, by direct calls\"", pschan_pool_size(sv->calls));
	if (!srv->ctx.auth && cfg->mode == MODE_TCP)
		zlog(ZLOG_WARN, "tcp_without_auth", "msg=\"TCP without "
		    "--signing-key-path: anyone who can reach the port can use "
		    "every enabled API group\"");
	if (serving_prepare(cfg, srv, node, LOOKUP_THREADS, LOOKUP_QUEUE,
	    err) != 0)
		return -1;
	srv->hooks = (struct server_hooks){ .quiesce = serve_streams_quiesce,
	    .stopping = serve_streams_stopping, .ctx = sv,
	    .peer = sv->pipe != NULL ? pipe_listen_peer : NULL,
	    .peer_ctx = sv->pipe };
	if (server_start(srv, *fd, err) != 0)
		return -1;
	if (sv->pipe != NULL && pipe_listen_start(sv->pipe, srv, err) != 0)
		return -1;
	return 0;
}

static int
serve_main(int argc, char **argv)
{
	static struct zeusd_config cfg;
	static struct serve sv;
	struct server *srv = &sv.srv;
	struct node node;
	struct zerr err;
	char where[300], groups[80];
	const char *why;
	bool served = false;
	int fd = -1, rc;

	rc = cli_parse_serve(argc, argv, &cfg, stdout, &err);
	if (rc == 1)
		return 0;
	if (rc != 0) {
		fprintf(stderr, "zeusd: %s\n", err.msg);
		return 2;
	}
	cli_own_host_names(&cfg);
	memset(&node, 0, sizeof(node));
	srv->ctx.cfg = &cfg;
	if (serve_refuse_startup(&cfg, &err) != 0 ||
	    serve_open(&cfg, &sv, &node, &fd, &err) != 0)
		goto out;
	if (sv.pipe != NULL)
		pipe_listen_describe(sv.pipe, where, sizeof(where));
	else
		listen_describe(fd, where, sizeof(where));
	fd = -1;			/* the server's now */
	serving_log_listening(&cfg, srv, &node, where, groups, sizeof(groups));
	service_running();
	why = console_wait();
	service_stopping();
	zlog(ZLOG_INFO, "stopping", "event=%s", why);
	if (server_stop(srv, SHUTDOWN_GRACE_MS, console_deadline() ?
	    SHUTDOWN_STUCK_CLOSE_MS : SHUTDOWN_STUCK_MS) != 0) {
		/* a device command never returned: its worker cannot join */
		console_done();
		_Exit(1);
	}
	served = true;
out:
	if (!served && srv->mhd != NULL)	/* the pipe's thread failed */
		(void)server_stop(srv, 0, SHUTDOWN_STUCK_MS);
	pipe_listen_close(sv.pipe);	/* its relays end */
	if (fd >= 0)
		sock_close(fd);
	pool_destroy(srv->ctx.lookups);
	streams_destroy(srv->ctx.streams);
	node_close(&node);	/* workers stop; queued commands answered */
	pschan_pool_destroy(sv.calls);	/* nothing calls the device half */
	tokens_destroy(srv->ctx.tokens);
	warden_destroy(sv.dev.warden);
	node_close(&sv.dev.node);
	auth_key_free(sv.dev.key);
	if (!served) {
		fprintf(stderr, "zeusd: %s\n", err.msg);
		return 1;
	}
	zlog(ZLOG_INFO, "stopped", NULL);
	console_done();
	return 0;
}

/* `serve`: as the service when the Service Control Manager started us */
static int
serve_entry(int argc, char **argv)
{
	int rc = service_run(serve_main, argc, argv);

	return rc >= 0 ? rc : serve_main(argc, argv);
}

int
main(int argc, char **argv)
{
	return cli_main(argc, argv, serve_entry);
}
