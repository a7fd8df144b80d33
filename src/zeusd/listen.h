/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h - the listening socket: a Unix domain socket with zeusd's safety
 * rules, or a TCP socket on an IPv4/IPv6 literal.
 */
#ifndef ZEUS_LISTEN_H
#define ZEUS_LISTEN_H

#include <stdbool.h>
#include <sys/socket.h>

#include "common/err.h"
#include "node/config.h"

/* Parses "HOST:PORT" (IPv4 literal) or "[V6]:PORT". */
int listen_parse_tcp(const char *s, struct sockaddr_storage *ss,
    socklen_t *len, struct zerr *err);

/*
 * Opens the socket the configuration asks for and returns its fd (listening,
 * non-blocking, close-on-exec), or -1 with `err`. For UDS: refuses a
 * directory on the path that others could write to (docs/security.md; only a
 * warning when not running as root); creates missing parent directories
 * (0755); refuses a path that exists and is not a socket (a symlink included),
 * or on which a daemon answers, or whose connect fails with anything but
 * ECONNREFUSED; removes a stale socket (with a warning); applies mode and
 * owner without following symlinks. Keeps an fd of the socket's directory
 * open for listen_remove_socket.
 */
int listen_open(const struct zeusd_config *cfg, struct zerr *err);

/*
 * Socket activation (zeusd.socket, zeusd-tcp.socket): sd_listen_fds(3)'s
 * rules without libsystemd. When $LISTEN_PID is this process and
 * $LISTEN_FDS is 1, takes fd 3 as the listening socket: it must be a
 * listening SOCK_STREAM socket of the configured mode's family (AF_UNIX for
 * uds, AF_INET or AF_INET6 for tcp), else startup fails naming what was
 * passed. The fd is made non-blocking and close-on-exec; the variables are
 * unset either way (override commands must not see them). Returns 1 with
 * *fd set, 0 when nothing was passed (then listen_open makes the socket as
 * before), -1 with `err`. The socket file, its mode and owner belong to the
 * .socket unit: listen_remove_socket leaves it alone.
 * Call before any thread exists (unsetenv).
 */
int listen_from_systemd(const struct zeusd_config *cfg, int *fd,
    struct zerr *err);

/*
 * Removes the socket file listen_open created, if the path still holds that
 * very file (same device and inode; anything else is left in place with a
 * warning), and closes the directory fd. Does nothing for TCP, or when no
 * socket file was created; safe to call more than once. Returns true when
 * this call removed the file (a file already gone is not logged).
 */
bool listen_remove_socket(void);

/*
 * The socket file listen_open created and has not removed or forgotten:
 * the fd of its verified directory (-1 when there is none: TCP, systemd's
 * socket, already removed) and its path as given (NULL then). For the
 * janitor (janitor.h), which inherits them and removes the file should
 * the device process not.
 */
int listen_socket_dirfd(void);
const char *listen_socket_path(void);

/*
 * Forgets the socket file without removing it: the network process of a
 * split daemon, whose device process removes it.
 */
void listen_forget_socket(void);

/* Describes the bound address ("unix:/run/zeusd/zeusd.sock",
 * "tcp:127.0.0.1:4938") for logs. */
void listen_describe(int fd, char *buf, size_t size);

/* "tcp:HOST:PORT" or "tcp:[V6]:PORT" into buf; other families: untouched. */
void listen_format_inet(const struct sockaddr_storage *ss, char *buf,
    size_t size);

#endif
