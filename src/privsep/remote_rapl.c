/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_rapl.c - the RAPL source of the network process (see
 * remote_rapl.h): one request per counter read, or one for every package.
 */
#include "remote_rapl.h"

#include <stdlib.h>
#include <string.h>

struct psrapl {
	struct pschan_pool *pool;
	unsigned n;
	char *label[PSMSG_MAX_PKGS][2];	/* by enum rapl_zone; may be NULL */
};

static int
psrapl_read(void *ctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct psrapl *p = ctx;
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_RAPL_READ, 0);
	req.dev = pkg;
	req.zone = (uint32_t)zone;
	pschan_call(p->pool, &req, &rep);
	if (rep.rc != 0)
		return zerr_set(err, (enum zerr_kind)rep.err_kind, "%s",
		    rep.err_msg);
	*raw = rep.v;
	return 0;
}

void
psrapl_raw_of(const struct psmsg_reply *rep, unsigned i,
    struct rapl_raw_sample *out)
{
	out->ok = rep->pkg_ok >> i & 1;
	out->cpu_raw = rep->cpu_uj[i];
	out->dram_raw = rep->dram_uj[i];
	out->mono_ns = rep->mono_ns[i];
}

static int
psrapl_read_many(void *ctx, uint64_t pkg_mask, struct rapl_raw_sample *raw,
    struct zerr *err)
{
	struct psrapl *p = ctx;
	struct psmsg_request req;
	struct psmsg_reply rep;

	psmsg_request_init(&req, PSMSG_SAMPLE, 0);
	req.pkg_mask = pkg_mask;
	pschan_call(p->pool, &req, &rep);
	for (unsigned i = 0; i < p->n; i++) {
		if (!(pkg_mask >> i & 1))
			continue;
		psrapl_raw_of(&rep, i, &raw[i]);
	}
	(void)err;
	return 0;
}

static const char *
psrapl_label(void *ctx, unsigned pkg, enum rapl_zone zone)
{
	struct psrapl *p = ctx;

	return pkg < p->n && (unsigned)zone < 2 ? p->label[pkg][zone] : NULL;
}

static void
psrapl_destroy(void *ctx)
{
	struct psrapl *p = ctx;

	for (unsigned i = 0; i < p->n; i++) {
		free(p->label[i][0]);
		free(p->label[i][1]);
	}
	free(p);		/* the pool belongs to the caller */
}

void *
psrapl_create(struct pschan_pool *pool, const struct rapl *dev)
{
	struct psrapl *p = calloc(1, sizeof(*p));
	unsigned n = rapl_count(dev);

	if (p == NULL || n > PSMSG_MAX_PKGS) {
		free(p);
		return NULL;
	}
	p->pool = pool;
	p->n = n;
	for (unsigned i = 0; i < n; i++)
		for (unsigned z = 0; z < 2; z++) {
			const char *l = rapl_zone_label(dev, i,
			    (enum rapl_zone)z);

			if (l != NULL && (p->label[i][z] = strdup(l)) == NULL) {
				psrapl_destroy(p);
				return NULL;
			}
		}
	return p;
}

const struct rapl_source_ops psrapl_ops = {
	.name = "remote",
	.read = psrapl_read,
	.label = psrapl_label,
	.read_many = psrapl_read_many,
	.destroy = psrapl_destroy,
	.tracks_wraps = true,	/* the device process's struct rapl does */
};
