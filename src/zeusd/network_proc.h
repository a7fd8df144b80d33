/* SPDX-License-Identifier: Apache-2.0 */
/*
 * network_proc.h - the network process: it serves HTTP (docs/design.md,
 * "Two processes"). In a split daemon it is the child of the fork
 * (split.h, fork_ends.h), confined and unprivileged, with a node whose devices are the
 * device process's; in the one-process daemon (--no-privsep) the same
 * serving code runs with the node's own devices, wired differently.
 */
#ifndef ZEUS_NETWORK_PROC_H
#define ZEUS_NETWORK_PROC_H

#include <signal.h>

#include "common/err.h"
#include "node/config.h"
#include "node/node.h"
#include "http/server.h"
#include "zeusd/fork_ends.h"

struct remote_reads;
struct remote_writes;

/* What differs between the network process and the one-process daemon. */
struct serve_wiring {
	/* once the server runs (the network process: its control thread) */
	void (*serving)(void);
	/*
	 * SIGHUP: re-reads what a reload re-reads and returns how many parts
	 * failed (reload.h); NULL where another process reloads, and the
	 * signal is logged with `reload_elsewhere`.
	 */
	int (*reload)(const struct zeusd_config *cfg, struct server *srv,
	    struct node *node);
	const char *reload_elsewhere;
};

/* The network process of a split daemon. */
extern const struct serve_wiring network_proc_wiring;

/*
 * The network process right after the fork: keeps only the fds it needs
 * (the listening socket, its channels, the control channel, the audit
 * log), opens *node over the device process (node_open_remote), then loses
 * the filesystem, drops to ends->user and installs its seccomp filter. On
 * any failure it logs and exits 1.
 */
void network_proc_become(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, const struct split_ends *ends);

/*
 * Serves on *fd (taken: set to -1 once the server owns it) until a signal
 * in `sigs` stops it, then stops the server. Returns 0 once stopped, -1
 * with err when it could not start; what it opened (srv->ctx's leases,
 * streams and loop, *rr, *rw) is main.c's to tear down either way. A device
 * command stuck at the stop ends the process (exit 1) without teardown.
 */
int network_proc_serve(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int *fd, const struct serve_wiring *w,
    const sigset_t *sigs, struct remote_reads **rr,
    struct remote_writes **rw, struct zerr *err);

#endif
