/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serving.c - serving.h.
 */
#include "zeusd/serving.h"

#include "api/routes.h"
#include "api/streams.h"
#include "common/log.h"
#include "common/pool.h"

int
serving_prepare(const struct zeusd_config *cfg, struct server *srv,
    struct node *node, unsigned threads, unsigned queue, struct zerr *err)
{
	srv->ctx.node = node;
	srv->ctx.routes = api_routes();
	if (streams_create(cfg, node, &srv->ctx.streams, err) != 0 ||
	    pool_create(threads, queue, &srv->ctx.lookups, err) != 0)
		return -1;
	return 0;
}

void
serving_streams_quiesce(struct server *srv)
{
	/* the streams never end by themselves; suspended ones must resume */
	if (srv->ctx.streams != NULL)
		streams_end_all(srv->ctx.streams);
}

void
serving_streams_stopping(struct server *srv)
{
	/* streams_set_nudge waits for a nudge in progress */
	if (srv->ctx.streams != NULL)
		streams_set_nudge(srv->ctx.streams, NULL, NULL);
}

void
serving_log_listening(const struct zeusd_config *cfg,
    const struct server *srv, const struct node *node, const char *where,
    char *groups, size_t size)
{
	group_set_format(cfg->enabled, groups, size);
	zlog(ZLOG_INFO, "listening", "address=%s gpus=%u cpus=%u "
	    "groups=\"%s\" auth=%s simulate=%s version=%s", where, node->ngpu,
	    node->ncpu, groups, srv->ctx.auth ? "on" : "off",
	    cfg->simulate ? "true" : "false", ZEUS_VERSION);
}
