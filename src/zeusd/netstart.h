/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netstart.h - how the device process starts the network process
 * (docs/design.md, "Two processes"): fork, then fexecve of zeusd itself
 * (the binary this process runs, opened through /proc/self/exe at the
 * start), so that the network process is a fresh image with nothing of
 * root's memory. What it needs comes by number, as OpenBSD ntpd passes its
 * children their socket:
 *
 *   argv    zeusd --network-process <the flags of `zeusd serve`, again>
 *   fd 0, 1 as the device process has them
 *   fd 2    the write end of the log pipe (zeusd/logrelay.h)
 *   fd 3    the control channel (privsep/control.h; SOCK_SEQPACKET)
 *   fd 4    the startup record below, in a sealed memfd
 *   fd 5    the listening socket
 *   fd 6    the audit log, read-only (closed without --audit-log)
 *   fd 7    the node policy as numeric text, a sealed memfd (closed
 *           without --policy-file)
 *   fd 8..  the network ends of the device channels (record's nchan)
 *
 * Nothing else stays open. The flags are parsed again from argv (the same
 * parser, so the same configuration); what the device process found out
 * at startup (the devices, the user to become, whether a key is set, the
 * systemd watchdog, the socket's name) is in the record. The network process refuses to start
 * without these (network_proc_main): run by hand, there is no control
 * channel whose other end is its parent.
 */
#ifndef ZEUS_NETSTART_H
#define ZEUS_NETSTART_H

#include <stdbool.h>
#include <stdint.h>

#include "node/node_remote.h"
#include "privsep/sandbox.h"

#define NETSTART_ARG "--network-process"

enum {
	NETSTART_FD_LOG = 2,
	NETSTART_FD_CTL = 3,
	NETSTART_FD_INFO = 4,
	NETSTART_FD_LISTEN = 5,
	NETSTART_FD_AUDIT = 6,
	NETSTART_FD_POLICY = 7,
	NETSTART_FD_CHAN = 8,
};

#define NETSTART_MAGIC 0x7a6e6574u	/* "znet" */

struct netstart_info {
	uint32_t magic;			/* NETSTART_MAGIC */
	uint32_t size;			/* sizeof(struct netstart_info) */
	uint32_t nchan;			/* channels from NETSTART_FD_CHAN on */
	bool auth;			/* --signing-key-path: tokens decide */
	bool audit;			/* NETSTART_FD_AUDIT is open */
	bool policy;			/* NETSTART_FD_POLICY is open */
	bool notify;			/* under systemd: relay notifications */
	uint64_t watchdog_usec;		/* systemd's watchdog; 0: none */
	char where[300];		/* the socket (listen_describe) */
	bool drop;			/* become `user` (zeusd runs as root) */
	struct sandbox_user user;
	struct node_remote_desc node;	/* the device process's devices */
	/*
	 * Nothing of the leases: the device process keeps them, those it
	 * took back from its journal and the energy ledger included, and
	 * answers for them (privsep/msg.h, PSMSG_LEASES).
	 */
};

#endif
