/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_gpu.c - the GPU backend of the network process (see
 * remote_gpu.h): each driver call is one request to the device process.
 */
#include "remote_gpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

uint32_t
psgpu_reason(const struct gpu_write *w)
{
	const char *r = w->writer_reason;

	if (r == NULL || w->writer != GPU_WRITER_RESTORE)
		return PSMSG_REASON_NONE;
	return strcmp(r, "process_exit") == 0 ? PSMSG_REASON_PROCESS_EXIT :
	    strcmp(r, "release") == 0 ? PSMSG_REASON_RELEASE :
	    strcmp(r, "shutdown") == 0 ? PSMSG_REASON_SHUTDOWN :
	    PSMSG_REASON_NONE;
}

/* gpu.h's writers are the messages' senders, by number */
_Static_assert(GPU_WRITER_UNSET == (int)PSMSG_FROM_NONE &&
    GPU_WRITER_UNIX == (int)PSMSG_FROM_UNIX &&
    GPU_WRITER_TCP == (int)PSMSG_FROM_TCP &&
    GPU_WRITER_RESTORE == (int)PSMSG_FROM_RESTORE &&
    GPU_WRITER_PIPE == (int)PSMSG_FROM_PIPE, "gpu_writer != psmsg_from");

void
psgpu_write_fields(struct psmsg_request *req, const struct gpu_write *w)
{
	req->w_op = (uint32_t)w->op;
	req->w_from = (uint32_t)w->writer;
	req->auth = w->writer_handle;
	req->tok = w->token_handle;
	req->w_addr_kind = w->writer_addr_kind;
	memcpy(req->w_addr, w->writer_addr, w->writer_addr_kind == 4 ? 4 :
	    w->writer_addr_kind == 6 ? 16 : 0);
	req->w_reason = psgpu_reason(w);
	if (w->writer == GPU_WRITER_UNIX)
		memcpy(req->w_label, w->writer_label, strnlen(w->writer_label,
		    sizeof(w->writer_label) - 1));
	/* only the fields the operation uses: the device process checks */
	switch (w->op) {
	case GPU_SET_POWER_LIMIT:
		req->w_power_limit_mw = w->power_limit_mw;
		break;
	case GPU_SET_PERSISTENCE_MODE:
		req->w_enabled = w->enabled ? 1 : 0;
		break;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		req->w_min_mhz = w->min_clock_mhz;
		req->w_max_mhz = w->max_clock_mhz;
		break;
	default:
		break;
	}
}

/* A lacks table and the ones it replaced (freed with the backend). */
struct psgpu_table {
	struct psgpu_lacks l;
	struct psgpu_table *older;
};

struct psgpu {
	struct pschan_pool *pool;
	unsigned ngpu;
	struct gpu_info *info;		/* [ngpu] */
	atomic_bool lost[PSMSG_MAX_GPUS];
	/*
	 * What one write of each GPU took lately, round trip included (ns,
	 * a moving average; 0: none yet), for psgpu_write_batch.
	 */
	_Atomic uint64_t write_ns[PSMSG_MAX_GPUS];
	/* swapped whole by psgpu_set_lacks, read by the HTTP threads */
	_Atomic(struct psgpu_table *) lacks;
};

static struct psgpu *
psgpu_of(struct gpu_backend *b)
{
	return b->ctx;
}

static void
psgpu_copy_lacks(char *dst, const char *src)
{
	snprintf(dst, PSGPU_LACKS_MAX, "%s", src != NULL ? src : "");
}

void
psgpu_lacks_of(struct gpu_backend *b, struct psgpu_lacks *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned op = 0; op < GPU_READ_OP_COUNT; op++)
		psgpu_copy_lacks(out->read[op], b->ops->read_lacks(b,
		    (enum gpu_read_op)op));
	for (unsigned op = 0; op < GPU_WRITE_OP_COUNT; op++)
		psgpu_copy_lacks(out->write[op], b->ops->write_lacks(b,
		    (enum gpu_write_op)op));
}

/* One GPU request: the reply's error, if any, becomes ours. */
static int
psgpu_call(struct psgpu *g, struct psmsg_request *req, unsigned gpu,
    struct psmsg_reply *rep, struct zerr *err)
{
	req->dev = gpu;
	pschan_call(g->pool, req, rep);
	if (gpu < g->ngpu)
		atomic_store(&g->lost[gpu], rep->lost != 0);
	if (rep->rc != 0)
		return zerr_set(err, (enum zerr_kind)rep->err_kind, "%s",
		    rep->err_msg);
	return 0;
}

static unsigned
psgpu_count(struct gpu_backend *b)
{
	return psgpu_of(b)->ngpu;
}

static int
psgpu_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct psgpu *g = psgpu_of(b);

	if (gpu >= g->ngpu)
		return zerr_set(err, ZERR_INVALID, "no GPU %u", gpu);
	*out = g->info[gpu];
	return 0;
}

/* The five reads: one request each, the value in a, b or v. */
static int
psgpu_read(struct gpu_backend *b, enum psmsg_op op, unsigned gpu,
    struct psmsg_reply *rep, struct zerr *err)
{
	struct psmsg_request req;

	psmsg_request_init(&req, op, 0);
	return psgpu_call(psgpu_of(b), &req, gpu, rep, err);
}

static int
psgpu_get_power_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct psmsg_reply rep;

	if (psgpu_read(b, PSMSG_GPU_POWER, gpu, &rep, err) != 0)
		return -1;
	*mw = rep.a;
	return 0;
}

/*
 * Every GPU asked for in one PSMSG_SAMPLE. The reply carries the first
 * failure's message only: when more than one GPU failed, the others are
 * asked again alone so that each error names its own GPU (a rare path).
 */
static void
psgpu_get_power_many(struct gpu_backend *b, const unsigned *gpus, unsigned n,
    uint32_t *mw, int *rc, struct zerr *const *errs)
{
	struct psgpu *g = psgpu_of(b);
	struct psmsg_request req;
	struct psmsg_reply rep;
	unsigned failed = 0;

	psmsg_request_init(&req, PSMSG_SAMPLE, 0);
	for (unsigned i = 0; i < n; i++)
		if (gpus[i] < g->ngpu)
			req.gpu_mask |= UINT64_C(1) << gpus[i];
	if (req.gpu_mask != 0) {
		pschan_call(g->pool, &req, &rep);
		psgpu_note_sample(b, &rep);
	} else
		rep.gpu_ok = 0;		/* none to ask: each fails alone */
	for (unsigned i = 0; i < n; i++)
		if (gpus[i] >= g->ngpu || !(rep.gpu_ok >> gpus[i] & 1))
			failed++;
	for (unsigned i = 0; i < n; i++) {
		if (gpus[i] < g->ngpu && (rep.gpu_ok >> gpus[i] & 1)) {
			mw[i] = rep.gpu_mw[gpus[i]];
			rc[i] = 0;
		} else if (failed == 1 && gpus[i] < g->ngpu) {
			rc[i] = zerr_set(errs[i],
			    (enum zerr_kind)rep.err_gpu_kind, "%s",
			    rep.err_msg);
		} else
			rc[i] = psgpu_get_power_mw(b, gpus[i], &mw[i],
			    errs[i]);
	}
}

static int
psgpu_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	struct psmsg_reply rep;

	if (psgpu_read(b, PSMSG_GPU_ENERGY, gpu, &rep, err) != 0)
		return -1;
	*mj = rep.v;
	return 0;
}

static int
psgpu_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct psmsg_reply rep;

	if (psgpu_read(b, PSMSG_GPU_LIMIT, gpu, &rep, err) != 0)
		return -1;
	*mw = rep.a;
	return 0;
}

static int
psgpu_get_constraints(struct gpu_backend *b, unsigned gpu, uint32_t *min_mw,
    uint32_t *max_mw, struct zerr *err)
{
	struct psmsg_reply rep;

	if (psgpu_read(b, PSMSG_GPU_CONSTRAINTS, gpu, &rep, err) != 0)
		return -1;
	*min_mw = rep.a;
	*max_mw = rep.b;
	return 0;
}

static int
psgpu_get_persistence(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	struct psmsg_reply rep;

	if (psgpu_read(b, PSMSG_GPU_PERSISTENCE, gpu, &rep, err) != 0)
		return -1;
	*enabled = rep.a != 0;
	return 0;
}

/*
 * How long a batch of writes may take: a read queued behind it waits for
 * all of it, where one write at a time it would wait for the one running.
 * The batch's size is this over what one write took lately (at least 1):
 * writes that cost little but a round trip each go together, a slow
 * driver's go one by one.
 */
#define PSGPU_WRITES_BUDGET_NS 1000000u		/* 1 ms */

/* A batch of n writes of `gpu` took `ns` (one worker per GPU calls). */
static void
psgpu_note_write_time(struct psgpu *g, unsigned gpu, uint64_t ns, unsigned n)
{
	uint64_t one = ns / (n > 0 ? n : 1), old;

	if (gpu >= g->ngpu)
		return;
	old = atomic_load_explicit(&g->write_ns[gpu], memory_order_relaxed);
	/* a slower write counts at once, a faster one a quarter at a time */
	atomic_store_explicit(&g->write_ns[gpu], old == 0 || one > old ? one :
	    old - (old - one) / 4, memory_order_relaxed);
}

static unsigned
psgpu_write_batch(struct gpu_backend *b, unsigned gpu)
{
	struct psgpu *g = psgpu_of(b);
	uint64_t one;

	if (gpu >= g->ngpu)
		return 1;
	one = atomic_load_explicit(&g->write_ns[gpu], memory_order_relaxed);
	if (one == 0 || one >= PSGPU_WRITES_BUDGET_NS)
		return 1;
	return PSGPU_WRITES_BUDGET_NS / one >= PSMSG_WRITES_MAX ?
	    PSMSG_WRITES_MAX : (unsigned)(PSGPU_WRITES_BUDGET_NS / one);
}

static int
psgpu_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct psmsg_request req;
	struct psmsg_reply rep;
	uint64_t t0 = zclock_now_ns();
	int rc;

	psmsg_request_init(&req, PSMSG_GPU_WRITE, 0);
	psgpu_write_fields(&req, w);
	rc = psgpu_call(psgpu_of(b), &req, gpu, &rep, err);
	psgpu_note_write_time(psgpu_of(b), gpu, zclock_now_ns() - t0, 1);
	return rc;
}

/* The writes in one PSMSG_GPU_WRITES (gpu.h: write_many). */
static void
psgpu_write_many(struct gpu_backend *b, unsigned gpu,
    const struct gpu_write *const *w, unsigned n, int *rc,
    struct zerr *const *errs)
{
	/*
	 * 41 KiB, on the GPU worker's stack (a default-sized one): as
	 * _Thread_local they would be in every thread of the process, and
	 * glibc touches each thread's static TLS block when it starts it.
	 */
	struct psmsg_writes req;
	struct psmsg_writes_reply rep;
	struct psgpu *g = psgpu_of(b);
	uint64_t t0;

	if (n < 2 || n > PSMSG_WRITES_MAX || gpu >= g->ngpu) {
		for (unsigned i = 0; i < n; i++)
			rc[i] = psgpu_write(b, gpu, w[i], errs[i]);
		return;
	}
	psmsg_writes_init(&req, n, gpu);
	for (unsigned i = 0; i < n; i++)
		psgpu_write_fields(&req.w[i], w[i]);
	t0 = zclock_now_ns();
	pschan_call_writes(g->pool, &req, &rep);
	psgpu_writes_done(b, gpu, &rep, t0, rc, errs);
}

void
psgpu_writes_done(struct gpu_backend *b, unsigned gpu,
    const struct psmsg_writes_reply *rep, uint64_t sent_ns, int *rc,
    struct zerr *const *errs)
{
	struct psgpu *g = psgpu_of(b);

	psgpu_note_write_time(g, gpu, zclock_now_ns() - sent_ns, rep->n);
	for (unsigned i = 0; i < rep->n; i++) {
		const struct psmsg_write_result *r = &rep->r[i];

		rc[i] = r->rc == 0 ? 0 : zerr_set(errs[i],
		    (enum zerr_kind)r->err_kind, "%s", r->err_msg);
	}
	psgpu_set_lost(b, gpu, rep->r[rep->n - 1].lost != 0);
}

static const char *
psgpu_answer(const char *s)
{
	return s[0] != '\0' ? s : NULL;
}

static const char *
psgpu_read_lacks(struct gpu_backend *b, enum gpu_read_op op)
{
	struct psgpu_table *t = atomic_load(&psgpu_of(b)->lacks);

	return (unsigned)op < GPU_READ_OP_COUNT ? psgpu_answer(t->l.read[op]) :
	    "an operation this daemon does not know";
}

static const char *
psgpu_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	struct psgpu_table *t = atomic_load(&psgpu_of(b)->lacks);

	return (unsigned)op < GPU_WRITE_OP_COUNT ?
	    psgpu_answer(t->l.write[op]) :
	    "an operation this daemon does not know";
}

static bool
psgpu_lost(struct gpu_backend *b, unsigned gpu)
{
	struct psgpu *g = psgpu_of(b);

	return gpu < g->ngpu && atomic_load(&g->lost[gpu]);
}

static void
psgpu_destroy(struct gpu_backend *b)
{
	struct psgpu *g = psgpu_of(b);

	/*
	 * Old lacks tables are kept until here (psgpu_set_lacks): a request
	 * thread may still hold a string from one.
	 */
	for (struct psgpu_table *t = atomic_load(&g->lacks), *o; t != NULL;
	    t = o) {
		o = t->older;
		free(t);
	}
	free(g->info);
	free(g);
	b->ops = NULL;
	b->ctx = NULL;
}

static const struct gpu_backend_ops psgpu_ops = {
	.name = "remote",
	.count = psgpu_count,
	.info = psgpu_info,
	.get_power_mw = psgpu_get_power_mw,
	.get_power_many = psgpu_get_power_many,
	.get_energy_mj = psgpu_get_energy_mj,
	.get_power_limit_mw = psgpu_get_power_limit_mw,
	.get_power_limit_constraints = psgpu_get_constraints,
	.get_persistence_mode = psgpu_get_persistence,
	.write = psgpu_write,
	.write_many = psgpu_write_many,
	.write_batch = psgpu_write_batch,
	.read_lacks = psgpu_read_lacks,
	.write_lacks = psgpu_write_lacks,
	.lost = psgpu_lost,
	.destroy = psgpu_destroy,
};

int
psgpu_create(struct pschan_pool *pool, unsigned ngpu,
    const struct gpu_info *info, const struct psgpu_lacks *lacks,
    struct gpu_backend *out, struct zerr *err)
{
	struct psgpu *g;
	struct psgpu_table *l;

	if (ngpu > PSMSG_MAX_GPUS)
		return zerr_set(err, ZERR_INTERNAL, "%u GPUs: privilege "
		    "separation handles at most %d", ngpu,
		    PSMSG_MAX_GPUS);
	g = calloc(1, sizeof(*g));
	l = malloc(sizeof(*l));
	if (g == NULL || l == NULL ||
	    (g->info = calloc(ngpu ? ngpu : 1, sizeof(*info))) == NULL) {
		free(g);
		free(l);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (ngpu > 0)
		memcpy(g->info, info, ngpu * sizeof(*info));
	l->l = *lacks;
	l->older = NULL;
	g->pool = pool;
	g->ngpu = ngpu;
	atomic_init(&g->lacks, l);
	for (unsigned i = 0; i < PSMSG_MAX_GPUS; i++) {
		atomic_init(&g->lost[i], false);
		atomic_init(&g->write_ns[i], 0);
	}
	out->ops = &psgpu_ops;
	out->ctx = g;
	return 0;
}

void
psgpu_set_lacks(struct gpu_backend *b, const struct psgpu_lacks *lacks)
{
	struct psgpu *g = psgpu_of(b);
	struct psgpu_table *t = malloc(sizeof(*t));

	if (t == NULL)
		return;		/* keeps the old table: logged by the caller */
	t->l = *lacks;
	/*
	 * The old table stays allocated until destroy: an HTTP thread may be
	 * between reading a pointer into it and formatting its reply. One
	 * per reload (an operator's SIGHUP), 2 KiB each. Only the reload
	 * thread writes, so load-then-store is not a race.
	 */
	t->older = atomic_load(&g->lacks);
	atomic_store(&g->lacks, t);
}

void
psgpu_note_sample(struct gpu_backend *b, const struct psmsg_reply *rep)
{
	struct psgpu *g = psgpu_of(b);

	if (g == NULL)		/* no GPU backend: nothing to note */
		return;
	for (unsigned i = 0; i < g->ngpu; i++)
		if (rep->gpu_ok & (1ull << i))
			atomic_store(&g->lost[i], false);
		else if (rep->gpu_lost & (1ull << i))
			atomic_store(&g->lost[i], true);
}

void
psgpu_set_lost(struct gpu_backend *b, unsigned gpu, bool lost)
{
	struct psgpu *g = psgpu_of(b);

	if (gpu < g->ngpu)
		atomic_store(&g->lost[gpu], lost);
}

bool
psgpu_is_remote(const struct gpu_backend *b)
{
	return b->ops == &psgpu_ops;
}
