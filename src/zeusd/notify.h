/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h - telling systemd how zeusd is doing: the sd_notify(3) protocol
 * (readiness, status, reload, stop, watchdog) for a Type=notify unit.
 *
 * Implemented here, not through libsystemd: the protocol is one datagram
 * of "KEY=VALUE\n" lines to the AF_UNIX socket named by $NOTIFY_SOCKET,
 * documented by systemd as a stable interface, and forty lines of C cost a
 * root daemon less than linking libsystemd (and its lz4/zstd/gcrypt/cap
 * dependencies) into it. Every build speaks it, so the tests exercise the
 * code that production runs. Without $NOTIFY_SOCKET every call is a no-op.
 */
#ifndef ZEUS_NOTIFY_H
#define ZEUS_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Reads and then unsets $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID
 * (override commands must not inherit them), and opens the datagram socket.
 * Call once, before any thread exists (setenv/unsetenv are not thread-safe).
 * An unusable value is logged and ignored: systemd then times the start out,
 * which says more than a daemon refusing to run.
 */
void notify_init(void);

/* Whether $NOTIFY_SOCKET was usable. */
bool notify_enabled(void);

/*
 * The watchdog interval systemd asked for ($WATCHDOG_USEC, for this pid),
 * in microseconds; 0 when there is none.
 */
uint64_t notify_watchdog_usec(void);

/* Sends `state` ("READY=1", "STOPPING=1\nSTATUS=..."), one datagram. */
void notify_send(const char *state);

/*
 * The network process, called only when the device process is under
 * systemd (it says so at the start, with its watchdog interval, since the
 * network process is exec'd without $NOTIFY_SOCKET): systemd takes
 * notifications from the main process only (NotifyAccess=main), so every
 * state notify_send is given is handed to fn (which asks the device process
 * to send it: by kind, never as text; privsep/control.h), and
 * notify_status sends nothing: the device process composes every STATUS=
 * line itself. notify_watchdog_usec then answers watchdog_usec.
 */
void notify_relay_from(uint64_t watchdog_usec,
    void (*fn)(const char *state));

/* A stop begins: logged (shutting_down), STOPPING=1 and a status. */
void notify_stopping(int sig);

/* notify_send of "STATUS=<formatted>" (nothing once relayed, above). */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
