/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.h - the device process's side of the channels (docs/design.md,
 * "Two processes").
 *
 * One thread per channel blocks in a read; each request is checked in full
 * (psmsg_request_check) before anything runs, then executed on the real
 * backend (psexec_run) and answered. The network process is untrusted: a
 * message that does not check out is logged with the reason, the network
 * process is killed, and `on_refused` tells the main loop, which takes the
 * daemon down (exit non-zero; no half-alive daemon). End of file on a
 * channel (the network process exited) just ends that thread.
 */
#ifndef ZEUS_PRIVSEP_DEVICE_H
#define ZEUS_PRIVSEP_DEVICE_H

#include <sys/types.h>

#include "common/err.h"
#include "exec.h"
#include "msg.h"

struct psdev;

/*
 * Starts one thread per fd (taken over: closed by psdev_stop). `x` and
 * `lim` are copied. `net` is the network process to kill on a refused
 * message; `on_refused(arg)` is then called from that channel's thread.
 */
int psdev_start(const struct psexec *x, const struct psmsg_limits *lim,
    const int *fds, unsigned n, pid_t net, void (*on_refused)(void *arg),
    void *arg, struct psdev **out, struct zerr *err);

/* Requests refused so far (for tests and the log). */
unsigned long psdev_refused(const struct psdev *d);

/*
 * Ends every thread (their channels are shut down, so a blocked read
 * returns) and frees. A request being executed may finish within
 * timeout_ms; -1 when one did not (a hung driver call): then nothing is
 * freed, and the caller should leave without closing the devices.
 */
int psdev_stop(struct psdev *d, unsigned timeout_ms);

#endif
