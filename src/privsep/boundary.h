/* SPDX-License-Identifier: Apache-2.0 */
/*
 * boundary.h - the one table of what the network process may ask the
 * device process (docs/design.md, "The boundary"), in the manner of
 * OpenSSH's monitor dispatch table.
 *
 * Every device-channel datagram starts with a struct psmsg_request header,
 * so its op is at a fixed place. The op names one row of the table; the
 * row says the datagram's exact size, which checker decodes it (msg.c,
 * hostile input), which executor runs it (exec.c), who may send it and
 * what travels with it. A datagram whose op has no row, whose size is not
 * its row's, or that fails its row's check stops the daemon (device.c).
 *
 * What a reader needs to know what a compromised network process can do:
 * this table (src/privsep/boundary.c), the control channel's three
 * messages (control.h), and the network process's system-call filter
 * (sandbox.c).
 */
#ifndef ZEUS_PRIVSEP_BOUNDARY_H
#define ZEUS_PRIVSEP_BOUNDARY_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "msg.h"

/* Who may send a row's message. */
enum psop_from {
	PSOP_FROM_NETWORK = 1,		/* the network process (all, today) */
};

/* A row's flags. */
enum {
	PSOP_FD = 1u << 0,		/* comes with exactly one descriptor
					 * (a connection's socket); others
					 * come with none */
	PSOP_SECRET = 1u << 1,		/* wiped from memory once answered */
	PSOP_GPU_WRITE = 1u << 2,	/* changes a GPU: the warden decides
					 * (access/warden.c) */
	PSOP_AUDITS = 1u << 3,		/* may add a line to the audit log */
};

/* The largest datagram of any row, and the largest reply. */
union psop_msg {
	struct psmsg_request req;
	struct psmsg_token tok;
	struct psmsg_audit audit;
	struct psmsg_writes writes;
	struct psmsg_tcp_owner owner;
	struct psmsg_slurm_step step;
};

union psop_reply {
	struct psmsg_reply rep;
	struct psmsg_writes_reply writes;
	struct psmsg_leases_reply leases;
	struct psmsg_ledger_reply ledger;
};

struct psop {
	uint32_t op;			/* enum psmsg_op */
	const char *name;
	uint32_t size;			/* the datagram's exact bytes */
	uint32_t from;			/* enum psop_from */
	uint32_t flags;			/* PSOP_* */
	/*
	 * Copies the datagram into *m and checks all of it; 0, or -1 with
	 * `why` and *m zeroed.
	 */
	int (*check)(const void *raw, size_t n, const struct psmsg_limits *lim,
	    union psop_msg *m, char *why, size_t whysz);
	/*
	 * Runs a checked message; `fd` is the descriptor that came with it
	 * (PSOP_FD rows; -1 otherwise). Fills *out and *outlen, the bytes to
	 * send back.
	 */
	void (*run)(const struct psexec *x, const union psop_msg *m, int fd,
	    union psop_reply *out, size_t *outlen);
};

/* The row of `op`, or NULL when the network process may not send it. */
const struct psop *psop_find(uint32_t op);

/* The rows, for tests and docs: *n of them. */
const struct psop *psop_table(size_t *n);

/*
 * One datagram of `n` bytes as it came (`fd`: the descriptor that came
 * with it, -1 none, PSEXEC_FD_LOST one this process could not take;
 * `bad`: more than one came, or not SCM_RIGHTS): found in the table,
 * checked, run. 0 with the reply in *out and *outlen, or -1 with `why`
 * (the message does not check out). `fd` is closed here.
 */
int psop_dispatch(const struct psexec *x, const struct psmsg_limits *lim,
    const void *raw, size_t n, int fd, int bad, union psop_msg *m,
    union psop_reply *out, size_t *outlen, char *why, size_t whysz);

#endif
