/* SPDX-License-Identifier: Apache-2.0 */
/*
 * push.c - sends exposition text to a Prometheus Pushgateway.
 *
 * POST, not PUT: the gateway then replaces only the metric families that
 * the push names, within the one group given by the grouping key. Each
 * window has its own group, so concurrent windows never wipe each other's
 * series, and a histogram and a counter (different family names) can share
 * a group.
 *
 * `instance` defaults to the host name, not host and pid: the gateway keeps
 * every group until it is deleted, so a per-process default left one more
 * group behind with every run of a short program. The cost is that two
 * processes on one host pushing the same window to one job share a group
 * (the later push of a family wins); they pass their own instance.
 */
#include <stdio.h>
#include <string.h>

#include "lib.h"
#include "os.h"
#include "prom.h"
#include "zeus/metric.h"

#define PUSH_DEFAULT_TIMEOUT_MS 3000u

void
push_default_instance(char *buf, size_t size)
{
	if (size == 0)
		return;
	lib_os_hostname(buf, size);
	if (buf[0] == '\0')
		snprintf(buf, size, "localhost");
}

int
zeus_push_text(const struct zeus_push_options *push, const char *window,
    const char *text, struct zeus_error *err)
{
	struct http_request rq = { 0 };
	struct http_response resp = { 0 };
	struct zbuf url;
	char inst[ZEUS_NAME_MAX];
	const char *instance = push->instance;
	int rc;

	if (push->url == NULL || lib_check_name(push->url, 2048) != 0 ||
	    lib_check_name(push->job, ZEUS_NAME_MAX) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "push needs a URL and a job name (1..%d bytes)",
		    ZEUS_NAME_MAX - 1);
	if (strncmp(push->url, "http://", 7) != 0 &&
	    strncmp(push->url, "https://", 8) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "Pushgateway URL must start with http:// or https://");
	if (instance == NULL) {
		push_default_instance(inst, sizeof(inst));
		instance = inst;
	}
	zbuf_init(&url, 8192);
	if (prom_push_url(&url, push->url, push->job, window, instance) != 0) {
		zbuf_free(&url);
		return lib_err(err, ZEUS_ERR_INVALID, "push URL too long");
	}
	rq.method = "POST";
	rq.url = url.data;
	rq.content_type = "text/plain; version=0.0.4; charset=utf-8";
	rq.body = text;
	rq.body_len = strlen(text);
	rq.timeout_ms = push->timeout_ms ? (long)push->timeout_ms :
	    (long)PUSH_DEFAULT_TIMEOUT_MS;
	rq.connect_timeout_ms = rq.timeout_ms;
	rc = http_perform(NULL, &rq, &resp, err);
	if (rc != 0) {
		if (err != NULL)
			err->code = ZEUS_ERR_PUSH;
	} else if (resp.status < 200 || resp.status > 299) {
		char shown[ZEUS_ERR_MSG_MAX];

		http_url_shown(url.data, shown, sizeof(shown));
		rc = lib_err(err, ZEUS_ERR_PUSH,
		    "Pushgateway %s answered HTTP %ld: %.300s", shown,
		    resp.status, resp.body.len ? resp.body.data : "");
		if (err != NULL)
			err->http_status = resp.status;
	}
	zbuf_free(&url);
	zbuf_free(&resp.body);
	return rc;
}
