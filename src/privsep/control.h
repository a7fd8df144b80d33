/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.h - the control channel between the two processes of a split
 * daemon (docs/design.md, "Two processes"): one SOCK_SEQPACKET socketpair
 * next to the device channels, for what is not a device call.
 *
 *   network -> device  PSCTL_NOTIFY    a systemd notification to pass on
 *                                      (READY=1, STATUS=..., WATCHDOG=1,
 *                                      STOPPING=1): systemd takes them
 *                                      from the main process only
 *                      PSCTL_RELOADED  a reload was applied; value = how
 *                                      many parts failed
 *   device -> network  PSCTL_RELOAD    SIGHUP: the files the network
 *                                      process may not open, as fds
 *                                      (flags say which follow, in bit
 *                                      order), the new table of what the
 *                                      GPU operations lack, value = the
 *                                      number of overridden operations
 *
 * Fixed size. The device process checks what comes from the network
 * process as hostile (psctl_check_from_network): a message that does not
 * check out stops the daemon like a bad device request.
 */
#ifndef ZEUS_PRIVSEP_CONTROL_H
#define ZEUS_PRIVSEP_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "remote_gpu.h"

#define PSCTL_MAGIC 0x7a706331u		/* "zpc1" */
#define PSCTL_TEXT_MAX 256
#define PSCTL_MAX_FDS 3

enum psctl_type {
	PSCTL_NOTIFY = 1,
	PSCTL_RELOADED,
	PSCTL_RELOAD,
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
	char text[PSCTL_TEXT_MAX];	/* NUL-terminated */
	struct psgpu_lacks lacks;
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
 * What the device process accepts from the network process: NOTIFY with a
 * printable text starting READY=1, STATUS=, WATCHDOG=1 or STOPPING=1, or
 * RELOADED; flags 0, no fds. 0, or -1 with `why`.
 */
int psctl_check_from_network(const struct psctl_msg *m, unsigned nfds,
    char *why, size_t whysz);

#endif
