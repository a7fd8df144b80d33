/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c - the sd_notify datagram protocol (see notify.h).
 *
 * One socket, opened once and written from any thread: a datagram send is
 * atomic, so the watchdog thread and the main thread need no lock.
 *
 * Nothing here ever waits: the socket is non-blocking and every send says
 * MSG_DONTWAIT. A datagram to a receiver whose queue is full (a hung or
 * slow service manager, or a NOTIFY_SOCKET nobody reads) otherwise blocks
 * until it is read, and the device process's STOPPING=1 held SIGTERM off
 * for as long (issue 30, item 7). Such a message is dropped instead: the
 * manager learns the state from the next one, or from the exit.
 */
#include "zeusd/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

static struct {
	int fd;				/* -1: no $NOTIFY_SOCKET */
	struct sockaddr_un addr;
	socklen_t addrlen;
	uint64_t watchdog_usec;
} notify = { .fd = -1 };

/* $WATCHDOG_USEC, if $WATCHDOG_PID is absent or names this process. */
static uint64_t
notify_read_watchdog(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (usec == NULL || *usec == '\0')
		return 0;
	if (pid != NULL && *pid != '\0' &&
	    strtoll(pid, NULL, 10) != (long long)getpid())
		return 0;	/* meant for a parent that exec'd us */
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0) {
		zlog(ZLOG_WARN, "watchdog_usec_invalid", "msg=\"WATCHDOG_USEC "
		    "is not a positive number of microseconds; no watchdog\"");
		return 0;
	}
	return v;
}

void
notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;
	char q[160];

	notify.watchdog_usec = notify_read_watchdog();
	if (path != NULL && *path != '\0') {
		len = strlen(path);
		if ((path[0] != '/' && path[0] != '@') ||
		    len >= sizeof(notify.addr.sun_path)) {
			zlog(ZLOG_WARN, "notify_socket_invalid", "path=%s "
			    "msg=\"not an absolute or abstract socket address; "
			    "systemd will not hear that zeusd is ready\"",
			    zlog_quote(q, sizeof(q), path));
		} else if ((notify.fd = socket(AF_UNIX, SOCK_DGRAM |
		    SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
			zlog(ZLOG_WARN, "notify_socket_failed", "error=\"%s\"",
			    strerror(errno));
		} else {
			notify.addr.sun_family = AF_UNIX;
			memcpy(notify.addr.sun_path, path, len);
			if (path[0] == '@')	/* abstract namespace */
				notify.addr.sun_path[0] = '\0';
			notify.addrlen = (socklen_t)(offsetof(struct sockaddr_un,
			    sun_path) + len);
		}
	}
	if (notify.fd < 0)
		notify.watchdog_usec = 0;	/* nobody to tell */
	(void)unsetenv("NOTIFY_SOCKET");
	(void)unsetenv("WATCHDOG_USEC");
	(void)unsetenv("WATCHDOG_PID");
}

/* Set in the network process (notify_relay_from). */
static void (*notify_relay)(const char *state);

bool
notify_enabled(void)
{
	return notify.fd >= 0 || notify_relay != NULL;
}

uint64_t
notify_watchdog_usec(void)
{
	return notify.watchdog_usec;
}

void
notify_relay_from(uint64_t watchdog_usec, void (*fn)(const char *state))
{
	notify.watchdog_usec = watchdog_usec;
	notify_relay = fn;
}

void
notify_send(const char *state)
{
	static _Atomic int warned;

	if (notify_relay != NULL) {
		notify_relay(state);
		return;
	}
	if (notify.fd < 0)
		return;
	if (sendto(notify.fd, state, strlen(state), MSG_NOSIGNAL |
	    MSG_DONTWAIT, (struct sockaddr *)&notify.addr,
	    notify.addrlen) < 0 &&
	    warned++ == 0)	/* once: the watchdog would repeat it forever */
		zlog(ZLOG_WARN, "notify_failed", "error=\"%s\" msg=\"%s\"",
		    strerror(errno), errno == EAGAIN ? "the service manager "
		    "is not reading its notify socket; messages are dropped, "
		    "never waited for" : "notify messages are lost");
}

void
notify_status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	/* no socket, or relayed: the device process composes its own */
	if (notify.fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "STATUS=");
	va_start(ap, fmt);
	(void)vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	notify_send(buf);
}

void
notify_stopping(int sig)
{
	zlog(ZLOG_INFO, "shutting_down", "signal=%d", sig);
	notify_send("STOPPING=1");
	notify_status("Stopping (signal %d)", sig);
}
