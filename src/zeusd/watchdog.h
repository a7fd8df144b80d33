/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watchdog.h - systemd's watchdog (WatchdogSec=): WATCHDOG=1 only while the
 * HTTP loop is seen to turn.
 */
#ifndef ZEUS_WATCHDOG_H
#define ZEUS_WATCHDOG_H

#include "common/err.h"

struct server;

/*
 * Starts the watchdog thread when systemd asked for one
 * (notify_watchdog_usec() > 0); otherwise does nothing. `srv` must be
 * serving already.
 */
int watchdog_start(struct server *srv, struct zerr *err);

/* Stops and joins the thread (before server_stop); safe if never started. */
void watchdog_stop(void);

#endif
