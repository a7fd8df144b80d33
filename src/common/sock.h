/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sock.h - the socket calls whose meaning differs between platforms, for
 * the shared HTTP and stream code: a socket is an int fd on Linux and a
 * Winsock SOCKET on Windows (closed by closesocket, shut down with SD_BOTH,
 * no MSG_NOSIGNAL, no SIOCOUTQ). os/sock_posix.c and os/sock_win.c; meson
 * picks one. The fds are libmicrohttpd's (MHD_socket, which fits an int on both).
 */
#ifndef ZEUS_SOCK_H
#define ZEUS_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

/* Once, before any socket (WSAStartup on Windows). */
int sock_startup(struct zerr *err);

void sock_close(int fd);

/* Both directions; the event loop then sees the peer as gone. */
void sock_shutdown(int fd);

/* Sends what the socket takes at once, never blocking, never a signal. */
void sock_send_nowait(int fd, const void *buf, size_t len);

/*
 * Bytes the socket still holds unsent (what TCP has not had acknowledged):
 * 0 and *bytes, or -1 where the system cannot say.
 */
int sock_unsent(int fd, int *bytes);

/* Whether the peer hung up or the socket failed, asked without waiting. */
bool sock_peer_gone(int fd);

/*
 * A close-on-exec duplicate of a Unix-socket connection, to pass to the
 * device process (gate.c); -1 with errno where there is none (Windows has
 * no Unix-socket peers).
 */
int sock_dup_unix(int fd);

/*
 * Whether `fd` is a Unix stream socket (the device process takes only
 * those for a connection's peer: access/warden.c); false on Windows.
 */
bool sock_is_unix_stream(int fd);

/*
 * The credentials of a Unix-socket connection's peer (SO_PEERCRED): 0, or
 * -1 with errno (not a connected Unix socket; ENOSYS on Windows).
 */
int sock_peer_cred(int fd, uid_t *uid, gid_t *gid, pid_t *pid);

#endif
