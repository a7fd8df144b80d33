/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_proc.h - the device process of a split daemon (docs/design.md,
 * "Two processes"): the parent of the fork (split.h, fork_ends.h), the PID systemd
 * knows. It keeps root, the real GPU backend, RAPL and the override
 * runner, answers the network process's device requests, handles the
 * signals, passes systemd notifications on, reloads on SIGHUP, and
 * removes the socket at the end.
 */
#ifndef ZEUS_DEVICE_PROC_H
#define ZEUS_DEVICE_PROC_H

#include <signal.h>

#include "node/config.h"
#include "node/node.h"
#include "http/server.h"
#include "zeusd/fork_ends.h"

/*
 * Runs the device process until the daemon stops; *status is its exit
 * status. The key and the policy in srv are the network process's now and
 * are freed here first. A device command stuck at the stop ends the
 * process (exit 1) without closing the devices.
 */
void device_proc_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, const struct split_ends *ends, const sigset_t *sigs,
    int *status);

#endif
