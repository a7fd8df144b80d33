/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - zeusd's entry point: subcommand dispatch, the startup checks of
 * docs/configuration.md ("Startup refusals"), the one choice between the
 * two wirings (a split daemon, split.h, or one process), and the one
 * teardown.
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
 * Signals are blocked here before anything else (signals_block) and taken
 * by the one signal loop (signals.h) of the process that serves
 * (network_proc.c) and of the device process (device_proc.c).
 *
 * Shutdown order: stop the override commands first (reaper.h: SIGTERM,
 * SIGKILL after a grace), so a worker blocked in one returns at once and
 * its request is answered, then stop the HTTP side (network_proc.c), then
 * here the devices, then sweep once more. No child of zeusd outlives it, on any exit path after
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

#include "access/audit.h"
#include "access/auth.h"
#include "access/lease.h"
#include "access/policy.h"
#include "api/streams.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/pool.h"
#include "http/server.h"
#include "http/tokens.h"
#include "node/node.h"
#include "node/remote_read.h"
#include "node/remote_write.h"
#include "overrides/overrides.h"
#include "overrides/reaper.h"
#include "zeusd/cli.h"
#include "zeusd/listen.h"
#include "zeusd/network_proc.h"
#include "zeusd/notify.h"
#include "zeusd/reload.h"
#include "zeusd/signals.h"
#include "zeusd/split.h"
#include "zeusd/token.h"

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
	if (!cfg->privsep && policy_slurm_confine(p)) {
		policy_free(p);
		return zerr_set(err, ZERR_INVALID, "%s: slurm_jobs = "
		    "\"confine\" is decided by zeusd's device process, which "
		    "--no-privsep does without", cfg->policy_file);
	}
	if (policy_holder_new(p, &srv->ctx.policy) != 0) {
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

/* The one-process daemon (--no-privsep): it reloads itself on SIGHUP. */
static const struct serve_wiring one_proc_wiring = {
	.reload = reload_run,
};

static int
serve_main(int argc, char **argv)
{
	static struct zeusd_config cfg;
	struct overrides *ov = NULL;	/* ours until node_open takes it */
	struct server srv;
	struct node node;
	struct remote_reads *rr = NULL;	/* the shared readers on the loop */
	struct remote_writes *rw = NULL;	/* the GPU writers on the loop */
	struct zerr err;
	sigset_t sigs;
	bool reaping = false;		/* reaper_enable done */
	bool served = false;		/* the server ran: a signal stopped it */
	int fd = -1, rc;
	int device_status = -1;		/* the device process's exit status */

	/* Every thread created from here on inherits this mask. */
	signals_block(&sigs);
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
	srv.ctx.cfg = &cfg;
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
	    auth_key_load_trusted(cfg.signing_key_path, &srv.ctx.key,
	    &err) != 0) ||
	    serve_open_policy(&cfg, &srv, &err) != 0 ||
	    audit_open(cfg.audit_log, &err) != 0)
		goto out;
	srv.ctx.auth = srv.ctx.key != NULL;
	cli_own_host_names(&cfg);
	cli_log_host_names(&cfg);
	if (cfg.mode == MODE_TCP && srv.ctx.key == NULL)
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
	/*
	 * The one choice between the two wirings: two processes from here
	 * (split.h: the device process runs in split_run until the daemon
	 * stops, the network process comes back), or one, which starts its
	 * devices' workers itself. Either then serves the same way.
	 */
	if (cfg.privsep) {
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
	if (network_proc_serve(&cfg, &srv, &node, &fd, cfg.privsep ?
	    &network_proc_wiring : &one_proc_wiring, &sigs, &rr, &rw,
	    &err) != 0)
		goto out;
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
	loop_free(srv.ctx.loop);	/* stopped with the server */
	pool_destroy(srv.ctx.lookups);	/* nothing waits on it now */
	streams_destroy(srv.ctx.streams);	/* after the HTTP side let go */
	/* no request runs now: put leased GPUs back, through their queues */
	if (served && srv.ctx.leases != NULL && cfg.restore_on_shutdown)
		leases_restore_all(srv.ctx.leases, SHUTDOWN_RESTORE_MS);
	leases_stop(srv.ctx.leases);
	leases_end_all(srv.ctx.leases);	/* the ledger's last lines */
	node_close(&node);
	remote_read_free(rr);	/* the readers are stopped */
	remote_write_free(rw);	/* and the GPU workers */
	leases_destroy(srv.ctx.leases);
	overrides_free(ov);
	if (served)
		(void)reaper_sweep(REAPER_GRACE_MS);	/* reparented since */
	else if (reaping)
		serve_end_children();
	auth_key_free(srv.ctx.key);
	tokens_destroy(srv.ctx.tokens);
	policy_holder_free(srv.ctx.policy);
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
	return cli_main(argc, argv, serve_main);
}
