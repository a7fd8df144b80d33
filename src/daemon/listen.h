/*
 * listen.h - the listening socket: a Unix domain socket with zeusd's safety
 * rules, or a TCP socket on an IPv4/IPv6 literal.
 */
#ifndef ZEUS_LISTEN_H
#define ZEUS_LISTEN_H

#include <sys/socket.h>

#include "../common/err.h"
#include "config.h"

/* Parses "HOST:PORT" (IPv4 literal) or "[V6]:PORT". */
int listen_parse_tcp(const char *s, struct sockaddr_storage *ss,
    socklen_t *len, struct zerr *err);

/*
 * Opens the socket the configuration asks for and returns its fd (listening,
 * non-blocking, close-on-exec), or -1 with `err`. For UDS: refuses a path that
 * exists and is not a socket, or on which a daemon answers, or whose connect
 * fails with anything but ECONNREFUSED; removes a stale socket (with a
 * warning); creates missing parent directories; applies mode and owner.
 */
int listen_open(const struct zeusd_config *cfg, struct zerr *err);

/* Describes the bound address ("unix:/run/zeusd/zeusd.sock",
 * "tcp:127.0.0.1:4938") for logs. */
void listen_describe(int fd, char *buf, size_t size);

#endif
