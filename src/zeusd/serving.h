/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serving.h - what every wiring of the HTTP server does alike (the
 * network process and the one-process daemon on Linux, network_proc.c;
 * Windows' main_win.c): the streams and the look-up pool a server needs,
 * the streams' part of its shutdown hooks, and the "listening" line.
 */
#ifndef ZEUS_SERVING_H
#define ZEUS_SERVING_H

#include <stddef.h>

#include "common/err.h"
#include "http/server.h"
#include "node/config.h"
#include "node/node.h"

/*
 * srv->ctx.node, the streams over `node` and the look-up pool (`threads`
 * threads, `queue` waiting at most). 0, or -1 with err; what was made is
 * in srv->ctx for the caller to destroy either way.
 */
int serving_prepare(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, unsigned threads, unsigned queue, struct zerr *err);

/* server_hooks' quiesce and stopping, for the streams of srv. */
void serving_streams_quiesce(struct server *srv);
void serving_streams_stopping(struct server *srv);

/* Logs "listening" (address `where`) and puts the groups into `groups`. */
void serving_log_listening(const struct zeusd_config *cfg,
    const struct server *srv, const struct node *node, const char *where,
    char *groups, size_t size);

#endif
