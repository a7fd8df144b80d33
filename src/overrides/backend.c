/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.c - the gpu_backend that runs overridden writes (run.c) and
 * forwards every read, and every other write, to the driver's backend it
 * wraps; and the swap of its overrides on reload (see overrides.h).
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

/*
 * `ov` can be swapped by a reload (overrides_swap) while GPU workers run
 * writes, some of them for a command's whole timeout. So a write takes its
 * own reference under `lock` (ovb_acquire) and drops it when done; the swap
 * replaces the pointer under the same lock and drops the backend's
 * reference; the last of them frees the old file's overrides. A write runs
 * wholly with the file it started with.
 */
struct ovb_backend {
	pthread_mutex_t lock;
	struct overrides *ov;
	struct gpu_backend inner;
};

static struct overrides *
ovb_acquire(struct ovb_backend *ob)
{
	struct overrides *ov;

	pthread_mutex_lock(&ob->lock);
	ov = ob->ov;
	atomic_fetch_add(&ov->refs, 1);
	pthread_mutex_unlock(&ob->lock);
	return ov;
}

static struct gpu_backend *
ovb_inner(struct gpu_backend *b)
{
	struct ovb_backend *ob = b->ctx;

	return ob->inner.ops != NULL ? &ob->inner : NULL;
}

static int
ovb_no_driver(unsigned gpu, struct zerr *err)
{
	return zerr_set(err, ZERR_INTERNAL, "GPU %u: no GPU driver available",
	    gpu);
}

static unsigned
ovb_count(struct gpu_backend *b)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->count(in) : 0;
}

/* What the GPU supports, counting the writes an override runs instead. */
static int
ovb_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);
	struct overrides *ov;

	if (in == NULL)
		return ovb_no_driver(gpu, err);
	if (in->ops->info(in, gpu, out, err) != 0)
		return -1;
	ov = ovb_acquire(b->ctx);	/* a reload may swap it meanwhile */
	out->caps.power_limit |= overrides_has(ov, GPU_SET_POWER_LIMIT);
	out->caps.persistence_mode |= overrides_has(ov,
	    GPU_SET_PERSISTENCE_MODE);
	out->caps.gpu_locked_clocks |= overrides_has(ov,
	    GPU_SET_GPU_LOCKED_CLOCKS);
	out->caps.mem_locked_clocks |= overrides_has(ov,
	    GPU_SET_MEM_LOCKED_CLOCKS);
	overrides_free(ov);
	return 0;
}

static const char *
ovb_read_lacks(struct gpu_backend *b, enum gpu_read_op op)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->read_lacks(in, op) : NULL;
}

/*
 * An overridden write needs nothing from the driver. Called on the HTTP
 * thread while a reload may swap the overrides: with a reference of its
 * own, as ovb_write.
 */
static const char *
ovb_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	struct gpu_backend *in = ovb_inner(b);
	struct overrides *ov = ovb_acquire(b->ctx);
	bool overridden = overrides_has(ov, op) ||
	    (op == GPU_RESET_LOCKED_CLOCKS &&
	    (overrides_has(ov, GPU_RESET_GPU_LOCKED_CLOCKS) ||
	    overrides_has(ov, GPU_RESET_MEM_LOCKED_CLOCKS)));

	overrides_free(ov);
	if (overridden || in == NULL)
		return NULL;
	return in->ops->write_lacks(in, op);
}

static bool
ovb_lost(struct gpu_backend *b, unsigned gpu)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL && in->ops->lost(in, gpu);
}

static int
ovb_get_power_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->get_power_mw(in, gpu, mw, err) :
	    ovb_no_driver(gpu, err);
}

static int
ovb_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->get_energy_mj(in, gpu, mj, err) :
	    ovb_no_driver(gpu, err);
}

static int
ovb_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->get_power_limit_mw(in, gpu, mw, err) :
	    ovb_no_driver(gpu, err);
}

static int
ovb_get_power_limit_constraints(struct gpu_backend *b, unsigned gpu,
    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->get_power_limit_constraints(in, gpu,
	    min_mw, max_mw, err) : ovb_no_driver(gpu, err);
}

static int
ovb_get_persistence_mode(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	return in != NULL ? in->ops->get_persistence_mode(in, gpu, enabled,
	    err) : ovb_no_driver(gpu, err);
}

/* One write through its override, or through the inner backend. */
static int
ovb_write_one(struct gpu_backend *b, const struct overrides *ov, unsigned gpu,
    const struct gpu_write *w, struct zerr *err)
{
	struct gpu_backend *in = ovb_inner(b);

	if (overrides_has(ov, w->op))
		return overrides_run(ov, gpu, w, err);
	return in != NULL ? in->ops->write(in, gpu, w, err) :
	    ovb_no_driver(gpu, err);
}

static int
ovb_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct overrides *ov = ovb_acquire(b->ctx);
	struct gpu_write g = { .op = GPU_RESET_GPU_LOCKED_CLOCKS };
	struct gpu_write m = { .op = GPU_RESET_MEM_LOCKED_CLOCKS };
	struct zerr second;
	int rg, rm;

	if (w->op != GPU_RESET_LOCKED_CLOCKS || overrides_has(ov, w->op) ||
	    (!overrides_has(ov, g.op) && !overrides_has(ov, m.op))) {
		rg = ovb_write_one(b, ov, gpu, w, err);
		overrides_free(ov);
		return rg;
	}
	/* Both domains, each its own way; the first error wins. */
	rg = ovb_write_one(b, ov, gpu, &g, err);
	rm = ovb_write_one(b, ov, gpu, &m, rg < 0 ? &second : err);
	overrides_free(ov);
	return rg < 0 || rm < 0 ? -1 : 0;
}

static void
ovb_destroy(struct gpu_backend *b)
{
	struct ovb_backend *ob = b->ctx;

	if (ob == NULL)
		return;
	if (ob->inner.ops != NULL && ob->inner.ops->destroy != NULL)
		ob->inner.ops->destroy(&ob->inner);
	overrides_free(ob->ov);
	pthread_mutex_destroy(&ob->lock);
	free(ob);
	b->ctx = NULL;
}

static const struct gpu_backend_ops ovb_ops = {
	.name = "overrides",
	.count = ovb_count,
	.info = ovb_info,
	.get_power_mw = ovb_get_power_mw,
	.get_energy_mj = ovb_get_energy_mj,
	.get_power_limit_mw = ovb_get_power_limit_mw,
	.get_power_limit_constraints = ovb_get_power_limit_constraints,
	.get_persistence_mode = ovb_get_persistence_mode,
	.write = ovb_write,
	.read_lacks = ovb_read_lacks,
	.write_lacks = ovb_write_lacks,
	.lost = ovb_lost,
	.destroy = ovb_destroy,
};

int
overrides_wrap(struct overrides *ov, struct gpu_backend inner,
    struct gpu_backend *out)
{
	struct ovb_backend *ob = calloc(1, sizeof(*ob));

	if (ob == NULL)
		return -1;
	pthread_mutex_init(&ob->lock, NULL);
	ob->ov = ov;
	ob->inner = inner;
	out->ops = &ovb_ops;
	out->ctx = ob;
	return 0;
}

int
overrides_swap(struct gpu_backend *b, struct overrides *ov,
    struct overrides **old)
{
	struct ovb_backend *ob;

	if (b->ops != &ovb_ops)
		return -1;
	ob = b->ctx;
	pthread_mutex_lock(&ob->lock);
	*old = ob->ov;
	ob->ov = ov;
	pthread_mutex_unlock(&ob->lock);
	return 0;
}
