/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden_int.h - the warden's own parts, shared by its files and nothing
 * else (access/warden.h is what the device process calls):
 *
 *   warden.c        peers, tokens, the decision on every write, the
 *                   network process's events, the executor's calls;
 *   warden_lease.c  the lease record of each GPU (the only one): its
 *                   holders (pidfds) and their watcher, its restores and
 *                   their retries, POST /gpu/release, the stop, the
 *                   lease journal and start-up's take-back;
 *   warden_book.c   the energy ledger (its file with --state-dir), every
 *                   lease_end line, GET /gpu/leases' and /metrics' figures.
 *
 * Lock order: a GPU's lock (struct wgpu), then the book's; the peer
 * table's (w->lock) is never held with either.
 */
#ifndef ZEUS_ACCESS_WARDEN_INT_H
#define ZEUS_ACCESS_WARDEN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include "access/journal.h"
#include "access/lease_text.h"
#include "access/policy.h"
#include "access/warden_config.h"
#include "common/err.h"
#include "common/identity.h"
#include "common/lease_label.h"
#include "privsep/msg.h"

#define WARDEN_MAX_PIDS 64		/* holder processes per GPU */
/* a restore of this process's own that failed: tried again after */
#define WARDEN_RETRY_FIRST_MS 1000
#define WARDEN_RETRY_MAX_MS 30000	/* doubling up to this */

struct audit_who;
struct gpu_backend;
struct gpu_write;
struct journal_rec;
struct pidwatch;
struct slurmjobs;
struct wbook;
struct wpeer;
struct wtoken;

/* A write's peer as the decision sees it (a copy, out of the lock). */
struct wwho {
	uid_t uid;
	pid_t pid;
	bool proc_known;
	uint64_t start;
	int pidfd;			/* proc_watch's, closed by the caller */
	bool gone;			/* proc_watch found it exited */
	struct identity id;
	struct policy_peer pp;
};

struct wgpu {
	pthread_mutex_t lock;
	unsigned idx;			/* its GPU */
	struct pidwatch *pw;		/* the warden's (leases), or NULL */
	bool held;
	uid_t uid;
	/*
	 * held ? uid + 1 : 0, written under `lock`, read by other GPUs'
	 * decisions without it (max_leased_gpus counts a user's leases).
	 */
	_Atomic uint64_t holder_key;
	pid_t first_pid;
	pid_t last_pid;			/* the last writer (restores' lines) */
	uid_t ended_uid;		/* the last lease's holder */
	unsigned settings;		/* GPU_SETTING_* changed under it */
	/*
	 * Being ended (a release, its holders gone, the stop): its restore
	 * runs, and one that failed is retried (attempts, why) while the
	 * lease refuses others with the failure's words.
	 */
	bool restoring;
	unsigned reason;		/* of that restore: enum psmsg_reason */
	unsigned attempts;
	char why[ZERR_MSG_MAX];
	/* its record once ended (the ledger's ring has a copy) */
	struct psmsg_lease last;
	char user[IDENTITY_USER_MAX];
	char comm[IDENTITY_COMM_MAX];
	char cgroup[IDENTITY_CGROUP_MAX];	/* the first writer's */
	char label[LEASE_LABEL_MAX + 1];	/* the holder's latest; "" */
	int pidfd[WARDEN_MAX_PIDS];
	pid_t pid[WARDEN_MAX_PIDS];
	uint64_t start[WARDEN_MAX_PIDS];	/* procstat_start_ticks */
	unsigned npid;
	/* the energy ledger (ledger_store.h; its file with --state-dir) */
	struct wbook *book;
	/* the values before the lease's first change of each setting */
	bool has_limit, has_persist, gpu_clocks, mem_clocks;
	uint32_t limit_mw;
	bool persist;
	/* when the lease began (Unix ms) and the energy counter then */
	bool has_start, energy_ok;
	uint64_t started_ms, energy_mj;
};

struct warden {
	struct warden_config cfg;
	struct wtoken **tok;		/* [WARDEN_MAX_TOKENS], lazily */
	unsigned key_gen;
	uint32_t tok_gen;
	pthread_mutex_t lock;		/* the peer table */
	struct wpeer **slot;		/* [WARDEN_MAX_PEERS], lazily filled */
	uint32_t nused;			/* slots ever handed out */
	uint32_t *freed;		/* [WARDEN_MAX_PEERS]: a stack */
	uint32_t nfreed;
	uint32_t closed_head, closed_tail;
	uint32_t next_gen;
	atomic_bool stopping;
	atomic_ulong refused;
	bool diag_ok;			/* sockdiag_unix_works() */
	/* the network process's events (PSMSG_AUDIT): a bucket (w->lock) */
	double events;
	uint64_t events_ns;
	unsigned long events_dropped;
	time_t events_said;
	pthread_cond_t peer_ended;	/* a PSMSG_PEER_END came (w->lock) */
	struct wgpu *gpu;		/* [cfg.ngpu] */
	struct slurmjobs *jobs;		/* the Slurm job steps that hold GPUs */
	/*
	 * --gpu-leases: the thread that restores a lease when its holder
	 * processes are gone (pidwatch.h), and the GPUs it restores.
	 */
	struct pidwatch *pw;
	struct gpu_backend *b;
	unsigned retry_ms;		/* its restores' backoff; 0: none due */
	/* the lease journal (--state-dir): -1 none */
	int jdir;
	char boot[JOURNAL_BOOT_LEN + 1];
	struct wbook *book;		/* the ledger, with --gpu-leases */
};

/* The value a write replaces, read just before it (its audit line). */
struct wbefore {
	bool limit_ok, persist_ok;
	uint32_t limit_mw;
	bool persist;
	/* a lease that begins, with a journal: its start (journal.h) */
	bool starts, energy_ok;
	uint64_t started_ms, energy_mj;
};

/* ---- warden.c -------------------------------------------------------------- */

/* The value write `wr` replaces, read just before it (its audit line). */
void wd_before_read(struct gpu_backend *b, unsigned gpu,
    const struct gpu_write *wr, struct wbefore *bf);

/* The words of a restore's reason (PSMSG_REASON_*). */
extern const char *const wd_reasons[PSMSG_REASON_END];

/*
 * The audit line of a write this process ran (ok or failed): who as it
 * knows them, the value before as it read it.
 */
void wd_audit_ran(const struct audit_who *a, unsigned gpu,
    const struct gpu_write *wr, const struct wbefore *bf, int rc,
    const struct zerr *err, const char *reason);

/*
 * The audit line of a refusal this process decided (its words), counted;
 * rc -1. `rq` names the writer as a write does.
 */
struct wwho;
int wd_refuse(struct warden *w, const struct wwho *p,
    const struct psmsg_request *rq, unsigned gpu, const char *op,
    struct zerr *err);

/* Peer `handle`'s copy (its pidfd: the caller's to close). 0, or -1. */
int wd_peer_copy(struct warden *w, uint64_t handle, struct wwho *out);

/* ---- warden_lease.c -------------------------------------------------------- */

/* --gpu-leases: the holders' watcher (w->pw, each g->pw). 0, or -1. */
int wd_watch_create(struct warden *w, struct zerr *err);

void wgpu_forget_pids(struct wgpu *g);
/*
 * The lease ends (lock held): its record, its energy and its lease_end
 * line (the ledger: wd_book_end), `reason` (enum psmsg_reason) and
 * `left` (its settings stay as they are: the stop).
 */
void wgpu_end(struct warden *w, struct wgpu *g, unsigned reason, bool left);
bool wgpu_live(struct wgpu *g);
bool wgpu_pending(const struct wgpu *g);
bool wgpu_held(struct warden *w, struct wgpu *g);
void wgpu_take(struct wgpu *g, struct wwho *p, const struct gpu_write *wr,
    bool got_limit, uint32_t limit_mw, bool got_persist, bool persist);

/* Unix time in ms (the journal's and the ledger's clock). */
uint64_t wd_realtime_ms(void);

/* journal_keep where nothing can be refused any more: a failure is logged. */
void wd_journal_keep(struct warden *w, const struct wgpu *g, unsigned gpu);

int wd_journal_ahead(struct warden *w, const struct wgpu *g, unsigned gpu,
    const struct wwho *p, const struct gpu_write *wr,
    const struct wbefore *bf, const char *label, struct zerr *err);


/* ---- warden_book.c --------------------------------------------------------- */

/* A lease begins, or is taken back (lock held): its user has a slot. */
void wd_book_start(struct wgpu *g);
/*
 * A lease ends (lock held, g still held): its energy to its user, its
 * record (g->last) to the ring of ended ones, its lease_end line and log
 * line; the counter now is the GPU's new base.
 */
void wd_book_end(struct warden *w, struct wgpu *g, unsigned reason,
    bool left);
/* 404: --gpu-leases is off (PSMSG_LEASES, _LEDGER, _RELEASE). -1. */
int wd_no_leases(struct zerr *err);
/* The ledger, from its file with --state-dir, else from 0. */
void wd_book_load(struct warden *w, struct gpu_backend *b);
/* Lease g's open record with the counter at `mj` (lock held). */
void wd_book_open_rec(const struct wgpu *g, bool mj_ok, uint64_t mj,
    struct psmsg_lease *r);
/* The file, if a lease end changed the book since (the watcher's thread). */
void wd_book_flush(struct warden *w);
void wd_book_close(struct warden *w);

#endif
