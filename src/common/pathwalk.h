/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pathwalk.h - walks a path as it is written, directory by directory and
 * through every symbolic link on the way, so that a caller can ask of each
 * whether someone other than root could redirect the path there.
 *
 * realpath(3) and open(2) follow links silently, and a check of only the
 * file at the end misses a directory or a link on the way that another
 * user owns: that user can swap what the path names at any time (rename,
 * or repoint a link of theirs, even inside a sticky /tmp). zeusd uses this
 * for its socket path (listen.c) and for the files it reads as root
 * (pathwalk_trusted: the signing key, the node policy, the override
 * commands, the audit log).
 */
#ifndef ZEUS_PATHWALK_H
#define ZEUS_PATHWALK_H

#include <sys/stat.h>

#include "common/err.h"

/* Symbolic links followed in one walk, in all (as the kernel's 40, less). */
#define PATHWALK_MAX_LINKS 16

struct pathwalk_ops {
	/*
	 * A directory on the way, open as `fd` (O_PATH), named `shown`:
	 * 0 to go on, -1 to stop the walk (err set).
	 */
	int (*dir)(void *arg, int fd, const char *shown, struct zerr *err);
	/*
	 * A symbolic link on the way (its lstat in `st`), before it is
	 * followed: 0 to follow it (its target is walked the same way), -1
	 * to stop (err set).
	 */
	int (*link)(void *arg, const char *shown, const struct stat *st,
	    struct zerr *err);
};

/*
 * Walks `path` (relative: from the working directory) from "/" on. Stops
 * quietly with 0 at the first component that is missing or not a
 * directory (the file at the end, or what a caller creates later); -1 when
 * a callback said so, the path is too long, or has more than
 * PATHWALK_MAX_LINKS links (err set; `what` names the path in messages,
 * e.g. "--policy-file").
 */
int pathwalk(const char *path, const char *what,
    const struct pathwalk_ops *ops, void *arg, struct zerr *err);

/*
 * The rule for a file zeusd reads with its privileges: every directory on
 * the way is owned by root or zeusd's effective user and not writable by
 * group or others unless sticky (others may add entries there but cannot
 * rename or remove ours), and every symbolic link is owned by root or
 * zeusd's effective user. Returns 0, or -1 with err naming the directory
 * or link, its owner and mode, and the fix. As root a violation is an
 * error; as any other user, whose privileges an attacker cannot borrow,
 * it is logged (`path_unsafe`, warn) and 0 returned.
 */
int pathwalk_trusted(const char *path, const char *what, struct zerr *err);

#endif
