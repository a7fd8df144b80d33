/* SPDX-License-Identifier: Apache-2.0 */
/*
 * boundary.c - the one table of what the network process may ask the
 * device process (boundary.h). Each row: op, exact size, sender, flags,
 * the hostile decoder (msg.c) and the executor (exec.c).
 */
#include "boundary.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/wipe.h"

/* ---- The rows' checkers and runners, one shape for all -------------------- */

static int
chk_request(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	return psmsg_request_check(raw, n, lim, &m->req, why, whysz);
}

static int
chk_token(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	(void)lim;
	return psmsg_token_check(raw, n, &m->tok, why, whysz);
}

static int
chk_audit(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	return psmsg_audit_check(raw, n, lim, &m->audit, why, whysz);
}

static int
chk_writes(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	return psmsg_writes_check(raw, n, lim, &m->writes, why, whysz);
}

static int
chk_owner(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	(void)lim;
	return psmsg_tcp_owner_check(raw, n, &m->owner, why, whysz);
}

static int
chk_step(const void *raw, size_t n, const struct psmsg_limits *lim,
    union psop_msg *m, char *why, size_t whysz)
{
	return psmsg_slurm_step_check(raw, n, lim, &m->step, why, whysz);
}

static void
run_request(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	psexec_run(x, &m->req, fd, &out->rep);
	*outlen = sizeof(out->rep);
}

static void
run_token(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_token(x, &m->tok, &out->rep);
	*outlen = sizeof(out->rep);
}

static void
run_audit(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_audit(x, &m->audit, &out->rep);
	*outlen = sizeof(out->rep);
}

static void
run_writes(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_writes(x, &m->writes, &out->writes);
	*outlen = psmsg_writes_reply_size(m->writes.n);
}

static void
run_owner(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_tcp_owner(x, &m->owner, &out->rep);
	*outlen = sizeof(out->rep);
}

static void
run_step(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_slurm_step(x, &m->step, &out->rep);
	*outlen = sizeof(out->rep);
}

static void
run_leases(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_leases(x, &m->req, &out->leases);
	*outlen = sizeof(out->leases);
}

static void
run_ledger(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_ledger(x, &m->req, &out->ledger);
	*outlen = sizeof(out->ledger);
}

static void
run_lease_check(const struct psexec *x, const union psop_msg *m, int fd,
    union psop_reply *out, size_t *outlen)
{
	(void)fd;
	psexec_lease_check(x, &m->req, &out->rep);
	*outlen = sizeof(out->rep);
}

/* ---- The table --------------------------------------------------------------- */

#define REQ sizeof(struct psmsg_request)
#define NET PSOP_FROM_NETWORK

static const struct psop table[] = {
	/* reads: one GPU (dev), answered from the driver */
	{ PSMSG_GPU_POWER, "gpu_power", REQ, NET, 0,
	    chk_request, run_request },
	{ PSMSG_GPU_ENERGY, "gpu_energy", REQ, NET, 0,
	    chk_request, run_request },
	{ PSMSG_GPU_LIMIT, "gpu_limit", REQ, NET, 0,
	    chk_request, run_request },
	{ PSMSG_GPU_CONSTRAINTS, "gpu_constraints", REQ, NET, 0,
	    chk_request, run_request },
	{ PSMSG_GPU_PERSISTENCE, "gpu_persistence", REQ, NET, 0,
	    chk_request, run_request },
	/* one write, for a peer or a TCP client: decided here */
	{ PSMSG_GPU_WRITE, "gpu_write", REQ, NET,
	    PSOP_GPU_WRITE | PSOP_AUDITS, chk_request, run_request },
	/* one package's RAPL zone */
	{ PSMSG_RAPL_READ, "rapl_read", REQ, NET, 0,
	    chk_request, run_request },
	/* a stream tick: the masked GPUs' power, the packages' energy */
	{ PSMSG_SAMPLE, "sample", REQ, NET, 0,
	    chk_request, run_request },
	/* this process's own figures for /metrics */
	{ PSMSG_PROC, "proc", REQ, NET, 0,
	    chk_request, run_request },
	/* a Unix peer connected: its socket, for its credentials */
	{ PSMSG_PEER, "peer", REQ, NET, PSOP_FD,
	    chk_request, run_request },
	/* that peer's connection closed: its handle grants nothing new */
	{ PSMSG_PEER_END, "peer_end", REQ, NET, 0,
	    chk_request, run_request },
	/* a bearer token, for the key only this process holds */
	{ PSMSG_TOKEN, "token", sizeof(struct psmsg_token), NET, PSOP_SECRET,
	    chk_token, run_token },
	/* a typed event for the audit log (no text of the sender's) */
	{ PSMSG_AUDIT, "audit", sizeof(struct psmsg_audit), NET, PSOP_AUDITS,
	    chk_audit, run_audit },
	/* a GPU worker's queued writes, in order, each decided alone */
	{ PSMSG_GPU_WRITES, "gpu_writes", sizeof(struct psmsg_writes), NET,
	    PSOP_GPU_WRITE | PSOP_AUDITS, chk_writes, run_writes },
	/* who owns a loopback TCP connection (inet_diag) */
	{ PSMSG_TCP_OWNER, "tcp_owner", sizeof(struct psmsg_tcp_owner), NET,
	    0, chk_owner, run_owner },
	/* root's Slurm plugin: a job step starts or ends */
	{ PSMSG_SLURM_STEP, "slurm_step", sizeof(struct psmsg_slurm_step),
	    NET, 0, chk_step, run_step },
	/* the lease record, the only one: GET /gpu/leases, the ledger */
	{ PSMSG_LEASES, "leases", REQ, NET, 0, chk_request, run_leases },
	{ PSMSG_LEDGER, "ledger", REQ, NET, 0, chk_request, run_ledger },
	/* POST /gpu/release: the device process restores, and says so */
	{ PSMSG_RELEASE, "release", REQ, NET, PSOP_GPU_WRITE | PSOP_AUDITS,
	    chk_request, run_leases },
	/* a write request's early 409 (refuses; grants nothing) */
	{ PSMSG_LEASE_CHECK, "lease_check", REQ, NET, PSOP_AUDITS,
	    chk_request, run_lease_check },
};

_Static_assert(sizeof(table) / sizeof(table[0]) == PSMSG_OP_END - 1,
    "every op has exactly one row");

const struct psop *
psop_find(uint32_t op)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].op == op)
			return &table[i];
	return NULL;
}

const struct psop *
psop_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

int
psop_dispatch(const struct psexec *x, const struct psmsg_limits *lim,
    const void *raw, size_t n, int fd, int bad, union psop_msg *m,
    union psop_reply *out, size_t *outlen, char *why, size_t whysz)
{
	const struct psop *row = NULL;
	uint32_t op;
	int rc = -1;

	why[0] = '\0';
	memset(m, 0, sizeof(*m));
	if (n < offsetof(struct psmsg_request, op) + sizeof(op)) {
		snprintf(why, whysz, "a datagram of %zu bytes", n);
		goto out;
	}
	memcpy(&op, (const char *)raw + offsetof(struct psmsg_request, op),
	    sizeof(op));
	if ((row = psop_find(op)) == NULL) {
		snprintf(why, whysz, "unknown op %u", op);
		goto out;
	}
	if (n != row->size) {
		snprintf(why, whysz, "%s of %zu bytes, not %u", row->name, n,
		    row->size);
		goto out;
	}
	if (row->check(raw, n, lim, m, why, whysz) != 0) {
		if (why[0] == '\0')
			snprintf(why, whysz, "%s does not check out",
			    row->name);
		goto out;
	}
	if (bad) {
		snprintf(why, whysz, "more than one descriptor, or not "
		    "SCM_RIGHTS");
		goto out;
	}
	if ((row->flags & PSOP_FD) && fd == -1) {
		snprintf(why, whysz, "%s without its descriptor", row->name);
		goto out;
	}
	if (!(row->flags & PSOP_FD) && fd != -1) {
		snprintf(why, whysz, "a descriptor with %s, which takes none",
		    row->name);
		goto out;
	}
	row->run(x, m, fd, out, outlen);
	rc = 0;
out:
	if (row != NULL && (row->flags & PSOP_SECRET))
		wipe(m, sizeof(*m));
	if (fd >= 0)
		close(fd);
	return rc;
}
