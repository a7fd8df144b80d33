/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_privsep_msg.c - the privilege-separation messages (src/privsep/msg.c)
 * and the device-side executor (src/privsep/exec.c).
 *
 * One test per validation rule of psmsg_request_check (the device process's
 * only input from the unprivileged side), the network side's reply check,
 * and the executor against a fake GPU backend and a fake RAPL reader that
 * count their calls: a forged request is refused by the check and never
 * reaches a backend, an accepted one reaches exactly the right call with
 * the right index, and a reply carries nothing but its fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/procstat.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"
#include "devices/rapl.h"
#include "privsep/control.h"
#include "privsep/exec.h"
#include "privsep/msg.h"

/* 3 GPUs, 2 packages, DRAM on package 1 only */
static const struct psmsg_limits lim = { 3, 2, 0x2 };

/* ---- the fake backends ------------------------------------------------- */

enum { F_POWER, F_ENERGY, F_LIMIT, F_CONSTRAINTS, F_PERSISTENCE, F_WRITE,
	F_LOST, F_RAPL, F_COUNT };

struct fake {
	unsigned calls[F_COUNT];
	unsigned last_gpu;
	struct gpu_write last_write;
	uint64_t fail_gpus;		/* these GPUs' calls fail... */
	enum zerr_kind fail_kind;	/* ...with this kind */
	uint64_t lost_gpus;
	uint64_t fail_pkgs;		/* RAPL reads of these fail */
	unsigned last_pkg;
	bool last_dram;			/* the last RAPL read asked for DRAM */
};

static struct fake fk;

static int
fake_gpu(unsigned f, unsigned gpu, struct zerr *err)
{
	fk.calls[f]++;
	fk.last_gpu = gpu;
	assert_true(gpu < lim.ngpu);
	if (fk.fail_gpus >> gpu & 1)
		return zerr_set(err, fk.fail_kind, "gpu %u: fake failure",
		    gpu);
	return 0;
}

static int
f_power(struct gpu_backend *b, unsigned gpu, uint32_t *mw, struct zerr *err)
{
	*mw = 100000 + gpu;
	return fake_gpu(F_POWER, gpu, err);
}

static int
f_energy(struct gpu_backend *b, unsigned gpu, uint64_t *mj, struct zerr *err)
{
	*mj = UINT64_C(1) << 40 | gpu;
	return fake_gpu(F_ENERGY, gpu, err);
}

static int
f_limit(struct gpu_backend *b, unsigned gpu, uint32_t *mw, struct zerr *err)
{
	*mw = 250000;
	return fake_gpu(F_LIMIT, gpu, err);
}

static int
f_constraints(struct gpu_backend *b, unsigned gpu, uint32_t *lo,
    uint32_t *hi, struct zerr *err)
{
	*lo = 100000;
	*hi = 300000;
	return fake_gpu(F_CONSTRAINTS, gpu, err);
}

static int
f_persistence(struct gpu_backend *b, unsigned gpu, bool *on, struct zerr *err)
{
	*on = true;
	return fake_gpu(F_PERSISTENCE, gpu, err);
}

static int
f_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	fk.last_write = *w;
	return fake_gpu(F_WRITE, gpu, err);
}

static bool
f_lost(struct gpu_backend *b, unsigned gpu)
{
	fk.calls[F_LOST]++;
	return fk.lost_gpus >> gpu & 1;
}

static const struct gpu_backend_ops fake_ops = {
	.name = "fake",
	.get_power_mw = f_power,
	.get_energy_mj = f_energy,
	.get_power_limit_mw = f_limit,
	.get_power_limit_constraints = f_constraints,
	.get_persistence_mode = f_persistence,
	.write = f_write,
	.lost = f_lost,
};

static struct gpu_backend fake_gpu_backend = { &fake_ops, NULL };

static int
f_rapl(void *ctx, unsigned pkg, uint64_t *cpu_uj, uint64_t *dram_uj,
    uint64_t *mono_ns, struct zerr *err)
{
	fk.calls[F_RAPL]++;
	fk.last_pkg = pkg;
	fk.last_dram = dram_uj != NULL;
	assert_ptr_equal(ctx, &fk);
	assert_true(pkg < lim.npkg);
	/* DRAM is asked for only where the package has it */
	assert_true(dram_uj == NULL || (lim.dram_mask >> pkg & 1));
	if (fk.fail_pkgs >> pkg & 1)
		return zerr_set(err, ZERR_INTERNAL, "package %u: fake", pkg);
	*cpu_uj = 1000u * pkg + 7;
	if (dram_uj != NULL)
		*dram_uj = 1000u * pkg + 8;
	*mono_ns = 5000u + pkg;
	return 0;
}

static const struct psexec exec_fake = {
	.gpu = &fake_gpu_backend, .ngpu = 3, .npkg = 2, .dram_mask = 0x2,
	.rapl_read = f_rapl, .rapl_ctx = &fk,
};

static int
setup(void **state)
{
	memset(&fk, 0, sizeof(fk));
	return 0;
}

static unsigned
total_calls(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < F_COUNT; i++)
		n += fk.calls[i];
	return n;
}

/* ---- helpers ----------------------------------------------------------- */

static struct psmsg_request
req(enum psmsg_op op)
{
	struct psmsg_request r;

	psmsg_request_init(&r, op, 42);
	return r;
}

static struct psmsg_request
wreq(enum gpu_write_op w, uint32_t limit, uint32_t enabled, uint32_t lo,
    uint32_t hi)
{
	struct psmsg_request r = req(PSMSG_GPU_WRITE);

	r.dev = 2;
	r.w_from = PSMSG_FROM_TCP;	/* a write names its writer: not 0 */
	r.w_op = w;
	r.w_power_limit_mw = limit;
	r.w_enabled = enabled;
	r.w_min_mhz = lo;
	r.w_max_mhz = hi;
	return r;
}

static int
check_lim(const struct psmsg_request *r, const struct psmsg_limits *l)
{
	struct psmsg_request out;
	char why[128] = "";
	int rc;

	memset(&out, 0x55, sizeof(out));
	rc = psmsg_request_check(r, sizeof(*r), l, &out, why, sizeof(why));
	if (rc == 0) {
		assert_memory_equal(&out, r, sizeof(*r));
	} else {
		/* a refusal says why and leaves nothing runnable behind */
		assert_int_equal(rc, -1);
		assert_true(why[0] != '\0');
		assert_int_equal(out.magic, 0);
		assert_int_equal(out.op, 0);
	}
	return rc;
}

static int
check(const struct psmsg_request *r)
{
	return check_lim(r, &lim);
}

/* The message the device process would act on, as the loop will do it. */
static int
serve_fd(const void *buf, size_t len, int fd, struct psmsg_reply *rep)
{
	struct psmsg_request r;
	char why[128];

	if (psmsg_request_check(buf, len, &lim, &r, why, sizeof(why)) != 0)
		return -1;
	psexec_run(&exec_fake, &r, fd, rep);
	return 0;
}

static int
serve(const void *buf, size_t len, struct psmsg_reply *rep)
{
	return serve_fd(buf, len, -1, rep);
}

/* ---- request check ----------------------------------------------------- */

static void
test_layout(void **state)
{
	assert_int_equal(sizeof(struct psmsg_request), 112 + PSMSG_LABEL_MAX);
	assert_int_equal(offsetof(struct psmsg_request, gpu_mask), 48);
	assert_int_equal(sizeof(struct psmsg_reply) % 8, 0);
	assert_int_equal(offsetof(struct psmsg_reply, v) % 8, 0);
	assert_int_equal(offsetof(struct psmsg_reply, cpu_uj) % 8, 0);
}

static void
test_good(void **state)
{
	static const enum psmsg_op reads[] = { PSMSG_GPU_POWER,
		PSMSG_GPU_ENERGY, PSMSG_GPU_LIMIT, PSMSG_GPU_CONSTRAINTS,
		PSMSG_GPU_PERSISTENCE };
	struct psmsg_request r;

	for (unsigned i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		for (unsigned g = 0; g < lim.ngpu; g++) {
			r = req(reads[i]);
			r.dev = g;
			assert_int_equal(check(&r), 0);
		}
	r = wreq(GPU_SET_POWER_LIMIT, 1, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_SET_POWER_LIMIT, 300000, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_SET_PERSISTENCE_MODE, 0, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_SET_PERSISTENCE_MODE, 0, 1, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_SET_GPU_LOCKED_CLOCKS, 0, 0, 0, 2100);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_SET_MEM_LOCKED_CLOCKS, 0, 0, 1500, 1500);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_RESET_GPU_LOCKED_CLOCKS, 0, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_RESET_MEM_LOCKED_CLOCKS, 0, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = wreq(GPU_RESET_LOCKED_CLOCKS, 0, 0, 0, 0);
	assert_int_equal(check(&r), 0);
	r = req(PSMSG_RAPL_READ);
	r.dev = 1;
	assert_int_equal(check(&r), 0);
	r.zone = RAPL_ZONE_DRAM;
	assert_int_equal(check(&r), 0);
	r = req(PSMSG_SAMPLE);
	r.gpu_mask = 0x7;
	r.pkg_mask = 0x3;
	assert_int_equal(check(&r), 0);
	r.gpu_mask = 0;
	assert_int_equal(check(&r), 0);
	r.gpu_mask = 0x4;
	r.pkg_mask = 0;
	assert_int_equal(check(&r), 0);
}

static void
test_bad_magic(void **state)
{
	struct psmsg_request r = req(PSMSG_GPU_POWER);

	r.magic = PSMSG_MAGIC ^ 1;
	assert_int_equal(check(&r), -1);
	r.magic = 0;
	assert_int_equal(check(&r), -1);
}

static void
test_bad_size(void **state)
{
	unsigned char buf[sizeof(struct psmsg_reply)] = { 0 };
	struct psmsg_request r = req(PSMSG_GPU_POWER), out;
	char why[128];

	memcpy(buf, &r, sizeof(r));
	for (size_t len = 0; len < sizeof(r); len++)
		assert_int_equal(psmsg_request_check(buf, len, &lim, &out, why,
		    sizeof(why)), -1);
	assert_int_equal(psmsg_request_check(buf, sizeof(r), &lim, &out, why,
	    sizeof(why)), 0);
	assert_int_equal(psmsg_request_check(buf, sizeof(r) + 1, &lim, &out,
	    why, sizeof(why)), -1);
	assert_int_equal(psmsg_request_check(buf, sizeof(buf), &lim, &out,
	    why, sizeof(why)), -1);
	assert_non_null(strstr(why, "bytes"));
	/* no room for a reason is fine */
	assert_int_equal(psmsg_request_check(buf, 3, &lim, &out, NULL, 0), -1);
}

static void
test_bad_op(void **state)
{
	static const uint32_t ops[] = { 0, PSMSG_OP_END, PSMSG_OP_END + 1,
		0x80000000u, UINT32_MAX };
	struct psmsg_request r;

	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		r = req(PSMSG_GPU_POWER);
		r.op = ops[i];
		assert_int_equal(check(&r), -1);
	}
	assert_string_equal(psmsg_op_name(0), "?");
	assert_string_equal(psmsg_op_name(PSMSG_OP_END), "?");
	assert_string_equal(psmsg_op_name(PSMSG_SAMPLE), "sample");
}

static void
test_gpu_range(void **state)
{
	static const struct psmsg_limits none = { 0, 2, 0 };
	struct psmsg_request r;

	for (uint32_t op = PSMSG_GPU_POWER; op <= PSMSG_GPU_WRITE; op++) {
		r = op == PSMSG_GPU_WRITE ?
		    wreq(GPU_RESET_LOCKED_CLOCKS, 0, 0, 0, 0) : req(op);
		r.dev = lim.ngpu - 1;
		assert_int_equal(check(&r), 0);
		r.dev = lim.ngpu;
		assert_int_equal(check(&r), -1);
		r.dev = UINT32_MAX;
		assert_int_equal(check(&r), -1);
		r.dev = 0;		/* no GPU at all: even 0 is out */
		assert_int_equal(check_lim(&r, &none), -1);
	}
}

static void
test_pkg_range(void **state)
{
	static const struct psmsg_limits none = { 3, 0, 0 };
	struct psmsg_request r = req(PSMSG_RAPL_READ);

	r.dev = lim.npkg;
	assert_int_equal(check(&r), -1);
	r.dev = UINT32_MAX;
	assert_int_equal(check(&r), -1);
	r.dev = 0;
	assert_int_equal(check_lim(&r, &none), -1);
}

static void
test_zone(void **state)
{
	struct psmsg_request r = req(PSMSG_RAPL_READ);

	r.dev = 0;			/* no DRAM on package 0 */
	r.zone = RAPL_ZONE_DRAM;
	assert_int_equal(check(&r), -1);
	r.dev = 1;
	r.zone = 2;
	assert_int_equal(check(&r), -1);
	r.zone = UINT32_MAX;
	assert_int_equal(check(&r), -1);
}

static void
test_bad_write_op(void **state)
{
	struct psmsg_request r = wreq(GPU_WRITE_OP_COUNT, 0, 0, 0, 0);

	assert_int_equal(check(&r), -1);
	r.w_op = UINT32_MAX;
	assert_int_equal(check(&r), -1);
}

static void
test_enabled(void **state)
{
	struct psmsg_request r = wreq(GPU_SET_PERSISTENCE_MODE, 0, 2, 0, 0);

	assert_int_equal(check(&r), -1);
	r.w_enabled = UINT32_MAX;
	assert_int_equal(check(&r), -1);
}

/*
 * Any power limit and clock pair passes: the driver judges values (as in
 * one process), so a user's out-of-range value must not stop the daemon.
 */
static void
test_power_limit(void **state)
{
	struct psmsg_request r = wreq(GPU_SET_POWER_LIMIT, 0, 0, 0, 0);

	assert_int_equal(check(&r), 0);
	r.w_power_limit_mw = UINT32_MAX;
	assert_int_equal(check(&r), 0);
}

static void
test_clocks(void **state)
{
	static const enum gpu_write_op ops[] = { GPU_SET_GPU_LOCKED_CLOCKS,
		GPU_SET_MEM_LOCKED_CLOCKS };
	struct psmsg_request r;

	for (unsigned i = 0; i < 2; i++) {
		r = wreq(ops[i], 0, 0, 1501, 1500);	/* min > max */
		assert_int_equal(check(&r), 0);
		r = wreq(ops[i], 0, 0, UINT32_MAX, UINT32_MAX);
		assert_int_equal(check(&r), 0);
		/* but a clock write carries no power limit */
		r = wreq(ops[i], 1, 0, 0, 0);
		assert_int_equal(check(&r), -1);
	}
}

/*
 * A write names its writer: a Unix peer or a TCP client. Nobody's (0), a
 * restore's (the device process restores a lease by itself now: nothing
 * the network process sends may pass for one) and unknown ones are
 * refused, whatever the write.
 */
static void
test_write_from(void **state)
{
	static const enum gpu_write_op ops[] = { GPU_SET_POWER_LIMIT,
		GPU_SET_PERSISTENCE_MODE, GPU_RESET_MEM_LOCKED_CLOCKS,
		GPU_RESET_LOCKED_CLOCKS };
	struct psmsg_request r;

	(void)state;
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		r = wreq(ops[i], 0, 0, 0, 0);
		r.w_from = PSMSG_FROM_TCP;
		assert_int_equal(check(&r), 0);
		r.w_from = PSMSG_FROM_UNIX;
		r.auth = 7;
		assert_int_equal(check(&r), 0);
		r.auth = 0;
		/* from nobody: a message, refused by the warden (403) */
		r.w_from = PSMSG_FROM_NONE;
		assert_int_equal(check(&r), 0);
		r.w_from = PSMSG_FROM_RESTORE;
		assert_int_equal(check(&r), -1);
		r.w_reason = PSMSG_REASON_PROCESS_EXIT;	/* as one was sent */
		assert_int_equal(check(&r), -1);
		r.w_reason = 0;
		r.w_from = PSMSG_FROM_END;
		assert_int_equal(check(&r), -1);
		r.w_from = UINT32_MAX;
		assert_int_equal(check(&r), -1);
	}
}

/* A lease label: a Unix writer's only, valid, terminated, nothing after. */
static void
test_label(void **state)
{
	struct psmsg_request r = wreq(GPU_SET_POWER_LIMIT, 1000, 0, 0, 0);

	(void)state;
	r.w_from = PSMSG_FROM_UNIX;
	r.auth = 7;
	snprintf(r.w_label, sizeof(r.w_label), "slurm:42.0");
	assert_int_equal(check(&r), 0);
	memset(r.w_label, 'a', LEASE_LABEL_MAX);	/* the longest */
	assert_int_equal(check(&r), 0);
	memset(r.w_label, 'a', LEASE_LABEL_MAX + 1);	/* one more */
	assert_int_equal(check(&r), -1);
	memset(r.w_label, 'a', sizeof(r.w_label));	/* no end */
	assert_int_equal(check(&r), -1);
	memset(r.w_label, 0, sizeof(r.w_label));
	snprintf(r.w_label, sizeof(r.w_label), "a b");	/* not a label */
	assert_int_equal(check(&r), -1);
	memset(r.w_label, 0, sizeof(r.w_label));
	r.w_label[0] = 'a';
	r.w_label[5] = 'b';				/* after the end */
	assert_int_equal(check(&r), -1);
	memset(r.w_label, 0, sizeof(r.w_label));
	snprintf(r.w_label, sizeof(r.w_label), "job");
	r.w_from = PSMSG_FROM_TCP;			/* no lease for TCP */
	r.auth = 0;
	assert_int_equal(check(&r), -1);
	r = req(PSMSG_GPU_POWER);			/* nor for a read */
	snprintf(r.w_label, sizeof(r.w_label), "job");
	assert_int_equal(check(&r), -1);
}

/*
 * Every field an op does not use, set to 1 in an otherwise good request of
 * that op, is refused: nothing can ride along.
 */
struct field {
	const char *name;
	size_t off, size;
};

#define F(m) { #m, offsetof(struct psmsg_request, m), \
	sizeof(((struct psmsg_request *)0)->m) }
static const struct field fields[] = {
	F(dev), F(zone), F(w_op), F(w_power_limit_mw), F(w_enabled),
	F(w_min_mhz), F(w_max_mhz), F(pad), F(gpu_mask), F(pkg_mask),
	F(auth), F(w_from), F(pad1), F(tok), F(w_reason), F(w_addr_kind),
	F(w_addr), F(w_label),
};
#undef F
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static bool
used(const char *list, const char *name)
{
	char key[40];

	snprintf(key, sizeof(key), " %s ", name);
	return strstr(list, key) != NULL;
}

static void
poke(struct psmsg_request *r, const struct field *f, uint64_t v)
{
	unsigned char *p = (unsigned char *)r + f->off;

	if (f->size == 4) {
		uint32_t v32 = (uint32_t)v;

		memcpy(p, &v32, 4);
	} else {
		memcpy(p, &v, 8);
	}
}

static void
test_unused_fields(void **state)
{
	struct {
		struct psmsg_request r;
		const char *used;	/* space-separated, padded */
	} cases[24];
	unsigned n = 0;

	for (uint32_t op = PSMSG_GPU_POWER; op < PSMSG_GPU_WRITE; op++) {
		cases[n].r = req(op);
		cases[n++].used = " dev ";
	}
	cases[n].r = wreq(GPU_SET_POWER_LIMIT, 1000, 0, 0, 0);
	cases[n++].used = " dev w_op auth w_from tok w_power_limit_mw ";
	cases[n].r = wreq(GPU_SET_PERSISTENCE_MODE, 0, 1, 0, 0);
	cases[n++].used = " dev w_op auth w_from tok w_enabled ";
	cases[n].r = wreq(GPU_SET_GPU_LOCKED_CLOCKS, 0, 0, 1000, 2000);
	cases[n++].used = " dev w_op auth w_from tok w_min_mhz w_max_mhz ";
	cases[n].r = wreq(GPU_SET_MEM_LOCKED_CLOCKS, 0, 0, 1000, 2000);
	cases[n++].used = " dev w_op auth w_from tok w_min_mhz w_max_mhz ";
	cases[n].r = wreq(GPU_RESET_GPU_LOCKED_CLOCKS, 0, 0, 0, 0);
	cases[n++].used = " dev w_op auth w_from tok ";
	cases[n].r = wreq(GPU_RESET_MEM_LOCKED_CLOCKS, 0, 0, 0, 0);
	cases[n++].used = " dev w_op auth w_from tok ";
	cases[n].r = wreq(GPU_RESET_LOCKED_CLOCKS, 0, 0, 0, 0);
	cases[n++].used = " dev w_op auth w_from tok ";
	cases[n].r = req(PSMSG_RAPL_READ);
	cases[n++].used = " dev zone ";
	cases[n].r = req(PSMSG_SAMPLE);
	cases[n].r.gpu_mask = 1;
	cases[n].r.pkg_mask = 1;
	cases[n++].used = " gpu_mask pkg_mask ";
	cases[n].r = req(PSMSG_PROC);
	cases[n++].used = " ";
	cases[n].r = req(PSMSG_PEER);
	cases[n++].used = " auth ";
	cases[n].r = req(PSMSG_PEER_END);
	cases[n].r.auth = 7;
	cases[n++].used = " auth dev ";	/* dev: the writes it queued */
	cases[n].r = req(PSMSG_LEASES);
	cases[n++].used = " ";
	cases[n].r = req(PSMSG_LEDGER);
	cases[n].r.dev = 3;
	cases[n++].used = " dev ";	/* dev: the first user */
	cases[n].r = req(PSMSG_RELEASE);
	cases[n].r.gpu_mask = 1;
	cases[n].r.w_from = PSMSG_FROM_UNIX;
	cases[n].r.auth = 7;
	cases[n].r.tok = 9;
	cases[n++].used = " gpu_mask w_from auth tok ";
	assert_true(n <= sizeof(cases) / sizeof(cases[0]));

	for (unsigned c = 0; c < n; c++) {
		assert_int_equal(check(&cases[c].r), 0);
		for (unsigned f = 0; f < NFIELDS; f++) {
			struct psmsg_request r = cases[c].r;

			if (used(cases[c].used, fields[f].name))
				continue;
			poke(&r, &fields[f], 1);
			if (check(&r) != -1)
				fail_msg("op %s case %u: %s=1 accepted",
				    psmsg_op_name(r.op), c, fields[f].name);
		}
	}
}

static void
test_pad(void **state)
{
	struct psmsg_request r = req(PSMSG_GPU_POWER);

	r.pad = 1;
	assert_int_equal(check(&r), -1);
	r.pad = 0x80000000u;
	assert_int_equal(check(&r), -1);
}

static void
test_sample_masks(void **state)
{
	static const struct psmsg_limits full = { 64, 64, UINT64_MAX };
	struct psmsg_request r = req(PSMSG_SAMPLE);

	assert_int_equal(check(&r), -1);	/* empty */
	r.gpu_mask = UINT64_C(1) << lim.ngpu;
	assert_int_equal(check(&r), -1);
	r.gpu_mask = UINT64_C(1) << 63;
	assert_int_equal(check(&r), -1);
	r.gpu_mask = 1;
	r.pkg_mask = UINT64_C(1) << lim.npkg;
	assert_int_equal(check(&r), -1);
	r.pkg_mask = UINT64_MAX;
	assert_int_equal(check(&r), -1);
	/* 64 devices: every bit is a device */
	r.gpu_mask = UINT64_MAX;
	r.pkg_mask = UINT64_MAX;
	assert_int_equal(check_lim(&r, &full), 0);
}

/* ---- the lease record's requests --------------------------------------- */

static void
test_lease_requests(void **state)
{
	struct psmsg_request r;

	(void)state;
	r = req(PSMSG_LEASES);
	assert_int_equal(check(&r), 0);
	r.auth = 7;			/* nobody's: the record is one */
	assert_int_equal(check(&r), -1);
	r = req(PSMSG_LEASES);
	r.w_from = PSMSG_FROM_UNIX;
	assert_int_equal(check(&r), -1);
	r = req(PSMSG_LEASES);
	r.tok = 1;
	assert_int_equal(check(&r), -1);
	r = req(PSMSG_LEASES);
	r.gpu_mask = 1;
	assert_int_equal(check(&r), -1);
	/* the ledger's first user: any number (past the end: none) */
	r = req(PSMSG_LEDGER);
	assert_int_equal(check(&r), 0);
	r.dev = 16;
	assert_int_equal(check(&r), 0);
	r.dev = UINT32_MAX;
	assert_int_equal(check(&r), 0);
	r.w_from = PSMSG_FROM_TCP;
	assert_int_equal(check(&r), -1);
	r = req(PSMSG_LEDGER);
	r.zone = 1;
	assert_int_equal(check(&r), -1);
	assert_string_equal(psmsg_op_name(PSMSG_LEASES), "leases");
	assert_string_equal(psmsg_op_name(PSMSG_LEDGER), "ledger");
	assert_string_equal(psmsg_op_name(PSMSG_RELEASE), "release");
}

static struct psmsg_request
release_req(uint64_t mask, uint32_t from, uint64_t auth)
{
	struct psmsg_request r = req(PSMSG_RELEASE);

	r.gpu_mask = mask;
	r.w_from = from;
	r.auth = auth;
	return r;
}

static void
test_release_request(void **state)
{
	static const struct psmsg_limits full = { 64, 2, 0 };
	struct psmsg_request r;

	(void)state;
	r = release_req(0x1, PSMSG_FROM_UNIX, 7);
	assert_int_equal(check(&r), 0);
	r.auth = 0;		/* a handle or none: the warden judges it */
	assert_int_equal(check(&r), 0);
	r.tok = 5;		/* the bearer token's handle, as a write's */
	assert_int_equal(check(&r), 0);
	r = release_req(0x7, PSMSG_FROM_TCP, 0);
	assert_int_equal(check(&r), 0);
	r = release_req(UINT64_MAX, PSMSG_FROM_TCP, 0);
	assert_int_equal(check_lim(&r, &full), 0);
	/* GPUs named, all of the node */
	r = release_req(0, PSMSG_FROM_UNIX, 7);
	assert_int_equal(check(&r), -1);
	r = release_req(UINT64_C(1) << lim.ngpu, PSMSG_FROM_UNIX, 7);
	assert_int_equal(check(&r), -1);
	r = release_req(0x1 | UINT64_C(1) << 63, PSMSG_FROM_UNIX, 7);
	assert_int_equal(check(&r), -1);
	/* someone's: a Unix peer or a TCP client, never a restore */
	r = release_req(0x1, PSMSG_FROM_NONE, 0);
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_RESTORE, 0);
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_RESTORE, 7);
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_END, 0);
	assert_int_equal(check(&r), -1);
	/* a TCP client has no peer handle */
	r = release_req(0x1, PSMSG_FROM_TCP, 7);
	assert_int_equal(check(&r), -1);
	/* nothing of a write rides along */
	r = release_req(0x1, PSMSG_FROM_UNIX, 7);
	snprintf(r.w_label, sizeof(r.w_label), "job");
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_UNIX, 7);
	r.w_op = GPU_RESET_LOCKED_CLOCKS;
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_UNIX, 7);
	r.w_reason = PSMSG_REASON_RELEASE;
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_TCP, 0);
	r.w_addr_kind = 4;
	r.w_addr[0] = 127;
	assert_int_equal(check(&r), -1);
	r = release_req(0x1, PSMSG_FROM_UNIX, 7);
	r.dev = 1;
	assert_int_equal(check(&r), -1);
}

/* ---- the lease record's replies ---------------------------------------- */

static struct psmsg_leases_reply lrep, lout;
static struct psmsg_ledger_reply drep, dout;

static void
lease_rec(struct psmsg_lease *r, uint32_t gpu, uint32_t state)
{
	memset(r, 0, sizeof(*r));
	r->gpu = gpu;
	r->uid = 1000;
	r->pid = 4242;
	r->state = state;
	r->settings = GPU_SETTING_POWER_LIMIT | GPU_SETTING_GPU_CLOCKS;
	r->energy_ok = 1;
	r->energy_mj = 12345;
	r->start_ms = UINT64_C(1700000000000);
	r->duration_us = 2500000;
	snprintf(r->user, sizeof(r->user), "alice");
	snprintf(r->cgroup, sizeof(r->cgroup), "/user.slice/job");
	snprintf(r->label, sizeof(r->label), "slurm:42.0");
	if (state == PSMSG_LEASE_ENDED) {
		r->end_ms = r->start_ms + 2500;
		r->reason = PSMSG_REASON_RELEASE;
	}
}

/* A good PSMSG_LEASES reply of request 42: one open lease, one ended. */
static void
good_leases(struct psmsg_leases_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->magic = PSMSG_MAGIC;
	r->op = PSMSG_LEASES;
	r->id = 42;
	r->nopen = 1;
	r->nended = 1;
	lease_rec(&r->rec[0], 1, PSMSG_LEASE_HELD);
	lease_rec(&r->rec[1], 2, PSMSG_LEASE_ENDED);
	r->rec[1].left = 1;
	r->unleased_ok = 0x5;
	r->unleased_mj[0] = 777;
	r->unleased_mj[2] = 0;	/* ok, and nothing yet */
}

static int
lcheck(const struct psmsg_leases_reply *r, uint32_t op, uint32_t ngpu)
{
	char why[128] = "";
	int rc;

	memset(&lout, 0x55, sizeof(lout));
	rc = psmsg_leases_reply_check(r, sizeof(*r), 42, op, ngpu, &lout, why,
	    sizeof(why));
	if (rc == 0) {
		assert_memory_equal(&lout, r, sizeof(*r));
	} else {
		assert_int_equal(rc, -1);
		assert_true(why[0] != '\0');
		assert_int_equal(lout.magic, 0);
		assert_int_equal(lout.nopen, 0);
	}
	return rc;
}

static void
test_leases_reply(void **state)
{
	unsigned char *big = malloc(sizeof(lrep) + 1);
	char why[128];

	(void)state;
	assert_non_null(big);
	good_leases(&lrep);
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	/* open leases only, none, a failure */
	lrep.nended = 0;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	lrep.nopen = 0;
	lrep.unleased_ok = 0;
	lrep.unleased_mj[0] = 0;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	lrep.rc = -1;
	lrep.err_kind = ZERR_INTERNAL;
	snprintf(lrep.err_msg, sizeof(lrep.err_msg), "no");
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);

	/* the size, exactly */
	good_leases(&lrep);
	memset(big, 0, sizeof(lrep) + 1);
	memcpy(big, &lrep, sizeof(lrep));
	assert_int_equal(psmsg_leases_reply_check(big, sizeof(lrep), 42,
	    PSMSG_LEASES, 3, &lout, why, sizeof(why)), 0);
	assert_int_equal(psmsg_leases_reply_check(big, sizeof(lrep) + 1, 42,
	    PSMSG_LEASES, 3, &lout, why, sizeof(why)), -1);
	assert_int_equal(psmsg_leases_reply_check(big, sizeof(lrep) - 1, 42,
	    PSMSG_LEASES, 3, &lout, why, sizeof(why)), -1);
	assert_int_equal(psmsg_leases_reply_check(big, 0, 42, PSMSG_LEASES, 3,
	    &lout, why, sizeof(why)), -1);
	free(big);
	/* the request's magic, id and op */
	good_leases(&lrep);
	lrep.magic ^= 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.id = 43;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	lrep.op = PSMSG_LEDGER;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* rc and its kind */
	good_leases(&lrep);
	lrep.rc = -1;			/* failed, without a kind */
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	lrep.err_kind = ZERR_CONFLICT;	/* ... with records */
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.err_kind = ZERR_CONFLICT;	/* ok, with a kind */
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rc = 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	memset(lrep.err_msg, 'x', sizeof(lrep.err_msg));
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* counts within the node and the arrays */
	good_leases(&lrep);
	lrep.nopen = 4;
	for (unsigned i = 0; i < 4; i++)
		lease_rec(&lrep.rec[i], i % 3, PSMSG_LEASE_HELD);
	lrep.nended = 0;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 4), 0);
	good_leases(&lrep);
	lrep.nended = PSMSG_LEASES_ENDED + 1;
	for (unsigned i = 1; i < 1 + lrep.nended; i++)
		lease_rec(&lrep.rec[i], 0, PSMSG_LEASE_ENDED);
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	lrep.nended = PSMSG_LEASES_ENDED;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	/* a record's GPU */
	good_leases(&lrep);
	lrep.rec[0].gpu = 3;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[1].gpu = UINT32_MAX;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* open ones first, then ended ones */
	good_leases(&lrep);
	lrep.rec[0].state = PSMSG_LEASE_ENDED;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[1].state = PSMSG_LEASE_RESTORING;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[0].state = PSMSG_LEASE_RESTORING;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	lrep.rec[0].state = PSMSG_LEASE_ENDED + 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* an open lease has no end yet */
	good_leases(&lrep);
	lrep.rec[0].end_ms = 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[0].reason = PSMSG_REASON_SHUTDOWN;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[0].left = 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* flags, reasons, settings, pid */
	good_leases(&lrep);
	lrep.rec[1].left = 2;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[1].energy_ok = 2;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[1].energy_ok = 0;	/* no energy, yet a figure */
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	lrep.rec[1].energy_mj = 0;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	good_leases(&lrep);
	lrep.rec[1].reason = PSMSG_REASON_END;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	lrep.rec[1].reason = PSMSG_REASON_HOLDER_GONE;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), 0);
	good_leases(&lrep);
	lrep.rec[0].settings = 1u << 31;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[0].pid = -1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* strings: terminated, 0 after the NUL */
	good_leases(&lrep);
	memset(lrep.rec[0].user, 'a', sizeof(lrep.rec[0].user));
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[0].user[sizeof(lrep.rec[0].user) - 1] = 'x';
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	memset(lrep.rec[1].cgroup, '/', sizeof(lrep.rec[1].cgroup));
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.rec[1].label[20] = 'x';
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* each GPU's unleased energy: only with its bit, only the node's */
	good_leases(&lrep);
	lrep.unleased_mj[1] = 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.unleased_ok = 0x1;
	lrep.unleased_mj[2] = 1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	good_leases(&lrep);
	lrep.unleased_ok |= 0x8;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* not_leased is a release's */
	good_leases(&lrep);
	lrep.not_leased = 0x1;
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
}

/* A good PSMSG_RELEASE reply of request 42: GPU 0 released, 2 had none. */
static void
good_release(struct psmsg_leases_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->magic = PSMSG_MAGIC;
	r->op = PSMSG_RELEASE;
	r->id = 42;
	r->nopen = 1;
	lease_rec(&r->rec[0], 0, PSMSG_LEASE_ENDED);
	r->not_leased = 0x4;
}

static void
test_release_reply(void **state)
{
	(void)state;
	good_release(&lrep);
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), 0);
	assert_int_equal(lcheck(&lrep, PSMSG_LEASES, 3), -1);
	/* refused: 409 and its words, nothing ended */
	memset(&lrep, 0, sizeof(lrep));
	lrep.magic = PSMSG_MAGIC;
	lrep.op = PSMSG_RELEASE;
	lrep.id = 42;
	lrep.rc = -1;
	lrep.err_kind = ZERR_CONFLICT;
	snprintf(lrep.err_msg, sizeof(lrep.err_msg), "GPU 0 is leased");
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), 0);
	lrep.nopen = 1;
	lease_rec(&lrep.rec[0], 0, PSMSG_LEASE_ENDED);
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	/* released records have ended */
	good_release(&lrep);
	lrep.rec[0].state = PSMSG_LEASE_HELD;
	lrep.rec[0].end_ms = 0;
	lrep.rec[0].reason = 0;
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	/* no "ended" list, no unleased energy */
	good_release(&lrep);
	lrep.nended = 1;
	lease_rec(&lrep.rec[1], 1, PSMSG_LEASE_ENDED);
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	good_release(&lrep);
	lrep.unleased_ok = 0x1;
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	/* GPUs of the node only */
	good_release(&lrep);
	lrep.not_leased = 0x8;
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	good_release(&lrep);
	lrep.rec[0].gpu = 3;
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
	good_release(&lrep);
	lrep.nopen = 4;
	assert_int_equal(lcheck(&lrep, PSMSG_RELEASE, 3), -1);
}

/* A good PSMSG_LEDGER reply of request 42: users [0, 2) of 2. */
static void
good_ledger(struct psmsg_ledger_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->magic = PSMSG_MAGIC;
	r->op = PSMSG_LEDGER;
	r->id = 42;
	r->nusers = 2;
	r->n = 2;
	r->u[0].uid = 1000;
	snprintf(r->u[0].user, sizeof(r->u[0].user), "alice");
	r->u[0].mj[0] = 5000;
	r->u[0].mj[2] = 7;
	r->u[1].uid = UINT32_MAX;
	snprintf(r->u[1].user, sizeof(r->u[1].user), "(other)");
	r->u[1].mj[1] = 1;
}

static int
dcheck(const struct psmsg_ledger_reply *r, uint32_t first, uint32_t ngpu)
{
	char why[128] = "";
	int rc;

	memset(&dout, 0x55, sizeof(dout));
	rc = psmsg_ledger_reply_check(r, sizeof(*r), 42, first, ngpu, &dout,
	    why, sizeof(why));
	if (rc == 0) {
		assert_memory_equal(&dout, r, sizeof(*r));
	} else {
		assert_int_equal(rc, -1);
		assert_true(why[0] != '\0');
		assert_int_equal(dout.magic, 0);
		assert_int_equal(dout.n, 0);
	}
	return rc;
}

static void
test_ledger_reply(void **state)
{
	unsigned char *big = malloc(sizeof(drep) + 1);
	char why[128];

	(void)state;
	assert_non_null(big);
	good_ledger(&drep);
	assert_int_equal(dcheck(&drep, 0, 3), 0);
	/* the last page, and past it: none */
	drep.nusers = 3;
	assert_int_equal(dcheck(&drep, 1, 3), 0);
	drep.n = 0;
	memset(drep.u, 0, sizeof(drep.u));
	assert_int_equal(dcheck(&drep, 3, 3), 0);
	assert_int_equal(dcheck(&drep, UINT32_MAX, 3), 0);
	/* a failure: no users */
	good_ledger(&drep);
	drep.rc = -1;
	drep.err_kind = ZERR_INTERNAL;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	drep.n = 0;
	memset(drep.u, 0, sizeof(drep.u));
	assert_int_equal(dcheck(&drep, 0, 3), 0);
	drep.err_kind = ZERR_NONE;
	assert_int_equal(dcheck(&drep, 0, 3), -1);

	/* the size, exactly */
	good_ledger(&drep);
	memset(big, 0, sizeof(drep) + 1);
	memcpy(big, &drep, sizeof(drep));
	assert_int_equal(psmsg_ledger_reply_check(big, sizeof(drep), 42, 0, 3,
	    &dout, why, sizeof(why)), 0);
	assert_int_equal(psmsg_ledger_reply_check(big, sizeof(drep) + 1, 42, 0,
	    3, &dout, why, sizeof(why)), -1);
	assert_int_equal(psmsg_ledger_reply_check(big, sizeof(drep) - 1, 42, 0,
	    3, &dout, why, sizeof(why)), -1);
	free(big);
	/* the request's magic, id and op */
	good_ledger(&drep);
	drep.id = 41;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	drep.op = PSMSG_LEASES;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	drep.magic = 0;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	/* users [first, first + n) of nusers */
	good_ledger(&drep);
	drep.nusers = 1;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	assert_int_equal(dcheck(&drep, 1, 3), -1);
	assert_int_equal(dcheck(&drep, 2, 3), -1);
	assert_int_equal(dcheck(&drep, UINT32_MAX, 3), -1);
	good_ledger(&drep);
	drep.n = PSMSG_LEDGER_USERS + 1;
	drep.nusers = PSMSG_LEDGER_MAX;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	drep.nusers = PSMSG_LEDGER_MAX + 1;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	drep.nusers = PSMSG_LEDGER_MAX;
	assert_int_equal(dcheck(&drep, PSMSG_LEDGER_MAX - 2, 3), 0);
	/* names: terminated, 0 after the NUL */
	good_ledger(&drep);
	memset(drep.u[1].user, 'b', sizeof(drep.u[1].user));
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	drep.u[0].user[10] = 'x';
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	/* energy on the node's GPUs only; the pad 0 */
	good_ledger(&drep);
	drep.u[0].mj[3] = 1;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	assert_int_equal(dcheck(&drep, 0, 4), 0);
	good_ledger(&drep);
	drep.u[1].mj[PSMSG_MAX_GPUS - 1] = 1;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
	good_ledger(&drep);
	drep.u[1].pad = 1;
	assert_int_equal(dcheck(&drep, 0, 3), -1);
}

/* ---- reply check ------------------------------------------------------- */

static void
good_reply(struct psmsg_reply *rep)
{
	struct psmsg_request r = req(PSMSG_GPU_POWER);

	psexec_run(&exec_fake, &r, -1, rep);
	assert_int_equal(rep->rc, 0);
}

static int
rcheck(const struct psmsg_reply *rep, uint64_t id, uint32_t op)
{
	struct psmsg_reply out;
	char why[128] = "";
	int rc;

	rc = psmsg_reply_check(rep, sizeof(*rep), id, op, &out, why,
	    sizeof(why));
	if (rc == 0)
		assert_memory_equal(&out, rep, sizeof(*rep));
	else
		assert_true(why[0] != '\0');
	return rc;
}

static void
test_reply_good(void **state)
{
	static struct psmsg_reply rep;
	struct psmsg_request r;

	good_reply(&rep);
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), 0);
	fk.fail_gpus = 0x2;
	fk.fail_kind = ZERR_FORBIDDEN;
	good_reply(&rep);		/* gpu 0: still fine */
	r = req(PSMSG_GPU_LIMIT);
	r.dev = 1;
	psexec_run(&exec_fake, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_LIMIT), 0);
}

static void
test_reply_bad(void **state)
{
	static struct psmsg_reply rep, out;
	static unsigned char big[sizeof(rep) + 1];
	char why[128];

	good_reply(&rep);
	assert_int_equal(rcheck(&rep, 43, PSMSG_GPU_POWER), -1);  /* id */
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_ENERGY), -1); /* op */
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep) - 1, 42,
	    PSMSG_GPU_POWER, &out, why, sizeof(why)), -1);
	memcpy(big, &rep, sizeof(rep));
	assert_int_equal(psmsg_reply_check(big, sizeof(big), 42,
	    PSMSG_GPU_POWER, &out, why, sizeof(why)), -1);

	good_reply(&rep);
	rep.magic = 0;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);		/* no NUL anywhere in err_msg */
	rep.rc = -1;
	rep.err_kind = ZERR_INTERNAL;
	memset(rep.err_msg, 'x', sizeof(rep.err_msg));
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);
	rep.err_msg[sizeof(rep.err_msg) - 1] = '\0';	/* the last byte */
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), 0);

	good_reply(&rep);
	rep.rc = -1;
	rep.err_kind = ZERR_CONFLICT + 1;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);
	rep.err_kind = UINT32_MAX;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);
	rep.err_kind = ZERR_NONE;	/* failure without a kind */
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.err_kind = ZERR_INTERNAL;	/* success with a kind */
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.rc = 1;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.err_gpu_kind = 99;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.lost = 2;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.pad0 = 1;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);

	good_reply(&rep);
	rep.pad = 1;
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_POWER), -1);
}

/* ---- executor ---------------------------------------------------------- */

static void
test_exec_reads(void **state)
{
	static struct psmsg_reply rep;
	struct psmsg_request r;

	r = req(PSMSG_GPU_POWER);
	r.dev = 2;
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(fk.calls[F_POWER], 1);
	assert_int_equal(fk.last_gpu, 2);
	assert_int_equal(rep.magic, PSMSG_MAGIC);
	assert_int_equal(rep.op, PSMSG_GPU_POWER);
	assert_int_equal(rep.id, 42);
	assert_int_equal(rep.rc, 0);
	assert_int_equal(rep.a, 100002);
	assert_int_equal(rep.lost, 0);

	r = req(PSMSG_GPU_ENERGY);
	r.dev = 1;
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(fk.calls[F_ENERGY], 1);
	assert_true(rep.v == (UINT64_C(1) << 40 | 1));

	r = req(PSMSG_GPU_LIMIT);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.a, 250000);

	r = req(PSMSG_GPU_CONSTRAINTS);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.a, 100000);
	assert_int_equal(rep.b, 300000);

	r = req(PSMSG_GPU_PERSISTENCE);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.a, 1);

	r = req(PSMSG_RAPL_READ);
	r.dev = 1;
	r.zone = RAPL_ZONE_DRAM;
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(fk.calls[F_RAPL], 1);
	assert_int_equal(fk.last_pkg, 1);
	assert_true(fk.last_dram);
	assert_int_equal(rep.v, 1008);
	assert_int_equal(rep.rc, 0);
	r.zone = RAPL_ZONE_CPU;		/* the package counter: no DRAM asked */
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_false(fk.last_dram);
	assert_int_equal(rep.v, 1007);
	assert_int_equal(fk.calls[F_LOST], 5);	/* once per GPU op */
}

static void
test_exec_write(void **state)
{
	static struct psmsg_reply rep;
	struct psmsg_request r = wreq(GPU_SET_GPU_LOCKED_CLOCKS, 0, 0, 900,
	    1800);

	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(fk.calls[F_WRITE], 1);
	assert_int_equal(fk.last_gpu, 2);
	assert_int_equal(fk.last_write.op, GPU_SET_GPU_LOCKED_CLOCKS);
	assert_int_equal(fk.last_write.min_clock_mhz, 900);
	assert_int_equal(fk.last_write.max_clock_mhz, 1800);
	assert_int_equal(rep.rc, 0);

	r = wreq(GPU_SET_POWER_LIMIT, 175000, 0, 0, 0);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(fk.last_write.op, GPU_SET_POWER_LIMIT);
	assert_int_equal(fk.last_write.power_limit_mw, 175000);

	r = wreq(GPU_SET_PERSISTENCE_MODE, 0, 1, 0, 0);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_true(fk.last_write.enabled);
	assert_int_equal(fk.calls[F_WRITE], 3);
}

static void
test_exec_failure(void **state)
{
	static struct psmsg_reply rep;
	struct psmsg_request r = wreq(GPU_SET_POWER_LIMIT, 175000, 0, 0, 0);
	size_t n;

	fk.fail_gpus = 0x4;
	fk.fail_kind = ZERR_UNAVAILABLE;
	fk.lost_gpus = 0x4;
	memset(&rep, 0xa5, sizeof(rep));
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.err_kind, ZERR_UNAVAILABLE);
	assert_string_equal(rep.err_msg, "gpu 2: fake failure");
	assert_int_equal(rep.lost, 1);
	/* nothing but the message: the rest of the array is zero */
	n = strlen(rep.err_msg);
	for (size_t i = n; i < sizeof(rep.err_msg); i++)
		assert_int_equal(rep.err_msg[i], 0);
	assert_int_equal(rep.pad0, 0);
	assert_int_equal(rep.pad, 0);
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_WRITE), 0);

	/* a backend failing without a kind still reads as a failure */
	fk.fail_kind = ZERR_NONE;
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.err_kind, ZERR_INTERNAL);
	assert_int_equal(rcheck(&rep, 42, PSMSG_GPU_WRITE), 0);

	fk.fail_pkgs = 0x1;
	r = req(PSMSG_RAPL_READ);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.err_kind, ZERR_INTERNAL);
	assert_string_equal(rep.err_msg, "package 0: fake");
}

static void
test_exec_sample(void **state)
{
	static struct psmsg_reply rep;
	struct psmsg_request r = req(PSMSG_SAMPLE);

	r.gpu_mask = 0x7;
	r.pkg_mask = 0x3;
	fk.fail_gpus = 0x6;
	fk.fail_kind = ZERR_UNAVAILABLE;
	fk.lost_gpus = 0x4;
	memset(&rep, 0xa5, sizeof(rep));
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(rep.rc, 0);
	assert_int_equal(rep.err_kind, ZERR_NONE);
	assert_int_equal(fk.calls[F_POWER], 3);
	assert_true(rep.gpu_ok == 0x1);
	assert_true(rep.gpu_lost == 0x4);
	assert_int_equal(rep.gpu_mw[0], 100000);
	assert_int_equal(rep.gpu_mw[1], 0);
	assert_int_equal(rep.err_gpu_kind, ZERR_UNAVAILABLE);
	/* the first failure's message */
	assert_string_equal(rep.err_msg, "gpu 1: fake failure");
	assert_true(rep.pkg_ok == 0x3);
	/* one read per package, DRAM only for package 1 */
	assert_int_equal(fk.calls[F_RAPL], 2);
	assert_int_equal(rep.cpu_uj[0], 7);
	assert_int_equal(rep.dram_uj[0], 0);
	assert_int_equal(rep.cpu_uj[1], 1007);
	assert_int_equal(rep.dram_uj[1], 1008);
	/* each package's own time, as its read reported it */
	assert_int_equal(rep.mono_ns[0], 5000);
	assert_int_equal(rep.mono_ns[1], 5001);
	assert_int_equal(rep.mono_ns[2], 0);	/* unsampled: zero */
	assert_int_equal(rcheck(&rep, 42, PSMSG_SAMPLE), 0);

	/* a failing package is left out, the other still sampled */
	fk.fail_pkgs = 0x2;
	r.gpu_mask = 0;
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_true(rep.pkg_ok == 0x1);
	assert_int_equal(rep.mono_ns[1], 0);
	assert_int_equal(rep.cpu_uj[1], 0);
	assert_int_equal(rep.err_gpu_kind, ZERR_NONE);
}

/*
 * The pattern of the device loop: check, then run. Forged messages of
 * every kind are refused and no backend function is called.
 */
static void
test_forged_never_runs(void **state)
{
	static struct psmsg_reply rep;
	unsigned char big[sizeof(struct psmsg_request) * 2] = { 0 };
	struct psmsg_request r;

	r = req(PSMSG_GPU_WRITE);			/* GPU id == ngpu */
	r.dev = lim.ngpu;
	r.w_op = GPU_SET_POWER_LIMIT;
	r.w_power_limit_mw = 100000;
	assert_int_equal(serve(&r, sizeof(r), &rep), -1);
	r.dev = 0;					/* smuggled clock */
	r.w_max_mhz = 1;
	assert_int_equal(serve(&r, sizeof(r), &rep), -1);
	r = req(PSMSG_GPU_POWER);			/* bad op */
	r.op = 99;
	assert_int_equal(serve(&r, sizeof(r), &rep), -1);
	r = req(PSMSG_GPU_POWER);			/* oversized */
	memcpy(big, &r, sizeof(r));
	assert_int_equal(serve(big, sizeof(big), &rep), -1);
	r = req(PSMSG_RAPL_READ);			/* dram on pkg 0 */
	r.zone = RAPL_ZONE_DRAM;
	assert_int_equal(serve(&r, sizeof(r), &rep), -1);
	r = req(PSMSG_SAMPLE);				/* bit 3 of 3 gpus */
	r.gpu_mask = 0x8;
	assert_int_equal(serve(&r, sizeof(r), &rep), -1);
	assert_int_equal(total_calls(), 0);
}

/*
 * The executor's own line of defence: a request it is handed unchecked
 * with an index out of range fails as ZERR_INTERNAL without a call.
 */
static void
test_exec_defends(void **state)
{
	static const struct psexec nothing = { 0 };
	static struct psmsg_reply rep;
	struct psmsg_request r = req(PSMSG_GPU_POWER);

	r.dev = 3;
	psexec_run(&exec_fake, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.err_kind, ZERR_INTERNAL);
	r = req(PSMSG_RAPL_READ);
	r.zone = RAPL_ZONE_DRAM;			/* pkg 0: no DRAM */
	psexec_run(&exec_fake, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	r = req(PSMSG_SAMPLE);
	r.pkg_mask = 0x4;
	psexec_run(&exec_fake, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	r.op = 0;
	psexec_run(&exec_fake, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(total_calls(), 0);

	/* no backends at all */
	r = req(PSMSG_GPU_POWER);
	psexec_run(&nothing, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	r = req(PSMSG_SAMPLE);
	r.gpu_mask = 1;
	psexec_run(&nothing, &r, -1, &rep);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rcheck(&rep, 42, PSMSG_SAMPLE), 0);
}

/*
 * The device process's own figures, and the network process's open
 * descriptors (it has no /proc to count them): no field, no device call.
 */
static void
test_proc(void **state)
{
	static struct psmsg_reply rep, back;
	struct psmsg_request r;
	struct psexec x = exec_fake;
	char why[128];

	psmsg_request_init(&r, PSMSG_PROC, 9);
	assert_int_equal(check(&r), 0);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	assert_int_equal(total_calls(), 0);
	assert_int_equal(rep.rc, 0);
	assert_true(rep.p_ok & PROCSTAT_STAT);
	assert_true(rep.p_rss > 0 && rep.p_fds > 0);
	assert_true(rep.p_net_ok == 0 && rep.p_net_fds == 0);	/* no .net */
	/* this process standing in for the network process */
	x.net = getpid();
	psexec_run(&x, &r, -1, &rep);
	assert_true(rep.p_net_ok == 1 && rep.p_net_fds >= 3);
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 9, PSMSG_PROC,
	    &back, why, sizeof(why)), 0);
	rep.p_net_ok = 2;
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 9, PSMSG_PROC,
	    &back, why, sizeof(why)), -1);
	/* one that is gone: not counted, and said so */
	x.net = 0x7ffffffe;
	psexec_run(&x, &r, -1, &rep);
	assert_true(rep.p_net_ok == 0 && rep.p_net_fds == 0);
	r.dev = 1;			/* it takes nothing */
	assert_int_equal(check(&r), -1);
	r.dev = 0;
	r.pkg_mask = 1;
	assert_int_equal(check(&r), -1);
}

/*
 * A peer's identity: the device process reads it from the connected socket
 * that comes with the request (the network process has no filesystem,
 * and its word on who connected is not taken); without its socket, or
 * with another kind of descriptor, it is refused.
 */
static void
test_peer(void **state)
{
	static struct psmsg_reply rep, back;
	struct psmsg_request r;
	char why[128];
	int sv[2], pfd[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	psmsg_request_init(&r, PSMSG_PEER, 11);
	assert_int_equal(check(&r), 0);
	assert_int_equal(serve_fd(&r, sizeof(r), sv[0], &rep), 0);
	assert_int_equal(total_calls(), 0);
	assert_int_equal(rep.rc, 0);
	assert_string_equal(rep.i_user, "root");
	assert_true(rep.i_comm[0] != '\0');
	/* our own cgroup, as /proc/self/cgroup says (a path: "/...") */
	assert_true(rep.i_cgroup[0] == '/');
	assert_true(rep.i_ngids >= 1 && rep.i_gids[0] == 0);
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 11, PSMSG_PEER,
	    &back, why, sizeof(why)), 0);
	/* a pipe is no peer; nor is no descriptor at all */
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(serve_fd(&r, sizeof(r), pfd[0], &rep), 0);
	assert_int_equal(rep.rc, -1);
	assert_int_equal(rep.i_ngids, 0);
	assert_int_equal(serve_fd(&r, sizeof(r), -1, &rep), 0);
	assert_int_equal(rep.rc, -1);
	close(pfd[0]);
	close(pfd[1]);
	/* a peer_end names a handle */
	psmsg_request_init(&r, PSMSG_PEER_END, 13);
	assert_int_equal(check(&r), -1);
	r.auth = 5;
	assert_int_equal(check(&r), 0);
	psmsg_request_init(&r, PSMSG_PEER, 11);
	assert_int_equal(serve_fd(&r, sizeof(r), sv[0], &rep), 0);
	close(sv[0]);
	close(sv[1]);
	/* a reply with too many or no groups, or a name without its NUL */
	rep.i_ngids = IDENTITY_MAX_GROUPS + 1;
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 11, PSMSG_PEER,
	    &back, why, sizeof(why)), -1);
	rep.i_ngids = 0;
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 11, PSMSG_PEER,
	    &back, why, sizeof(why)), -1);
	rep.i_ngids = 1;
	memset(rep.i_comm, 'x', sizeof(rep.i_comm));
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 11, PSMSG_PEER,
	    &back, why, sizeof(why)), -1);
	rep.i_comm[0] = '\0';
	memset(rep.i_cgroup, 'x', sizeof(rep.i_cgroup));
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 11, PSMSG_PEER,
	    &back, why, sizeof(why)), -1);
	rep.i_cgroup[0] = '\0';
	/* groups in a reply to another op */
	psmsg_request_init(&r, PSMSG_PROC, 12);
	assert_int_equal(serve(&r, sizeof(r), &rep), 0);
	rep.i_ngids = 1;
	assert_int_equal(psmsg_reply_check(&rep, sizeof(rep), 12, PSMSG_PROC,
	    &back, why, sizeof(why)), -1);
}

/*
 * A token request: the one larger message. Exactly its size, a header
 * with nothing but magic, op and id, a length in range and nothing after
 * the token; an ordinary-size request with op PSMSG_TOKEN is refused.
 */
static void
test_token_request(void **state)
{
	static struct psmsg_token t, out;
	struct psmsg_request r;
	char why[128];

	memset(&t, 0, sizeof(t));
	psmsg_request_init(&t.h, PSMSG_TOKEN, 5);
	t.len = 3;
	memcpy(t.token, "a.b", 3);
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), 0);
	assert_int_equal(out.len, 3);
	assert_int_equal(psmsg_token_check(&t, sizeof(t) - 1, &out, why,
	    sizeof(why)), -1);
	t.token[3] = 'x';		/* a byte after the token */
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	t.token[3] = '\0';
	t.len = 0;
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	t.len = PSMSG_TOKEN_MAX + 1;
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	t.len = 3;
	t.h.dev = 1;			/* anything in the header */
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	t.h.dev = 0;
	t.h.op = PSMSG_PEER;
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	t.h.op = PSMSG_TOKEN;
	t.pad = 1;
	assert_int_equal(psmsg_token_check(&t, sizeof(t), &out, why,
	    sizeof(why)), -1);
	psmsg_request_init(&r, PSMSG_TOKEN, 6);
	assert_int_equal(check(&r), -1);
	/* a token handle rides on writes only */
	psmsg_request_init(&r, PSMSG_GPU_POWER, 7);
	r.tok = 1;
	assert_int_equal(check(&r), -1);
	/* a write from no known sender is the warden's to refuse, but an
	 * unknown kind of sender is a broken message */
	r = req(PSMSG_GPU_WRITE);
	r.w_op = GPU_RESET_LOCKED_CLOCKS;
	r.w_from = PSMSG_FROM_END;
	assert_int_equal(check(&r), -1);
	r.w_from = PSMSG_FROM_TCP;
	r.tok = 99;
	assert_int_equal(check(&r), 0);
}

/*
 * PSMSG_GPU_WRITES: the writes of one GPU in one message. Exactly its
 * size; a header with nothing but magic, op and id; 2..PSMSG_WRITES_MAX
 * writes, each one a write psmsg_request_check would take, all of one GPU,
 * nothing after the last. The executor runs each in order as if alone,
 * and the network side's check takes exactly the reply it sends.
 */
static int
wcheck(const struct psmsg_writes *w)
{
	static struct psmsg_writes out;
	char why[128] = "";
	int rc;

	rc = psmsg_writes_check(w, sizeof(*w), &lim, &out, why, sizeof(why));
	if (rc == 0)
		assert_memory_equal(&out, w, sizeof(*w));
	else {
		assert_true(why[0] != '\0');
		assert_int_equal(out.h.magic, 0);
		assert_int_equal(out.n, 0);
	}
	return rc;
}

static void
test_writes_request(void **state)
{
	static struct psmsg_writes w, out;
	struct psmsg_request r;
	char why[128];

	memset(&w, 0, sizeof(w));
	psmsg_request_init(&w.h, PSMSG_GPU_WRITES, 9);
	w.n = 3;
	w.w[0] = wreq(GPU_SET_POWER_LIMIT, 175000, 0, 0, 0);
	w.w[1] = wreq(GPU_SET_GPU_LOCKED_CLOCKS, 0, 0, 900, 1800);
	w.w[2] = wreq(GPU_SET_POWER_LIMIT, 200000, 0, 0, 0);
	for (unsigned i = 0; i < 3; i++)
		w.w[i].w_from = PSMSG_FROM_TCP;
	assert_int_equal(wcheck(&w), 0);
	assert_int_equal(psmsg_writes_check(&w, sizeof(w) - 1, &lim, &out,
	    why, sizeof(why)), -1);
	assert_int_equal(psmsg_writes_check(&w, sizeof(w) + 1, &lim, &out,
	    why, sizeof(why)), -1);

	w.n = 1;			/* one write goes alone */
	w.w[1] = w.w[2] = (struct psmsg_request){ 0 };
	assert_int_equal(wcheck(&w), -1);
	w.n = PSMSG_WRITES_MAX + 1;
	assert_int_equal(wcheck(&w), -1);
	w.n = 0;
	assert_int_equal(wcheck(&w), -1);

	w.n = 2;
	w.w[1] = wreq(GPU_SET_POWER_LIMIT, 150000, 0, 0, 0);
	assert_int_equal(wcheck(&w), 0);
	w.w[2] = w.w[1];		/* a write after the last counted */
	assert_int_equal(wcheck(&w), -1);
	w.w[2] = (struct psmsg_request){ 0 };
	w.w[2].pad = 1;			/* any byte after it */
	assert_int_equal(wcheck(&w), -1);
	w.w[2] = (struct psmsg_request){ 0 };

	w.w[1].dev = 1;			/* two GPUs */
	assert_int_equal(wcheck(&w), -1);
	w.w[1].dev = lim.ngpu;		/* a GPU out of range */
	w.w[0].dev = lim.ngpu;
	assert_int_equal(wcheck(&w), -1);
	w.w[0].dev = w.w[1].dev = 2;
	w.w[1].op = PSMSG_GPU_POWER;	/* a read among the writes */
	w.w[1].w_op = 0;
	w.w[1].w_power_limit_mw = 0;
	assert_int_equal(wcheck(&w), -1);
	w.w[1] = wreq(GPU_SET_PERSISTENCE_MODE, 0, 2, 0, 0);	/* bad value */
	assert_int_equal(wcheck(&w), -1);
	w.w[1] = wreq(GPU_SET_PERSISTENCE_MODE, 0, 1, 0, 0);
	w.w[1].magic = 0;		/* a write's own header */
	assert_int_equal(wcheck(&w), -1);
	w.w[1].magic = PSMSG_MAGIC;
	assert_int_equal(wcheck(&w), 0);

	w.h.dev = 2;			/* anything in the header */
	assert_int_equal(wcheck(&w), -1);
	w.h.dev = 0;
	w.h.auth = 1;
	assert_int_equal(wcheck(&w), -1);
	w.h.auth = 0;
	w.pad = 1;
	assert_int_equal(wcheck(&w), -1);
	w.pad = 0;
	w.h.op = PSMSG_GPU_WRITE;
	assert_int_equal(wcheck(&w), -1);
	w.h.op = PSMSG_GPU_WRITES;
	assert_int_equal(wcheck(&w), 0);

	/* an ordinary-size request with op PSMSG_GPU_WRITES is refused */
	psmsg_request_init(&r, PSMSG_GPU_WRITES, 6);
	assert_int_equal(check(&r), -1);
	assert_string_equal(psmsg_op_name(PSMSG_GPU_WRITES), "gpu_writes");
	assert_string_equal(psmsg_op_name(PSMSG_AUDIT), "audit");
}

static void
test_writes_exec(void **state)
{
	static struct psmsg_writes w;
	static struct psmsg_writes_reply rep, out;
	char why[128];
	size_t len;

	memset(&w, 0, sizeof(w));
	psmsg_request_init(&w.h, PSMSG_GPU_WRITES, 11);
	w.n = 3;
	w.w[0] = wreq(GPU_SET_POWER_LIMIT, 175000, 0, 0, 0);
	w.w[1] = wreq(GPU_SET_GPU_LOCKED_CLOCKS, 0, 0, 900, 1800);
	w.w[2] = wreq(GPU_SET_POWER_LIMIT, 200000, 0, 0, 0);
	assert_int_equal(wcheck(&w), 0);
	memset(&rep, 0xa5, sizeof(rep));
	psexec_writes(&exec_fake, &w, &rep);
	/* each ran, in order: the last one's value is the one left */
	assert_int_equal(fk.calls[F_WRITE], 3);
	assert_int_equal(fk.last_write.op, GPU_SET_POWER_LIMIT);
	assert_int_equal(fk.last_write.power_limit_mw, 200000);
	assert_int_equal(rep.n, 3);
	len = psmsg_writes_reply_size(3);
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(out.r[i].rc, 0);
	/* nothing past the results sent is this process's memory */
	for (size_t i = len; i < sizeof(rep); i++)
		assert_int_equal(((const unsigned char *)&rep)[i], 0);

	/* one failure is that write's alone */
	fk.fail_gpus = 0x4;
	fk.fail_kind = ZERR_FORBIDDEN;
	psexec_writes(&exec_fake, &w, &rep);
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(out.r[i].rc, -1);
		assert_int_equal(out.r[i].err_kind, ZERR_FORBIDDEN);
		assert_string_equal(out.r[i].err_msg, "gpu 2: fake failure");
	}
	fk.fail_gpus = 0;

	/* the reply check: size, header, each result */
	assert_int_equal(psmsg_writes_reply_check(&rep, len - 1, 11, 3, &out,
	    why, sizeof(why)), -1);
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 12, 3, &out,
	    why, sizeof(why)), -1);
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 2, &out,
	    why, sizeof(why)), -1);
	rep.r[1].rc = 0;		/* success with an error kind */
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), -1);
	assert_int_equal(out.n, 0);
	rep.r[1].rc = -1;
	rep.r[1].err_kind = ZERR_NONE;	/* failure without a kind */
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), -1);
	rep.r[1].err_kind = ZERR_FORBIDDEN;
	rep.r[1].lost = 2;
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), -1);
	rep.r[1].lost = 0;
	memset(rep.r[1].err_msg, 'x', sizeof(rep.r[1].err_msg));
	assert_int_equal(psmsg_writes_reply_check(&rep, len, 11, 3, &out,
	    why, sizeof(why)), -1);
}

/* ---- control channel ----------------------------------------------- */

static void
ctl_init(struct psctl_msg *m, uint32_t type, uint32_t value)
{
	memset(m, 0, sizeof(*m));
	m->magic = PSCTL_MAGIC;
	m->type = type;
	m->value = value;
}

/* What the device process takes from the network process, and no more. */
static void
test_ctl_from_network(void **state)
{
	static struct psctl_msg m;
	char why[128];

	(void)state;
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_READY);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), 0);
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_WATCHDOG);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), 0);
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_STOPPING);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), 0);
	ctl_init(&m, PSCTL_RELOADED, 2);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), 0);
	ctl_init(&m, PSCTL_RELOADED, PSCTL_RELOADED_MAX);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), 0);
	/* a kind that is none, a count of failures no reload has */
	ctl_init(&m, PSCTL_NOTIFY, 0);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_STOPPING + 1);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	ctl_init(&m, PSCTL_RELOADED, PSCTL_RELOADED_MAX + 1);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	/* nothing rides in the lacks table */
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_READY);
	m.lacks.write[0][0] = 'x';
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	/* the device side's own messages, fds, flags */
	ctl_init(&m, PSCTL_RELOAD, 0);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	ctl_init(&m, PSCTL_STOP, PSCTL_STOP_RESTART);
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
	ctl_init(&m, PSCTL_NOTIFY, PSCTL_N_READY);
	assert_int_equal(psctl_check_from_network(&m, 1, why, sizeof(why)), -1);
	m.flags = PSCTL_FD_KEY;
	assert_int_equal(psctl_check_from_network(&m, 0, why, sizeof(why)), -1);
}

/* Size, magic and fds of what arrives: malformed ones close their fds. */
static void
test_ctl_recv(void **state)
{
	static struct psctl_msg m, in;
	int sv[2], fds[PSCTL_MAX_FDS], extra[PSCTL_MAX_FDS + 1];
	unsigned nfds;
	char why[128];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ctl_init(&m, PSCTL_RELOAD, 0);
	extra[0] = dup(0);
	assert_int_equal(psctl_send(sv[0], &m, extra, 1), 0);
	assert_int_equal(psctl_recv(sv[1], &in, fds, &nfds, why, sizeof(why)),
	    1);
	assert_int_equal(nfds, 1);
	assert_int_equal(in.type, PSCTL_RELOAD);
	close(fds[0]);
	close(extra[0]);
	/* short, and bad magic */
	assert_int_equal(send(sv[0], &m, sizeof(m) - 1, 0),
	    (ssize_t)sizeof(m) - 1);
	assert_int_equal(psctl_recv(sv[1], &in, fds, &nfds, why, sizeof(why)),
	    -1);
	m.magic = 0;
	assert_int_equal(send(sv[0], &m, sizeof(m), 0), (ssize_t)sizeof(m));
	assert_int_equal(psctl_recv(sv[1], &in, fds, &nfds, why, sizeof(why)),
	    -1);
	/* more fds than a message carries: refused, all of them closed */
	ctl_init(&m, PSCTL_RELOAD, 0);
	for (unsigned i = 0; i <= PSCTL_MAX_FDS; i++)
		extra[i] = dup(0);
	{
		union {
			char buf[CMSG_SPACE(sizeof(extra))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
		    .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(extra));
		memcpy(CMSG_DATA(c), extra, sizeof(extra));
		assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)sizeof(m));
	}
	assert_int_equal(psctl_recv(sv[1], &in, fds, &nfds, why, sizeof(why)),
	    -1);
	assert_int_equal(nfds, 0);
	for (unsigned i = 0; i <= PSCTL_MAX_FDS; i++)
		close(extra[i]);
	/* end of file */
	close(sv[0]);
	assert_int_equal(psctl_recv(sv[1], &in, fds, &nfds, why, sizeof(why)),
	    0);
	close(sv[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_write_from),
		cmocka_unit_test(test_lease_requests),
		cmocka_unit_test(test_release_request),
		cmocka_unit_test(test_leases_reply),
		cmocka_unit_test(test_release_reply),
		cmocka_unit_test(test_ledger_reply),
		cmocka_unit_test_setup(test_writes_request, setup),
		cmocka_unit_test_setup(test_writes_exec, setup),
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_bad_size),
		cmocka_unit_test(test_bad_op),
		cmocka_unit_test(test_gpu_range),
		cmocka_unit_test(test_pkg_range),
		cmocka_unit_test(test_zone),
		cmocka_unit_test(test_bad_write_op),
		cmocka_unit_test(test_enabled),
		cmocka_unit_test(test_power_limit),
		cmocka_unit_test(test_clocks),
		cmocka_unit_test(test_unused_fields),
		cmocka_unit_test(test_pad),
		cmocka_unit_test(test_sample_masks),
		cmocka_unit_test_setup(test_reply_good, setup),
		cmocka_unit_test_setup(test_reply_bad, setup),
		cmocka_unit_test_setup(test_exec_reads, setup),
		cmocka_unit_test_setup(test_exec_write, setup),
		cmocka_unit_test_setup(test_exec_failure, setup),
		cmocka_unit_test_setup(test_exec_sample, setup),
		cmocka_unit_test_setup(test_forged_never_runs, setup),
		cmocka_unit_test_setup(test_exec_defends, setup),
		cmocka_unit_test_setup(test_proc, setup),
		cmocka_unit_test_setup(test_peer, setup),
		cmocka_unit_test_setup(test_token_request, setup),
		cmocka_unit_test(test_ctl_from_network),
		cmocka_unit_test(test_ctl_recv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
