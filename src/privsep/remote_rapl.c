/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_rapl.c - the RAPL source of the network process (see
 * remote_rapl.h): one request per counter read.
 */
#include "remote_rapl.h"

static int
psrapl_read(void *ctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_RAPL_READ, 0);
	req.dev = pkg;
	req.zone = (uint32_t)zone;
	pschan_call(ctx, &req, &rep);
	if (rep.rc != 0)
		return zerr_set(err, (enum zerr_kind)rep.err_kind, "%s",
		    rep.err_msg);
	*raw = rep.v;
	return 0;
}

static void
psrapl_destroy(void *ctx)
{
	(void)ctx;		/* the pool belongs to the caller */
}

const struct rapl_source_ops psrapl_ops = {
	.name = "remote",
	.read = psrapl_read,
	.label = NULL,
	.destroy = psrapl_destroy,
};
