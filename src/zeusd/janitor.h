/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.h - the split daemon's third process, which removes the socket
 * file when the device process ends without removing it (docs/design.md,
 * "Two processes").
 *
 * The device process (root) creates the socket file and removes it at its
 * end. Killed with SIGKILL, it removes nothing, and the network process
 * (unprivileged) may not: the file would stay until the next start. So
 * the device process forks a janitor before its threads start. The
 * janitor keeps stdio, the read end of a pipe whose only write end the
 * device process holds, and the socket's verified directory fd; closes
 * every other fd; blocks every signal it can, so that a Ctrl-C or
 * systemd's SIGTERM to the whole group leaves it alone; installs a seccomp
 * filter that allows little more than the removal; and waits in read().
 * End of file means the device process is gone, whichever way: it then
 * removes the file if the path still holds the very socket zeusd created
 * (listen_remove_socket: same device and inode, so a newer daemon's
 * socket is never touched), logs when it did, and exits.
 */
#ifndef ZEUS_JANITOR_H
#define ZEUS_JANITOR_H

#include <sys/types.h>

#include "common/err.h"

/*
 * Device process, before any thread starts (it forks). Starts the janitor
 * and spares it from the override reaper's sweeps; does nothing when there
 * is no socket file of ours to remove (TCP, or a socket from systemd).
 * Returns 0, or -1 with `err` (nothing started).
 */
int janitor_start(struct zerr *err);

/* The janitor's pid, or 0 when none runs. */
pid_t janitor_pid(void);

/*
 * Device process, at its end, after it removed the socket itself: closes
 * the pipe, so the janitor finds nothing to do and exits, and reaps it
 * (SIGKILL when it has not exited within a second). Logs a janitor that
 * died before (janitor_died). Does nothing when none was started; safe
 * to call more than once.
 */
void janitor_stop(void);

#endif
