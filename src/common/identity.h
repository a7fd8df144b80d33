/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity.h - who a local peer is: its user name and groups (NSS) and its
 * command name (/proc/PID/comm), for the node policy, the audit log and
 * the messages that name a user.
 *
 * Both sources are files (or NSS modules that read files and talk to
 * daemons), so in a split daemon only the device process looks them up: the
 * network process has no filesystem (docs/security.md) and asks it over a
 * channel (PSMSG_PEER), once per connection.
 */
#ifndef ZEUS_IDENTITY_H
#define ZEUS_IDENTITY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IDENTITY_MAX_GROUPS 64		/* groups of one peer looked at */
#define IDENTITY_USER_MAX 64		/* name with its NUL */
#define IDENTITY_COMM_MAX 32		/* /proc/PID/comm is at most 16 */
#define IDENTITY_CGROUP_MAX 256		/* path with its NUL */

struct identity {
	char user[IDENTITY_USER_MAX];	/* "" when the uid has no entry */
	char comm[IDENTITY_COMM_MAX];	/* "" when unreadable or pid 0 */
	/*
	 * The process's cgroup (v2: the "0::" line of /proc/PID/cgroup), so a
	 * Slurm job or a systemd unit can be recognised in the energy ledger;
	 * "" when unreadable, pid 0, or longer than the field.
	 */
	char cgroup[IDENTITY_CGROUP_MAX];
	unsigned ngids;			/* 1..IDENTITY_MAX_GROUPS */
	gid_t gids[IDENTITY_MAX_GROUPS];/* gids[0] is the primary gid */
};

/*
 * Looks up uid's user name and supplementary groups (getgrouplist, for a
 * user in more groups than fit: the first ones) and pid's command name and
 * cgroup (pid 0: a peer in another PID namespace, none). Blocking NSS and file reads.
 * Names longer than the fields are left out rather than cut, so a cut name
 * never reads as another user's.
 */
void identity_lookup(uid_t uid, gid_t gid, pid_t pid, struct identity *out);

/*
 * uid's user name alone into out[0..size), NUL-terminated: "" when the
 * uid has none, or one that does not fit (left out, as above). Blocking
 * NSS.
 */
void identity_user(uid_t uid, char *out, size_t size);

#endif
