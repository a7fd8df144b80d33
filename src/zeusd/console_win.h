/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console_win.h - how Windows zeusd is told to stop (the Windows
 * counterpart of signals.h): the console control handler. Ctrl-C,
 * Ctrl-Break, closing the console window, logoff and system shutdown all
 * stop it cleanly, and so do a service's stop and shutdown controls.
 */
#ifndef ZEUS_CONSOLE_WIN_H
#define ZEUS_CONSOLE_WIN_H

#include <stdbool.h>

#include "common/err.h"

/* Installs the handler; events from here on are kept for console_wait. */
int console_arm(struct zerr *err);

/*
 * The Service Control Manager's stop or shutdown control (service_win.c),
 * delivered as a stop event like the console's ("service_stop",
 * "service_shutdown"). Any thread, after console_arm.
 */
void console_service_stop(bool shutdown);

/* Waits for the first stop event; returns its name ("ctrl_c", ...). */
const char *console_wait(void);

/*
 * Whether the stop event is one after which Windows ends the process
 * within about 5 s (a console close, logoff or shutdown), not Ctrl-C or
 * Ctrl-Break: the stop must then fit that.
 */
bool console_deadline(void);

/*
 * The stop is done. For a console close, logoff or shutdown Windows ends
 * the process once the handler returns (after at most 5 s), so the
 * handler waits for this before it returns.
 */
void console_done(void);

#endif
