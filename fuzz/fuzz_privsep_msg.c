/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_privsep_msg.c - the device process's request decoder on arbitrary
 * bytes, and whatever it accepts run through the executor: "accepted =>
 * safe to execute".
 *
 * The backends are fakes that abort on any index or value the device
 * process must never pass to a driver (a GPU or package beyond the limits,
 * DRAM of a package without it, a write op or value out of range) and
 * always succeed, so an accepted request must also come back with rc 0:
 * the executor's own range checks (its second line of defence) would
 * otherwise hide a hole in the decoder. Each input is checked against two
 * fixed limits, a small machine and a full one (64 GPUs, 64 packages), so
 * the mask edges at bit 63 are covered too.
 *
 * A PSMSG_TCP_OWNER the decoder accepts names a loopback connection, the
 * only kind common/sockdiag.c looks up.
 *
 * A PSMSG_SLURM_STEP it accepts is a step's start with GPUs within the
 * limits, or an end of nothing but its ids; without a warden here the
 * executor refuses it.
 *
 * The input also goes through the boundary's table (psop_dispatch) as the
 * device process's channel thread takes it: what the table accepts has a
 * row, that row's exact size, no descriptor, and a reply of at most the
 * largest reply's size.
 *
 * The network side's reply check gets the input too (as a whole reply
 * and laid over a valid one): what it accepts must have a NUL-terminated
 * message, valid kinds and the id and op asked for. So do the checks of
 * the lease core's replies (LEASES, RELEASE, LEDGER), over valid ones.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sockdiag.h"
#include "devices/gpu.h"
#include "devices/rapl.h"
#include "privsep/boundary.h"
#include "privsep/exec.h"
#include "privsep/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct psmsg_limits limits[] = {
	{ 5, 3, 0x5 },			/* DRAM on packages 0 and 2 */
	{ 64, 64, UINT64_C(0xaaaaaaaaaaaaaaaa) },
};

static const struct psmsg_limits *cur;	/* the limits of this run */
static unsigned calls;

static void
must(int ok)
{
	if (!ok)
		abort();
}

static void
gpu_call(unsigned gpu)
{
	must(gpu < cur->ngpu);
	calls++;
}

static int
f_power(struct gpu_backend *b, unsigned gpu, uint32_t *mw, struct zerr *err)
{
	gpu_call(gpu);
	*mw = 1000 + gpu;
	return 0;
}

static int
f_energy(struct gpu_backend *b, unsigned gpu, uint64_t *mj, struct zerr *err)
{
	gpu_call(gpu);
	*mj = gpu;
	return 0;
}

static int
f_limit(struct gpu_backend *b, unsigned gpu, uint32_t *mw, struct zerr *err)
{
	gpu_call(gpu);
	*mw = 1;
	return 0;
}

static int
f_constraints(struct gpu_backend *b, unsigned gpu, uint32_t *lo,
    uint32_t *hi, struct zerr *err)
{
	gpu_call(gpu);
	*lo = 1;
	*hi = 2;
	return 0;
}

static int
f_persistence(struct gpu_backend *b, unsigned gpu, bool *on, struct zerr *err)
{
	gpu_call(gpu);
	*on = false;
	return 0;
}

/*
 * What a driver may be asked to do: one write's own values, none of
 * another's (any u32 of its own: the driver judges those).
 */
static int
f_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	gpu_call(gpu);
	must((unsigned)w->op < GPU_WRITE_OP_COUNT);
	switch (w->op) {
	case GPU_SET_PERSISTENCE_MODE:
		must(w->power_limit_mw == 0 && w->min_clock_mhz == 0 &&
		    w->max_clock_mhz == 0);
		break;
	case GPU_SET_POWER_LIMIT:
		must(!w->enabled && w->min_clock_mhz == 0 &&
		    w->max_clock_mhz == 0);
		break;
	default:
		break;
	}
	return 0;
}

static bool
f_lost(struct gpu_backend *b, unsigned gpu)
{
	must(gpu < cur->ngpu);
	return false;
}

static const struct gpu_backend_ops fake_ops = {
	.name = "fuzz",
	.get_power_mw = f_power,
	.get_energy_mj = f_energy,
	.get_power_limit_mw = f_limit,
	.get_power_limit_constraints = f_constraints,
	.get_persistence_mode = f_persistence,
	.write = f_write,
	.lost = f_lost,
};

static struct gpu_backend fake_gpu = { &fake_ops, NULL };

static int
f_rapl(void *ctx, unsigned pkg, uint64_t *cpu_uj, uint64_t *dram_uj,
    uint64_t *mono_ns, struct zerr *err)
{
	must(pkg < cur->npkg);
	must(dram_uj == NULL || (cur->dram_mask >> pkg & 1));
	calls++;
	*cpu_uj = pkg;
	if (dram_uj != NULL)
		*dram_uj = pkg;
	*mono_ns = 1;
	return 0;
}

static void
run_one(const uint8_t *data, size_t size, const struct psmsg_limits *l)
{
	static struct psmsg_reply rep, back;	/* a few KiB: not on stack */
	/* .net: this process stands in for the network process */
	struct psexec x = { .gpu = &fake_gpu, .ngpu = l->ngpu,
	    .npkg = l->npkg, .dram_mask = l->dram_mask, .rapl_read = f_rapl,
	    .net = getpid() };
	struct psmsg_request r;
	char why[128];

	static struct psmsg_token tok;

	cur = l;
	calls = 0;
	{
		static union psop_msg m;
		static union psop_reply out;
		size_t outlen = 0;
		uint32_t op;

		if (psop_dispatch(&x, l, data, size, -1, 0, &m, &out, &outlen,
		    why, sizeof(why)) == 0) {
			const struct psop *row;

			memcpy(&op, data + 4, sizeof(op));
			row = psop_find(op);
			must(row != NULL && size == row->size &&
			    !(row->flags & PSOP_FD) && outlen > 0 &&
			    outlen <= sizeof(out));
		} else {
			must(why[0] != '\0');
		}
		calls = 0;
	}
	if (size == sizeof(tok)) {
		/* the token request: checked, then (no key here) refused */
		if (psmsg_token_check(data, size, &tok, why, sizeof(why)) != 0) {
			must(tok.len == 0 && tok.h.magic == 0);
			return;
		}
		must(tok.len >= 1 && tok.len <= PSMSG_TOKEN_MAX);
		psexec_token(&x, &tok, &rep);
		must(rep.rc == -1 && calls == 0);
		must(psmsg_reply_check(&rep, sizeof(rep), tok.h.id, PSMSG_TOKEN,
		    &back, why, sizeof(why)) == 0);
		return;
	}
	if (size == sizeof(struct psmsg_writes)) {
		static struct psmsg_writes w;
		static struct psmsg_writes_reply wrep, wback;

		/* the writes of one GPU: each as a write alone, in order */
		if (psmsg_writes_check(data, size, l, &w, why,
		    sizeof(why)) != 0) {
			must(w.n == 0 && w.h.magic == 0);
			return;
		}
		must(w.n >= 2 && w.n <= PSMSG_WRITES_MAX);
		for (uint32_t i = 0; i < w.n; i++)
			must(w.w[i].op == PSMSG_GPU_WRITE &&
			    w.w[i].dev == w.w[0].dev && w.w[i].dev < l->ngpu);
		psexec_writes(&x, &w, &wrep);
		must(calls == w.n);
		must(psmsg_writes_reply_check(&wrep,
		    psmsg_writes_reply_size(w.n), w.h.id, w.n, &wback, why,
		    sizeof(why)) == 0);
		return;
	}
	if (size == sizeof(struct psmsg_tcp_owner)) {
		struct psmsg_tcp_owner o;
		struct sockdiag_tuple t = { 0 };

		/* accepted: a loopback tuple, which is all sockdiag asks */
		if (psmsg_tcp_owner_check(data, size, &o, why,
		    sizeof(why)) != 0) {
			must(o.h.magic == 0 && o.family == 0);
			return;
		}
		t.family = (uint8_t)o.family;
		memcpy(t.client, o.client, sizeof(t.client));
		memcpy(t.server, o.server, sizeof(t.server));
		must(o.client_port <= 65535 && o.server_port <= 65535);
		t.client_port = (uint16_t)o.client_port;
		t.server_port = (uint16_t)o.server_port;
		must(sockdiag_tuple_loopback(&t));
		psexec_tcp_owner(&x, &o, &rep);	/* one netlink look-up */
		must(calls == 0);
		must(psmsg_reply_check(&rep, sizeof(rep), o.h.id,
		    PSMSG_TCP_OWNER, &back, why, sizeof(why)) == 0);
		return;
	}
	if (size == sizeof(struct psmsg_slurm_step)) {
		struct psmsg_slurm_step m;

		/* accepted: a start or an end as the table takes them */
		if (psmsg_slurm_step_check(data, size, l, &m, why,
		    sizeof(why)) != 0) {
			must(m.h.magic == 0 && m.who == 0);
			return;
		}
		must(m.who != 0 && m.job != 0 && m.start <= 1);
		must(m.start ? m.gpus != 0 && m.uid != UINT32_MAX &&
		    (l->ngpu >= 64 || m.gpus >> l->ngpu == 0) :
		    m.gpus == 0 && m.uid == 0);
		psexec_slurm_step(&x, &m, &rep);	/* no warden: refused */
		must(rep.rc == -1 && calls == 0);
		must(psmsg_reply_check(&rep, sizeof(rep), m.h.id,
		    PSMSG_SLURM_STEP, &back, why, sizeof(why)) == 0);
		return;
	}
	if (psmsg_request_check(data, size, l, &r, why, sizeof(why)) != 0) {
		must(r.magic == 0 && r.op == 0);	/* nothing to run */
		return;
	}
	/* a peer request comes with its socket (device.c); none here */
	psexec_run(&x, &r, -1, &rep);
	must(rep.id == r.id && rep.op == r.op);
	must(rep.rc == (r.op == PSMSG_PEER ? -1 : 0));
	if (r.op == PSMSG_SAMPLE) {
		unsigned n = (unsigned)__builtin_popcountll(r.gpu_mask);

		must(rep.gpu_ok == r.gpu_mask && rep.pkg_ok == r.pkg_mask);
		n += (unsigned)__builtin_popcountll(r.pkg_mask);	/* one each */
		must(calls == n);
	} else if (r.op == PSMSG_PROC || r.op == PSMSG_PEER ||
	    r.op == PSMSG_PEER_END) {
		/* the process's own /proc, or NSS and /proc/PID/comm: no
		 * device */
		must(calls == 0);
	} else {
		must(calls == 1);
	}
	must(psmsg_reply_check(&rep, sizeof(rep), r.id, r.op, &back, why,
	    sizeof(why)) == 0);
}

/* Whatever the reply check accepts is safe to turn into an HTTP answer. */
static void
reply_one(const void *buf, size_t size, uint64_t id, uint32_t op)
{
	static struct psmsg_reply rep;
	char why[128];

	if (psmsg_reply_check(buf, size, id, op, &rep, why, sizeof(why)) != 0)
		return;
	must(memchr(rep.err_msg, '\0', sizeof(rep.err_msg)) != NULL);
	must(rep.err_kind <= ZERR_CONFLICT &&
	    rep.err_gpu_kind <= ZERR_CONFLICT);
	must((rep.rc == 0 && rep.err_kind == ZERR_NONE) ||
	    (rep.rc == -1 && rep.err_kind != ZERR_NONE));
	must(rep.id == id && rep.op == op && rep.lost <= 1);
	must(memchr(rep.i_user, '\0', sizeof(rep.i_user)) != NULL &&
	    memchr(rep.i_comm, '\0', sizeof(rep.i_comm)) != NULL &&
	    memchr(rep.i_cgroup, '\0', sizeof(rep.i_cgroup)) != NULL);
	must(rep.i_ngids <= IDENTITY_MAX_GROUPS);
}

/* Bytes `data` laid at offset `off` over `n` bytes of `dst`. */
static void
overlay(void *dst, size_t n, const uint8_t *data, size_t size)
{
	size_t off, k;

	if (size < 2)
		return;
	off = (size_t)(data[0] | data[1] << 8) % n;
	k = size - 2 < n - off ? size - 2 : n - off;
	memcpy((char *)dst + off, data + 2, k);
}

/* A valid reply to LEASES or RELEASE: 1 lease of a node of 4 GPUs. */
static void
leases_template(struct psmsg_leases_reply *l, uint32_t op)
{
	memset(l, 0, sizeof(*l));
	l->magic = PSMSG_MAGIC;
	l->op = op;
	l->id = 9;
	l->nopen = 1;
	l->rec[0].gpu = 3;
	l->rec[0].state = op == PSMSG_RELEASE ? PSMSG_LEASE_ENDED :
	    PSMSG_LEASE_HELD;
	if (op == PSMSG_RELEASE)
		l->rec[0].reason = PSMSG_REASON_RELEASE;
	memcpy(l->rec[0].user, "alice", 6);
}

/* A valid reply to LEDGER from its first user: 2 users of 8 GPUs. */
static void
ledger_template(struct psmsg_ledger_reply *d)
{
	memset(d, 0, sizeof(*d));
	d->magic = PSMSG_MAGIC;
	d->op = PSMSG_LEDGER;
	d->id = 11;
	d->nusers = 2;
	d->n = 2;
	memcpy(d->u[0].user, "alice", 6);
	memcpy(d->u[1].user, "(other)", 8);
}

static int
leases_check(const struct psmsg_leases_reply *l, uint32_t op,
    struct psmsg_leases_reply *out)
{
	char why[128];

	return psmsg_leases_reply_check(l, sizeof(*l), 9, op, 4, out, why,
	    sizeof(why));
}

static int
ledger_check(const struct psmsg_ledger_reply *d,
    struct psmsg_ledger_reply *out)
{
	char why[128];

	return psmsg_ledger_reply_check(d, sizeof(*d), 11, 0, 8, out, why,
	    sizeof(why));
}

/*
 * The input laid over a valid reply of LEASES or RELEASE (by the input's
 * size, odd or even) and of LEDGER: what the checks accept is safe to
 * turn into /gpu/leases, /gpu/release's answer and /metrics. The valid
 * replies themselves must pass, or only refusals would be tried.
 */
static void
lease_replies_one(const uint8_t *data, size_t size)
{
	static struct psmsg_leases_reply l, lback;
	static struct psmsg_ledger_reply d, dback;
	static bool templates_pass;
	uint32_t op = size & 1 ? PSMSG_RELEASE : PSMSG_LEASES;

	if (!templates_pass) {
		leases_template(&l, PSMSG_LEASES);
		must(leases_check(&l, PSMSG_LEASES, &lback) == 0);
		leases_template(&l, PSMSG_RELEASE);
		must(leases_check(&l, PSMSG_RELEASE, &lback) == 0);
		ledger_template(&d);
		must(ledger_check(&d, &dback) == 0);
		templates_pass = true;
	}

	leases_template(&l, op);
	overlay(&l, sizeof(l), data, size);
	if (leases_check(&l, op, &lback) == 0) {
		must(lback.nopen <= 4 && lback.nended <= PSMSG_LEASES_ENDED);
		must(memchr(lback.err_msg, '\0', sizeof(lback.err_msg)) !=
		    NULL);
		for (uint32_t i = 0; i < lback.nopen + lback.nended; i++) {
			const struct psmsg_lease *r = &lback.rec[i];

			must(r->gpu < 4 && r->state <= PSMSG_LEASE_ENDED);
			must(memchr(r->user, '\0', sizeof(r->user)) != NULL &&
			    memchr(r->cgroup, '\0', sizeof(r->cgroup)) !=
			    NULL &&
			    memchr(r->label, '\0', sizeof(r->label)) != NULL);
		}
		must((lback.unleased_ok | lback.not_leased) >> 4 == 0);
	}

	ledger_template(&d);
	overlay(&d, sizeof(d), data, size);
	if (ledger_check(&d, &dback) == 0) {
		must(dback.n <= PSMSG_LEDGER_USERS && dback.n <= dback.nusers);
		for (uint32_t i = 0; i < dback.n; i++) {
			must(memchr(dback.u[i].user, '\0',
			    sizeof(dback.u[i].user)) != NULL);
			for (uint32_t g = 8; g < PSMSG_MAX_GPUS; g++)
				must(dback.u[i].mj[g] == 0);
		}
	}
}

/*
 * The writes of one GPU (random bytes of its size never get past the
 * header): the input laid over a valid request of 2..64 writes, and over
 * a valid reply to one, whose check must leave only safe results.
 */
static void
writes_one(const uint8_t *data, size_t size)
{
	static struct psmsg_writes w;
	static struct psmsg_writes_reply rep, back;
	char why[128];
	uint32_t n;

	if (size < 1)
		return;
	n = 2 + data[0] % (PSMSG_WRITES_MAX - 1);
	psmsg_writes_init(&w, n, 0);
	w.h.id = 5;
	for (uint32_t i = 0; i < n; i++) {
		w.w[i].w_op = GPU_RESET_LOCKED_CLOCKS;
		w.w[i].w_from = PSMSG_FROM_TCP;
	}
	overlay(&w, sizeof(w), data + 1, size - 1);
	for (unsigned i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (limits[i].ngpu > 0)
			run_one((const uint8_t *)&w, sizeof(w), &limits[i]);

	memset(&rep, 0, sizeof(rep));
	rep.magic = PSMSG_MAGIC;
	rep.op = PSMSG_GPU_WRITES;
	rep.id = 5;
	rep.n = n;
	rep.r[0].rc = -1;
	rep.r[0].err_kind = ZERR_FORBIDDEN;
	memcpy(rep.r[0].err_msg, "no permission", 14);
	overlay(&rep, psmsg_writes_reply_size(n), data + 1, size - 1);
	if (psmsg_writes_reply_check(&rep, psmsg_writes_reply_size(n), 5, n,
	    &back, why, sizeof(why)) != 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		must(memchr(back.r[i].err_msg, '\0',
		    sizeof(back.r[i].err_msg)) != NULL);
		must((back.r[i].rc == 0 && back.r[i].err_kind == ZERR_NONE) ||
		    (back.r[i].rc == -1 && back.r[i].err_kind != ZERR_NONE &&
		    back.r[i].err_kind <= ZERR_CONFLICT));
		must(back.r[i].lost <= 1);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct psmsg_reply tmpl;
	size_t off, n;

	static struct psmsg_token tok;

	for (unsigned i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		run_one(data, size, &limits[i]);
	/* any bytes as a token, in a well-formed token request */
	if (size >= 1 && size <= PSMSG_TOKEN_MAX) {
		memset(&tok, 0, sizeof(tok));
		psmsg_request_init(&tok.h, PSMSG_TOKEN, 3);
		tok.len = (uint32_t)size;
		memcpy(tok.token, data, size);
		run_one((const uint8_t *)&tok, sizeof(tok), &limits[0]);
	}

	/*
	 * Replies: random bytes of a reply's size (KiB) rarely get past the
	 * magic, so the input is also laid over a valid failure reply at an
	 * offset taken from its first two bytes.
	 */
	if (size == sizeof(struct psmsg_reply)) {
		memcpy(&tmpl, data, size);
		reply_one(data, size, tmpl.id, tmpl.op);
	}
	writes_one(data, size);
	lease_replies_one(data, size);
	if (size >= 2) {
		memset(&tmpl, 0, sizeof(tmpl));
		tmpl.magic = PSMSG_MAGIC;
		tmpl.op = PSMSG_GPU_WRITE;
		tmpl.id = 7;
		tmpl.rc = -1;
		tmpl.err_kind = ZERR_FORBIDDEN;
		memcpy(tmpl.err_msg, "no permission", 14);
		off = (size_t)(data[0] | data[1] << 8) % sizeof(tmpl);
		n = size - 2;
		if (n > sizeof(tmpl) - off)
			n = sizeof(tmpl) - off;
		memcpy((char *)&tmpl + off, data + 2, n);
		reply_one(&tmpl, sizeof(tmpl), 7, PSMSG_GPU_WRITE);
	}
	return 0;
}
