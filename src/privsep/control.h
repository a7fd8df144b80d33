/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.h - the control channel between the two processes of a split
 * daemon (docs/design.md, "Two processes"): one SOCK_SEQPACKET socketpair
 * next to the device channels, for what is not a device call.
 *
 *   network -> device  PSCTL_NOTIFY    a systemd state to pass on, by
 *                                      kind (value: PSCTL_N_*): systemd
 *                                      takes notifications from the main
 *                                      process only, and the device
 *                                      process writes each datagram
 *                                      itself, STATUS= texts included
 *                      PSCTL_RELOADED  the reload the device process sent
 *                                      was applied; value = how many of
 *                                      its parts failed (at most
 *                                      PSCTL_RELOADED_MAX)
 *   device -> network  PSCTL_RELOAD    SIGHUP: the files the network
 *                                      process may not open, as fds
 *                                      (flags say which follow, in bit
 *                                      order), the new table of what the
 *                                      GPU operations lack, value = the
 *                                      number of overridden operations
 *                      PSCTL_STOP      stop (value 0: SIGTERM's stop) or
 *                                      restart (value 1: SIGUSR2's, the
 *                                      leases handed over): the device
 *                                      process's stop reaches its network
 *                                      process through here, not by
 *                                      kill(2), which crosses users only
 *                                      with CAP_KILL (the packaged unit
 *                                      has none)
 *
 * Fixed size, and no text: nothing the network process writes reaches
 * systemd or the log as it wrote it (issue 42, item 4d). The device process
 * checks what comes from the network process as hostile
 * (psctl_check_from_network, and device_proc.c for the order: one READY,
 * a RELOADED only for a reload it sent): a message that does not check
 * out stops the daemon like a bad device request.
 */
#ifndef ZEUS_PRIVSEP_CONTROL_H
#define ZEUS_PRIVSEP_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "remote_gpu.h"

#define PSCTL_MAGIC 0x7a706331u		/* "zpc1" */
#define PSCTL_MAX_FDS 3
/* a RELOADED's count: the parts the device process passes (the fds) */
#define PSCTL_RELOADED_MAX PSCTL_MAX_FDS

enum psctl_type {
	PSCTL_NOTIFY = 1,
	PSCTL_RELOADED,
	PSCTL_RELOAD,
	PSCTL_STOP,
};

/* A PSCTL_STOP's value. */
enum psctl_stop {
	PSCTL_STOP_STOP = 0,		/* as SIGTERM */
	PSCTL_STOP_RESTART = 1,		/* as SIGUSR2 */
};

/*
 * What a PSCTL_NOTIFY asks the device process to tell systemd. READY:
 * "READY=1" and the STATUS= line the device process composes from what it
 * knows itself (the address, the GPU and CPU counts, the groups, auth);
 * WATCHDOG: "WATCHDOG=1"; STOPPING: "STOPPING=1".
 */
enum psctl_notify {
	PSCTL_N_READY = 1,
	PSCTL_N_WATCHDOG,
	PSCTL_N_STOPPING,
};

enum {
	PSCTL_FD_KEY = 1u << 0,
	PSCTL_FD_POLICY = 1u << 1,
	PSCTL_FD_AUDIT = 1u << 2,
	PSCTL_KEY_CHANGED = 1u << 3,	/* no fd: the device's key changed */
};

struct psctl_msg {
	uint32_t magic;
	uint32_t type;
	uint32_t flags;
	uint32_t value;
	struct psgpu_lacks lacks;	/* PSCTL_RELOAD's; else zero */
};

/* Sends m with fds[0..nfds-1] attached (SCM_RIGHTS); 0 or -1 (errno). */
int psctl_send(int fd, const struct psctl_msg *m, const int *fds,
    unsigned nfds);

/*
 * Receives one message and up to PSCTL_MAX_FDS fds. Returns 1 with a
 * message, 0 at end of file, -1 on an error or a malformed message (size,
 * magic, too many fds: `why` says; received fds are closed then).
 */
int psctl_recv(int fd, struct psctl_msg *m, int *fds, unsigned *nfds,
    char *why, size_t whysz);

/*
 * What the device process accepts from the network process: NOTIFY of a
 * kind of enum psctl_notify, or RELOADED with a value of at most
 * PSCTL_RELOADED_MAX; flags 0, no fds, the lacks table zero. 0, or -1
 * with `why`.
 */
int psctl_check_from_network(const struct psctl_msg *m, unsigned nfds,
    char *why, size_t whysz);

#endif
