/* SPDX-License-Identifier: Apache-2.0 */
/*
 * split.c - the fork into a device process and a network process (see
 * split.h): the channels between them, the network process's user, and
 * nothing else. What each process then does is device_proc.c's and
 * network_proc.c's.
 */
#include "zeusd/split.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include "access/audit.h"
#include "common/log.h"
#include "node/remote_write.h"
#include "privsep/chan.h"
#include "privsep/msg.h"
#include "privsep/sandbox.h"
#include "zeusd/device_proc.h"
#include "zeusd/janitor.h"
#include "zeusd/listen.h"
#include "zeusd/network_proc.h"

/*
 * Channels: one per network-side thread that may call the device process
 * at the same time: a worker per GPU and per package, the GPU power
 * reader, the CPU energy reader, the stream sampler and the HTTP thread
 * (PSMSG_PROC for /metrics, PSMSG_PEER at a Unix connection's first
 * request); one more so a burst never waits for one; and one each that
 * the two readers keep for the batches answered on the HTTP loop
 * (remote_read.h; their threads still run the batches that come back to
 * them); and, without --gpu-leases, one per GPU that its worker keeps for
 * the writes answered on the HTTP loop (remote_write.h; the worker's
 * thread keeps its own for the rest). (The RAPL keepalive runs in the
 * device process, next to the counters.)
 */
#define SPLIT_SHARED_CHANNELS 7

int
split_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int listen_fd, int *status, struct zerr *err)
{
	unsigned nchan = node->ngpu + node->ncpu + SPLIT_SHARED_CHANNELS +
	    remote_write_channels(node, cfg->gpu_leases);
	struct sandbox_user user, *u = NULL;
	struct pschan_pool *pool;
	struct split_ends ends;
	struct sockaddr_storage name;
	socklen_t name_len;
	sigset_t sigs;
	int ctl[2] = { -1, -1 }, logp[2], *peer, audit_ro;
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
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0 ||
	    pipe2(logp, O_CLOEXEC) != 0) {
		int e = errno;

		if (ctl[0] >= 0) {
			close(ctl[0]);
			close(ctl[1]);
		}
		pschan_pool_destroy(pool);
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		return zerr_set(err, ZERR_INTERNAL, "socketpair or pipe: %s",
		    strerror(e));
	}
	/* the network process's view of the audit log: read-only */
	audit_ro = audit_open_readonly();
	if (audit_enabled() && audit_ro < 0) {
		int e = errno;

		close(ctl[0]);
		close(ctl[1]);
		close(logp[0]);
		close(logp[1]);
		pschan_pool_destroy(pool);
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		return zerr_set(err, ZERR_INTERNAL, "the audit log, read-only: "
		    "%s", strerror(e));
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
		close(logp[0]);
		close(logp[1]);
		if (audit_ro >= 0)
			close(audit_ro);
		return zerr_set(err, ZERR_INTERNAL, "fork: %s", strerror(e));
	}
	if (pid == 0) {
		/* the audit log is written by the device process only */
		if (audit_enabled())
			audit_set_readonly(audit_ro);
		for (unsigned i = 0; i < nchan; i++)
			close(peer[i]);
		free(peer);
		close(ctl[0]);
		/* our log goes through the device process (zeusd/logrelay.h) */
		if (dup2(logp[1], STDERR_FILENO) < 0)
			_exit(1);
		close(logp[0]);
		close(logp[1]);
		ends = (struct split_ends){ .ctl = ctl[1], .net = 0,
		    .pool = pool, .user = u, .listen_fd = listen_fd };
		network_proc_become(cfg, srv, node, &ends);
		return 0;
	}
	close(ctl[1]);
	close(logp[1]);
	if (audit_ro >= 0)
		close(audit_ro);
	/* the warden's proof that a peer's socket is one of ours */
	name_len = sizeof(name);
	memset(&name, 0, sizeof(name));
	if (getsockname(listen_fd, (struct sockaddr *)&name, &name_len) != 0)
		name_len = 0;
	close(listen_fd);
	pschan_pool_destroy(pool);	/* the network process has its ends */
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	ends = (struct split_ends){ .ctl = ctl[0], .net = pid, .peer = peer,
	    .nchan = nchan, .listen_name = &name, .listen_name_len = name_len,
	    .log_fd = logp[0] };
	device_proc_run(cfg, srv, node, &ends, &sigs, status);
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
