/* SPDX-License-Identifier: Apache-2.0 */
/*
 * split.h - privilege separation: zeusd as two processes (docs/design.md,
 * "Two processes"; docs/security.md).
 *
 * serve_main opens everything that needs root (the devices, the socket,
 * the key, the policy, the audit log) and calls split_run, which forks
 * (split.c holds the fork alone; each side is a file of its own):
 *   - the device process (device_proc.c; the parent: the PID systemd
 *     knows) keeps root, the real GPU backend, RAPL and the override
 *     runner, and answers the network process's device requests
 *     (src/privsep/device.c); it handles the signals, passes systemd
 *     notifications on, reloads on SIGHUP, and removes the socket at the
 *     end;
 *   - the network process (network_proc.c; the child) keeps only the fds
 *     it needs, loses
 *     the filesystem (chroot), drops to an unprivileged user with no
 *     capabilities, no_new_privs and a seccomp filter
 *     (src/privsep/sandbox.c), and serves HTTP with a node whose devices
 *     are remote (node_open_remote);
 *   - the janitor (a second child, janitor.h) holds only the socket's
 *     directory and removes the socket file should the device process
 *     die without doing so (SIGKILL).
 * Either dying takes the other down: the device process sees SIGCHLD and
 * exits non-zero after cleaning up; the network process sees end of file
 * on the control channel (or any device channel) and exits non-zero.
 */
#ifndef ZEUS_SPLIT_H
#define ZEUS_SPLIT_H

#include "common/err.h"
#include "node/config.h"
#include "node/node.h"
#include "http/server.h"

/*
 * Splits. Returns 0 in the network process, where *node is now the remote
 * node and serving goes on as in one process; in the device process runs
 * until the daemon stops and returns 1 with *status the exit status; -1
 * before the fork (err set).
 */
int split_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, int listen_fd, int *status, struct zerr *err);

#endif
