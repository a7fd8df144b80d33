/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node.h - the devices of this node as the daemon sees them: the GPU backend
 * (NVML, possibly wrapped by command overrides) with one worker per GPU, and
 * the RAPL packages with one worker per package.
 *
 * Every queue is bounded (ZEUSD_DEVICE_QUEUE_MAX, default 64: that many
 * reads and that many writes per device worker; the shared readers, which
 * serve every device, that many per device they serve).
 */
#ifndef ZEUS_NODE_H
#define ZEUS_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "devices/gpu.h"
#include "devices/rapl.h"
#include "node/config.h"

#define NODE_QUEUE_MAX_ENV "ZEUSD_DEVICE_QUEUE_MAX"
#define NODE_QUEUE_MAX_DEFAULT 64
#define NODE_QUEUE_MAX_LIMIT 65536

struct worker;
struct worker_batch;
struct work_counters;
struct rapl;
struct overrides;
struct gpu_cmd;
struct cpu_cmd;
struct pschan_pool;
struct pschan_async;
struct node;
struct node_sample;
struct procstat;
struct identity;

/*
 * The network half reaches its devices, and asks everything else that
 * needs the devices, the key or the lease record, through the device half
 * (node_remote.c; two processes on Linux, one in zeusd.exe).
 */
/* A token's claims as the device process verified them (node_token). */
struct node_claims {
	char sub[264];			/* NUL-terminated */
	unsigned scopes;		/* group_set */
	bool has_exp;
	int64_t exp;
	uint64_t handle;		/* the device process's */
};

struct node_audit;
struct psmsg_audit;
struct psmsg_leases_reply;
struct psmsg_ledger_reply;
struct sockdiag_tuple;
struct gpu_write;

/* A Slurm job step that starts holding GPUs, or ends (node_slurm_step). */
struct node_slurm_step {
	bool start;
	uint32_t job, step;
	uid_t uid;			/* start: the job's user */
	uint64_t gpus;			/* start: bit i for GPU i */
	uint64_t who;			/* the asking connection's handle */
};

struct node {
	struct gpu_backend gpu;		/* ops NULL when there are no GPUs */
	unsigned ngpu;
	struct gpu_info *gpu_info;	/* [ngpu] */
	struct worker **gpu_workers;	/* [ngpu] */
	/*
	 * Instantaneous power reads of every GPU: one thread, so a request
	 * for N GPUs costs one thread hop, and never waits behind a slow
	 * write queued on a GPU's worker (NVML is thread-safe).
	 */
	struct worker *gpu_power_reader;
	struct rapl *rapl;		/* NULL when there are no packages */
	unsigned ncpu;
	struct worker **cpu_workers;	/* [ncpu] */
	/*
	 * Cumulative energy reads of every package: one thread, one hop per
	 * request, and never queued behind a /cpu/get_power that sleeps one
	 * sampling period on a package's worker.
	 */
	struct worker *cpu_energy_reader;
	/* commands run and failed per device, whatever thread ran them */
	struct work_counters *gpu_counters;	/* [ngpu] */
	struct work_counters *cpu_counters;	/* [ncpu] */
	unsigned overrides;		/* number of overridden operations */
	/*
	 * The network half's node (node_open_remote): every device call goes
	 * to the device half through these calls (gpu is a remote backend,
	 * rapl a core over a remote source). NULL in the device half's own
	 * node, which has the real backends and no workers.
	 */
	struct pschan_pool *pool;
	/*
	 * Whether the device half is another process (Linux), whose own
	 * figures /metrics shows; false in zeusd.exe, one process.
	 */
	bool device_apart;
	/*
	 * The loop thread's own channel for node_lease_check, taken from the
	 * pool at its first call (so that the early 409 never waits for a
	 * channel others hold), or NULL: then a free one, if any.
	 */
	struct pschan_async *lease_chan;
	unsigned queue_max;		/* ZEUSD_DEVICE_QUEUE_MAX */
};

/*
 * Reserves room for a device command, as part of `batch`, on the queue it
 * belongs to: instantaneous GPU power on the power reader, RAPL energy on
 * the energy reader, everything else on the device's own worker. On a full
 * queue the whole batch is released (nothing of the request will be
 * queued) and `err` (ZERR_BUSY) names the queue and its bound. Once every
 * command is reserved, worker_batch_submit(batch) queues them.
 */
int node_gpu_reserve(struct node *node, struct worker_batch *batch,
    struct gpu_cmd *cmd, struct zerr *err);
int node_cpu_reserve(struct node *node, struct worker_batch *batch,
    struct cpu_cmd *cmd, struct zerr *err);

/*
 * True while the driver reports GPU `gpu` lost (/discover, /metrics). Any
 * thread; asks the backend's flag, not the driver.
 */
bool node_gpu_lost(const struct node *node, unsigned gpu);

/*
 * The device half's node (docs/design.md, "Two processes"):
 * node_open_devices opens the backends, wraps the overrides and reads the
 * GPU facts, and starts no thread, so the process can fork right after.
 * node_start starts the workers (node_open_remote's).
 */
int node_open_devices(struct node *node, const struct zeusd_config *cfg,
    struct overrides *ov, struct zerr *err);
int node_start(struct node *node, struct zerr *err);

/*
 * The network half's node: the same GPUs and packages as the device
 * half's, as it described them (node_remote.h), reached through `pool`
 * (not owned), with its own workers started. Every call below is made on
 * such a node.
 */
struct node_remote_desc;
int node_open_remote(struct node *net, const struct node_remote_desc *dev,
    struct pschan_pool *pool, struct zerr *err);

/*
 * One stream tick: the power of GPUs gpus[0..ngpus-1] and a RAPL sample
 * of packages pkgs[0..npkgs-1] (both ascending), as one request to the
 * device half. Results go to the caller's
 * arrays; gpu_err/cpu_err hold the last failure of each kind.
 */
struct node_sample {
	int *gpu_rc;			/* [ngpus]: 0 or -1 */
	uint32_t *gpu_mw;		/* [ngpus] */
	int *cpu_rc;			/* [npkgs] */
	struct rapl_sample *cpu;	/* [npkgs] */
	struct zerr gpu_err, cpu_err;
};

void node_sample(struct node *node, const unsigned *gpus, unsigned ngpus,
    const unsigned *pkgs, unsigned npkgs, struct node_sample *out);

/*
 * The device half's process figures (common/procstat.h). Then, in the same
 * round trip, the open descriptors of the network process, which has no
 * /proc to count them in: set in *net (open_fds and PROCSTAT_FDS) when
 * `net` is not NULL and the device process could count them (Linux).
 */
struct procstat;
/*
 * `audit` (may be NULL): the audit log as the device half writes it (it
 * writes every line); audit->ok false when it could not tell.
 */
struct node_audit {
	bool ok;
	uint64_t failures, refused;
	bool down;
};
void node_procstat(struct node *node, struct procstat *out,
    struct procstat *net, struct node_audit *audit);

/*
 * A Unix-socket peer's user, groups and command name (common/identity.h),
 * looked up by the device process (the network process has no filesystem
 * and no NSS): `sock` (the peer's connected socket, kept by the caller)
 * goes there, and the device process reads the credentials from it itself
 * and returns a handle for the peer's writes (*handle; `refresh`: the one
 * it had, or 0); a socket the device process refuses (closed meanwhile)
 * gives handle 0 and a zeroed identity, and the device process refuses
 * writes for it. Blocking. Returns 0, or -1 with err (ZERR_BUSY) when the
 * device process had no room to look (out of descriptors): the request is
 * answered 503, and the next one asks again.
 */
struct identity;
int node_peer(struct node *node, int sock, uint64_t refresh,
    struct identity *out, uint64_t *handle, struct zerr *err);

/* The peer of a handle from node_peer closed its connection. Blocking. */
void node_peer_end(struct node *node, uint64_t handle, uint32_t queued);

/*
 * The device process's table of the Slurm job steps that hold GPUs
 * (access/slurmjobs.h) gets a step's start or end, from the peer `s->who`
 * names (root only: the device process checks). 0, or -1 with err
 * (ZERR_FORBIDDEN, ZERR_INVALID, ZERR_BUSY; zeusd.exe has no job steps).
 * Blocking.
 */
int node_slurm_step(struct node *node, const struct node_slurm_step *s,
    struct zerr *err);

/*
 * The device half, which alone holds the signing key, verifies a bearer
 * token (at most 8192 bytes) and answers its claims and a handle. 0, or
 * -1 with err (ZERR_UNAUTHENTICATED: refused). Blocking.
 */
int node_token(struct node *node, const char *token, size_t len,
    struct node_claims *out, struct zerr *err);

/*
 * One of the network half's own audit lines
 * (privsep/msg.h, struct psmsg_audit: its h.op, magic and id are set
 * here), which the device process writes: this process holds no writable
 * fd of the log (audit.h). 0, or -1 with err (refused: logged there).
 * Blocking. The two kinds, built here (a lease's lines, and the refusals
 * of a lease or a release, are the device process's own):
 *   refused:    a write refused here; `who` names the writer as a write
 *               does (gate_writer), `gpu` UINT32_MAX for none, `code` why
 *               (privsep/msg.h, enum psmsg_refusal: the device process
 *               words the line)
 *   superseded: a non-blocking write dropped before it ran (`w`, with
 *               its writer)
 */
int node_audit(struct node *node, struct psmsg_audit *a, struct zerr *err);
void node_audit_refused(struct node *node, const struct gpu_write *who,
    unsigned gpu, const char *op, unsigned code);
void node_audit_superseded(struct node *node, const struct gpu_write *w,
    unsigned gpu);

/*
 * The lease record (--gpu-leases), which only the device process holds
 * (privsep/msg.h, struct psmsg_lease; docs/security.md, "Shared nodes"):
 *   node_leases:  the open leases with their energy so far, the last
 *                 ended ones, each GPU's energy charged to nobody
 *   node_release: POST /gpu/release of `by` (gate_writer's: whose) on the
 *                 GPUs of gpu_mask (not 0, within the node's): the leases
 *                 ended, their settings put back, in out->rec[0..nopen),
 *                 and the GPUs without one in out->not_leased; -1 with
 *                 err ZERR_CONFLICT when another user holds one of them
 *                 or a restore failed (nothing ended)
 *   node_ledger:  the ledger's users [first, first + out->n) of
 *                 out->nusers, each with its energy per GPU
 * *out is large (privsep/msg.h): not for a small stack. Blocking, one
 * round trip each: the look-up pool's, never the loop's. 0, or -1 with
 * err (the device process's refusal).
 */
int node_leases(struct node *node, struct psmsg_leases_reply *out,
    struct zerr *err);
/*
 * The early 409 of a write request (--gpu-leases), before any of it is
 * queued: write `op` of `by` (gate_writer's) on the GPUs of gpu_mask. -1
 * with err (ZERR_CONFLICT, the device process's words; it audits it) when
 * it would be refused; 0 grants nothing (each write is decided when it
 * runs), and is also the answer when no channel is free now. One round
 * trip that the device process answers without waiting for a GPU, on a
 * channel of the caller's own (node->lease_chan): the loop thread's, and
 * only its (zeusd.exe has none: a free one).
 */
int node_lease_check(struct node *node, const struct gpu_write *by,
    uint64_t gpu_mask, struct zerr *err);
int node_release(struct node *node, const struct gpu_write *by,
    uint64_t gpu_mask, struct psmsg_leases_reply *out, struct zerr *err);
int node_ledger(struct node *node, uint32_t first,
    struct psmsg_ledger_reply *out, struct zerr *err);

/*
 * Who owns the client's socket of a loopback TCP connection (`t`, as
 * common/sockdiag.h has it): one netlink look-up by the device process
 * (the network process may open no socket); Windows cannot tell. 0 with
 * *uid, or -1 when
 * unknown (the connection is gone, no answer within SOCKDIAG_TIMEOUT_MS,
 * not Linux). Blocking, for one round trip to the device process.
 */
int node_tcp_owner(struct node *node, const struct sockdiag_tuple *t,
    uint32_t *uid);

/* Stops the workers (after finishing queued commands) and closes devices. */
void node_close(struct node *node);

#endif
