/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msg.h - the messages between the network process and the device process
 * (privilege separation, docs/design.md).
 *
 * The network process runs without privileges and parses everything that
 * comes from the network, so the device process must assume it has been
 * taken over: every request it reads is hostile until psmsg_request_check
 * has accepted it. To keep that check small and exhaustive the messages are
 * fixed-size plain data: no pointers, no lengths, no strings in requests,
 * every field at a fixed offset with no implicit padding (the asserts
 * below), and every field that an operation does not use must be 0, so a
 * forged request cannot smuggle anything past the check.
 *
 * One request and one reply per round trip on a SOCK_SEQPACKET channel;
 * the reply echoes the request's id and op. Both processes are the same
 * binary on the same host, so the layout is native (byte order, alignment).
 *
 * Reading: recv into a buffer at least one byte larger than the message
 * (or with MSG_TRUNC) so that an oversized message shows its real length
 * and is refused here instead of being silently truncated to a valid size.
 */
#ifndef ZEUS_PRIVSEP_MSG_H
#define ZEUS_PRIVSEP_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/identity.h"

#define PSMSG_MAGIC 0x7a707331u		/* "zps1" */
#define PSMSG_MAX_GPUS 64		/* bits of a uint64_t mask */
#define PSMSG_MAX_PKGS 64
#define PSMSG_LABEL_MAX 72		/* a lease label (64) + NUL, to 8 */
#define PSMSG_SUB_MAX 264		/* a token's sub (auth.h: 256) + NUL,
					 * rounded up to 8 */

/* Value ranges the device process accepts (the API's are narrower). */

enum psmsg_op {
	PSMSG_GPU_POWER = 1,		/* dev */
	PSMSG_GPU_ENERGY,		/* dev */
	PSMSG_GPU_LIMIT,		/* dev */
	PSMSG_GPU_CONSTRAINTS,		/* dev */
	PSMSG_GPU_PERSISTENCE,		/* dev */
	PSMSG_GPU_WRITE,		/* dev, w_* */
	PSMSG_RAPL_READ,		/* dev = package index, zone */
	PSMSG_SAMPLE,			/* gpu_mask, pkg_mask: one per stream tick */
	PSMSG_PROC,			/* the device process's own figures */
	PSMSG_PEER,			/* a connected Unix peer (its fd) */
	PSMSG_PEER_END,			/* auth: that peer's connection closed */
	PSMSG_TOKEN,			/* struct psmsg_token: verify a token */
	PSMSG_AUDIT,			/* struct psmsg_audit: an audit line */
	PSMSG_GPU_WRITES,		/* struct psmsg_writes: writes in order */
	PSMSG_TCP_OWNER,		/* struct psmsg_tcp_owner: whose socket */
	PSMSG_SLURM_STEP,		/* struct psmsg_slurm_step */
	PSMSG_LEASES,			/* the lease record: struct
					 * psmsg_leases_reply */
	PSMSG_LEDGER,			/* dev = first user: struct
					 * psmsg_ledger_reply */
	PSMSG_RELEASE,			/* gpu_mask, w_from, auth, tok:
					 * struct psmsg_leases_reply */
	PSMSG_LEASE_CHECK,		/* gpu_mask, w_from, auth, w_op:
					 * the early 409 of a write */
	PSMSG_OP_END
};

struct psmsg_request {
	uint32_t magic;
	uint32_t op;			/* enum psmsg_op */
	uint64_t id;			/* echoed in the reply */
	uint32_t dev;
	uint32_t zone;			/* enum rapl_zone: 0 cpu, 1 dram */
	uint32_t w_op;			/* enum gpu_write_op */
	uint32_t w_power_limit_mw;
	uint32_t w_enabled;		/* 0 or 1 */
	uint32_t w_min_mhz, w_max_mhz;
	uint32_t pad;			/* must be 0 */
	uint64_t gpu_mask, pkg_mask;	/* PSMSG_SAMPLE */
	/*
	 * Who a message speaks for (docs/security.md, "Privilege
	 * separation"): the device process decides every write itself.
	 *   PSMSG_PEER: the connection's socket travels with the message
	 *     (SCM_RIGHTS); auth 0, or the handle it had (refreshed after a
	 *     reload: same process, identity read anew).
	 *   PSMSG_PEER_END: auth = the handle of a connection that closed;
 *     dev = how many GPU writes it queued while it was open, in all
 *     (the device process lets those not yet decided run, no others).
	 *   PSMSG_GPU_WRITE: w_from (enum psmsg_from) and, for a Unix
	 *     writer, auth = its handle; for a restore, auth = the handle of
	 *     the peer that released the lease, or 0 (its holder exited, or
	 *     zeusd stops).
	 * Every other op: both 0.
	 */
	uint64_t auth;
	uint32_t w_from;
	uint32_t pad1;			/* must be 0 */
	/*
	 * PSMSG_GPU_WRITE with a signing key configured: the handle of the
	 * request's bearer token, as a PSMSG_TOKEN reply gave it (0: none).
	 * Every other op: 0.
	 */
	uint64_t tok;
	/*
	 * PSMSG_GPU_WRITE, for the audit line the device process writes:
	 * a restore's reason (enum psmsg_reason; 0 for other writes), and a
	 * TCP writer's address as the network process saw it (w_addr_kind 4
	 * or 6, 0 for none; unused bytes 0). Every other op: all 0.
	 */
	uint32_t w_reason;
	uint32_t w_addr_kind;
	uint8_t w_addr[16];
	/*
	 * PSMSG_GPU_WRITE from a Unix writer: the label its lease takes
	 * (lease_label.h; "" none), NUL-terminated, 0 after the NUL. Every
	 * other op and writer: all 0.
	 */
	char w_label[PSMSG_LABEL_MAX];
};

/* Why a restore runs (psmsg_request.w_reason): its audit line's reason. */
enum psmsg_reason {
	PSMSG_REASON_NONE = 0,
	PSMSG_REASON_PROCESS_EXIT,
	PSMSG_REASON_RELEASE,
	PSMSG_REASON_SHUTDOWN,
	PSMSG_REASON_HOLDER_GONE,	/* while zeusd was down (the journal) */
	PSMSG_REASON_END
};

#define PSMSG_TOKEN_MAX 8192		/* bytes of a token (auth.h's max) */

/*
 * PSMSG_TOKEN, the one request larger than struct psmsg_request: a bearer
 * token as the client sent it, for the device process (which alone holds
 * the signing key) to verify. `h` has op PSMSG_TOKEN and every other field
 * 0; token[len..] is 0.
 */
struct psmsg_token {
	struct psmsg_request h;
	uint32_t len;			/* 1..PSMSG_TOKEN_MAX */
	uint32_t pad;			/* 0 */
	char token[PSMSG_TOKEN_MAX];
};

/* Who a GPU write is for (psmsg_request.w_from). */
enum psmsg_from {
	PSMSG_FROM_NONE = 0,		/* not a write */
	PSMSG_FROM_UNIX,		/* a Unix-socket peer: auth its handle */
	PSMSG_FROM_TCP,			/* a TCP client */
	PSMSG_FROM_RESTORE,		/* a lease's restore */
	PSMSG_FROM_PIPE,		/* a named-pipe client (zeusd.exe) */
	PSMSG_FROM_END
};

struct psmsg_reply {
	uint32_t magic, op;
	uint64_t id;
	int32_t rc;			/* 0, or -1 with err_kind/err_msg */
	uint32_t err_kind;		/* enum zerr_kind */
	char err_msg[ZERR_MSG_MAX];	/* NUL-terminated */
	uint32_t lost;			/* GPU ops: backend's lost() after the call */
	uint32_t a, b;			/* power/limit mW; min,max; persistence */
	/*
	 * Not in the first draft of the layout: without it the compiler puts
	 * 4 bytes of padding before `v`, which memset covers but nothing
	 * names; explicit, it is zeroed and checked like every other field.
	 */
	uint32_t pad0;			/* 0 */
	uint64_t v;			/* GPU energy mJ; RAPL energy µJ;
					 * PSMSG_PEER: the peer's handle */
	/* PSMSG_SAMPLE */
	uint64_t gpu_ok, gpu_lost, pkg_ok;
	uint32_t err_gpu_kind;		/* first GPU failure, message in err_msg */
	uint32_t pad;			/* 0 */
	uint32_t gpu_mw[PSMSG_MAX_GPUS];
	/* wrap-compensated, as the device process's struct rapl reports */
	uint64_t cpu_uj[PSMSG_MAX_PKGS], dram_uj[PSMSG_MAX_PKGS];
	uint64_t mono_ns[PSMSG_MAX_PKGS];	/* CLOCK_MONOTONIC after the read */
	/* PSMSG_PROC: struct procstat of the device process */
	uint64_t p_ok;			/* PROCSTAT_* bits */
	uint64_t p_start_ms, p_cpu_ms, p_rss, p_vsize, p_fds, p_max_fds;
	/*
	 * ... and the network process's open descriptors, which it cannot
	 * count itself (procstat.h): p_net_ok 1 when p_net_fds is set
	 */
	uint64_t p_net_ok, p_net_fds;
	/*
	 * ... and the audit log as the device process writes it (the lines
	 * of the writes it runs): lines lost, and 1 while it cannot write
	 */
	uint64_t a_failures;
	uint64_t a_refused;		/* writes --audit-required refused */
	uint32_t a_down;
	uint32_t pad3;			/* 0 */
	/* PSMSG_PEER: struct identity (NUL-terminated strings) */
	char i_user[IDENTITY_USER_MAX], i_comm[IDENTITY_COMM_MAX];
	uint32_t i_ngids;		/* 1..IDENTITY_MAX_GROUPS; else 0 */
	uint32_t pad2;			/* 0 */
	uint32_t i_gids[IDENTITY_MAX_GROUPS];
	char i_cgroup[IDENTITY_CGROUP_MAX];	/* NUL-terminated */
	/* PSMSG_TOKEN: the verified claims and the token's handle */
	uint64_t t_handle;
	int64_t t_exp;
	uint32_t t_scopes;		/* group_set */
	uint32_t t_has_exp;		/* 0 or 1 */
	char t_sub[PSMSG_SUB_MAX];	/* NUL-terminated */
};

/*
 * PSMSG_AUDIT: an event of the network process's own (its early
 * refusals, writes dropped before they ran), which the device process
 * turns into an audit line in its own words: the network process holds
 * no writable fd of the audit log and sends no text. Typed fields only:
 * who a refusal or a dropped write was for is named as a write names it
 * (h.w_from, h.auth, h.tok, h.w_addr*), why by a code (enum
 * psmsg_refusal), so the identity, the user name and the message in the
 * line are the device process's. The device process checks a refusal
 * against its own policy where it can, and takes at most a burst of such
 * events (a bucket refilled at a fixed rate; the rest are counted, not
 * written). A lease's lines (its end, its restores, a refused release or
 * lease) are the device process's own, from its own record: the kinds
 * and codes that carried them before it held the only record (LEASE_END,
 * UNQUEUED; LEASE, RELEASE) are refused as broken messages, and their
 * fields stay, all 0, so that the layout does not move.
 */
enum psmsg_audit_kind {
	PSMSG_AUDIT_REFUSED = 1,	/* op, error; gpu or no_gpu */
	PSMSG_AUDIT_SUPERSEDED,		/* the write in h.w_* */
	PSMSG_AUDIT_LEASE_END,		/* refused (a broken message) */
	PSMSG_AUDIT_UNQUEUED,		/* refused (a broken message) */
	PSMSG_AUDIT_KIND_END
};

/* Why the network process refused a write (PSMSG_AUDIT_REFUSED's code). */
enum psmsg_refusal {
	PSMSG_REFUSAL_SCOPE = 1,	/* the node policy grants no gpu-control */
	PSMSG_REFUSAL_POLICY_GPU,	/* ... not on that GPU */
	PSMSG_REFUSAL_AUDIT_DOWN,	/* --audit-required, the log full */
	PSMSG_REFUSAL_LEASE,		/* refused: the device's own now */
	PSMSG_REFUSAL_RELEASE,		/* refused: the device's own now */
	PSMSG_REFUSAL_END
};

#define PSMSG_AUDIT_OP_MAX 32
#define PSMSG_AUDIT_LABEL_MAX 72

struct psmsg_audit {
	struct psmsg_request h;		/* op PSMSG_AUDIT; dev: the GPU */
	uint32_t kind;			/* enum psmsg_audit_kind */
	uint32_t no_gpu;		/* REFUSED: 1 when no GPU is named */
	uint32_t reason;		/* LEASE_END, UNQUEUED: psmsg_reason */
	uint32_t settings;		/* LEASE_END: GPU_SETTING_* bits */
	uint32_t holder_uid, holder_pid;	/* LEASE_END, UNQUEUED */
	uint32_t left, energy_ok;	/* LEASE_END: 0 or 1 each */
	uint64_t duration_us;		/* LEASE_END */
	uint64_t energy_mj;		/* LEASE_END, when energy_ok */
	/* NUL-terminated, every byte after the NUL 0 */
	char op[PSMSG_AUDIT_OP_MAX];	/* REFUSED: [a-z_]+ */
	uint32_t code;			/* REFUSED: enum psmsg_refusal;
					 * UNQUEUED: enum zerr_kind */
	uint32_t pad2;			/* 0 */
	char user[IDENTITY_USER_MAX];	/* all 0: the device names users */
	char cgroup[IDENTITY_CGROUP_MAX];	/* LEASE_END */
	char label[PSMSG_AUDIT_LABEL_MAX];	/* LEASE_END: "" none */
};

/*
 * PSMSG_GPU_WRITES: the writes queued on one GPU's worker, sent as one
 * message instead of one round trip each (docs/design.md, "Writes travel
 * together"). `h` has op PSMSG_GPU_WRITES and every other field 0;
 * w[0..n-1] are PSMSG_GPU_WRITE requests of one GPU, each checked and
 * decided exactly as if it had come alone, and run in that order;
 * w[n..] are all 0. The reply is a struct psmsg_writes_reply of
 * psmsg_writes_reply_size(n) bytes: one result per write, in order.
 */
#define PSMSG_WRITES_MAX 64		/* WORKER_BATCH_MAX */

struct psmsg_writes {
	struct psmsg_request h;
	uint32_t n;			/* 2..PSMSG_WRITES_MAX */
	uint32_t pad;			/* 0 */
	struct psmsg_request w[PSMSG_WRITES_MAX];
};

/* One write's outcome, as a PSMSG_GPU_WRITE's reply would have had it. */
struct psmsg_write_result {
	int32_t rc;			/* 0, or -1 with err_kind/err_msg */
	uint32_t err_kind;		/* enum zerr_kind */
	uint32_t lost;			/* the GPU's lost() after the write */
	uint32_t pad;			/* 0 */
	char err_msg[ZERR_MSG_MAX];	/* NUL-terminated, 0 after the NUL */
};

struct psmsg_writes_reply {
	uint32_t magic, op;		/* PSMSG_MAGIC, PSMSG_GPU_WRITES */
	uint64_t id;			/* the request's */
	uint32_t n;			/* the request's */
	uint32_t pad;			/* 0 */
	struct psmsg_write_result r[PSMSG_WRITES_MAX];	/* [n] sent */
};

/* The bytes of a writes reply with n results (what is sent). */
#define psmsg_writes_reply_size(n) \
	(offsetof(struct psmsg_writes_reply, r) + \
	    (size_t)(n) * sizeof(struct psmsg_write_result))

/*
 * The lease record, the device process's only (docs/design.md, "The lease
 * core"), as the network process serves it: GET /gpu/leases, the ledger
 * in /metrics, POST /gpu/release's answer.
 *
 * PSMSG_LEASES: a request with every field 0. The reply has the open
 * leases (rec[0..nopen), each GPU's at most once, with their energy and
 * duration so far), then the last ended ones (rec[nopen..nopen+nended),
 * newest first), and each GPU's energy charged to nobody.
 *
 * PSMSG_RELEASE: POST /gpu/release for the writer that w_from, auth and
 * tok name (as a PSMSG_GPU_WRITE names it) on the GPUs of gpu_mask. The
 * device process ends the caller's leases there (root's on the Unix
 * socket: anyone's), putting back what they changed, and answers with the
 * ended records (rec[0..nopen)) and the GPUs named that had no lease
 * (not_leased); a GPU leased by another user refuses the whole call (409,
 * nothing done), as does a restore that failed (409; it is retried).
 *
 * PSMSG_LEASE_CHECK: a write (w_op, no values) for the writer w_from and
 * auth name, on the GPUs of gpu_mask, before any of it is queued: rc -1
 * with the 409 (another user's lease, a restore that failed,
 * max_leased_gpus, a holder that cannot be watched) refuses the whole
 * request, which changes nothing, audited by the device process. rc 0
 * grants nothing: each write is decided when it runs. Answered without
 * waiting for a GPU whose write is running (it then refuses nothing).
 *
 * PSMSG_LEDGER: dev = the first user wanted. The reply has users
 * [dev, dev + n) of the nusers the ledger has (n <= PSMSG_LEDGER_USERS),
 * each with its energy per GPU over every lease it held, open ones up to
 * now; users keep their order, and past 255 the rest are summed in one
 * slot, "(other)".
 */
enum psmsg_lease_state { PSMSG_LEASE_HELD, PSMSG_LEASE_RESTORING,
    PSMSG_LEASE_ENDED };

struct psmsg_lease {
	uint32_t gpu, uid;
	int32_t pid;			/* the process that took it */
	uint32_t state;			/* enum psmsg_lease_state */
	uint32_t settings;		/* GPU_SETTING_* it changed */
	uint32_t energy_ok;		/* 0 or 1 */
	uint32_t reason;		/* ended: enum psmsg_reason (0: none) */
	uint32_t left;			/* ended with its settings left: 0/1 */
	uint64_t start_ms, end_ms;	/* Unix ms; end 0 while open */
	uint64_t duration_us;		/* so far, while open */
	uint64_t energy_mj;		/* when energy_ok */
	/* NUL-terminated, 0 after the NUL */
	char user[IDENTITY_USER_MAX];	/* "" without a passwd entry */
	char cgroup[IDENTITY_CGROUP_MAX];	/* "" unknown */
	char label[PSMSG_LABEL_MAX];	/* "" none */
};

#define PSMSG_LEASES_ENDED 32
#define PSMSG_LEASES_MAX (PSMSG_MAX_GPUS + PSMSG_LEASES_ENDED)

struct psmsg_leases_reply {
	uint32_t magic, op;
	uint64_t id;
	int32_t rc;			/* 0, or -1 with err_kind/err_msg */
	uint32_t err_kind;
	char err_msg[ZERR_MSG_MAX];	/* NUL-terminated, 0 after the NUL */
	uint32_t nopen, nended;
	uint64_t unleased_ok;		/* LEASES: bit i, unleased_mj[i] */
	uint64_t not_leased;		/* RELEASE */
	uint64_t unleased_mj[PSMSG_MAX_GPUS];
	struct psmsg_lease rec[PSMSG_LEASES_MAX];
};

#define PSMSG_LEDGER_USERS 16		/* per reply */
#define PSMSG_LEDGER_MAX 256		/* users the ledger names */

struct psmsg_ledger_user {
	uint32_t uid;			/* (uid_t)-1: "(other)" */
	uint32_t pad;			/* 0 */
	char user[IDENTITY_USER_MAX];	/* NUL-terminated, 0 after */
	uint64_t mj[PSMSG_MAX_GPUS];	/* [ngpu]; 0 after */
};

struct psmsg_ledger_reply {
	uint32_t magic, op;
	uint64_t id;
	int32_t rc;
	uint32_t err_kind;
	char err_msg[ZERR_MSG_MAX];
	uint32_t nusers;		/* the ledger's, in all */
	uint32_t n;			/* in u[] */
	struct psmsg_ledger_user u[PSMSG_LEDGER_USERS];
};

/*
 * PSMSG_TCP_OWNER: which uid owns the client's socket of a loopback TCP
 * connection the network process accepted (common/sockdiag.h), for the
 * per-peer cap to count it under that user (http/server.c). `h` has op
 * PSMSG_TCP_OWNER and every other field 0; the tuple is the client
 * socket's: `client` its local end (the address and port the network
 * process saw the connection come from), `server` the address and port it
 * came to. Both loopback: family 4, two addresses of 127.0.0.0/8 in
 * bytes 0..3 and 0 after; family 6, both ::1. Ports 1..65535, host order.
 * The reply: rc 0 with `a` the uid, or rc -1 (ZERR_NOT_FOUND) when the
 * kernel cannot tell.
 */
struct psmsg_tcp_owner {
	struct psmsg_request h;
	uint32_t family;		/* 4 or 6 */
	uint32_t pad;			/* 0 */
	uint32_t client_port, server_port;
	uint8_t client[16], server[16];
};

/*
 * PSMSG_SLURM_STEP: a Slurm job step on this node starts holding GPUs, or
 * ends (access/slurmjobs.h), as root's zeus_spank.so said it over the
 * Unix socket (POST /slurm/step_start, /slurm/step_end). `h` has op
 * PSMSG_SLURM_STEP and every other field 0; `who` is the handle PSMSG_PEER
 * gave the connection that asked (the device process takes the step only
 * from root, and finds the step's cgroup from that process's own).
 * Start: start 1, job 1.., a step id, uid not (uid_t)-1, gpus not 0 and
 * only bits < ngpu. End: start 0, job and step, uid and gpus 0.
 */
struct psmsg_slurm_step {
	struct psmsg_request h;
	uint32_t start;			/* 1: starts; 0: ended */
	uint32_t pad;			/* 0 */
	uint32_t job, step;
	uint32_t uid;
	uint32_t pad1;			/* 0 */
	uint64_t gpus;			/* bit i: GPU i */
	uint64_t who;			/* the asking connection's handle */
};

/*
 * No implicit padding anywhere: each size is the sum of its fields, so
 * every byte on the wire is a named field that the sender zeroes or fills
 * and the receiver can check. A multiple of 8 keeps arrays of messages and
 * the 64-bit fields aligned.
 */
_Static_assert(ZERR_MSG_MAX % 8 == 0, "err_msg must keep 8-byte alignment");
_Static_assert(sizeof(struct psmsg_request) == 2 * 4 + 8 + 8 * 4 + 2 * 8 +
    8 + 2 * 4 + 8 + 2 * 4 + 16 + PSMSG_LABEL_MAX,
    "struct psmsg_request has padding");
_Static_assert(sizeof(struct psmsg_request) % 8 == 0,
    "struct psmsg_request size not a multiple of 8");
_Static_assert(sizeof(struct psmsg_reply) ==
    2 * 4 + 8 + 4 + 4 + ZERR_MSG_MAX + 4 * 4 + 8 + 3 * 8 + 2 * 4 +
    PSMSG_MAX_GPUS * 4 + 3 * PSMSG_MAX_PKGS * 8 + 9 * 8 + 2 * 8 + 2 * 4 +
    IDENTITY_USER_MAX + IDENTITY_COMM_MAX + 2 * 4 + IDENTITY_MAX_GROUPS * 4 +
    IDENTITY_CGROUP_MAX + 2 * 8 + 2 * 4 + PSMSG_SUB_MAX,
    "struct psmsg_reply has padding");
_Static_assert(sizeof(struct psmsg_reply) % 8 == 0,
    "struct psmsg_reply size not a multiple of 8");
_Static_assert(sizeof(struct psmsg_token) == sizeof(struct psmsg_request) +
    2 * 4 + PSMSG_TOKEN_MAX, "struct psmsg_token has padding");
_Static_assert(sizeof(struct psmsg_audit) == sizeof(struct psmsg_request) +
    8 * 4 + 2 * 8 + PSMSG_AUDIT_OP_MAX + 2 * 4 + IDENTITY_USER_MAX +
    IDENTITY_CGROUP_MAX + PSMSG_AUDIT_LABEL_MAX,
    "struct psmsg_audit has padding");
_Static_assert(sizeof(struct psmsg_writes) == sizeof(struct psmsg_request) +
    2 * 4 + PSMSG_WRITES_MAX * sizeof(struct psmsg_request),
    "struct psmsg_writes has padding");
_Static_assert(sizeof(struct psmsg_write_result) == 4 * 4 + ZERR_MSG_MAX,
    "struct psmsg_write_result has padding");
_Static_assert(sizeof(struct psmsg_writes_reply) == 2 * 4 + 8 + 2 * 4 +
    PSMSG_WRITES_MAX * sizeof(struct psmsg_write_result),
    "struct psmsg_writes_reply has padding");
_Static_assert(sizeof(struct psmsg_tcp_owner) == sizeof(struct
    psmsg_request) + 4 * 4 + 2 * 16, "struct psmsg_tcp_owner has padding");
_Static_assert(sizeof(struct psmsg_slurm_step) == sizeof(struct
    psmsg_request) + 6 * 4 + 2 * 8, "struct psmsg_slurm_step has padding");
_Static_assert(sizeof(struct psmsg_lease) == 8 * 4 + 4 * 8 +
    IDENTITY_USER_MAX + IDENTITY_CGROUP_MAX + PSMSG_LABEL_MAX,
    "struct psmsg_lease has padding");
_Static_assert(sizeof(struct psmsg_leases_reply) == 2 * 4 + 8 + 2 * 4 +
    ZERR_MSG_MAX + 2 * 4 + 2 * 8 + PSMSG_MAX_GPUS * 8 +
    PSMSG_LEASES_MAX * sizeof(struct psmsg_lease),
    "struct psmsg_leases_reply has padding");
_Static_assert(sizeof(struct psmsg_ledger_reply) == 2 * 4 + 8 + 2 * 4 +
    ZERR_MSG_MAX + 2 * 4 + PSMSG_LEDGER_USERS * (2 * 4 + IDENTITY_USER_MAX +
    PSMSG_MAX_GPUS * 8), "struct psmsg_ledger_reply has padding");

/* What the device process serves: the bounds a request is checked against. */
struct psmsg_limits {
	unsigned ngpu, npkg;		/* each at most PSMSG_MAX_* */
	uint64_t dram_mask;		/* bit i: package i has a DRAM zone */
};

/*
 * The device side's decoder. Accepts `buf` only when it is exactly one
 * request (len == sizeof), the magic matches, the op is known, every field
 * the op uses is in range for `lim` and every field it does not use is 0:
 *   GPU reads:   dev < ngpu
 *   GPU_WRITE:   dev < ngpu, w_op < GPU_WRITE_OP_COUNT, and per w_op
 *                a power limit, enabled 0/1, or a clock pair; resets take
 *                no value. Limits and clocks may be any u32: the driver
 *                judges them (400), as in one process
 *   RAPL_READ:   dev < npkg, zone 0 (cpu) or 1 (dram, only where the
 *                package has DRAM)
 *   SAMPLE:      at least one bit across gpu_mask/pkg_mask, only bits
 *                < ngpu / < npkg
 *   PEER:        nothing but auth (0 or a handle); the socket it names
 *                comes as SCM_RIGHTS (device.c checks that it came, and
 *                that it is a connected Unix stream socket)
 *   PEER_END:    nothing but auth, not 0
 *   GPU_WRITE:   w_from a psmsg_from, auth any (whether they name a
 *                writer that may is the device process's decision,
 *                access/warden.h, not a broken message)
 *   every op:    auth and w_from 0 where not listed
 * Returns 0 and fills *out, or -1 with *out zeroed and a short reason in
 * `why` (numbers, never bytes of the message as text).
 *
 * `lim` over PSMSG_MAX_* or with DRAM bits beyond npkg is a programming
 * error of the caller (assert).
 */
int psmsg_request_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_request *out, char *why,
    size_t whysz);

/*
 * The same for a PSMSG_TOKEN (len == sizeof(struct psmsg_token)): the
 * header as psmsg_request_check would take it with every field but magic
 * and op 0, 1 <= len <= PSMSG_TOKEN_MAX, token[len..] all 0, pad 0.
 * The token bytes themselves are the verifier's business (auth.h), not
 * the decoder's. Returns 0 and fills *out, or -1 with a reason.
 */
int psmsg_token_check(const void *buf, size_t len, struct psmsg_token *out,
    char *why, size_t whysz);

/*
 * The same for a PSMSG_AUDIT (len == sizeof(struct psmsg_audit)): the
 * header checked as a GPU write's would be (dev < ngpu unless no_gpu;
 * for SUPERSEDED a valid write, for UNQUEUED a restore's op; who fields as
 * a write's), a known kind whose unused fields are all 0, flags 0 or 1,
 * a reason in range, every string NUL-terminated with 0 after it, `op`
 * of [a-z_], `label` of the lease label's characters. Returns 0 and
 * fills *out, or -1 with a reason.
 */
int psmsg_audit_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_audit *out, char *why,
    size_t whysz);

/*
 * The same for a PSMSG_GPU_WRITES (len == sizeof(struct psmsg_writes)):
 * the header with every field but magic, op and id 0, pad 0,
 * 2 <= n <= PSMSG_WRITES_MAX, each w[i < n] a PSMSG_GPU_WRITE that
 * psmsg_request_check accepts, all of one GPU, and w[n..] all 0.
 * Returns 0 and fills *out, or -1 with *out zeroed and a reason.
 */
int psmsg_writes_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_writes *out, char *why,
    size_t whysz);

/*
 * The same for a PSMSG_TCP_OWNER (len == sizeof(struct psmsg_tcp_owner)):
 * the header with every field but magic, op and id 0, pad 0, family 4 or
 * 6, both ports 1..65535 and both addresses loopback as the struct says
 * (anything else is a network process asking about connections it did
 * not accept). Returns 0 and fills *out, or -1 with *out zeroed and a
 * reason.
 */
int psmsg_tcp_owner_check(const void *buf, size_t len,
    struct psmsg_tcp_owner *out, char *why, size_t whysz);

/*
 * The same for a PSMSG_SLURM_STEP (len == sizeof(struct
 * psmsg_slurm_step)): the header with every field but magic, op and id 0,
 * pads 0, `who` not 0, and a start or an end as the struct says (job not
 * 0, a step id below 0xfffffff0 or Slurm's batch, extern or interactive;
 * a start's GPUs within lim->ngpu). Returns 0 and fills *out, or -1 with
 * *out zeroed and a reason.
 */
int psmsg_slurm_step_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_slurm_step *out, char *why,
    size_t whysz);

/*
 * The network side's check of the reply to PSMSG_GPU_WRITES request `id`
 * of `n` writes: len == psmsg_writes_reply_size(n), magic, op, id and n
 * echoed, pad 0, and each result as psmsg_reply_check checks a reply's
 * rc, kind, message and lost flag. Fills out->r[0..n-1] (the rest 0), or
 * returns -1 with *out zeroed and a reason.
 */
int psmsg_writes_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t n, struct psmsg_writes_reply *out, char *why, size_t whysz);

/*
 * The network side's check of a reply to request (id, op): exact size,
 * magic, echoed id and op, rc 0 with ZERR_NONE or -1 with another kind,
 * kinds valid enum zerr_kind values, err_msg, i_user, i_comm and i_cgroup
 * NUL-terminated inside their arrays, i_ngids in range for a PEER reply
 * and 0 otherwise, lost 0/1, pads 0. The device process is trusted, so this guards
 * against a crossed channel or a bug rather than an attacker; it is as
 * strict anyway, because the reply's message ends up in an HTTP body.
 * Returns 0 and fills *out, or -1 with *out zeroed and a reason in `why`.
 */
/*
 * The network side's checks of the lease record's replies: exact size,
 * the request's magic, id and op, rc and error as psmsg_reply_check's,
 * counts within their arrays and `ngpu`, every record's GPU below ngpu,
 * its state (open leases first, then ended ones; a release's records all
 * ended), flags 0 or 1, strings NUL-terminated with 0 after, unused
 * figures 0. A ledger reply's users are [first, first + n) of nusers.
 * 0, or -1 with *out zeroed and a reason.
 */
int psmsg_leases_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t op, uint32_t ngpu, struct psmsg_leases_reply *out, char *why,
    size_t whysz);
int psmsg_ledger_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t first, uint32_t ngpu, struct psmsg_ledger_reply *out,
    char *why, size_t whysz);

int psmsg_reply_check(const void *buf, size_t len, uint64_t id, uint32_t op,
    struct psmsg_reply *out, char *why, size_t whysz);

/*
 * The reply fields of PSMSG_PROC and PSMSG_PEER from and to the structs
 * they carry, field by field (put: the device side; get: the network
 * side, after psmsg_reply_check). Strings are copied up to their NUL, so
 * the rest of each field stays as the zeroed reply left it.
 */
struct procstat;
void psmsg_put_procstat(struct psmsg_reply *rep, const struct procstat *p);
void psmsg_get_procstat(const struct psmsg_reply *rep, struct procstat *p);
void psmsg_put_identity(struct psmsg_reply *rep, const struct identity *id);
void psmsg_get_identity(const struct psmsg_reply *rep, struct identity *id);

/* Zeroes *r and sets magic, op and id: the caller fills the op's fields. */
void psmsg_request_init(struct psmsg_request *r, enum psmsg_op op,
    uint64_t id);

/* Zeroes *w and makes it a batch of n (<= PSMSG_WRITES_MAX) writes, each
 * a PSMSG_GPU_WRITE of GPU `gpu` whose write fields the caller fills. */
void psmsg_writes_init(struct psmsg_writes *w, uint32_t n, uint32_t gpu);

/* "gpu_power", ..., "sample" for logs; "?" for anything else. */
const char *psmsg_op_name(uint32_t op);

#endif
