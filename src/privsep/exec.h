/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.h - the device process's executor: one validated request in, one
 * hardware operation on the real backends, one reply out.
 *
 * It holds no state of its own, so the device process can run one executor
 * thread per channel over the same `struct psexec`: the backends already
 * tolerate concurrent calls (gpu.h, rapl.h). Queues and everything else
 * stateful about requests stay in the network process; this only turns a
 * message into a driver call and the result into a message. (RAPL wrap
 * tracking is the device process's, inside its struct rapl, next to the
 * keepalive that feeds it: see rapl_read below.)
 */
#ifndef ZEUS_PRIVSEP_EXEC_H
#define ZEUS_PRIVSEP_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "devices/gpu.h"
#include "msg.h"

struct identity;

/* A verified token's claims, as PSMSG_TOKEN's reply carries them. */
struct psexec_claims {
	char sub[PSMSG_SUB_MAX];
	uint32_t scopes;		/* group_set */
	bool has_exp;
	int64_t exp;
};

/*
 * The device process's decisions about who may write (access/warden.h
 * implements it; privsep below access only sees these calls). NULL in a
 * psexec without one (unit tests): PSMSG_PEER then answers the socket's
 * credentials with handle 0 and writes run as asked.
 */
struct psexec_guard {
	void *ctx;
	/*
	 * PSMSG_PEER: `fd` is the connected socket that came with it (not
	 * taken), `refresh` 0 or the handle it had. Fills *id and *handle, or
	 * returns -1 with err (a socket that is not a connected Unix stream,
	 * a full table, a refresh for another process).
	 */
	int (*peer)(void *ctx, int fd, uint64_t refresh, struct identity *id,
	    uint64_t *handle, struct zerr *err);
	/* PSMSG_PEER_END: `queued` writes it had queued in all (its dev) */
	void (*peer_end)(void *ctx, uint64_t handle, uint32_t queued);
	/*
	 * PSMSG_GPU_WRITE: decides who `req` is for (w_from, auth, tok),
	 * runs it on `b` if allowed, audits.
	 */
	int (*write)(void *ctx, struct gpu_backend *b, unsigned gpu,
	    const struct gpu_write *w, const struct psmsg_request *req,
	    struct zerr *err);
	/*
	 * PSMSG_TOKEN: verifies `token` with the signing key; fills *c and
	 * *handle, or returns -1 with err (ZERR_UNAUTHENTICATED).
	 */
	int (*token)(void *ctx, const char *token, size_t len,
	    struct psexec_claims *c, uint64_t *handle, struct zerr *err);
	/* PSMSG_PROC: this process's audit log, lines lost and down now */
	void (*audit)(void *ctx, uint64_t *failures, uint64_t *refused,
	    bool *down);
	/*
	 * PSMSG_AUDIT: writes the network process's line (checked by
	 * psmsg_audit_check), or refuses it (-1 with err: a holder that is
	 * not this process's record's, a peer it does not know).
	 */
	int (*audit_record)(void *ctx, const struct psmsg_audit *a,
	    struct zerr *err);
	/*
	 * PSMSG_SLURM_STEP: a job step starts or ends, if the connection
	 * `m->who` names is root's (-1 with err otherwise).
	 */
	int (*slurm_step)(void *ctx, const struct psmsg_slurm_step *m,
	    struct zerr *err);
	/*
	 * The lease record, the only one (access/warden.h): PSMSG_LEASES,
	 * PSMSG_LEDGER (dev: the first user), PSMSG_RELEASE (who and which
	 * GPUs as in `req`). Fill *out (zeroed) or return -1 with err.
	 */
	int (*leases)(void *ctx, struct psmsg_leases_reply *out,
	    struct zerr *err);
	int (*ledger)(void *ctx, uint32_t first,
	    struct psmsg_ledger_reply *out, struct zerr *err);
	int (*release)(void *ctx, const struct psmsg_request *req,
	    struct psmsg_leases_reply *out, struct zerr *err);
	/* PSMSG_LEASE_CHECK: 0, or -1 with the 409 */
	int (*lease_check)(void *ctx, const struct psmsg_request *req,
	    struct zerr *err);
};

struct psexec {
	const struct psexec_guard *guard;	/* may be NULL (above) */
	struct gpu_backend *gpu;	/* may have ops == NULL when ngpu == 0 */
	unsigned ngpu, npkg;
	uint64_t dram_mask;		/* bit i: package i has a DRAM zone */
	/*
	 * Package `pkg`'s energy as rapl_sample gives it: wrap-compensated
	 * cumulative µJ of the package and, when dram_uj is not NULL (only
	 * for packages in dram_mask), of its DRAM, and the CLOCK_MONOTONIC
	 * time right after the read. NULL when npkg == 0.
	 */
	int (*rapl_read)(void *ctx, unsigned pkg, uint64_t *cpu_uj,
	    uint64_t *dram_uj, uint64_t *mono_ns, struct zerr *err);
	void *rapl_ctx;
	pid_t net;		/* the network process, whose descriptors
				 * PSMSG_PROC counts too; 0: none */
};

/*
 * Runs `req`, which psmsg_request_check accepted against limits matching
 * `x`, and fills the whole of *rep (zeroed first: no byte of this process's
 * memory goes to the other one unless it is a field).
 *
 * The reply echoes magic, op and id. rc, err_kind and err_msg come from the
 * backend's zerr; `lost` is the backend's lost() after a GPU operation.
 * PSMSG_SAMPLE always has rc 0 and reports per device: gpu_ok/gpu_lost and
 * gpu_mw[i] per GPU (the first failure's kind in err_gpu_kind, its message
 * in err_msg), pkg_ok, cpu_uj[i], dram_uj[i] (packages in dram_mask) and
 * mono_ns[i] per package.
 *
 * `fd` is the descriptor that came with the request (PSMSG_PEER's socket),
 * -1 for none; the caller closes it. PSEXEC_FD_LOST: one was sent but
 * this process could not take it (out of descriptors), answered busy.
 *
 * A request that slipped past the check anyway (an index out of range, a
 * missing backend) is answered with ZERR_INTERNAL without calling anything.
 */
void psexec_run(const struct psexec *x, const struct psmsg_request *req,
    int fd, struct psmsg_reply *rep);
#define PSEXEC_FD_LOST (-2)

/*
 * A checked PSMSG_GPU_WRITES (psmsg_writes_check): each write run by
 * psexec_run in order, as if it had come alone, its outcome in
 * out->r[i]. Fills the whole of *out; the caller sends
 * psmsg_writes_reply_size(w->n) bytes of it.
 */
void psexec_writes(const struct psexec *x, const struct psmsg_writes *w,
    struct psmsg_writes_reply *out);

/* A checked PSMSG_AUDIT (psmsg_audit_check), answered in *rep. */
void psexec_audit(const struct psexec *x, const struct psmsg_audit *a,
    struct psmsg_reply *rep);

/* A checked PSMSG_TOKEN (psmsg_token_check), answered in *rep. */
void psexec_token(const struct psexec *x, const struct psmsg_token *t,
    struct psmsg_reply *rep);

/*
 * A checked PSMSG_TCP_OWNER (psmsg_tcp_owner_check), answered in *rep:
 * one netlink look-up of that exact connection (common/sockdiag.h,
 * bounded by SOCKDIAG_TIMEOUT_MS), its uid in rep->a, or ZERR_NOT_FOUND.
 */
void psexec_tcp_owner(const struct psexec *x, const struct psmsg_tcp_owner *o,
    struct psmsg_reply *rep);

/*
 * A checked PSMSG_LEASES, PSMSG_RELEASE or PSMSG_LEDGER request, answered
 * in the whole of *out (zeroed first), by the guard's record.
 */
void psexec_leases(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_leases_reply *out);
void psexec_ledger(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_ledger_reply *out);
void psexec_lease_check(const struct psexec *x,
    const struct psmsg_request *req, struct psmsg_reply *rep);

/* A checked PSMSG_SLURM_STEP (psmsg_slurm_step_check), answered in *rep. */
void psexec_slurm_step(const struct psexec *x,
    const struct psmsg_slurm_step *m, struct psmsg_reply *rep);

#endif
