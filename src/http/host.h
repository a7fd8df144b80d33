/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host.h - the Host check on TCP, against DNS rebinding (issue 30, item
 * 8b): a web page whose name the attacker points at 127.0.0.1 makes the
 * browser send requests to zeusd as to its own origin, with that name in
 * `Host`.
 *
 * Rebinding needs two things: a browser whose requests reach zeusd (for
 * a zeusd on loopback, one on the node itself) and a zeusd that asks no
 * token (a page cannot attach one). So the check applies only to a TCP
 * zeusd without --signing-key-path, on a connection whose local address
 * is a loopback one (127.0.0.0/8, ::1, an IPv4-mapped ::ffff:127.x.y.z).
 * Elsewhere any Host is served, as by the upstream daemon, so that
 * aliases, tunnels and container names work (issue 42, item 2): with a key
 * a page has no token, and a routable address the operator opened to the
 * network serves whoever reaches it anyway. Where it applies, a request
 * is served only when its Host (port ignored) is
 *   - an IP literal equal to the address the connection came in on (an
 *     IPv4 one also when that is IPv4-mapped IPv6),
 *   - `localhost`, when that address is a loopback one, or
 *   - a name or IP literal of --tcp-allowed-hosts (case-insensitive, a
 *     trailing dot ignored).
 * A request without Host (HTTP/1.0) passes: a browser always sends one.
 */
#ifndef ZEUS_HOST_H
#define ZEUS_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The most names --tcp-allowed-hosts takes, and the longest one. */
#define HOST_LIST_MAX 64
#define HOST_NAME_MAX_LEN 253

/*
 * Whether a TCP connection whose local address is `local` (NULL: not
 * known) needs the Host check, with `auth` whether requests need a token:
 * only without auth, and on a loopback address (or one not known, or the
 * unspecified one, which no accepted connection has).
 */
bool host_check_applies(const struct sockaddr *local, bool auth);

/*
 * Whether `host` (the header's value; NULL: none) may be served on a
 * connection whose local address is `local`, with `allowed` the
 * --tcp-allowed-hosts list (comma-separated; NULL: none).
 */
bool host_allowed(const char *host, const struct sockaddr *local,
    const char *allowed);

/*
 * Checks a --tcp-allowed-hosts value: 1 to HOST_LIST_MAX entries of
 * letters, digits, '-', '.', or an IPv6 literal in brackets; 0, or -1
 * with the first bad entry in `bad`.
 */
int host_list_check(const char *list, char *bad, size_t badsize);

#endif
