/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main_win.c - zeusd's entry point on Windows (main.c on Linux): the same
 * subcommands, the same flags less the Linux-only features' (cli.c, with
 * cli_os_win.c's transports), and the one-process wiring of the same
 * modules: devices and their workers (node/), the HTTP server (http/),
 * handlers and streams (api/).
 *
 * Why one process: Linux zeusd splits into a root device process and an
 * unprivileged, sandboxed network process (privsep/, seccomp, chroot, a
 * socketpair between them). Windows has none of fork, seccomp or
 * SCM_RIGHTS, and an NVML write needs an administrator there, so zeusd
 * runs as one process with the account it is started as: an
 * administrator (or a service account with that right) for GPU writes.
 * Everything that parses network input then runs with that account's
 * rights; docs/windows.md says what an administrator must know.
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
#include "api/streams.h"
#include "common/log.h"
#include "common/pool.h"
#include "common/sock.h"
#include "http/pipe_win.h"
#include "http/server.h"
#include "node/node.h"
#include "overrides/overrides.h"
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

/* What serving holds: the server, and the pipe feeding it (or NULL). */
struct serve {
	struct server srv;
	struct pipe_listener *pipe;
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

/* Socket or pipe, key, overrides, devices, server; 0, or -1 with err. */
static int
serve_open(struct zeusd_config *cfg, struct serve *sv, struct node *node,
    int *fd, struct zerr *err)
{
	struct server *srv = &sv->srv;
	struct overrides *ov = NULL;
	int rc;

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
	    auth_key_load_trusted(cfg->signing_key_path, &srv->ctx.key,
	    err) != 0) {
		overrides_free(ov);
		return -1;
	}
	srv->ctx.auth = srv->ctx.key != NULL;	/* one process: it is here */
	rc = node_open_devices(node, cfg, ov, err);	/* takes ov */
	if (rc != 0 || node_start(node, err) != 0)
		return -1;
	/* once nothing can refuse startup: a refusal is its one line */
	cli_log_host_names(cfg);
	if (srv->ctx.key == NULL && cfg->mode == MODE_TCP)
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
	auth_key_free(srv->ctx.key);
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
