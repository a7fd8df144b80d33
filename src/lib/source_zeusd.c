/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source_zeusd.c - the monitor's zeusd source: the devices a zeusd
 * reports in /discover, read with one request per kind per read
 * (/gpu/get_cumulative_energy, /gpu/get_power, /cpu/get_cumulative_energy)
 * whatever the number of devices.
 */
#include "source.h"

#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "zeus/client.h"

struct zsrc {
	struct zeus_client *client;
	bool any_dram;
};

/* Finds id in a readings array (answers are in ascending id order). */
static const struct zeus_gpu_reading *
zsrc_find_gpu(const struct zeus_gpu_readings *r, unsigned id)
{
	for (size_t i = 0; i < r->count; i++)
		if (r->gpu[i].id == id)
			return &r->gpu[i];
	return NULL;
}

static int
zsrc_gpu(struct zsrc *z, bool energy, const unsigned *ids, size_t n,
    uint64_t *out, struct zeus_error *err)
{
	struct zeus_gpu_readings *r = malloc(sizeof(*r));
	int rc;

	if (r == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	rc = energy ? zeus_client_gpu_get_cumulative_energy(z->client, ids, n,
	    r, err) : zeus_client_gpu_get_power(z->client, ids, n, r, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct zeus_gpu_reading *g = zsrc_find_gpu(r, ids[i]);

		if (g == NULL)
			rc = lib_err(err, ZEUS_ERR_TRANSPORT,
			    "zeusd did not answer for GPU %u", ids[i]);
		else
			out[i] = energy ? g->energy_mj : g->power_mw;
	}
	free(r);
	return rc;
}

static int
zsrc_gpu_energy(void *ctx, const unsigned *ids, size_t n, uint64_t *mj,
    struct zeus_error *err)
{
	return zsrc_gpu(ctx, true, ids, n, mj, err);
}

static int
zsrc_gpu_power(void *ctx, const unsigned *ids, size_t n, uint64_t *mw,
    struct zeus_error *err)
{
	return zsrc_gpu(ctx, false, ids, n, mw, err);
}

static int
zsrc_cpu_energy(void *ctx, const unsigned *ids, size_t n, uint64_t *cpu,
    uint64_t *dram, struct zeus_error *err)
{
	struct zsrc *z = ctx;
	struct zeus_cpu_readings *r = malloc(sizeof(*r));
	int rc;

	if (r == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	rc = zeus_client_cpu_get_cumulative_energy(z->client, ids, n, true,
	    z->any_dram, r, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t k;

		for (k = 0; k < r->count && r->cpu[k].id != ids[i]; k++)
			;
		if (k == r->count || !r->cpu[k].has_cpu) {
			rc = lib_err(err, ZEUS_ERR_TRANSPORT,
			    "zeusd did not answer for CPU %u", ids[i]);
			break;
		}
		cpu[i] = r->cpu[k].cpu_energy_uj;
		dram[i] = r->cpu[k].has_dram ? r->cpu[k].dram_energy_uj : 0;
	}
	free(r);
	return rc;
}

static void
zsrc_destroy(void *ctx)
{
	struct zsrc *z = ctx;

	if (z == NULL)
		return;
	zeus_client_close(z->client);
	free(z);
}

static const struct mon_source_ops zsrc_ops = {
	.gpu_energy = zsrc_gpu_energy,
	.gpu_power = zsrc_gpu_power,
	.cpu_energy = zsrc_cpu_energy,
	.destroy = zsrc_destroy,
};

/*
 * Fills the inventory from /discover. zeusd numbers GPUs 0..n-1 as NVML
 * does; a disabled API group means zero devices of that kind unless they
 * were asked for by index.
 */
static int
zsrc_inventory(struct zsrc *z, const struct zeus_discovery *d,
    const struct mon_source_want *w, struct mon_inventory *inv,
    struct zeus_error *err)
{
	struct zeus_access acc;

	/* what the node lets this caller read, asked once (docs/api.md) */
	if (((w->gpus && d->gpu_count > 0) || (w->cpus && d->cpu_count > 0)) &&
	    zeus_client_access(z->client, &acc, err) != 0)
		return -1;
	if (w->gpus && d->gpu_count > 0) {
		if (!(d->enabled_groups & ZEUS_GROUP_GPU_READ)) {
			if (w->gpus_required)
				return lib_err(err, ZEUS_ERR_NOT_FOUND,
				    "zeusd has the gpu-read API disabled");
		} else {
			for (size_t i = 0; i < d->gpu_count; i++) {
				if (d->gpus[i].id != i)
					return lib_err(err, ZEUS_ERR_TRANSPORT,
					    "zeusd GPU ids are not 0..n-1");
				inv->gpu_energy[i] =
				    d->gpus[i].cumulative_energy_available;
				inv->gpu_denied[i] = acc.known && (i >= 64 ||
				    !(acc.gpu_read >> i & 1));
			}
			inv->ngpus = d->gpu_count;
		}
	}
	if (w->cpus && d->cpu_count > 0) {
		if (!(d->enabled_groups & ZEUS_GROUP_CPU_READ)) {
			if (w->cpus_required)
				return lib_err(err, ZEUS_ERR_NOT_FOUND,
				    "zeusd has the cpu-read API disabled");
		} else {
			for (size_t i = 0; i < d->cpu_count; i++) {
				inv->cpu_id[i] = d->cpus[i].id;
				inv->cpu_dram[i] = d->cpus[i].dram_available;
				inv->cpu_denied[i] = acc.known &&
				    d->cpus[i].id < 64 &&
				    !(acc.cpu_read >> d->cpus[i].id & 1);
				z->any_dram |= d->cpus[i].dram_available;
			}
			inv->ncpus = d->cpu_count;
		}
	}
	return 0;
}

int
source_zeusd_open(const struct mon_source_want *w, struct mon_source *out,
    struct mon_inventory *inv, struct zeus_error *err)
{
	struct zsrc *z = calloc(1, sizeof(*z));
	struct zeus_discovery *d = malloc(sizeof(*d));
	int rc = -1;

	memset(inv, 0, sizeof(*inv));
	if (z == NULL || d == NULL) {
		lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if (zeus_client_open(w->zeusd, &z->client, err) != 0 ||
	    zeus_client_discover(z->client, d, err) != 0 ||
	    zsrc_inventory(z, d, w, inv, err) != 0)
		goto out;
	out->ops = &zsrc_ops;
	out->ctx = z;
	z = NULL;
	rc = 0;
out:
	zsrc_destroy(z);
	free(d);
	return rc;
}
