/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.h - GPU leases and restore on exit (--gpu-leases): the first GPU
 * setting change by a non-root Unix-socket peer gives its user a lease on
 * that GPU; while any process of that user that changed a setting on it
 * lives, other non-root writers get 409. When the last such process exits
 * the settings the user changed go back to the values in force before the
 * user's first change, through the GPU's own device queue (room there is
 * never refused to a restore), and the lease ends once every restore
 * succeeded: a failed one is retried with a backoff while the lease keeps
 * refusing others, the 409 naming the failure. See docs/security.md,
 * "Shared nodes".
 *
 * Processes are watched through the pidfd each connection took when it was
 * accepted (peer_take_pidfd: the process that connected, not its pid
 * number, which may be reused), on one small thread that sleeps in
 * epoll_wait: no polling. TCP peers have no process to watch: they never
 * take a lease (but are refused on a leased GPU like any non-root writer).
 */
#ifndef ZEUS_LEASE_H
#define ZEUS_LEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <time.h>

#include "common/err.h"
#include "common/identity.h"
#include "common/lease_label.h"

struct leases;
struct node;
struct peer;
struct gpu_cmd;

#define LEASE_LEDGER_ENDED 32	/* ended leases kept for GET /gpu/leases */

/*
 * One lease on one GPU as the energy ledger sees it: its holder, what it
 * changed, its span and the GPU energy charged to it (docs/security.md,
 * "Shared nodes: the energy ledger").
 */
enum lease_rec_state { LEASE_REC_HELD, LEASE_REC_RESTORING, LEASE_REC_ENDED };

struct lease_record {
	unsigned gpu;
	uid_t uid;
	char user[64];			/* "" without a passwd entry */
	pid_t pid;			/* the process that took it */
	char cgroup[IDENTITY_CGROUP_MAX];	/* "" unknown */
	char label[LEASE_LABEL_MAX + 1];	/* the client's; "" none */
	enum lease_rec_state state;
	struct timespec start;		/* CLOCK_REALTIME of its first write */
	struct timespec end;		/* ... of its end; 0 while open */
	double duration_s;		/* so far, while open */
	bool energy_ok;			/* false: the GPU has no counter */
	uint64_t energy_mj;		/* so far, while open */
	unsigned settings;		/* GPU_SETTING_* it changed */
	const char *reason;		/* how it ended (static), or NULL */
};

/*
 * A caller waiting for leases to end (leases_release): one per GPU, the
 * caller's memory until `done` ran. `done(ctx)` runs once, on whatever
 * thread ended the lease (a device worker), with `rec` filled when `ok`,
 * or `err` set when the restore failed (it is retried; the lease stays).
 */
struct lease_waiter {
	unsigned gpu;
	unsigned gen;			/* the lease's, at release */
	void (*done)(void *ctx);
	void *ctx;
	bool ok;
	struct lease_record rec;
	struct zerr err;
	struct lease_waiter *next;	/* the leases' list */
};

/*
 * What GET /gpu/leases and /metrics show, taken with fresh counter
 * readings: `cur` and `unleased_*` are [ngpu] arrays of the caller's.
 */
struct lease_view {
	struct lease_record *cur;	/* the open leases */
	unsigned ncur;
	struct lease_record ended[LEASE_LEDGER_ENDED];	/* newest first */
	unsigned nended;
	uint64_t *unleased_mj;		/* per GPU, charged to nobody */
	bool *unleased_ok;		/* false: no counter, or never read */
};

int leases_create(struct node *node, struct leases **out, struct zerr *err);

/*
 * A lease the device process took back from its journal at start-up
 * (--state-dir, warden_recover): what it changed, when it began, and its
 * holder processes that still run, as pidfds the device process opened
 * and checked (pid and start time) and passed here.
 */
#define LEASE_ADOPT_PIDS 64
struct lease_adopted {
	bool held;
	uid_t uid;
	char user[IDENTITY_USER_MAX];
	char cgroup[IDENTITY_CGROUP_MAX];	/* its first writer's; "" */
	char label[LEASE_LABEL_MAX + 1];	/* its latest; "" none */
	bool has_start, energy_ok;
	uint64_t started_ms;		/* Unix time of its first change */
	uint64_t energy_mj;		/* the GPU's counter then */
	bool has_limit, has_persist, gpu_clocks, mem_clocks;
	uint32_t limit_mw;
	bool persist;
	unsigned npid;
	pid_t pid[LEASE_ADOPT_PIDS];
	int fd[LEASE_ADOPT_PIDS];	/* pidfds (a network process's: by
					 * number, netstart.h) */
};

/*
 * Start-up, before requests are served: GPU `gpu`'s lease as the device
 * process took it back (a->held), held again here as if its holder had
 * taken it in this process: listed by GET /gpu/leases, refusing others
 * with the usual 409, its energy counted from its start before the
 * restart, and restored when its processes exit (at once when none runs
 * any more: a->npid 0). Takes a->fd[] (closed on failure too). 0, or -1
 * with err.
 */
int leases_adopt(struct leases *l, unsigned gpu, const struct lease_adopted *a,
    struct zerr *err);

/*
 * Start-up, before leases_adopt and before anything is served: the energy
 * ledger as the device process kept it (--state-dir: ledger_store.h, its
 * file), so that /metrics continues instead of starting at 0: each user's
 * totals of ended leases, in their order, and each GPU's unleased energy
 * with the counter reading it is based on (the energy used since, zeusd
 * down included, is nobody's unless a lease taken back was open: then
 * its own, from its start reading). Adds to what is there.
 */
struct ledger_store;
void leases_seed_ledger(struct leases *l, const struct ledger_store *s);

/*
 * Stops the watcher thread: no restore starts after it. Call before the
 * device workers stop (restores already queued still run and complete
 * into `l`), and leases_destroy after they stopped.
 */
void leases_stop(struct leases *l);

/*
 * At shutdown, after leases_stop and before the devices close: every lease
 * still held (no --restore-on-shutdown) ends now with the energy read here,
 * its settings left as they are; the ledger's audit line says so. With
 * `kept` (the device process keeps a lease journal, --state-dir) a held
 * lease does not end: the next zeusd takes it back, and its one lease_end
 * line comes when it really ends; only a log line says it was handed on.
 */
void leases_end_all(struct leases *l, bool kept);
void leases_destroy(struct leases *l);

/*
 * Loop thread, before a write is queued: for a writer that is not root on
 * the Unix socket, refuses (ZERR_CONFLICT, 409) when another user holds a
 * lease on one of `gpus`; for a non-root Unix peer, then takes or extends
 * its user's lease with the peer's process (p->pidfd; `id`, when known,
 * names the user and the process's cgroup for the ledger). A non-root Unix
 * peer whose process has exited (or was gone at accept time: no pidfd) is
 * refused (ZERR_CONFLICT) before anything is taken. Root is never refused
 * and never takes a lease. Returns 0 or -1 with err.
 */
int leases_claim(struct leases *l, const struct peer *p,
    const struct identity *id, const uint32_t *gpus, unsigned n,
    unsigned max_gpus, struct zerr *err);

/*
 * Loop thread, right after a successful leases_claim of a write that
 * carried a label (lease_label_invalid(label) == NULL): labels the
 * caller's leases on `gpus` with it, replacing an earlier one. Nothing
 * for root or a TCP peer (no lease). A lease taken without a label has
 * none; a later write without one keeps it.
 */
void leases_label(struct leases *l, const struct peer *p,
    const uint32_t *gpus, unsigned n, const char *label);

/*
 * Loop thread, after a successful leases_claim: the write is now queued
 * (or was refused). Required once per successful claim with the same
 * arguments: a restore due while the write was between the two is queued
 * now, behind it.
 */
void leases_claim_done(struct leases *l, const struct peer *p,
    const uint32_t *gpus, unsigned n);

/*
 * Worker thread, after a write ran: records the value it replaced when it
 * is the first change of that setting under the lease (the value to
 * restore). `unix_peer`/`uid`: the writer. `l` may be NULL (no leases).
 */
void leases_note(struct leases *l, bool unix_peer, uid_t uid,
    const struct gpu_cmd *cmd);

/*
 * Loop thread, POST /gpu/release: ends the caller's leases on `gpus` (any
 * user's for root on the Unix socket), restoring what they changed
 * (`handle`: the caller's for the device process, gate_writer; 0 in one
 * process). A GPU
 * leased by another user refuses the whole call (ZERR_CONFLICT, nothing
 * done); a GPU with no lease is reported in not_leased[] (the caller's
 * [n]). For every lease ended, w[i] is registered and its `done` runs once
 * the restore finished; returns how many were registered (in w[0..]), or
 * -1 with err.
 */
int leases_release(struct leases *l, const struct peer *p, uint64_t handle,
    const uint32_t *gpus, unsigned n, struct lease_waiter *w,
    uint32_t *not_leased, unsigned *nnot, struct zerr *err);

/*
 * The ledger with fresh readings of every GPU's energy counter (mj[i]
 * valid when ok[i]; taken after the request that asks arrived): advances
 * each GPU's unleased energy to now and fills `v`. Any thread.
 */
void leases_view(struct leases *l, const uint64_t *mj, const bool *ok,
    struct lease_view *v);

/*
 * The per-user counters for /metrics: calls `each` for every user that
 * held a lease since start and every GPU, with its joules (ended leases
 * and, with the readings of leases_view just before, open ones), in a
 * stable order. At most 256 users have their own series; later ones are
 * summed under "(other)".
 */
void leases_users(struct leases *l, void (*each)(void *arg, uid_t uid,
    const char *user, unsigned gpu, uint64_t mj), void *arg);

/* A lease's settings as text: "power_limit,gpu_clocks" ("" for none). */
void lease_settings_format(unsigned settings, char *buf, size_t size);

/*
 * SIGTERM with --restore-on-shutdown: restores every leased GPU now and
 * waits up to `timeout_ms` for the restores to finish.
 */
void leases_restore_all(struct leases *l, unsigned timeout_ms);

#endif
