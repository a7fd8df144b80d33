/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden.h - the device process's own decision on every GPU write of a
 * split daemon (docs/security.md, "Privilege separation").
 *
 * The network process parses HTTP and may be taken over; it still asks
 * first (the gate, the policy: an early refusal; a write request's early
 * 409 is asked of this process, warden_lease_check), but nothing depends
 * on it. Here, in the device process, each write is judged again from
 * what this process learnt itself:
 *
 *  - who: a Unix peer's credentials come from its connected socket, which
 *    the network process passes once per connection (PSMSG_PEER): the
 *    kernel's SO_PEERCRED and SO_PEERGROUPS and a pidfd, read here; the
 *    network process gets a handle and names the writer by it. A handle
 *    is only ever made for a socket connected to zeusd's listening path,
 *    so the network process can speak only for peers that connected;
 *  - may they: the gpu-control group enabled, the transport the write says
 *    it came by being the one zeusd serves, with a signing key a token
 *    verified here (the network process holds no key: it asks here with
 *    PSMSG_TOKEN and names the token by its handle) that holds the
 *    gpu-control scope and has not expired, and for a non-root Unix peer
 *    the node policy's gpu-control grant on that GPU;
 *  - is the GPU a Slurm job step's (the node policy's slurm_jobs =
 *    "confine", access/slurmjobs.h): a GPU a step holds is changed only
 *    from inside that step's cgroup, and a step's processes change no
 *    other GPU; root's zeus_spank.so says which steps hold which GPUs;
 *  - is the GPU someone else's (--gpu-leases): a lease of its own, kept
 *    from the writes it ran: the holder's user, the processes (pidfds)
 *    whose changes succeeded, and the value each setting had before the
 *    lease's first change of it. Another user's write, and any TCP write,
 *    is refused while a holder process lives or a setting waits for its
 *    restore; a restore is run only as recorded here (the recorded value,
 *    never the network process's), and only when the holder's processes
 *    are gone, the holder (or root) released it, or zeusd stops; each
 *    by this process on its own (warden_watch, warden_release,
 *    warden_leases_stop): the network process holds no lease record and
 *    asks for no restore, so one taken over, stopped or crashed leaves no
 *    cap behind.
 *
 * The lease record here is the only one (docs/design.md, "The lease
 * core"): GET /gpu/leases, POST /gpu/release and the energy ledger in
 * /metrics are answered from it (warden_leases, warden_release,
 * warden_ledger_page). Every write it runs or refuses, every lease's end
 * and every release gets its audit line here, with who as this process
 * knows them and the value before as it read it (the network process
 * only tells typed events: its early refusals and superseded writes).
 */
#ifndef ZEUS_ACCESS_WARDEN_H
#define ZEUS_ACCESS_WARDEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "access/warden_config.h"
#include "common/err.h"
#include "node/groups.h"

struct warden;
struct policy_holder;
struct gpu_backend;
struct gpu_write;
struct identity;
struct psexec_guard;

#define WARDEN_MAX_PEERS 65536		/* handles at once */
#define WARDEN_MAX_TOKENS 4096		/* verified tokens kept */
#define WARDEN_CLOSED_GRACE_S 120	/* a closed peer's queued writes
					 * may still run this long */
#define WARDEN_QUEUED_AFTER_CLOSE 4096	/* ... and at most this many */
/* a connection the kernel says closed: PSMSG_PEER_END is awaited so long */
#define WARDEN_PEER_END_WAIT_MS 200
/* the network process's audit events: at most this many at once, then
 * this many a second */
#define WARDEN_EVENTS_BURST 512
#define WARDEN_EVENTS_PER_S 100


int warden_create(const struct warden_config *cfg, struct warden **out,
    struct zerr *err);
void warden_destroy(struct warden *w);

/*
 * Start-up, before any request is served: the leases the journal holds
 * (--state-dir) are taken back. One whose holder still runs (its pid with
 * the same start time) holds again and is restored when those processes
 * exit; one whose holder is gone is restored now (audited with reason
 * holder_gone_while_zeusd_was_down). A file from another boot is dropped;
 * a garbled one is set aside and its GPU left as it is; one that is not
 * root's and private is not read. With --gpu-leases, the energy ledger
 * starts here too (from its file with --state-dir). Returns the leases
 * that hold again.
 */
int warden_recover(struct warden *w, struct gpu_backend *b);

/*
 * --gpu-leases, after warden_recover: a thread (pidwatch.h) restores a
 * lease's GPU, through `b`, as soon as its holder processes are gone, and
 * retries a restore that failed (1 s, doubling to 30 s). Stopped by
 * warden_leases_stop or warden_destroy. 0 (also without leases), or -1
 * with err.
 */
int warden_watch(struct warden *w, struct gpu_backend *b, struct zerr *err);

/*
 * PSMSG_LEASES: the open leases with their energy so far, the last ended
 * ones (newest first) and each GPU's energy charged to nobody, with the
 * counters read now. PSMSG_LEDGER: users [first, first + n) of the
 * ledger, each with its energy per GPU, open leases up to now. 0, or -1
 * with err (404 without --gpu-leases). *out zeroed by the caller.
 */
struct psmsg_leases_reply;
struct psmsg_ledger_reply;
int warden_leases(struct warden *w, struct psmsg_leases_reply *out,
    struct zerr *err);
int warden_ledger_page(struct warden *w, uint32_t first,
    struct psmsg_ledger_reply *out, struct zerr *err);

/*
 * PSMSG_RELEASE (POST /gpu/release) from the writer `rq` names (w_from,
 * auth: a Unix peer's handle while its connection is open; a TCP client
 * is no one's holder): ends its leases on the GPUs of rq->gpu_mask (root
 * on the Unix socket: anyone's), putting back what they changed, with
 * their records in out->rec[0..nopen) and the GPUs without a lease in
 * out->not_leased. Another user's lease on one of them refuses the whole
 * call (409, nothing done, audited); a restore that fails answers 409 and
 * is retried, the lease holding meanwhile. 0, or -1 with err.
 */
struct psmsg_request;
int warden_release(struct warden *w, const struct psmsg_request *rq,
    struct psmsg_leases_reply *out, struct zerr *err);

/*
 * PSMSG_LEASE_CHECK: a write request of the writer `rq` names (w_from,
 * auth; w_op) on the GPUs of rq->gpu_mask, before the network process
 * queues any of it: -1 with the 409 (audited) when another user's lease,
 * a restore that failed, max_leased_gpus or a holder that cannot be
 * watched refuses it, so that the whole request changes nothing; 0
 * otherwise, which grants nothing (warden_write decides each write).
 */
int warden_lease_check(struct warden *w, const struct psmsg_request *rq,
    struct zerr *err);

/*
 * The stop, once the network process is gone: with `restore`
 * (--restore-on-shutdown, not a restart that hands leases over) every
 * held lease is restored, retried until `timeout_ms`, then given up with
 * a log line; restores already failing are tried too. Then each lease
 * still held ends with its settings left (its lease_end says so), or,
 * with `kept` (the journal keeps it for the next zeusd), stays.
 */
void warden_leases_stop(struct warden *w, bool restore, bool kept,
    unsigned timeout_ms);

/*
 * The network process started (its pid) and the listening socket's path
 * (cfg.net, cfg.listen_path): set once, before any request is decided.
 */
void warden_set_network(struct warden *w, pid_t net, const char *listen_path);

/* The calls privsep/exec.c makes (struct psexec_guard), ctx = w. */
void warden_guard(struct warden *w, struct psexec_guard *g);

/*
 * zeusd is stopping (--restore-on-shutdown): a lease's restore runs even
 * while its holder lives.
 */
void warden_stopping(struct warden *w);

/*
 * PSMSG_PEER: `fd` (not taken) must be a Unix stream socket accepted on
 * zeusd's listening socket (its name is cfg.listen_path), from a process
 * other than the network process. Reads its credentials, groups and command name, keeps them
 * with a pidfd of the process, and gives a handle (`refresh`: the handle
 * this connection had, kept when it is the same process). Returns 0, or
 * -1 with err.
 */
int warden_peer(struct warden *w, int fd, uint64_t refresh,
    struct identity *id, uint64_t *handle, struct zerr *err);

/*
 * PSMSG_PEER_END: the connection closed; it had queued `queued` writes in
 * all (the network process's count): those not yet decided may still
 * run, at most WARDEN_QUEUED_AFTER_CLOSE, and nothing else.
 */
void warden_peer_end(struct warden *w, uint64_t handle, uint32_t queued);

/*
 * PSMSG_GPU_WRITE `rq` (who: w_from, auth, tok; for the audit line:
 * w_reason, w_addr): decides; when allowed runs `wr` on `b` and keeps the
 * lease; writes the audit line of what it ran or refused. Returns the write's 0/-1 with err, or -1 with err when refused
 * (ZERR_FORBIDDEN, ZERR_CONFLICT).
 */
struct psmsg_request;
int warden_write(struct warden *w, struct gpu_backend *b, unsigned gpu,
    const struct gpu_write *wr, const struct psmsg_request *rq,
    struct zerr *err);

/*
 * PSMSG_TOKEN: verifies `token` with the signing key (the signature over
 * the raw bytes first: nothing of an unsigned token is decoded, auth.h)
 * and keeps its claims under a handle (the same handle for the same
 * token), which the token's writes name. The table holds
 * WARDEN_MAX_TOKENS; a full one forgets expired tokens first, then the
 * least recently used. Returns 0, or -1 with err (ZERR_UNAUTHENTICATED;
 * ZERR_INTERNAL without a key).
 */
struct auth_claims;
int warden_token(struct warden *w, const char *token, size_t len,
    struct auth_claims *c, uint64_t *handle, struct zerr *err);

/* The key changed (SIGHUP): every token handle given so far is void. */
void warden_key_reloaded(struct warden *w);

/*
 * PSMSG_AUDIT: one of the network process's own lines (psmsg.h), written
 * with who as this process knows them; a lease's line only for the holder
 * this process's record of that GPU has (-1 with err otherwise).
 */
struct psmsg_audit;
int warden_audit(struct warden *w, const struct psmsg_audit *a,
    struct zerr *err);

/*
 * PSMSG_SLURM_STEP: a Slurm job step starts holding GPUs or ends
 * (access/slurmjobs.h), taken only from a root peer (m->who), whose
 * cgroups name the job's. 0, or -1 with err (ZERR_FORBIDDEN: not root;
 * ZERR_INVALID: no cgroup of the job; ZERR_BUSY: the table is full).
 */
struct psmsg_slurm_step;
int warden_slurm_step(struct warden *w, const struct psmsg_slurm_step *m,
    struct zerr *err);

/* Counters for tests and logs. */
unsigned long warden_refused(const struct warden *w);

#endif
