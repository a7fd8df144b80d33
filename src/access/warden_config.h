/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden_config.h - what the device process's warden is made with
 * (warden.h, warden_create): apart so that the warden's own files
 * (warden_int.h) see it without the calls.
 */
#ifndef ZEUS_ACCESS_WARDEN_CONFIG_H
#define ZEUS_ACCESS_WARDEN_CONFIG_H

#include <stdbool.h>
#include <sys/types.h>

#include "node/groups.h"

struct policy_holder;
struct auth_key;

struct warden_config {
	unsigned ngpu;
	/*
	 * The signing key (NULL: auth off), the device process's alone: a
	 * split daemon's network process never holds it and asks here
	 * (PSMSG_TOKEN). Not owned; replaced in place on SIGHUP
	 * (auth_key_replace), then warden_key_reloaded.
	 */
	struct auth_key *key;
	group_set enabled;		/* --enable */
	bool unix_transport, tcp_transport;	/* what zeusd serves */
	bool pipe_transport;		/* zeusd.exe's named pipe */
	bool leases;			/* --gpu-leases */
	bool audit_required;		/* --audit-required */
	struct policy_holder *policy;	/* NULL: none; not owned */
	pid_t net;			/* the network process (refused as a
					 * peer of its own) */
	/*
	 * The path of zeusd's listening Unix socket (getsockname before the
	 * split; "" unknown): a peer's socket must be connected to it.
	 */
	char listen_path[108];
	/*
	 * --state-dir: the lease journal's directory (journal.h), opened by
	 * warden_create (NULL: no journal; only with leases).
	 */
	const char *state_dir;
};

#endif
