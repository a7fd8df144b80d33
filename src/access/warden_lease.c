/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden_lease.c - the lease record of each GPU, as the device process
 * keeps it (warden_int.h, struct wgpu; warden.h says what binds): its
 * holder processes as pidfds and the thread that watches them, the value
 * before the lease's first change of each setting, the restores (asked
 * for, or on this process's own when the holders are gone, retried after
 * a backoff), the lease journal written ahead of each change
 * (--state-dir, journal.h) and start-up's take-back from it.
 *
 * Every function here runs with the GPU's lock held unless it says so.
 */
#include "access/warden.h"
#include "access/warden_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/audit.h"
#include "access/pidwatch.h"
#include "common/clock.h"
#include "common/identity.h"
#include "common/log.h"
#include "common/procstat.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"

/* ---- The record and its holders ------------------------------------------- */

/* A holder's pidfd goes (it is watched no more). */
static void
wgpu_close_pid(struct wgpu *g, int fd)
{
	if (g->pw != NULL)
		pidwatch_remove(g->pw, fd);
	close(fd);
}

/* A holder's pidfd comes: its exit is told to holder_exited. */
static void
wgpu_watch_pid(struct wgpu *g, int fd, pid_t pid)
{
	struct zerr e;

	if (g->pw != NULL && pidwatch_add(g->pw, fd, g->idx, &e) != 0)
		zlog(ZLOG_WARN, "holder_not_watched", "gpu=%u pid=%ld "
		    "error=\"%s\" msg=\"its exit is seen at the next write, "
		    "view or release of that GPU\"", g->idx, (long)pid,
		    e.msg);
}

void
wgpu_forget_pids(struct wgpu *g)
{
	for (unsigned i = 0; i < g->npid; i++)
		wgpu_close_pid(g, g->pidfd[i]);
	g->npid = 0;
}

void
wgpu_end(struct warden *w, struct wgpu *g, unsigned reason, bool left)
{
	wd_book_end(w, g, reason, left);
	zlog(ZLOG_INFO, "gpu_lease_released", "gpu=%u uid=%u reason=%s",
	    g->idx, (unsigned)g->uid, wd_reasons[reason]);
	g->held = false;
	g->restoring = false;
	atomic_store(&g->holder_key, 0);
	g->ended_uid = g->uid;
	wgpu_forget_pids(g);
}

/* Drops the holder's processes that exited; true while one lives. */
bool
wgpu_live(struct wgpu *g)
{
	unsigned k = 0;

	for (unsigned i = 0; i < g->npid; i++) {
		if (pidwatch_exited(g->pidfd[i])) {
			wgpu_close_pid(g, g->pidfd[i]);
			continue;
		}
		g->pidfd[k] = g->pidfd[i];
		g->start[k] = g->start[i];
		g->pid[k++] = g->pid[i];
	}
	g->npid = k;
	return k > 0;
}

bool
wgpu_pending(const struct wgpu *g)
{
	return g->has_limit || g->has_persist || g->gpu_clocks || g->mem_clocks;
}

/* Whether the lease still binds (ending it when not). */
bool
wgpu_held(struct warden *w, struct wgpu *g)
{
	bool live = g->held && wgpu_live(g);

	if (g->held && !live && !wgpu_pending(g))
		wgpu_end(w, g, g->restoring ? g->reason :
		    PSMSG_REASON_PROCESS_EXIT, false);
	return g->held;
}

/*
 * After a successful write of a non-root Unix peer: its lease, which takes
 * over p's pidfd when it watches a process not yet among the holders.
 */
void
wgpu_take(struct wgpu *g, struct wwho *p, const struct gpu_write *wr,
    bool got_limit, uint32_t limit_mw, bool got_persist, bool persist)
{
	unsigned t = gpu_write_touches(wr->op);
	bool known = false;

	if (!g->held) {
		memset(&g->has_limit, 0, sizeof(*g) - offsetof(struct wgpu,
		    has_limit));
		g->held = true;
		g->uid = p->uid;
		atomic_store(&g->holder_key, (uint64_t)p->uid + 1);
		g->settings = 0;
		g->restoring = false;
		g->attempts = 0;
		g->why[0] = '\0';
		g->first_pid = p->pid;
		zlog(ZLOG_INFO, "gpu_lease_taken", "gpu=%u uid=%u pid=%ld",
		    g->idx, (unsigned)p->uid, (long)p->pid);
		snprintf(g->user, sizeof(g->user), "%s", p->id.user);
		snprintf(g->comm, sizeof(g->comm), "%s", p->id.comm);
		snprintf(g->cgroup, sizeof(g->cgroup), "%s", p->id.cgroup);
		g->label[0] = '\0';
	}
	g->last_pid = p->pid;
	for (unsigned i = 0; i < g->npid; i++)
		known |= g->pid[i] == p->pid;
	if (!known && p->pidfd >= 0 && g->npid < WARDEN_MAX_PIDS) {
		wgpu_watch_pid(g, p->pidfd, p->pid);
		g->pidfd[g->npid] = p->pidfd;
		g->start[g->npid] = p->start;
		g->pid[g->npid++] = p->pid;
		p->pidfd = -1;
	}
	if ((t & GPU_SETTING_POWER_LIMIT) && !g->has_limit && got_limit) {
		g->has_limit = true;
		g->limit_mw = limit_mw;
	}
	if ((t & GPU_SETTING_PERSISTENCE) && !g->has_persist && got_persist) {
		g->has_persist = true;
		g->persist = persist;
	}
	g->gpu_clocks |= (t & GPU_SETTING_GPU_CLOCKS) != 0;
	g->mem_clocks |= (t & GPU_SETTING_MEM_CLOCKS) != 0;
	g->settings |= t;
}

/* ---- The lease journal (--state-dir, journal.h) --------------------------- */

/* Now, as Unix time in ms (a lease's start in the journal). */
uint64_t
wd_realtime_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* GPU `gpu`'s record as the journal keeps it. */
static void
rec_of(const struct wgpu *g, unsigned gpu, struct journal_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->gpu = gpu;
	r->uid = (uint32_t)g->uid;
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", g->cgroup);
	snprintf(r->label, sizeof(r->label), "%s", g->label);
	r->has_start = g->has_start;
	r->started_ms = g->started_ms;
	r->has_energy = g->energy_ok;
	r->energy_mj = g->energy_mj;
	r->has_limit = g->has_limit;
	r->limit_mw = g->limit_mw;
	r->has_persist = g->has_persist;
	r->persist = g->persist;
	r->gpu_clocks = g->gpu_clocks;
	r->mem_clocks = g->mem_clocks;
	for (unsigned i = 0; i < g->npid && i < JOURNAL_MAX_PIDS; i++) {
		r->pid[r->npid] = (int32_t)g->pid[i];
		r->start[r->npid++] = g->start[i];
	}
}

/*
 * The journal made to match the record (lock held): the file replaced, or
 * removed when nothing waits for a restore. 0, or -1 with err.
 */
static int
journal_keep(struct warden *w, const struct wgpu *g, unsigned gpu,
    struct zerr *err)
{
	struct journal_rec r;

	if (w->jdir < 0)
		return 0;
	if (!g->held || !wgpu_pending(g))
		return journal_remove(w->jdir, gpu, err);
	rec_of(g, gpu, &r);
	return journal_save(w->jdir, &r, w->boot, err);
}

/* journal_keep where nothing can be refused any more: a failure is logged. */
void
wd_journal_keep(struct warden *w, const struct wgpu *g, unsigned gpu)
{
	char q[ZERR_MSG_MAX + 64];
	struct zerr e;

	zerr_clear(&e);
	if (journal_keep(w, g, gpu, &e) != 0)
		zlog(ZLOG_ERROR, "lease_journal_failed", "gpu=%u error=%s "
		    "msg=\"the journal may not match the lease until its "
		    "next change\"", gpu, zlog_quote(q, sizeof(q), e.msg));
}

/*
 * Before a write of non-root peer `p` runs (lock held): the lease as it
 * will be if the write succeeds goes to the journal first, when it
 * changes what the journal holds (a new lease, a setting's first change,
 * a new holder process). 0, or -1 with err (503: nothing runs).
 */
int
wd_journal_ahead(struct warden *w, const struct wgpu *g, unsigned gpu,
    const struct wwho *p, const struct gpu_write *wr,
    const struct wbefore *bf, const char *label, struct zerr *err)
{
	unsigned t = gpu_write_touches(wr->op);
	struct journal_rec r, now;
	bool known = false;

	if (w->jdir < 0)
		return 0;
	memset(&now, 0, sizeof(now));
	if (g->held)
		rec_of(g, gpu, &now);
	r = now;
	r.gpu = gpu;
	r.uid = (uint32_t)p->uid;
	if (!g->held) {
		snprintf(r.cgroup, sizeof(r.cgroup), "%s", p->id.cgroup);
		r.label[0] = '\0';
	}
	if (label[0] != '\0')		/* a write's label replaces the last */
		snprintf(r.label, sizeof(r.label), "%.*s",
		    LEASE_LABEL_MAX, label);
	if (!g->held && bf->starts) {
		r.has_start = true;
		r.started_ms = bf->started_ms;
		r.has_energy = bf->energy_ok;
		r.energy_mj = bf->energy_mj;
	}
	if ((t & GPU_SETTING_POWER_LIMIT) && !r.has_limit && bf->limit_ok) {
		r.has_limit = true;
		r.limit_mw = bf->limit_mw;
	}
	if ((t & GPU_SETTING_PERSISTENCE) && !r.has_persist &&
	    bf->persist_ok) {
		r.has_persist = true;
		r.persist = bf->persist;
	}
	r.gpu_clocks |= (t & GPU_SETTING_GPU_CLOCKS) != 0;
	r.mem_clocks |= (t & GPU_SETTING_MEM_CLOCKS) != 0;
	for (unsigned i = 0; i < r.npid; i++)
		known |= r.pid[i] == (int32_t)p->pid;
	if (!known && p->proc_known && r.npid < JOURNAL_MAX_PIDS) {
		r.pid[r.npid] = (int32_t)p->pid;
		r.start[r.npid++] = p->start;
	}
	if (!journal_rec_pending(&r) || memcmp(&r, &now, sizeof(r)) == 0)
		return 0;
	return journal_save(w->jdir, &r, w->boot, err);
}

/* ---- Restores and the holders' watcher ----------------------------------- */

/*
 * Every setting the lease changed, back to its recorded value (lock
 * held), each write audited with `reason` (enum psmsg_reason); the lease
 * ends when all are back, and the journal follows. true when all went
 * back; else the first failure is in g->why and others are refused with
 * it until a retry succeeds (restore_retry).
 */
static bool
restore_all(struct warden *w, struct wgpu *g, struct gpu_backend *b,
    unsigned gpu, unsigned reason)
{
	struct audit_who holder;
	char q[ZERR_MSG_MAX + 64];
	bool all = true;
	int rc;

	if (!g->restoring) {
		zlog(ZLOG_INFO, "gpu_restore_started", "gpu=%u uid=%u "
		    "reason=%s", gpu, (unsigned)g->uid, wd_reasons[reason]);
		g->restoring = true;
		g->attempts = 0;
		g->why[0] = '\0';
	}
	g->attempts++;
	memset(&holder, 0, sizeof(holder));
	holder.unix_peer = true;
	holder.uid = g->uid;
	holder.pid = g->last_pid;
	snprintf(holder.user, sizeof(holder.user), "%s", g->user);
	for (unsigned k = 0; k < 4; k++) {
		struct gpu_write wr;
		struct wbefore bf;
		struct zerr e;
		bool *flag;

		memset(&wr, 0, sizeof(wr));
		switch (k) {
		case 0:
			flag = &g->has_limit;
			wr.op = GPU_SET_POWER_LIMIT;
			wr.power_limit_mw = g->limit_mw;
			break;
		case 1:
			flag = &g->has_persist;
			wr.op = GPU_SET_PERSISTENCE_MODE;
			wr.enabled = g->persist;
			break;
		case 2:
			flag = &g->gpu_clocks;
			wr.op = GPU_RESET_GPU_LOCKED_CLOCKS;
			break;
		default:
			flag = &g->mem_clocks;
			wr.op = GPU_RESET_MEM_LOCKED_CLOCKS;
			break;
		}
		if (!*flag)
			continue;
		zerr_clear(&e);
		memset(&bf, 0, sizeof(bf));
		if (audit_enabled())
			wd_before_read(b, gpu, &wr, &bf);
		rc = b->ops->write(b, gpu, &wr, &e);
		if (rc == 0) {
			*flag = false;
			zlog(ZLOG_INFO, "gpu_restored", "gpu=%u op=%s uid=%u "
			    "reason=%s", gpu, gpu_write_op_name(wr.op),
			    (unsigned)g->uid, wd_reasons[reason]);
		} else {
			if (all)	/* the driver's error names GPU and op */
				snprintf(g->why, sizeof(g->why), "%s", e.msg);
			all = false;
			zlog(ZLOG_ERROR, "gpu_restore_failed", "gpu=%u op=%s "
			    "uid=%u attempt=%u error=%s", gpu,
			    gpu_write_op_name(wr.op), (unsigned)g->uid,
			    g->attempts, zlog_quote(q, sizeof(q), e.msg));
		}
		wd_audit_ran(&holder, gpu, &wr, &bf, rc, &e,
		    wd_reasons[reason]);
	}
	if (!wgpu_pending(g))
		wgpu_end(w, g, reason, false);
	wd_journal_keep(w, g, gpu);
	return all;
}

static void retry_after(struct warden *w, bool again);

/*
 * GPU `gpu`'s lease once none of its holder processes runs, or once it is
 * being ended (a release whose restore failed) (lock held): this process
 * puts back what it changed. A lease that changed nothing ends. true
 * while something still waits: a write failed, and is tried again after
 * a backoff (restore_retry); others are refused meanwhile.
 */
static bool
restore_gone(struct warden *w, struct wgpu *g, unsigned gpu)
{
	char q[ZERR_MSG_MAX + 64];
	unsigned reason = g->restoring ? g->reason :
	    PSMSG_REASON_PROCESS_EXIT;

	if (!g->held || w->b == NULL || (!g->restoring && wgpu_live(g)))
		return false;
	if (!wgpu_pending(g)) {
		wgpu_end(w, g, reason, false);
		wd_journal_keep(w, g, gpu);
		return false;
	}
	g->reason = reason;
	if (restore_all(w, g, w->b, gpu, reason)) {
		zlog(ZLOG_INFO, "gpu_lease_restored_by_device", "gpu=%u uid=%u "
		    "msg=\"%s\"", gpu, (unsigned)g->ended_uid,
		    reason == PSMSG_REASON_PROCESS_EXIT ? "its holder "
		    "processes are gone" : "retried");
		return false;
	}
	zlog(ZLOG_ERROR, "gpu_lease_restore_failed", "gpu=%u uid=%u "
	    "msg=\"%s; retried after a backoff; others are refused "
	    "meanwhile\"", gpu, (unsigned)g->uid,
	    reason == PSMSG_REASON_PROCESS_EXIT ? "its holder processes are "
	    "gone" : "it is being ended");
	zlog(ZLOG_WARN, "gpu_restore_retry", "gpu=%u uid=%u attempt=%u "
	    "error=%s msg=\"the lease holds until the restore succeeds\"",
	    gpu, (unsigned)g->uid, g->attempts + 1, zlog_quote(q, sizeof(q),
	    g->why));
	return true;
}

/* A holder process of GPU `gpu`'s lease exited (pidwatch.h). */
static void
holder_exited(void *ctx, uint32_t gpu)
{
	struct warden *w = ctx;
	struct wgpu *g;
	bool owed;

	if (gpu >= w->cfg.ngpu)
		return;
	pthread_mutex_lock(&w->gpu[gpu].lock);
	g = &w->gpu[gpu];
	if (g->held) {
		unsigned had = g->npid;

		(void)wgpu_live(g);
		zlog(ZLOG_INFO, "gpu_lease_process_exited", "gpu=%u uid=%u "
		    "exited=%u left=%u", gpu, (unsigned)g->uid, had - g->npid,
		    g->npid);
	}
	owed = restore_gone(w, g, gpu);
	pthread_mutex_unlock(&w->gpu[gpu].lock);
	if (owed && w->retry_ms == 0)
		retry_after(w, true);
	wd_book_flush(w);
}

/*
 * The next retry of restores that failed: the watcher's thread's, or
 * before it starts (warden_recover).
 */
static void
retry_after(struct warden *w, bool again)
{
	if (!again) {
		w->retry_ms = 0;
		return;
	}
	w->retry_ms = w->retry_ms == 0 ? WARDEN_RETRY_FIRST_MS :
	    w->retry_ms >= WARDEN_RETRY_MAX_MS / 2 ? WARDEN_RETRY_MAX_MS :
	    w->retry_ms * 2;
	pidwatch_tick_in(w->pw, w->retry_ms);
}

/*
 * Every lease whose holder processes are gone or that is being ended: a
 * restore that failed (at its backoff), or a lease no pidfd watches (a
 * write of an exited process ran: warden_write's kick). Then the
 * ledger's file, when a lease end changed it.
 */
static void
restore_retry(void *ctx)
{
	struct warden *w = ctx;
	bool again = false;

	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		pthread_mutex_lock(&w->gpu[i].lock);
		again |= restore_gone(w, &w->gpu[i], i);
		pthread_mutex_unlock(&w->gpu[i].lock);
	}
	retry_after(w, again);
	wd_book_flush(w);
}

int
wd_watch_create(struct warden *w, struct zerr *err)
{
	if (pidwatch_create(holder_exited, restore_retry, w, &w->pw, err) != 0)
		return -1;
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		w->gpu[i].pw = w->pw;
	return 0;
}

int
warden_watch(struct warden *w, struct gpu_backend *b, struct zerr *err)
{
	if (w->pw == NULL)
		return 0;
	w->b = b;
	return pidwatch_start(w->pw, err);
}

/* ---- POST /gpu/release and the stop --------------------------------------- */

int
warden_release(struct warden *w, const struct psmsg_request *rq,
    struct psmsg_leases_reply *out, struct zerr *err)
{
	struct wwho who, *p = NULL;
	uint64_t mask = rq->gpu_mask;
	unsigned bad = 0;
	bool refused = false;
	uid_t by = (uid_t)-1;		/* a TCP client is no uid */

	memset(&who, 0, sizeof(who));
	who.pidfd = -1;
	if (!w->cfg.leases || w->b == NULL)
		return wd_no_leases(err);
	if (rq->w_from == PSMSG_FROM_UNIX) {
		if (wd_peer_copy(w, rq->auth, &who) != 0) {
			zerr_set(err, ZERR_FORBIDDEN, "Forbidden: the "
			    "connection that asked is unknown to the device "
			    "process");
			return wd_refuse(w, NULL, rq, AUDIT_NO_GPU, "release",
			    err);
		}
		p = &who;
		by = who.uid;
	}
	/* first the whole call's check: another user's lease refuses it */
	for (unsigned i = 0; i < w->cfg.ngpu && !refused; i++) {
		struct wgpu *g = &w->gpu[i];

		if (!(mask >> i & 1))
			continue;
		pthread_mutex_lock(&g->lock);
		if (wgpu_held(w, g) && by != 0 && g->uid != by) {
			(void)lease_text_not_yours(err, i, g->user, g->uid);
			refused = true;
			bad = i;
		}
		pthread_mutex_unlock(&g->lock);
	}
	if (refused) {
		if (p != NULL && p->pidfd >= 0)
			close(p->pidfd);
		return wd_refuse(w, p, rq, bad, "release", err);
	}
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct wgpu *g = &w->gpu[i];
		bool ok;

		if (!(mask >> i & 1))
			continue;
		pthread_mutex_lock(&g->lock);
		if (!wgpu_held(w, g) || (by != 0 && g->uid != by)) {
			/* ended since the check (its holders exited) */
			out->not_leased |= 1ull << i;
			pthread_mutex_unlock(&g->lock);
			continue;
		}
		zlog(ZLOG_INFO, "gpu_lease_release", "gpu=%u uid=%u by_uid=%u",
		    i, (unsigned)g->uid, (unsigned)by);
		g->reason = PSMSG_REASON_RELEASE;
		ok = restore_all(w, g, w->b, i, PSMSG_REASON_RELEASE);
		if (ok)
			out->rec[out->nopen++] = g->last;
		else
			zerr_set(err, ZERR_CONFLICT, "GPU %u: restoring the "
			    "lease's settings failed (%s); it is retried, and "
			    "the lease holds until it succeeds", i, g->why);
		pthread_mutex_unlock(&g->lock);
		if (!ok) {
			/* the watcher's thread retries it, after a backoff */
			pidwatch_kick(w->pw);
			if (p != NULL && p->pidfd >= 0)
				close(p->pidfd);
			return -1;
		}
	}
	if (p != NULL && p->pidfd >= 0)
		close(p->pidfd);
	pidwatch_kick(w->pw);		/* the ledger's file */
	return 0;
}

void
warden_leases_stop(struct warden *w, bool restore, bool kept,
    unsigned timeout_ms)
{
	uint64_t until = zclock_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned pause_ms = WARDEN_RETRY_FIRST_MS / 4;
	bool left;

	if (w == NULL || !w->cfg.leases || w->b == NULL)
		return;
	pidwatch_destroy(w->pw);	/* no restore of its own from here */
	w->pw = NULL;
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		w->gpu[i].pw = NULL;
	for (;;) {
		left = false;
		for (unsigned i = 0; i < w->cfg.ngpu; i++) {
			struct wgpu *g = &w->gpu[i];

			pthread_mutex_lock(&g->lock);
			if (wgpu_held(w, g) && (restore || g->restoring)) {
				if (!g->restoring)
					g->reason = PSMSG_REASON_SHUTDOWN;
				left |= !restore_all(w, g, w->b, i,
				    g->reason);
			}
			pthread_mutex_unlock(&g->lock);
		}
		if (!left || !restore ||
		    zclock_now_ns() + pause_ms * 1000000ull >= until)
			break;
		(void)zclock_sleep_ms(pause_ms);
		pause_ms *= 2;
	}
	if (left && restore)
		zlog(ZLOG_WARN, "gpu_restore_timeout", "msg=\"some restores "
		    "did not finish before shutdown\"");
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct wgpu *g = &w->gpu[i];
		char q[ZERR_MSG_MAX + 64];

		pthread_mutex_lock(&g->lock);
		if (!g->held) {
			pthread_mutex_unlock(&g->lock);
			continue;
		}
		if (g->restoring && wgpu_pending(g))
			zlog(ZLOG_ERROR, "gpu_restore_abandoned", "gpu=%u "
			    "uid=%u attempts=%u error=%s msg=\"zeusd is "
			    "stopping; the settings stay as they are\"", i,
			    (unsigned)g->uid, g->attempts, zlog_quote(q,
			    sizeof(q), g->why));
		if (kept) {
			/* the journal holds it: the next zeusd carries on */
			zlog(ZLOG_INFO, "gpu_lease_kept", "gpu=%u uid=%u "
			    "msg=\"the lease stays in the journal; the next "
			    "zeusd takes it back\"", i, (unsigned)g->uid);
		} else {
			wgpu_end(w, g, PSMSG_REASON_SHUTDOWN, true);
		}
		pthread_mutex_unlock(&g->lock);
	}
}

/* ---- Start-up: the journal taken back ------------------------------------ */

/* The holder processes of `r` that still run (pid and start time). */
static void
adopt_pids(struct wgpu *g, const struct journal_rec *r)
{
	g->npid = 0;
	for (unsigned i = 0; i < r->npid; i++) {
		uint64_t start;
		int fd = pidwatch_open((pid_t)r->pid[i]);

		if (fd < 0)
			continue;
		if (procstat_start_ticks((pid_t)r->pid[i], &start) != 0 ||
		    start != r->start[i] || pidwatch_exited(fd)) {
			close(fd);	/* gone, or its pid is another's now */
			continue;
		}
		wgpu_watch_pid(g, fd, (pid_t)r->pid[i]);
		g->pidfd[g->npid] = fd;
		g->pid[g->npid] = (pid_t)r->pid[i];
		g->start[g->npid++] = r->start[i];
	}
}

int
warden_recover(struct warden *w, struct gpu_backend *b)
{
	int held = 0;

	if (w->cfg.leases)
		wd_book_load(w, b);	/* first: a lease ended below counts */
	if (w->jdir < 0)
		return 0;
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct wgpu *g = &w->gpu[i];
		struct journal_rec r;
		enum journal_bad bad;
		char why[160], q[200];
		int rc = journal_load(w->jdir, i, w->boot, &r, &bad, why,
		    sizeof(why));

		if (rc == 1)
			continue;
		if (rc != 0) {
			zlog(bad == JOURNAL_OTHER_BOOT ? ZLOG_INFO : ZLOG_ERROR,
			    "lease_journal_refused", "gpu=%u reason=%s why=%s "
			    "msg=\"%s\"", i, journal_bad_name(bad),
			    zlog_quote(q, sizeof(q), why),
			    bad == JOURNAL_OTHER_BOOT ?
			    "GPU settings do not outlive a reboot: the record "
			    "is dropped" : bad == JOURNAL_GARBLED ? "what the "
			    "GPU was before its lease is unknown: it is left "
			    "as it is (check it: nvidia-smi -q); the file is "
			    "kept as gpu-N.lease.refused" : "the file is not "
			    "trusted and not read: the GPU is left as it is "
			    "(check it: nvidia-smi -q)");
			if (bad == JOURNAL_OTHER_BOOT) {
				struct zerr e;

				(void)journal_remove(w->jdir, i, &e);
			} else if (bad == JOURNAL_GARBLED) {
				(void)journal_set_aside(w->jdir, i);
			}
			continue;
		}
		pthread_mutex_lock(&g->lock);
		memset(&g->has_limit, 0, sizeof(*g) - offsetof(struct wgpu,
		    has_limit));
		g->held = true;
		g->uid = (uid_t)r.uid;
		atomic_store(&g->holder_key, (uint64_t)r.uid + 1);
		g->restoring = false;
		g->attempts = 0;
		g->why[0] = '\0';
		identity_user((uid_t)r.uid, g->user, sizeof(g->user));
		snprintf(g->cgroup, sizeof(g->cgroup), "%s", r.cgroup);
		snprintf(g->label, sizeof(g->label), "%s", r.label);
		g->has_limit = r.has_limit;
		g->limit_mw = r.limit_mw;
		g->has_persist = r.has_persist;
		g->persist = r.persist;
		g->gpu_clocks = r.gpu_clocks;
		g->mem_clocks = r.mem_clocks;
		g->settings = (r.has_limit ? GPU_SETTING_POWER_LIMIT : 0) |
		    (r.has_persist ? GPU_SETTING_PERSISTENCE : 0) |
		    (r.gpu_clocks ? GPU_SETTING_GPU_CLOCKS : 0) |
		    (r.mem_clocks ? GPU_SETTING_MEM_CLOCKS : 0);
		g->has_start = r.has_start;
		g->started_ms = r.started_ms;
		g->energy_ok = r.has_energy;
		g->energy_mj = r.energy_mj;
		wd_book_start(g);	/* its start, if the file is older */
		adopt_pids(g, &r);
		g->first_pid = g->last_pid = r.npid > 0 ? r.pid[0] : 0;
		if (g->npid > 0) {
			held++;
			zlog(ZLOG_INFO, "lease_journal_taken_back", "gpu=%u "
			    "uid=%u processes=%u msg=\"the lease holds again; "
			    "it is restored when they exit\"", i,
			    (unsigned)r.uid, g->npid);
			wd_journal_keep(w, g, i);
		} else if (restore_all(w, g, b, i,
		    PSMSG_REASON_HOLDER_GONE)) {
			zlog(ZLOG_INFO, "lease_journal_restored", "gpu=%u "
			    "uid=%u msg=\"its holder is gone: the GPU is put "
			    "back\"", i, (unsigned)r.uid);
		} else {
			/* retried by the watcher, refusing others */
			g->reason = PSMSG_REASON_HOLDER_GONE;
			zlog(ZLOG_ERROR, "lease_journal_restore_failed",
			    "gpu=%u uid=%u msg=\"retried after a backoff; the "
			    "GPU is refused to others meanwhile\"", i,
			    (unsigned)r.uid);
			if (w->retry_ms == 0)	/* the watcher's, once it runs */
				retry_after(w, true);
		}
		pthread_mutex_unlock(&g->lock);
	}
	return held;
}
