/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - zeusd's entry point: subcommand dispatch, the startup checks of
 * docs/configuration.md ("Startup refusals"), and the signal-driven shutdown.
 *
 * Startup order: block the signals handled here (so that no thread, not
 * even one libmicrohttpd or a device library starts, can take one), parse
 * flags, read the systemd environment (notify socket, watchdog, a socket
 * passed by socket activation), load overrides and signing key, refuse
 * root-only groups without root, become a child subreaper, open devices,
 * open the socket (or take systemd's), serve, and only then tell systemd
 * READY=1. A failure at any step prints one line and exits non-zero before
 * a socket is left behind.
 *
 * Signals, all taken by sigwait(2) on this thread: SIGTERM and SIGINT stop
 * the daemon; SIGHUP reloads the signing key and the overrides file
 * (reload.c); SIGUSR1 and SIGUSR2 are logged and otherwise ignored, and
 * SIGPIPE is ignored, so none of them can kill a daemon by accident.
 *
 * Shutdown order: stop the override commands first (reaper.h: SIGTERM,
 * SIGKILL after a grace), so a worker blocked in one returns at once and
 * its request is answered, then stop the HTTP side, then the devices, then
 * sweep once more. No child of zeusd outlives it, on any exit path after
 * the subreaper is set: its children are root's processes too.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "overrides/overrides.h"
#include "overrides/reaper.h"
#include "audit.h"
#include "auth.h"
#include "cli.h"
#include "lease.h"
#include "listen.h"
#include "node.h"
#include "notify.h"
#include "policy.h"
#include "reload.h"
#include "remote_read.h"
#include "server.h"
#include "split.h"
#include "streams.h"
#include "token.h"
#include "watchdog.h"

#define SHUTDOWN_GRACE_MS 5000	/* in-flight requests finish */
#define SHUTDOWN_STUCK_MS 30000	/* then device commands, at most */
#define SHUTDOWN_RESTORE_MS 10000	/* --restore-on-shutdown, at most */

static int
serve_fail(const struct zerr *err)
{
	fprintf(stderr, "zeusd: %s\n", err->msg);
	return 1;
}

/*
 * Every exit path after reaper_enable: kill the running override commands
 * and every process they left behind (nothing at all on a startup failure,
 * unless a device backend spawned something).
 */
static void
serve_end_children(void)
{
	(void)reaper_shutdown(REAPER_GRACE_MS);
}

/*
 * Refuses root-only groups without root (docs/configuration.md), unless
 * simulated.
 */
static int
serve_check_privileges(const struct zeusd_config *cfg,
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
serve_open_policy(const struct zeusd_config *cfg, struct server *srv,
    struct zerr *err)
{
	struct policy *p;

	if (cfg->policy_file == NULL)
		return 0;
	if (policy_load(cfg->policy_file, &p, err) != 0)
		return -1;
	if (policy_holder_new(p, &srv->policy) != 0) {
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
serve_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int
serve_main(int argc, char **argv)
{
	static struct zeusd_config cfg;
	struct overrides *ov = NULL;	/* ours until node_open takes it */
	struct server srv;
	struct node node;
	struct zerr err;
	sigset_t sigs;
	char where[160], groups[80];
	bool reaping = false;		/* reaper_enable done */
	bool served = false;		/* the server ran: a signal stopped it */
	int fd = -1, sig, rc;
	int device_status = -1;		/* the device process's exit status */

	/* Every thread created from here on inherits this mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = cli_parse_serve(argc, argv, &cfg, stdout, &err);
	if (rc == 1)
		return 0;
	if (rc != 0) {
		fprintf(stderr, "zeusd: %s\n", err.msg);
		return 2;
	}
	/*
	 * From here every exit goes through `out`, whose steps all accept
	 * what was never opened: a zeroed node, NULL pointers, no socket.
	 */
	memset(&srv, 0, sizeof(srv));
	memset(&node, 0, sizeof(node));
	srv.cfg = &cfg;
	/* every configuration error stops startup before anything is opened */
	if (server_configure(&srv, &err) != 0 || streams_check_env(&err) != 0)
		goto out;
	/* Before any thread: both unset environment variables. */
	notify_init();
	if (listen_from_systemd(&cfg, &fd, &err) < 0)
		goto out;
	if (cfg.gpu_command_overrides != NULL) {
		if (!(cfg.enabled & GROUP_BIT(GROUP_GPU_CONTROL)))
			zlog(ZLOG_WARN, "overrides_ignored",
			    "msg=\"--gpu-command-overrides given but gpu-control "
			    "is not enabled; the file is ignored\"");
		else if (overrides_load(cfg.gpu_command_overrides, &ov,
		    &err) != 0)
			goto out;
	}
	if (serve_check_privileges(&cfg, ov, &err) != 0 ||
	    (cfg.signing_key_path != NULL &&
	    auth_key_load_trusted(cfg.signing_key_path, &srv.key,
	    &err) != 0) ||
	    serve_open_policy(&cfg, &srv, &err) != 0 ||
	    audit_open(cfg.audit_log, &err) != 0)
		goto out;
	if (cfg.mode == MODE_TCP && srv.key == NULL)
		zlog(ZLOG_WARN, "tcp_without_auth", "msg=\"TCP without "
		    "--signing-key-path: anyone who can reach the port can use "
		    "every enabled API group\"");

	serve_raise_fd_limit();
	/* Before any device thread exists, so no override can run first. */
	if (reaper_enable(&err) != 0)
		goto out;
	reaping = true;

	rc = node_open_devices(&node, &cfg, ov, &err);
	ov = NULL;			/* the node took it over either way */
	if (rc != 0)
		goto out;
	if (fd >= 0)
		zlog(ZLOG_INFO, "socket_activated", "fd=%d msg=\"listening "
		    "socket passed by systemd; its path, mode and owner come "
		    "from the .socket unit\"", fd);
	else if ((fd = listen_open(&cfg, &err)) < 0)
		goto out;
	if (cfg.privsep) {
		/* two processes from here (split.h); one comes back */
		rc = split_run(&cfg, &srv, &node, fd, &device_status, &err);
		if (rc < 0)
			goto out;
		if (rc > 0) {
			fd = -1;	/* the network process's */
			goto out;	/* the device process is done */
		}
		reaping = false;	/* the device process's job */
	} else if (node_start(&node, &err) != 0)
		goto out;
	srv.node = &node;
	if (cfg.gpu_leases && leases_create(&node, &srv.leases, &err) != 0)
		goto out;
	if (cfg.gpu_leases && cfg.mode == MODE_TCP)
		zlog(ZLOG_WARN, "leases_on_tcp", "msg=\"TCP clients have no "
		    "process to watch: they never take a lease (see "
		    "docs/security.md)\"");
	if (streams_create(&cfg, &node, &srv.streams, &err) != 0)
		goto out;
	if (remote_read_attach(&node, &srv, &err) != 0)
		goto out;
	if (server_start(&srv, fd, &err) != 0)
		goto out;
	if (cfg.privsep)
		split_network_serving();	/* reloads apply from here */
	listen_describe(fd, where, sizeof(where));
	fd = -1;			/* the server's now */
	group_set_format(cfg.enabled, groups, sizeof(groups));
	zlog(ZLOG_INFO, "listening", "address=%s gpus=%u cpus=%u "
	    "groups=\"%s\" auth=%s simulate=%s version=%s", where,
	    node.ngpu, node.ncpu, groups, srv.key ? "on" : "off",
	    cfg.simulate ? "true" : "false", ZEUS_VERSION);
	/* devices open, socket accepting: systemd may start dependents */
	notify_send("READY=1");
	notify_status("Serving %s: %u GPUs, %u CPUs, groups %s, auth %s",
	    where, node.ngpu, node.ncpu, groups, srv.key ? "on" : "off");
	if (watchdog_start(&srv, &err) != 0)
		zlog(ZLOG_WARN, "watchdog_not_started", "error=\"%s\"",
		    err.msg);

	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGHUP && cfg.privsep) {
			/* the device process reloads and sends us the files */
			zlog(ZLOG_INFO, "signal_ignored", "signal=SIGHUP "
			    "msg=\"send it to the device process (the main "
			    "PID)\"");
			continue;
		}
		if (sig == SIGHUP) {
			notify_send("RELOADING=1");
			notify_status("Reloading the signing key and overrides");
			rc = reload_run(&cfg, &srv, &node);
			notify_send("READY=1");
			notify_status("Serving %s: %u GPUs, %u CPUs, groups %s, "
			    "auth %s%s", where, node.ngpu, node.ncpu, groups,
			    srv.key ? "on" : "off", rc > 0 ? " (last reload "
			    "failed, see the log)" : "");
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
	watchdog_stop();	/* the loop is about to stop answering */
	/*
	 * Overrides first: a request blocked in one gets its (failed)
	 * answer within the grace instead of holding shutdown until the
	 * command's own timeout, and no new command starts from here on.
	 */
	serve_end_children();
	if (server_stop(&srv, SHUTDOWN_GRACE_MS, SHUTDOWN_STUCK_MS) != 0) {
		/*
		 * A device command never returned (a GPU fell off the bus, a
		 * hung driver): its worker cannot be joined, so leave without
		 * tearing anything down, but not before killing any command
		 * still registered and what any command left behind.
		 */
		serve_end_children();
		listen_remove_socket();
		_exit(1);
	}
	served = true;
out:
	/*
	 * The one teardown, for a startup failure at any step and for the
	 * shutdown alike: the socket and the streams (the HTTP side has let
	 * go), then leases and devices, then children, then the key, the
	 * policy and the audit log.
	 */
	if (fd >= 0)
		close(fd);	/* opened but never handed to the server */
	listen_remove_socket();	/* only if still the socket we created */
	streams_destroy(srv.streams);	/* after the HTTP side let go */
	/* no request runs now: put leased GPUs back, through their queues */
	if (served && srv.leases != NULL && cfg.restore_on_shutdown)
		leases_restore_all(srv.leases, SHUTDOWN_RESTORE_MS);
	leases_stop(srv.leases);
	node_close(&node);
	leases_destroy(srv.leases);
	overrides_free(ov);
	if (served)
		(void)reaper_sweep(REAPER_GRACE_MS);	/* reparented since */
	else if (reaping)
		serve_end_children();
	auth_key_free(srv.key);
	policy_holder_free(srv.policy);
	audit_close();
	if (device_status >= 0) {
		zlog(ZLOG_INFO, "stopped", "status=%d", device_status);
		return device_status;
	}
	if (!served)
		return serve_fail(&err);
	zlog(ZLOG_INFO, "stopped", NULL);
	return 0;
}

int
main(int argc, char **argv)
{
	(void)zlog_detect_journal();
	if (zlog_init_from_env() != 0) {
		fprintf(stderr, "zeusd: invalid ZEUSD_LOG (expected debug, "
		    "info, warn or error, in any case)\n");
		return 1;
	}
	if (argc < 2) {
		cli_print_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("zeusd %s\n", ZEUS_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		cli_print_usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "serve") == 0)
		return serve_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "token") == 0)
		return token_main(argc - 1, argv + 1);
	fprintf(stderr, "zeusd: unknown command '%.64s' (see zeusd --help)\n",
	    argv[1]);
	return 2;
}
