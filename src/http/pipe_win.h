/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_win.h - zeusd's Windows named pipe (`--mode named-pipe`, the
 * default there, as upstream): instances of the pipe accept clients, and
 * each client is fed into the one libmicrohttpd daemon TCP uses
 * (server_add_connection) through a loopback socket pair and a relay
 * thread, so routing, auth, limits, streams, deadlines, logs and errors
 * are the server's own. The server knows such a connection's peer as the
 * pipe client's process id (PEER_PIPE) through server_hooks.peer.
 */
#ifndef ZEUS_PIPE_WIN_H
#define ZEUS_PIPE_WIN_H

#include <stddef.h>

#include "common/err.h"

struct server;
struct peer;
struct pipe_listener;

/*
 * Converts `sddl` (ConvertStringSecurityDescriptorToSecurityDescriptorW)
 * and creates the pipe's first instance with FILE_FLAG_FIRST_PIPE_INSTANCE,
 * so a malformed SDDL or a pipe name another process serves stop startup
 * here, and the private loopback listener of the socket pairs. 0, or -1
 * with `err`.
 */
int pipe_listen_open(const char *name, const char *sddl,
    struct pipe_listener **out, struct zerr *err);

/*
 * Starts accepting clients into `srv` (started, with hooks.peer =
 * pipe_listen_peer and hooks.peer_ctx = pl). 0, or -1 with `err`.
 */
int pipe_listen_start(struct pipe_listener *pl, struct server *srv,
    struct zerr *err);

/* server_hooks.peer: a relay socket's pipe client (PEER_PIPE), once. */
int pipe_listen_peer(void *pl, int fd, struct peer *p);

/*
 * Stops accepting: the waiting instance is closed; connected clients go
 * on until the server closes their connections. Safe to call twice.
 */
void pipe_listen_quiesce(struct pipe_listener *pl);

/*
 * After server_stop: ends the relays still running (their clients'
 * pipes are closed) and frees everything. NULL is a no-op.
 */
void pipe_listen_close(struct pipe_listener *pl);

/* "pipe:\\.\pipe\zeusd", for logs. */
void pipe_listen_describe(const struct pipe_listener *pl, char *buf,
    size_t size);

#endif
