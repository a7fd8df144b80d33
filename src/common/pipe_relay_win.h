/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_relay_win.h - a named pipe handle and a socket joined, on Windows:
 * the named pipe's HTTP rides on sockets at both ends (zeusd's
 * libmicrohttpd, http/pipe_win.c; libzeus's libcurl, lib/os_win.c), and
 * this relays the bytes between the pipe and one end of a loopback socket
 * pair whose other end the HTTP library holds (os/pipe_relay_win.c).
 *
 * Winsock has no socketpair (and AF_UNIX only on recent Windows, not
 * under wine's emulation for this): a pair is a TCP connection on
 * 127.0.0.1 to a private listener, the accepted end checked to be the one
 * this process connected, so no other local process can slip in.
 */
#ifndef ZEUS_PIPE_RELAY_WIN_H
#define ZEUS_PIPE_RELAY_WIN_H

#include <winsock2.h>
#include <windows.h>

/* A pair's listener: 127.0.0.1, an ephemeral port, exclusive. */
struct relay_listener {
	SOCKET s;
	struct sockaddr_in addr;
};

/* 0, or -1 (WSAGetLastError says why); rl->s INVALID_SOCKET then. */
int relay_listener_open(struct relay_listener *rl);
void relay_listener_close(struct relay_listener *rl);

/*
 * A connected pair on `rl` (one caller at a time): *mine, overlapped,
 * for the relay, and *theirs, the accepted end, for the HTTP library.
 * Neither is inherited by child processes. Connections to the port that
 * this call did not make are accepted and closed, up to a bound, and
 * counted in *strangers (for the caller's log). 0, or -1
 * (WSAGetLastError).
 */
int relay_pair(struct relay_listener *rl, SOCKET *mine, SOCKET *theirs,
    unsigned *strangers);

/*
 * Accepts on `rl` the connection that comes from `from` (the address a
 * socket of this process is bound to), waiting up to timeout_ms for each
 * connection; others are closed and counted in *strangers, up to a
 * bound. The accepted socket is not inherited. 0 with *out, or -1
 * (WSAGetLastError).
 */
int relay_accept(struct relay_listener *rl, const struct sockaddr_in *from,
    long timeout_ms, SOCKET *out, unsigned *strangers);

/*
 * Relays between `pipe` (opened overlapped) and `sock` (overlapped) on a
 * thread of its own, 16 KiB at a time each way, until either side ends,
 * fails, or `stop` (a manual-reset event; NULL: none) is set; then closes
 * both and calls done(arg) (NULL: none), its last use of anything the
 * caller owns. Takes `pipe` and `sock` whatever it returns. 0, or -1
 * when no thread could be started (both closed, done not called).
 */
int relay_start(HANDLE pipe, SOCKET sock, HANDLE stop,
    void (*done)(void *), void *arg);

#endif
