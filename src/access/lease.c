/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.c - GPU leases and restore on exit (see lease.h).
 *
 * One mutex guards every GPU's lease; it is held for table updates only,
 * never across a device call. A lease moves HELD -> RESTORING when its last
 * watched process exits (or at shutdown) and back to FREE when every
 * restore command succeeded; while RESTORING it still refuses other users,
 * so nobody's write lands between the death and the restore. A restore
 * command is never refused for a full queue (work.unbounded), and one that
 * fails is retried by the watcher thread after a backoff (its epoll_wait
 * timeout), the lease held and refusing others with the failure meanwhile:
 * a restore cannot be skipped.
 *
 * The watcher thread owns the epoll set: claims add pidfds to it from the
 * loop thread (epoll_ctl is thread-safe), the thread removes and closes
 * them. Each watch is one (GPU, pid) pair, so one process that changed two
 * GPUs is watched twice and each GPU is restored on its own.
 */
#include "access/lease.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/identity.h"
#include "common/log.h"
#include "devices/gpu_cmd.h"
#include "devices/worker.h"
#include "access/audit.h"
#include "access/lease_text.h"
#include "access/ledger_store.h"
#include "node/node.h"
#include "access/peer.h"

#define LEASE_MAX_PIDS 64	/* watched processes per GPU */
#define LEASE_RETRY_FIRST_MS 1000	/* a failed restore: retried after */
#define LEASE_RETRY_MAX_MS 30000	/* doubling up to this */
#define LEDGER_MAX_USERS 256	/* users with their own /metrics series */
#define LEDGER_ENDED 32		/* ended leases GET /gpu/leases keeps */

enum lease_state { LEASE_FREE, LEASE_HELD, LEASE_RESTORING };

struct lease_watch {
	struct leases *l;
	unsigned gpu;
	pid_t pid;
	int fd;			/* pidfd, -1: slot free */
};

struct lease_gpu {
	enum lease_state state;
	uid_t uid;
	char user[64];
	pid_t last_pid;		/* the last writer (a restore's audit line) */
	struct lease_watch watch[LEASE_MAX_PIDS];
	unsigned nwatch;
	/*
	 * What to restore: the settings changed under the lease. The values
	 * they go back to are the device process's record (access/warden.c),
	 * which it read itself before the lease's first change of each: a
	 * restore names the setting only.
	 */
	bool has_limit, has_persist, gpu_clocks, mem_clocks;
	unsigned restores_left;
	/*
	 * A restore is never skipped: an op whose command failed (or could
	 * not be queued) stays in `pending` and the lease stays RESTORING,
	 * refusing others with `why`, until a retry of it succeeds.
	 */
	/*
	 * Writes claimed on the loop thread and not yet queued
	 * (leases_claim_done). The last watched process exiting in that
	 * window defers the restore (`restore_due`) until they are queued,
	 * so it runs after them and cannot miss what they change.
	 */
	unsigned claims;
	/*
	 * Writes claimed and not yet noted (leases_note, success or not): a
	 * lease under which every write failed ends when the last one is
	 * noted (lease_drop_if_unused). A write dropped before it ran is
	 * never noted, so its lease waits for its holder's exit, as any
	 * lease does.
	 */
	unsigned inflight;
	bool restore_due;
	const char *due_reason;		/* of restore_due (static) */
	const char *reason;	/* of the restore under way */
	unsigned pending;	/* bits of lease_ops[] left to (re)try */
	unsigned attempts;	/* rounds so far */
	bool retry_armed;
	struct timespec retry_at;	/* CLOCK_MONOTONIC */
	char why[ZERR_MSG_MAX + 48];	/* the last failure, "" for none */
	/*
	 * The releasing peer's handle (gate_writer) for a restore with reason
	 * "release": the device process runs a restore while the holder lives
	 * only for it (access/warden.h).
	 */
	uint64_t rel_handle;
	/* the energy ledger (leases_note starts it, lease_free_gpu ends it) */
	unsigned gen;			/* bumped by every FREE -> HELD */
	pid_t holder_pid;		/* the process that took it */
	char cgroup[IDENTITY_CGROUP_MAX];
	char label[LEASE_LABEL_MAX + 1];	/* leases_label's, "" none */
	unsigned settings;		/* GPU_SETTING_* changed under it */
	bool started;			/* its start was read (or tried) */
	bool start_ok;			/* start_mj is a reading */
	uint64_t start_mj;
	bool end_ok;			/* end_mj: read by the last restore */
	uint64_t end_mj;
	bool left;			/* ended with its settings not restored */
	struct timespec start_rt, start_mono;
};

/* A GPU's energy charged to nobody (the ledger; CLOCK-free: readings). */
struct ledger_gpu {
	bool based;			/* last_mj holds a reading */
	uint64_t last_mj;		/* the counter at the last boundary */
	uint64_t unleased_mj;
	bool seen;			/* seen_mj: the newest reading */
	uint64_t seen_mj;
};

/* A user's energy over every lease it held, per GPU; never reset. */
struct ledger_user {
	uid_t uid;
	char user[64];
	uint64_t *mj;			/* [ngpu] */
};

struct leases {
	struct node *node;
	pthread_mutex_t lock;
	pthread_cond_t idle;	/* a lease went FREE */
	struct lease_gpu *gpus;
	unsigned ngpu;
	int epfd, stopfd;
	int kickfd;		/* a retry was armed: recompute the timeout */
	pthread_t thread;
	bool started;
	bool stopping;		/* leases_stop: no retry is armed after */
	/* the ledger, under `lock` */
	struct ledger_gpu *ledger;	/* [ngpu] */
	struct ledger_user users[LEDGER_MAX_USERS];
	unsigned nusers;
	struct lease_record ended[LEDGER_ENDED];	/* a ring */
	unsigned nended;		/* ever ended; ended[nended % N] next */
	struct lease_waiter *waiters;	/* leases_release's */
	bool ledger_kept;		/* leases_seed_ledger: the device
					 * process keeps the ledger's file */
};

/* What a restore writes, one command each; bit i of `pending` is [i]. */
static const enum gpu_write_op lease_ops[] = { GPU_SET_POWER_LIMIT,
    GPU_SET_PERSISTENCE_MODE, GPU_RESET_GPU_LOCKED_CLOCKS,
    GPU_RESET_MEM_LOCKED_CLOCKS };
#define LEASE_NOPS (sizeof(lease_ops) / sizeof(lease_ops[0]))
#define LEASE_ALL_OPS ((1u << LEASE_NOPS) - 1)

static unsigned
lease_op_bit(enum gpu_write_op op)
{
	for (unsigned i = 0; i < LEASE_NOPS; i++)
		if (lease_ops[i] == op)
			return 1u << i;
	return 0;
}

/*
 * One restore command. It is queued for every setting at once, but decides
 * only when it runs (lease_restore_exec): by then every write the user
 * queued earlier on this GPU has run and been noted, since a device queue
 * runs writes in order and `complete` (the note) before the next `exec`.
 */
struct lease_restore {
	struct gpu_cmd cmd;	/* must stay first */
	struct leases *l;
	int (*exec)(struct work *w, void *device);	/* gpu_cmd's */
	struct audit_who who;
	const char *reason;
	unsigned attempt;	/* the round it belongs to, from 1 */
	bool skipped;		/* the user never changed this setting */
	struct timespec t0;
};
/* lease_restore_exec gets the command's struct work: gpu_cmd's first too */
static_assert(offsetof(struct lease_restore, cmd) == 0,
    "struct lease_restore: cmd must stay first");

static int
lease_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int
lease_restore_exec(struct work *w, void *device)
{
	struct lease_restore *r = (struct lease_restore *)w;
	struct lease_gpu *g = &r->l->gpus[r->cmd.gpu];
	bool go = false;

	pthread_mutex_lock(&r->l->lock);
	switch (r->cmd.write.op) {
	case GPU_SET_POWER_LIMIT:
		go = g->has_limit;
		break;
	case GPU_SET_PERSISTENCE_MODE:
		go = g->has_persist;
		break;
	case GPU_RESET_GPU_LOCKED_CLOCKS:
		go = g->gpu_clocks;
		break;
	case GPU_RESET_MEM_LOCKED_CLOCKS:
		go = g->mem_clocks;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&r->l->lock);
	if (!go) {
		r->skipped = true;
		r->cmd.rc = 0;
		return 0;
	}
	return r->exec(w, device);
}

static void lease_restore_done(struct gpu_cmd *cmd, void *arg);

/* Queues one restore command (lock held). Returns 0 or -1 (logged). */
static int
lease_queue(struct leases *l, unsigned gpu, enum gpu_write_op op,
    const char *reason)
{
	struct lease_gpu *g = &l->gpus[gpu];
	struct lease_restore *r = calloc(1, sizeof(*r));
	struct worker_batch wb;
	struct gpu_write w;
	struct zerr err;

	if (r == NULL) {
		zlog(ZLOG_ERROR, "gpu_restore_failed", "gpu=%u op=%s "
		    "error=\"out of memory\"", gpu, gpu_write_op_name(op));
		snprintf(g->why, sizeof(g->why), "%s: out of memory",
		    gpu_write_op_name(op));
		return -1;
	}
	memset(&w, 0, sizeof(w));
	w.op = op;
	w.writer = GPU_WRITER_RESTORE;
	w.writer_reason = reason;
	if (reason != NULL && strcmp(reason, "release") == 0)
		w.writer_handle = g->rel_handle;
	r->l = l;
	r->reason = reason;
	r->attempt = g->attempts;
	r->who.unix_peer = true;
	r->who.uid = g->uid;
	r->who.pid = g->last_pid;
	snprintf(r->who.user, sizeof(r->who.user), "%s", g->user);
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	gpu_cmd_init(&r->cmd, GPU_CMD_WRITE, gpu, lease_restore_done, r);
	gpu_cmd_set_write(&r->cmd, &w, NULL);
	/* the device process reads it for the line it writes */
	r->cmd.want_before = false;
	r->exec = r->cmd.work.exec;
	r->cmd.work.exec = lease_restore_exec;
	/* never refused for a full queue (filled by the holder, say): at
	 * most one restore command per setting per GPU is out at a time */
	r->cmd.work.unbounded = true;
	worker_batch_init(&wb);
	if (node_gpu_reserve(l->node, &wb, &r->cmd, &err) != 0) {
		char q[ZERR_MSG_MAX + 64];

		zlog(ZLOG_ERROR, "gpu_restore_failed", "gpu=%u op=%s error=%s",
		    gpu, gpu_write_op_name(op), zlog_quote(q, sizeof(q),
		    err.msg));
		/* the device process writes its line (node.h: node_audit) */
		if (audit_enabled())
			node_audit_unqueued(l->node, gpu, r->who.uid,
			    r->who.pid, (int)op, (int)err.kind, reason);
		snprintf(g->why, sizeof(g->why), "%s: %s",
		    gpu_write_op_name(op), err.msg);
		free(r);
		return -1;
	}
	g->restores_left++;
	worker_batch_submit(&wb);
	return 0;
}

/* ---- The energy ledger (lock held unless said) ---------------------------- */

/*
 * Reads GPU `gpu`'s cumulative energy counter, on the calling thread (a
 * device worker's, or the caller's: never with the lock held). -1 for a
 * GPU without a counter or a failed read.
 */
static int
lease_energy(struct leases *l, unsigned gpu, uint64_t *mj)
{
	struct node *n = l->node;
	struct zerr err;

	if (n->gpu.ops == NULL || n->gpu_info == NULL ||
	    !n->gpu_info[gpu].energy_available)
		return -1;
	return n->gpu.ops->get_energy_mj(&n->gpu, gpu, mj, &err);
}

/* The counter read `mj` with nobody's lease running: charged to nobody. */
static void
ledger_unleased(struct leases *l, unsigned gpu, uint64_t mj)
{
	struct ledger_gpu *lg = &l->ledger[gpu];

	/* a counter that went back (a driver reload) starts a new base */
	if (lg->based && mj >= lg->last_mj)
		lg->unleased_mj += mj - lg->last_mj;
	lg->based = true;
	lg->last_mj = mj;
}

/*
 * The user's slot, made at its first lease; past LEDGER_MAX_USERS - 1
 * users, the last slot sums the rest under "(other)". NULL: no memory.
 */
static struct ledger_user *
ledger_user(struct leases *l, uid_t uid, const char *user)
{
	struct ledger_user *u;

	for (unsigned i = 0; i < l->nusers; i++)
		if (l->users[i].uid == uid)
			return &l->users[i];
	if (l->nusers == LEDGER_MAX_USERS)
		return &l->users[LEDGER_MAX_USERS - 1];
	u = &l->users[l->nusers];
	if ((u->mj = calloc(l->ngpu ? l->ngpu : 1, sizeof(*u->mj))) == NULL)
		return NULL;
	if (l->nusers == LEDGER_MAX_USERS - 1) {
		u->uid = (uid_t)-1;
		snprintf(u->user, sizeof(u->user), "(other)");
	} else {
		u->uid = uid;
		snprintf(u->user, sizeof(u->user), "%s", user);
	}
	l->nusers++;
	return u;
}

void
lease_settings_format(unsigned settings, char *buf, size_t size)
{
	static const struct { unsigned bit; const char *name; } names[] = {
		{ GPU_SETTING_POWER_LIMIT, "power_limit" },
		{ GPU_SETTING_PERSISTENCE, "persistence" },
		{ GPU_SETTING_GPU_CLOCKS, "gpu_clocks" },
		{ GPU_SETTING_MEM_CLOCKS, "mem_clocks" },
	};
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int k;

		if (!(settings & names[i].bit))
			continue;
		k = snprintf(buf + len, size - len, "%s%s", len ? "," : "",
		    names[i].name);
		if (k < 0 || (size_t)k >= size - len)
			break;
		len += (size_t)k;
	}
}

static double
lease_seconds(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	    (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/*
 * g's record; `now_mj` (NULL: none) a reading taken while it is open, for
 * its energy so far.
 */
static void
lease_fill(const struct lease_gpu *g, unsigned gpu, const uint64_t *now_mj,
    struct lease_record *r)
{
	struct timespec now;

	memset(r, 0, sizeof(*r));
	r->gpu = gpu;
	r->uid = g->uid;
	snprintf(r->user, sizeof(r->user), "%s", g->user);
	r->pid = g->holder_pid;
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", g->cgroup);
	snprintf(r->label, sizeof(r->label), "%s", g->label);
	r->state = g->state == LEASE_RESTORING ? LEASE_REC_RESTORING :
	    LEASE_REC_HELD;
	r->settings = g->settings;
	if (!g->started)
		return;
	r->start = g->start_rt;
	clock_gettime(CLOCK_MONOTONIC, &now);
	r->duration_s = lease_seconds(&g->start_mono, &now);
	if (g->start_ok && now_mj != NULL && *now_mj >= g->start_mj) {
		r->energy_ok = true;
		r->energy_mj = *now_mj - g->start_mj;
	}
}

/*
 * The lease on `gpu` ends (FREE next): its record goes to the ended ring,
 * its energy to its user, an audit line and a log line are written, and
 * whoever waits for it (leases_release) is told.
 */
static void
ledger_end(struct leases *l, struct lease_gpu *g, unsigned gpu)
{
	struct lease_record *r = &l->ended[l->nended % LEDGER_ENDED];
	struct ledger_user *u;
	const char *reason;
	char settings[80], q[2 * IDENTITY_CGROUP_MAX];
	struct lease_waiter **wp;

	lease_fill(g, gpu, g->end_ok ? &g->end_mj : NULL, r);
	r->state = LEASE_REC_ENDED;
	r->reason = g->reason;
	clock_gettime(CLOCK_REALTIME, &r->end);
	l->nended++;
	if (g->end_ok) {
		l->ledger[gpu].seen = true;
		l->ledger[gpu].seen_mj = g->end_mj;
		if (r->energy_ok) {
			l->ledger[gpu].based = true;
			l->ledger[gpu].last_mj = g->end_mj;
		} else {
			/* no start reading: nobody's, as before it */
			ledger_unleased(l, gpu, g->end_mj);
		}
	}
	if (r->energy_ok && (u = ledger_user(l, g->uid, g->user)) != NULL)
		u->mj[gpu] += r->energy_mj;
	lease_settings_format(g->settings, settings, sizeof(settings));
	reason = g->reason ? g->reason : "ended";
	/*
	 * The device process writes its line (node.h: node_audit), and
	 * counts its energy in the ledger's copy it keeps (--state-dir):
	 * then told with or without an audit log.
	 */
	if (audit_enabled() || l->ledger_kept) {
		struct node_lease_line nl = { .gpu = gpu, .uid = g->uid,
		    .pid = g->holder_pid, .user = g->user, .cgroup = g->cgroup,
		    .label = g->label, .reason = reason,
		    .settings = g->settings, .left = g->left,
		    .energy_ok = r->energy_ok, .duration_s = r->duration_s,
		    .energy_mj = r->energy_mj };

		node_audit_lease_end(l->node, &nl);
	}
	zlog(ZLOG_INFO, "gpu_lease_ended", "gpu=%u uid=%u pid=%ld cgroup=%s "
	    "reason=%s duration_s=%.3f energy_j=%s%.3f settings=%s", gpu,
	    (unsigned)g->uid, (long)g->holder_pid, zlog_quote(q, sizeof(q),
	    g->cgroup), reason, r->duration_s, r->energy_ok ? "" : "-",
	    r->energy_ok ? (double)r->energy_mj / 1000 : 0.0,
	    settings[0] ? settings : "-");
	for (wp = &l->waiters; *wp != NULL;) {
		struct lease_waiter *w = *wp;

		if (w->gpu != gpu || w->gen != g->gen) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		w->ok = true;
		w->rec = *r;
		w->done(w->ctx);
	}
	g->started = g->start_ok = g->end_ok = g->left = false;
	g->settings = 0;
}

/* A restore failed (it is retried): whoever waits for g is told why. */
static void
ledger_restore_failed(struct leases *l, struct lease_gpu *g, unsigned gpu)
{
	struct lease_waiter **wp;

	for (wp = &l->waiters; *wp != NULL;) {
		struct lease_waiter *w = *wp;

		if (w->gpu != gpu || w->gen != g->gen) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		w->ok = false;
		zerr_set(&w->err, ZERR_CONFLICT, "GPU %u: restoring the "
		    "lease's settings failed (%s); it is retried, and the lease "
		    "holds until it succeeds", gpu, g->why);
		w->done(w->ctx);
	}
}

/* Stops watching the lease's processes. */
static void
lease_unwatch(struct leases *l, struct lease_gpu *g)
{
	for (unsigned i = 0; i < LEASE_MAX_PIDS; i++)
		if (g->watch[i].fd >= 0) {
			(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, g->watch[i].fd,
			    NULL);
			close(g->watch[i].fd);
			g->watch[i].fd = -1;
		}
	g->nwatch = 0;
}

static void
lease_reset(struct leases *l, struct lease_gpu *g)
{
	g->state = LEASE_FREE;
	g->has_limit = g->has_persist = g->gpu_clocks = g->mem_clocks = false;
	g->restores_left = 0;
	g->pending = 0;
	g->attempts = 0;
	g->retry_armed = false;
	g->inflight = 0;
	g->why[0] = '\0';
	pthread_cond_broadcast(&l->idle);
}

static void
lease_free_gpu(struct leases *l, struct lease_gpu *g, unsigned gpu)
{
	ledger_end(l, g, gpu);
	zlog(ZLOG_INFO, "gpu_lease_released", "gpu=%u uid=%u", gpu,
	    (unsigned)g->uid);
	lease_reset(l, g);
}

/*
 * A lease under which nothing changed (every write it was taken for
 * failed: a power limit out of range, say) ends at once: there is nothing
 * to restore and no energy to charge, and other users are not kept out by
 * a request that changed nothing. Lock held; a no-op for any other lease
 * (one of another user, or with a write still to run or noted).
 */
static void
lease_drop_if_unused(struct leases *l, struct lease_gpu *g, unsigned gpu,
    uid_t uid)
{
	if (g->state != LEASE_HELD || g->uid != uid || g->claims != 0 ||
	    g->inflight != 0 || g->settings != 0 || g->started ||
	    g->restore_due)
		return;
	lease_unwatch(l, g);
	zlog(ZLOG_INFO, "gpu_lease_dropped", "gpu=%u uid=%u reason=no_change",
	    gpu, (unsigned)g->uid);
	g->started = g->start_ok = g->end_ok = g->left = false;
	g->settings = 0;
	lease_reset(l, g);
}

/* Queues the restore of every op in `pending` (lock held). */
static void
lease_restore_round(struct leases *l, unsigned gpu);

/*
 * The last restore command of a round is done (lock held): the lease ends
 * when nothing is left to restore; otherwise a retry of what failed is
 * armed, later each time, and the lease keeps refusing others. It is never
 * freed with a setting unrestored.
 */
static void
lease_settle(struct leases *l, unsigned gpu)
{
	struct lease_gpu *g = &l->gpus[gpu];
	char q[sizeof(g->why) + 16];
	unsigned ms = LEASE_RETRY_FIRST_MS;
	uint64_t one = 1;

	if (g->pending == 0) {
		lease_free_gpu(l, g, gpu);
		return;
	}
	ledger_restore_failed(l, g, gpu);
	if (l->stopping) {
		zlog(ZLOG_ERROR, "gpu_restore_abandoned", "gpu=%u uid=%u "
		    "attempts=%u error=%s msg=\"zeusd is stopping; the settings "
		    "stay as they are\"", gpu, (unsigned)g->uid, g->attempts,
		    zlog_quote(q, sizeof(q), g->why));
		return;
	}
	for (unsigned i = 1; i < g->attempts && ms < LEASE_RETRY_MAX_MS; i++)
		ms *= 2;
	if (ms > LEASE_RETRY_MAX_MS)
		ms = LEASE_RETRY_MAX_MS;
	clock_gettime(CLOCK_MONOTONIC, &g->retry_at);
	g->retry_at.tv_sec += ms / 1000;
	g->retry_at.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (g->retry_at.tv_nsec >= 1000000000L) {
		g->retry_at.tv_sec++;
		g->retry_at.tv_nsec -= 1000000000L;
	}
	g->retry_armed = true;
	zlog(ZLOG_WARN, "gpu_restore_retry", "gpu=%u uid=%u attempt=%u "
	    "in_ms=%u error=%s msg=\"the lease holds until the restore "
	    "succeeds\"", gpu, (unsigned)g->uid, g->attempts + 1, ms,
	    zlog_quote(q, sizeof(q), g->why));
	/* the watcher sleeps with the timeout of the retries it knew */
	if (write(l->kickfd, &one, sizeof(one)) != sizeof(one))
		zlog(ZLOG_WARN, "lease_watcher_kick_failed", "error=\"%s\"",
		    strerror(errno));
}

static void
lease_restore_round(struct leases *l, unsigned gpu)
{
	struct lease_gpu *g = &l->gpus[gpu];

	g->attempts++;
	for (unsigned i = 0; i < LEASE_NOPS; i++)
		if ((g->pending & (1u << i)) &&
		    lease_queue(l, gpu, lease_ops[i], g->reason) == 0)
			g->pending &= ~(1u << i);
	if (g->restores_left == 0)
		lease_settle(l, gpu);
}

/* HELD -> RESTORING: queues the restore of every setting (lock held). */
static void
lease_restore(struct leases *l, unsigned gpu, const char *reason)
{
	struct lease_gpu *g = &l->gpus[gpu];

	assert(g->state == LEASE_HELD);
	g->state = LEASE_RESTORING;
	g->restore_due = false;
	lease_unwatch(l, g);
	zlog(ZLOG_INFO, "gpu_restore_started", "gpu=%u uid=%u reason=%s", gpu,
	    (unsigned)g->uid, reason);
	g->reason = reason;
	g->pending = LEASE_ALL_OPS;
	g->attempts = 0;
	g->why[0] = '\0';
	lease_restore_round(l, gpu);
}

static void
lease_restore_done(struct gpu_cmd *cmd, void *arg)
{
	struct lease_restore *r = arg;
	struct leases *l = r->l;
	struct lease_gpu *g = &l->gpus[cmd->gpu];
	char q[ZERR_MSG_MAX + 64];
	uint64_t end_mj = 0;
	bool last, end_ok = false;

	/*
	 * The last restore of a round may end the lease: its energy counter
	 * is read now, on this worker, before the lock (a device call).
	 */
	pthread_mutex_lock(&l->lock);
	last = g->restores_left == 1;
	pthread_mutex_unlock(&l->lock);
	if (last)
		end_ok = lease_energy(l, cmd->gpu, &end_mj) == 0;
	if (r->skipped)
		goto out;
	if (cmd->rc != 0)
		zlog(ZLOG_ERROR, "gpu_restore_failed", "gpu=%u op=%s uid=%u "
		    "attempt=%u error=%s", cmd->gpu, gpu_cmd_name(cmd),
		    (unsigned)r->who.uid, r->attempt, zlog_quote(q,
		    sizeof(q), cmd->err.msg));
	else	/* its audit line is the device process's, which ran it */
		zlog(ZLOG_INFO, "gpu_restored", "gpu=%u op=%s uid=%u reason=%s",
		    cmd->gpu, gpu_cmd_name(cmd), (unsigned)r->who.uid,
		    r->reason);
out:
	pthread_mutex_lock(&l->lock);
	if (last) {
		g->end_ok = end_ok;
		g->end_mj = end_mj;
	}
	/* the lease stays RESTORING until its last restore succeeded */
	assert(g->state == LEASE_RESTORING && g->restores_left > 0);
	if (!r->skipped && cmd->rc != 0) {
		g->pending |= lease_op_bit(cmd->write.op);
		/* the driver's error names the GPU and the operation */
		snprintf(g->why, sizeof(g->why), "%s", cmd->err.msg);
	}
	if (g->restores_left > 0 && --g->restores_left == 0)
		lease_settle(l, cmd->gpu);
	pthread_mutex_unlock(&l->lock);
	free(r);
}

/* A slot may have been reused since epoll_wait returned: ask again. */
static bool
lease_exited(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, 0) == 1;
}

/* Whether g's armed retry is due: 0, else > 0. */
static long long
lease_retry_timeout_one(const struct lease_gpu *g)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec != g->retry_at.tv_sec)
		return now.tv_sec < g->retry_at.tv_sec ? 1 : 0;
	return now.tv_nsec < g->retry_at.tv_nsec ? 1 : 0;
}

/*
 * Milliseconds until the first armed retry is due (0: one is), -1 for
 * none (lock held).
 */
static int
lease_retry_timeout(struct leases *l)
{
	struct timespec now;
	long long best = -1;

	clock_gettime(CLOCK_MONOTONIC, &now);
	for (unsigned i = 0; i < l->ngpu; i++) {
		const struct lease_gpu *g = &l->gpus[i];
		long long ms;

		if (!g->retry_armed)
			continue;
		ms = (long long)(g->retry_at.tv_sec - now.tv_sec) * 1000 +
		    (g->retry_at.tv_nsec - now.tv_nsec + 999999) / 1000000;
		if (ms < 0)
			ms = 0;
		if (best < 0 || ms < best)
			best = ms;
	}
	return best > 60000 ? 60000 : (int)best;
}

/* Starts the retries that are due (lock held). */
static void
lease_retry_due(struct leases *l)
{
	for (unsigned i = 0; i < l->ngpu; i++) {
		struct lease_gpu *g = &l->gpus[i];

		if (!g->retry_armed || lease_retry_timeout_one(g) > 0)
			continue;
		g->retry_armed = false;
		zlog(ZLOG_INFO, "gpu_restore_retrying", "gpu=%u uid=%u "
		    "attempt=%u", i, (unsigned)g->uid, g->attempts + 1);
		lease_restore_round(l, i);
	}
}

static void *
lease_thread(void *arg)
{
	struct leases *l = arg;
	struct epoll_event ev[16];

	for (;;) {
		int n, timeout;

		pthread_mutex_lock(&l->lock);
		timeout = lease_retry_timeout(l);
		pthread_mutex_unlock(&l->lock);
		n = epoll_wait(l->epfd, ev, 16, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			zlog(ZLOG_ERROR, "lease_watcher_failed", "error=\"%s\"",
			    strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			struct lease_watch *w = ev[i].data.ptr;
			struct lease_gpu *g;

			if (w == NULL)
				return NULL;	/* the stop eventfd */
			if (w == (struct lease_watch *)&l->kickfd) {
				uint64_t v;

				if (read(l->kickfd, &v, sizeof(v)) < 0 &&
				    errno != EAGAIN)
					zlog(ZLOG_WARN, "lease_watcher_kick_"
					    "failed", "error=\"%s\"",
					    strerror(errno));
				continue;
			}
			pthread_mutex_lock(&l->lock);
			g = &l->gpus[w->gpu];
			if (w->fd >= 0 && lease_exited(w->fd)) {
				(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd,
				    NULL);
				close(w->fd);
				w->fd = -1;
				g->nwatch--;
				zlog(ZLOG_INFO, "gpu_lease_process_exited",
				    "gpu=%u uid=%u pid=%ld left=%u", w->gpu,
				    (unsigned)g->uid, (long)w->pid, g->nwatch);
				if (g->nwatch == 0 && g->state == LEASE_HELD &&
				    g->claims > 0) {
					g->restore_due = true;
					g->due_reason = "process_exit";
				}
				else if (g->nwatch == 0 &&
				    g->state == LEASE_HELD)
					lease_restore(l, w->gpu,
					    "process_exit");
			}
			pthread_mutex_unlock(&l->lock);
		}
		pthread_mutex_lock(&l->lock);
		lease_retry_due(l);
		pthread_mutex_unlock(&l->lock);
	}
}

int
leases_create(struct node *node, struct leases **out, struct zerr *err)
{
	struct leases *l = calloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (l == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	l->node = node;
	l->ngpu = node->ngpu;
	l->epfd = l->stopfd = l->kickfd = -1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
	if ((l->gpus = calloc(l->ngpu ? l->ngpu : 1, sizeof(*l->gpus))) ==
	    NULL || (l->ledger = calloc(l->ngpu ? l->ngpu : 1,
	    sizeof(*l->ledger))) == NULL)
		goto fail;
	for (unsigned i = 0; i < l->ngpu; i++)
		for (unsigned j = 0; j < LEASE_MAX_PIDS; j++)
			l->gpus[i].watch[j].fd = -1;
	if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (l->stopfd = eventfd(0, EFD_CLOEXEC)) < 0 ||
	    (l->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stopfd, &ev) != 0)
		goto fail;
	ev.data.ptr = &l->kickfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->kickfd, &ev) != 0)
		goto fail;
	/* a kernel without pidfd_open (before 5.3) cannot watch */
	{
		int fd = lease_pidfd_open(getpid());

		if (fd < 0) {
			zerr_set(err, ZERR_INTERNAL, "--gpu-leases needs "
			    "pidfd_open(2) (Linux 5.3 or later): %s",
			    strerror(errno));
			leases_destroy(l);
			return -1;
		}
		close(fd);
	}
	if (pthread_create(&l->thread, NULL, lease_thread, l) != 0)
		goto fail;
	l->started = true;
	*out = l;
	return 0;
fail:
	zerr_set(err, ZERR_INTERNAL, "cannot start the lease watcher: %s",
	    strerror(errno));
	leases_destroy(l);
	return -1;
}

void
leases_stop(struct leases *l)
{
	uint64_t one = 1;

	if (l == NULL || !l->started)
		return;
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	pthread_mutex_unlock(&l->lock);
	if (write(l->stopfd, &one, sizeof(one)) != sizeof(one))
		zlog(ZLOG_WARN, "lease_watcher_stop_failed", NULL);
	pthread_join(l->thread, NULL);
	l->started = false;
	/* retries that were waiting for their time: none will run now */
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->ngpu; i++) {
		struct lease_gpu *g = &l->gpus[i];
		char q[sizeof(g->why) + 16];

		if (!g->retry_armed)
			continue;
		g->retry_armed = false;
		zlog(ZLOG_ERROR, "gpu_restore_abandoned", "gpu=%u uid=%u "
		    "attempts=%u error=%s msg=\"zeusd is stopping; the settings "
		    "stay as they are\"", i, (unsigned)g->uid, g->attempts,
		    zlog_quote(q, sizeof(q), g->why));
	}
	pthread_mutex_unlock(&l->lock);
}

void
leases_end_all(struct leases *l, bool kept)
{
	if (l == NULL)
		return;
	for (unsigned i = 0; i < l->ngpu; i++) {
		struct lease_gpu *g = &l->gpus[i];
		uint64_t mj = 0;
		bool held, ok;

		pthread_mutex_lock(&l->lock);
		held = g->state == LEASE_HELD && g->started;
		pthread_mutex_unlock(&l->lock);
		if (!held)
			continue;
		if (kept) {
			/* the journal holds it: the next zeusd carries on */
			zlog(ZLOG_INFO, "gpu_lease_kept", "gpu=%u uid=%u "
			    "msg=\"the lease stays in the journal; the next "
			    "zeusd takes it back\"", i, (unsigned)g->uid);
			continue;
		}
		ok = lease_energy(l, i, &mj) == 0;	/* a device call */
		pthread_mutex_lock(&l->lock);
		if (g->state == LEASE_HELD && g->started) {
			g->end_ok = ok;
			g->end_mj = mj;
			g->reason = "shutdown";
			g->left = true;
			lease_free_gpu(l, g, i);
		}
		pthread_mutex_unlock(&l->lock);
	}
}

void
leases_destroy(struct leases *l)
{
	if (l == NULL)
		return;
	leases_stop(l);
	for (unsigned i = 0; i < l->ngpu; i++)
		for (unsigned j = 0; j < LEASE_MAX_PIDS; j++)
			if (l->gpus[i].watch[j].fd >= 0)
				close(l->gpus[i].watch[j].fd);
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->stopfd >= 0)
		close(l->stopfd);
	if (l->kickfd >= 0)
		close(l->kickfd);
	pthread_cond_destroy(&l->idle);
	pthread_mutex_destroy(&l->lock);
	for (unsigned u = 0; u < l->nusers; u++)
		free(l->users[u].mj);
	free(l->ledger);
	free(l->gpus);
	free(l);
}

/*
 * Adds the peer's process to the GPU's watch set (lock held): a duplicate
 * of the pidfd the connection took at accept time (peer_take_pidfd), never
 * a pidfd opened from the pid number now, which may name another process.
 * The caller checked that the process has not exited.
 */
static int
lease_watch_peer(struct leases *l, struct lease_gpu *g, unsigned gpu,
    const struct peer *p, struct zerr *err)
{
	struct lease_watch *slot = NULL;
	struct epoll_event ev;

	for (unsigned i = 0; i < LEASE_MAX_PIDS; i++) {
		/* one number, both alive: the same process (the peer's is
		 * alive, so a process that held the number before is gone,
		 * and its pidfd polls as exited) */
		if (g->watch[i].fd >= 0 && g->watch[i].pid == p->pid &&
		    !lease_exited(g->watch[i].fd))
			return 0;
		if (g->watch[i].fd < 0 && slot == NULL)
			slot = &g->watch[i];
	}
	if (slot == NULL)
		return zerr_set(err, ZERR_BUSY, "GPU %u: more than %d processes "
		    "hold its lease", gpu, LEASE_MAX_PIDS);
	slot->fd = fcntl(p->pidfd, F_DUPFD_CLOEXEC, 0);
	if (slot->fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "GPU %u: the requesting "
		    "process (pid %ld) cannot be watched: %s", gpu,
		    (long)p->pid, strerror(errno));
	slot->l = l;
	slot->gpu = gpu;
	slot->pid = p->pid;
	ev.events = EPOLLIN;
	ev.data.ptr = slot;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, slot->fd, &ev) != 0) {
		close(slot->fd);
		slot->fd = -1;
		return zerr_set(err, ZERR_INTERNAL, "GPU %u: cannot watch pid "
		    "%ld: %s", gpu, (long)p->pid, strerror(errno));
	}
	g->nwatch++;
	g->last_pid = p->pid;
	return 0;
}

/*
 * The node policy's max_leased_gpus (lock held): the GPUs `uid` holds
 * leases on, with the free ones of `gpus` it would take now, at most `max`.
 * The device process checks the same (warden.c); this answers first.
 */
static int
lease_check_max(struct leases *l, uid_t uid, const uint32_t *gpus,
    unsigned n, unsigned max, struct zerr *err)
{
	unsigned held = 0, taking = 0;

	for (unsigned i = 0; i < l->ngpu; i++)
		held += l->gpus[i].state != LEASE_FREE && l->gpus[i].uid == uid;
	for (unsigned i = 0; i < n; i++) {
		bool dup = false;

		for (unsigned k = 0; k < i; k++)
			dup |= gpus[k] == gpus[i];
		if (!dup && gpus[i] < l->ngpu &&
		    l->gpus[gpus[i]].state == LEASE_FREE)
			taking++;
	}
	if (taking == 0 || held + taking <= max)
		return 0;
	return lease_text_max(err, uid, held, taking, max);
}

void
leases_seed_ledger(struct leases *l, const struct ledger_store *s)
{
	unsigned ngpu = s->ngpu < l->ngpu ? s->ngpu : l->ngpu;

	if (ngpu > LEDGER_STORE_GPUS)
		ngpu = LEDGER_STORE_GPUS;
	pthread_mutex_lock(&l->lock);
	l->ledger_kept = true;
	for (unsigned i = 0; i < s->nusers && i < LEDGER_STORE_USERS; i++) {
		const struct ledger_store_user *su = &s->users[i];
		char name[LEDGER_STORE_NAME];
		struct ledger_user *u;

		snprintf(name, sizeof(name), "%.*s", LEDGER_STORE_NAME - 1,
		    su->name);
		/* in the file's order: "(other)" comes 256th, as it was */
		if ((u = ledger_user(l, (uid_t)su->uid, name)) == NULL)
			break;
		for (unsigned g = 0; g < ngpu; g++)
			u->mj[g] = ledger_store_sat_add(u->mj[g], su->mj[g]);
	}
	for (unsigned g = 0; g < ngpu; g++) {
		struct ledger_gpu *lg = &l->ledger[g];

		lg->unleased_mj = ledger_store_sat_add(lg->unleased_mj,
		    s->gpu[g].unleased_mj);
		if (s->gpu[g].based && !lg->based) {
			lg->based = true;
			lg->last_mj = s->gpu[g].last_mj;
		}
	}
	pthread_mutex_unlock(&l->lock);
	zlog(ZLOG_INFO, "ledger_continued", "users=%u gpus=%u", s->nusers <
	    LEDGER_STORE_USERS ? s->nusers : LEDGER_STORE_USERS, ngpu);
}

/* CLOCK_MONOTONIC `ms` milliseconds ago (a lease begun before a restart). */
static struct timespec
lease_mono_ago(uint64_t ms)
{
	struct timespec t;
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &t);
	ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
	ns = ms <= ns / 1000000u ? ns - ms * 1000000u : 0;
	t.tv_sec = (time_t)(ns / 1000000000u);
	t.tv_nsec = (long)(ns % 1000000000u);
	return t;
}

int
leases_adopt(struct leases *l, unsigned gpu, const struct lease_adopted *a,
    struct zerr *err)
{
	struct lease_gpu *g;
	struct timespec rt;
	uint64_t now_ms;
	unsigned k = 0;
	int rc = 0;

	if (gpu >= l->ngpu || !a->held || a->npid > LEASE_ADOPT_PIDS) {
		for (unsigned i = 0; i < a->npid && i < LEASE_ADOPT_PIDS; i++)
			close(a->fd[i]);
		return zerr_set(err, ZERR_INVALID, "no lease of GPU %u to take "
		    "back", gpu);
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	now_ms = (uint64_t)rt.tv_sec * 1000 + (uint64_t)rt.tv_nsec / 1000000;
	pthread_mutex_lock(&l->lock);
	g = &l->gpus[gpu];
	lease_unwatch(l, g);
	g->state = LEASE_HELD;
	g->uid = a->uid;
	g->gen++;
	g->holder_pid = a->npid > 0 ? a->pid[0] : 0;
	g->last_pid = g->holder_pid;
	snprintf(g->user, sizeof(g->user), "%s", a->user);
	snprintf(g->cgroup, sizeof(g->cgroup), "%s", a->cgroup);
	snprintf(g->label, sizeof(g->label), "%s", a->label);
	g->has_limit = a->has_limit;
	g->has_persist = a->has_persist;
	g->gpu_clocks = a->gpu_clocks;
	g->mem_clocks = a->mem_clocks;
	g->settings = (a->has_limit ? GPU_SETTING_POWER_LIMIT : 0) |
	    (a->has_persist ? GPU_SETTING_PERSISTENCE : 0) |
	    (a->gpu_clocks ? GPU_SETTING_GPU_CLOCKS : 0) |
	    (a->mem_clocks ? GPU_SETTING_MEM_CLOCKS : 0);
	/* its energy and span count from its start before the restart */
	g->started = true;
	g->start_ok = a->has_start && a->energy_ok;
	g->start_mj = a->energy_mj;
	g->end_ok = g->left = false;
	if (a->has_start && a->started_ms <= now_ms) {
		g->start_rt.tv_sec = (time_t)(a->started_ms / 1000);
		g->start_rt.tv_nsec = (long)(a->started_ms % 1000) * 1000000L;
		g->start_mono = lease_mono_ago(now_ms - a->started_ms);
	} else {
		g->start_rt = rt;
		clock_gettime(CLOCK_MONOTONIC, &g->start_mono);
	}
	for (unsigned i = 0; i < a->npid; i++) {
		struct lease_watch *slot = &g->watch[k];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = slot };

		slot->l = l;
		slot->gpu = gpu;
		slot->pid = a->pid[i];
		slot->fd = a->fd[i];
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, slot->fd, &ev) != 0) {
			rc = zerr_set(err, ZERR_INTERNAL, "GPU %u: cannot watch "
			    "pid %ld: %s", gpu, (long)a->pid[i],
			    strerror(errno));
			close(slot->fd);
			slot->fd = -1;
			continue;
		}
		k++;
	}
	g->nwatch = k;
	(void)ledger_user(l, g->uid, g->user);	/* its /metrics series */
	zlog(ZLOG_INFO, "gpu_lease_taken_back", "gpu=%u uid=%u processes=%u",
	    gpu, (unsigned)g->uid, k);
	/* nothing left to wait for: put back now (the device process says
	 * so too: none of the holder's processes runs) */
	if (k == 0)
		lease_restore(l, gpu, "process_exit");
	pthread_mutex_unlock(&l->lock);
	return rc;
}

int
leases_claim(struct leases *l, const struct peer *p,
    const struct identity *id, const uint32_t *gpus, unsigned n,
    unsigned max_gpus, struct zerr *err)
{
	const char *user = id != NULL ? id->user : NULL;
	bool unix_user = p != NULL && p->kind == PEER_UNIX;
	int rc = 0;

	if (unix_user && p->uid == 0)
		return 0;		/* root: never refused, never leases */
	/*
	 * A process in a pid namespace that zeusd's cannot see (zeusd in a
	 * container, the client outside or in a sibling one) comes with pid
	 * 0 from SO_PEERCRED: no number to log, audit or tell apart from
	 * another such process (lease_watch_peer), no /proc entry for its
	 * name and cgroup. It cannot hold a lease, so it cannot write.
	 */
	if (unix_user && p->pid <= 0)
		return zerr_set(err, ZERR_FORBIDDEN, "the process that opened "
		    "this connection is in a pid namespace zeusd cannot see "
		    "(its pid reads as 0); a GPU lease is bound to a process "
		    "zeusd can watch, so with --gpu-leases GPU settings can "
		    "only be changed from zeusd's pid namespace or one below "
		    "it");
	/*
	 * The lease would watch the process that opened this connection. If
	 * it has exited (a child that connected and handed the socket to its
	 * parent), nothing is left to watch: its pid number may already be
	 * another process's. Refused before anything is taken.
	 */
	if (unix_user && peer_exited(p))
		return zerr_set(err, ZERR_CONFLICT, "the process that opened "
		    "this connection (pid %ld) has exited; a GPU lease is "
		    "bound to that process, so GPU settings may only be "
		    "changed over a connection whose own process is alive",
		    (long)p->pid);
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < n && rc == 0; i++) {
		struct lease_gpu *g;

		if (gpus[i] >= l->ngpu)
			continue;
		g = &l->gpus[gpus[i]];
		if (g->state == LEASE_RESTORING && g->why[0] != '\0' &&
		    (!unix_user || g->uid != p->uid))
			rc = lease_text_restore_failed(err, gpus[i], g->user,
			    g->uid, g->why, g->attempts,
			    LEASE_RETRY_MAX_MS / 1000);
		else if (g->state == LEASE_RESTORING && g->why[0] != '\0')
			rc = zerr_set(err, ZERR_CONFLICT, "GPU %u: restoring "
			    "your previous settings failed (%s); it is retried "
			    "(attempts so far: %u), and the GPU is refused "
			    "until it succeeds", gpus[i], g->why, g->attempts);
		else if (g->state != LEASE_FREE &&
		    (!unix_user || g->uid != p->uid))
			rc = lease_text_held(err, gpus[i], g->user, g->uid,
			    g->state == LEASE_RESTORING);
		else if (g->state == LEASE_RESTORING)
			rc = zerr_set(err, ZERR_CONFLICT, "GPU %u: your "
			    "previous settings are being restored; retry",
			    gpus[i]);
	}
	if (rc == 0 && unix_user && max_gpus > 0)
		rc = lease_check_max(l, p->uid, gpus, n, max_gpus, err);
	for (unsigned i = 0; i < n && rc == 0 && unix_user; i++) {
		struct lease_gpu *g;

		if (gpus[i] >= l->ngpu)
			continue;
		g = &l->gpus[gpus[i]];
		if (g->state == LEASE_FREE) {
			g->state = LEASE_HELD;
			g->uid = p->uid;
			g->gen++;
			g->holder_pid = p->pid;
			g->started = g->start_ok = g->end_ok = false;
			g->settings = 0;
			g->label[0] = '\0';
			snprintf(g->cgroup, sizeof(g->cgroup), "%s",
			    id != NULL ? id->cgroup : "");
			snprintf(g->user, sizeof(g->user), "%s",
			    user != NULL ? user : "");
			zlog(ZLOG_INFO, "gpu_lease_taken", "gpu=%u uid=%u "
			    "pid=%ld", gpus[i], (unsigned)p->uid, (long)p->pid);
		}
		rc = lease_watch_peer(l, g, gpus[i], p, err);
		if (rc != 0 && g->nwatch == 0)
			lease_restore(l, gpus[i], "claim_failed");
	}
	for (unsigned i = 0; i < n && rc == 0 && unix_user; i++)
		if (gpus[i] < l->ngpu) {
			l->gpus[gpus[i]].claims++;
			l->gpus[gpus[i]].inflight++;
		}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void
leases_label(struct leases *l, const struct peer *p, const uint32_t *gpus,
    unsigned n, const char *label)
{
	if (l == NULL || p == NULL || p->kind != PEER_UNIX || p->uid == 0)
		return;
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < n; i++)
		if (gpus[i] < l->ngpu && l->gpus[gpus[i]].state != LEASE_FREE &&
		    l->gpus[gpus[i]].uid == p->uid)
			snprintf(l->gpus[gpus[i]].label,
			    sizeof(l->gpus[gpus[i]].label), "%s", label);
	pthread_mutex_unlock(&l->lock);
}

void
leases_claim_done(struct leases *l, const struct peer *p,
    const uint32_t *gpus, unsigned n)
{
	if (l == NULL || p == NULL || p->kind != PEER_UNIX || p->uid == 0)
		return;
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < n; i++) {
		struct lease_gpu *g;

		if (gpus[i] >= l->ngpu)
			continue;
		g = &l->gpus[gpus[i]];
		assert(g->claims > 0);
		if (g->claims > 0)
			g->claims--;
		/* its writes may all have failed before they were queued */
		lease_drop_if_unused(l, g, gpus[i], p->uid);
		if (g->claims > 0 || !g->restore_due)
			continue;
		g->restore_due = false;
		/* a process of the user may have joined meanwhile (a
		 * release is done whatever joined) */
		if (g->state == LEASE_HELD && (g->nwatch == 0 ||
		    strcmp(g->due_reason, "release") == 0))
			lease_restore(l, gpus[i], g->due_reason);
	}
	pthread_mutex_unlock(&l->lock);
}

void
leases_note(struct leases *l, bool unix_peer, uid_t uid,
    const struct gpu_cmd *cmd)
{
	struct lease_gpu *g;
	unsigned t, gen = 0;
	bool start = false;
	uint64_t mj = 0;
	int rc;

	if (l == NULL || !unix_peer || uid == 0 || cmd->gpu >= l->ngpu)
		return;
	t = gpu_write_touches(cmd->write.op);
	pthread_mutex_lock(&l->lock);
	g = &l->gpus[cmd->gpu];
	if (g->state != LEASE_FREE && g->uid == uid && g->inflight > 0)
		g->inflight--;
	if (cmd->rc != 0) {
		lease_drop_if_unused(l, g, cmd->gpu, uid);
		pthread_mutex_unlock(&l->lock);
		return;
	}
	/* RESTORING too: a write queued before the death is still noted
	 * before the restore runs (lease_restore_exec) */
	if (g->state != LEASE_FREE && g->uid == uid) {
		if (t & GPU_SETTING_POWER_LIMIT)
			g->has_limit = true;
		if (t & GPU_SETTING_PERSISTENCE)
			g->has_persist = true;
		if (t & GPU_SETTING_GPU_CLOCKS)
			g->gpu_clocks = true;
		if (t & GPU_SETTING_MEM_CLOCKS)
			g->mem_clocks = true;
		g->settings |= t;
		/* the lease's first change: its energy starts here */
		if (g->state == LEASE_HELD && !g->started) {
			g->started = true;
			start = true;
			gen = g->gen;
		}
	}
	pthread_mutex_unlock(&l->lock);
	if (!start)
		return;
	/* this worker runs the GPU's commands: no restore runs meanwhile */
	rc = lease_energy(l, cmd->gpu, &mj);
	pthread_mutex_lock(&l->lock);
	if (g->gen == gen && g->started) {
		clock_gettime(CLOCK_REALTIME, &g->start_rt);
		clock_gettime(CLOCK_MONOTONIC, &g->start_mono);
		g->start_ok = rc == 0;
		g->start_mj = mj;
		if (rc == 0) {
			ledger_unleased(l, cmd->gpu, mj);	/* up to now */
			l->ledger[cmd->gpu].seen = true;
			l->ledger[cmd->gpu].seen_mj = mj;
			(void)ledger_user(l, g->uid, g->user);	/* a series */
		}
	}
	pthread_mutex_unlock(&l->lock);
}

int
leases_release(struct leases *l, const struct peer *p, uint64_t handle,
    const uint32_t *gpus, unsigned n, struct lease_waiter *w,
    uint32_t *not_leased, unsigned *nnot, struct zerr *err)
{
	bool unix_peer = p != NULL && p->kind == PEER_UNIX;
	bool root = unix_peer && p->uid == 0;
	unsigned k = 0;

	*nnot = 0;
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < n; i++) {
		const struct lease_gpu *g;

		if (gpus[i] >= l->ngpu)
			continue;
		g = &l->gpus[gpus[i]];
		if (g->state != LEASE_FREE && !root &&
		    (!unix_peer || g->uid != p->uid)) {
			lease_text_not_yours(err, gpus[i], g->user, g->uid);
			pthread_mutex_unlock(&l->lock);
			return -1;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct lease_gpu *g;

		if (gpus[i] >= l->ngpu)
			continue;
		g = &l->gpus[gpus[i]];
		if (g->state == LEASE_FREE) {
			not_leased[(*nnot)++] = gpus[i];
			continue;
		}
		w[k].gpu = gpus[i];
		w[k].gen = g->gen;
		w[k].next = l->waiters;
		l->waiters = &w[k];
		k++;
		zlog(ZLOG_INFO, "gpu_lease_release", "gpu=%u uid=%u by_uid=%u",
		    gpus[i], (unsigned)g->uid, (unsigned)p->uid);
		g->rel_handle = handle;
		/* a write of the holder between claim and queue: after it */
		if (g->state == LEASE_HELD && g->claims > 0) {
			g->restore_due = true;
			g->due_reason = "release";
		} else if (g->state == LEASE_HELD)
			lease_restore(l, gpus[i], "release");
	}
	pthread_mutex_unlock(&l->lock);
	return (int)k;
}

void
leases_view(struct leases *l, const uint64_t *mj, const bool *ok,
    struct lease_view *v)
{
	v->ncur = 0;
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->ngpu; i++) {
		struct lease_gpu *g = &l->gpus[i];
		struct ledger_gpu *lg = &l->ledger[i];

		if (ok[i]) {
			lg->seen = true;
			lg->seen_mj = mj[i];
			/* a GPU nobody's lease runs on: its energy is nobody's */
			if (g->state == LEASE_FREE || !g->started ||
			    !g->start_ok)
				ledger_unleased(l, i, mj[i]);
		}
		if (g->state != LEASE_FREE)
			lease_fill(g, i, ok[i] ? &mj[i] : NULL,
			    &v->cur[v->ncur++]);
		v->unleased_ok[i] = lg->based;
		v->unleased_mj[i] = lg->unleased_mj;
	}
	v->nended = 0;
	for (unsigned k = 0; k < LEDGER_ENDED && k < l->nended; k++)
		v->ended[v->nended++] = l->ended[(l->nended - 1 - k) %
		    LEDGER_ENDED];
	pthread_mutex_unlock(&l->lock);
}

void
leases_users(struct leases *l, void (*each)(void *arg, uid_t uid,
    const char *user, unsigned gpu, uint64_t mj), void *arg)
{
	pthread_mutex_lock(&l->lock);
	for (unsigned u = 0; u < l->nusers; u++) {
		const struct ledger_user *lu = &l->users[u];

		for (unsigned i = 0; i < l->ngpu; i++) {
			const struct lease_gpu *g = &l->gpus[i];
			const struct ledger_gpu *lg = &l->ledger[i];
			uint64_t mj = lu->mj[i];

			/* an open lease's energy so far, as last read */
			if (g->state != LEASE_FREE && g->start_ok &&
			    lg->seen && lg->seen_mj >= g->start_mj &&
			    (g->uid == lu->uid || (lu->uid == (uid_t)-1 &&
			    u == LEDGER_MAX_USERS - 1)))
				mj += lg->seen_mj - g->start_mj;
			each(arg, lu->uid, lu->user, i, mj);
		}
	}
	pthread_mutex_unlock(&l->lock);
}

void
leases_restore_all(struct leases *l, unsigned timeout_ms)
{
	struct timespec until;
	bool busy;

	until = zclock_realtime_in(timeout_ms);
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->ngpu; i++)
		if (l->gpus[i].state == LEASE_HELD)
			lease_restore(l, i, "shutdown");
	for (;;) {
		busy = false;
		for (unsigned i = 0; i < l->ngpu; i++)
			busy |= l->gpus[i].state != LEASE_FREE;
		if (!busy || pthread_cond_timedwait(&l->idle, &l->lock,
		    &until) != 0)
			break;
	}
	pthread_mutex_unlock(&l->lock);
	if (busy)
		zlog(ZLOG_WARN, "gpu_restore_timeout", "msg=\"some restores "
		    "did not finish before shutdown\"");
}
