/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden_book.c - the energy ledger, kept by the device process alone
 * (--gpu-leases; warden_int.h): each user's energy over its leases, each
 * GPU's energy charged to nobody, the last ended leases' records, each
 * lease_end line; GET /gpu/leases and the ledger in /metrics are answered
 * from here (PSMSG_LEASES, PSMSG_LEDGER). With a lease journal
 * (--state-dir) it is kept in a file as well (ledger_store.h; docs/
 * design.md, "The ledger file").
 */
#include "access/warden.h"
#include "access/warden_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/audit.h"
#include "access/lease_text.h"
#include "access/ledger_store.h"
#include "access/pidwatch.h"
#include "common/log.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"

/* ---- The ledger ------------------------------------------------------------ */

_Static_assert(LEDGER_STORE_USERS <= PSMSG_LEDGER_MAX &&
    LEDGER_STORE_GPUS <= PSMSG_MAX_GPUS, "the ledger fits its replies");

/*
 * Built from what this process sees itself: the GPU's energy counter read
 * when a lease starts and when it ends (the increments outside leases are
 * nobody's). Its file (--state-dir) is written at each lease end on the
 * holders' watcher's thread (wd_book_flush), at start-up and at the stop.
 * Lock order: a GPU's lock, then the book's.
 */
struct wbook {
	pthread_mutex_t lock;
	struct ledger_store s;
	struct gpu_backend *b;		/* the counters (warden_recover's) */
	int dirfd;			/* the journal's directory; -1 none */
	const char *boot;
	bool failing;			/* the last save failed (said once) */
	bool dirty;			/* changed since the file was written */
	struct psmsg_lease ended[PSMSG_LEASES_ENDED];	/* a ring */
	unsigned nended;		/* ever ended; ended[nended % N] next */
};

/* Writes the file (book locked); a failure is said once until one works. */
static void
book_save(struct wbook *bk)
{
	char q[ZERR_MSG_MAX + 64];
	struct zerr e;

	if (bk->dirfd < 0)
		return;
	zerr_clear(&e);
	if (ledger_store_save(bk->dirfd, &bk->s, bk->boot, &e) == 0) {
		bk->failing = false;
		return;
	}
	if (!bk->failing)
		zlog(ZLOG_ERROR, "ledger_save_failed", "error=%s msg=\"the "
		    "energy ledger's file is behind: a restart now loses the "
		    "latest totals\"", zlog_quote(q, sizeof(q), e.msg));
	bk->failing = true;
}

/*
 * A lease begins, or is taken back, with the counter at g->energy_mj
 * (GPU lock held): the energy before it is nobody's.
 */
void
wd_book_start(struct wgpu *g)
{
	struct wbook *bk = g->book;

	if (bk == NULL)
		return;
	pthread_mutex_lock(&bk->lock);
	/* its user has a series from its first lease's start on */
	ledger_store_add(&bk->s, (uint32_t)g->uid, g->user, g->idx, 0);
	if (g->energy_ok)
		ledger_store_unleased(&bk->s, g->idx, g->energy_mj);
	pthread_mutex_unlock(&bk->lock);
}

void
wd_book_open_rec(const struct wgpu *g, bool mj_ok, uint64_t mj,
    struct psmsg_lease *r)
{
	uint64_t now_ms = wd_realtime_ms();

	memset(r, 0, sizeof(*r));
	r->gpu = g->idx;
	r->uid = (uint32_t)g->uid;
	r->pid = g->first_pid > 0 ? (int32_t)g->first_pid : 0;
	r->state = g->restoring ? PSMSG_LEASE_RESTORING : PSMSG_LEASE_HELD;
	r->settings = g->settings & GPU_SETTING_ALL;
	snprintf(r->user, sizeof(r->user), "%s", g->user);
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", g->cgroup);
	snprintf(r->label, sizeof(r->label), "%s", g->label);
	if (!g->has_start)
		return;
	r->start_ms = g->started_ms;
	r->duration_us = now_ms >= g->started_ms ?
	    (now_ms - g->started_ms) * 1000 : 0;
	if (g->energy_ok && mj_ok && mj >= g->energy_mj) {
		r->energy_ok = 1;
		r->energy_mj = mj - g->energy_mj;
	}
}

void
wd_book_end(struct warden *w, struct wgpu *g, unsigned reason, bool left)
{
	struct wbook *bk = g->book;
	struct psmsg_lease *r = &g->last;
	struct audit_who holder;
	struct audit_lease le;
	char names[96], q[2 * IDENTITY_CGROUP_MAX];
	uint64_t mj = 0;
	bool mj_ok = false;
	struct zerr e;

	if (bk != NULL && bk->b != NULL)
		mj_ok = bk->b->ops->get_energy_mj(bk->b, g->idx, &mj, &e) == 0;
	wd_book_open_rec(g, mj_ok, mj, r);
	r->state = PSMSG_LEASE_ENDED;
	r->reason = reason < PSMSG_REASON_END ? reason : 0;
	r->left = left;
	r->end_ms = wd_realtime_ms();
	if (bk != NULL) {
		pthread_mutex_lock(&bk->lock);
		bk->ended[bk->nended++ % PSMSG_LEASES_ENDED] = *r;
		if (mj_ok && r->energy_ok) {
			ledger_store_add(&bk->s, (uint32_t)g->uid, g->user,
			    g->idx, r->energy_mj);
			ledger_store_rebase(&bk->s, g->idx, mj);
		} else if (mj_ok) {
			/* no start reading: nobody's, as before it */
			ledger_store_unleased(&bk->s, g->idx, mj);
		}
		bk->dirty = true;
		pthread_mutex_unlock(&bk->lock);
	}
	lease_settings_format(g->settings, names, sizeof(names));
	memset(&holder, 0, sizeof(holder));
	holder.unix_peer = true;
	holder.uid = g->uid;
	holder.pid = g->first_pid;
	snprintf(holder.user, sizeof(holder.user), "%s", g->user);
	memset(&le, 0, sizeof(le));
	le.cgroup = g->cgroup;
	le.label = g->label[0] != '\0' ? g->label : NULL;
	le.reason = wd_reasons[r->reason];
	le.settings = names;
	le.left = left;
	le.duration_s = (double)r->duration_us / 1e6;
	le.energy_ok = r->energy_ok;
	le.energy_j = (double)r->energy_mj / 1000.0;
	if (g->settings != 0)	/* a lease that changed nothing: no line */
		audit_write_lease(&holder, g->idx, &le);
	zlog(ZLOG_INFO, "gpu_lease_ended", "gpu=%u uid=%u pid=%ld cgroup=%s "
	    "reason=%s duration_s=%.3f energy_j=%s%.3f settings=%s", g->idx,
	    (unsigned)g->uid, (long)g->first_pid, zlog_quote(q, sizeof(q),
	    g->cgroup), wd_reasons[r->reason], le.duration_s,
	    r->energy_ok ? "" : "-", le.energy_j, names[0] ? names : "-");
	if (w->pw != NULL)
		pidwatch_kick(w->pw);	/* the file, on the watcher's thread */
}

void
wd_book_flush(struct warden *w)
{
	struct wbook *bk = w->book;

	if (bk == NULL)
		return;
	pthread_mutex_lock(&bk->lock);
	if (bk->dirty) {
		bk->dirty = false;
		book_save(bk);
	}
	pthread_mutex_unlock(&bk->lock);
}

/*
 * Start-up, before the journal's leases are taken back: the file (with
 * --state-dir), or a ledger from 0 when there is none or it is refused
 * (set aside).
 */
void
wd_book_load(struct warden *w, struct gpu_backend *b)
{
	struct wbook *bk = calloc(1, sizeof(*bk));
	enum journal_bad bad = JOURNAL_OK;
	char why[160], q[200];
	int rc = 1;

	if (bk == NULL) {
		zlog(ZLOG_ERROR, "ledger_not_kept", "msg=\"out of memory: the "
		    "energy ledger is not kept\"");
		return;
	}
	pthread_mutex_init(&bk->lock, NULL);
	bk->b = b;
	bk->dirfd = w->jdir;
	bk->boot = w->boot;
	ledger_store_init(&bk->s, w->cfg.ngpu);
	if (w->jdir >= 0)
		rc = ledger_store_load(w->jdir, w->boot, w->cfg.ngpu, &bk->s,
		    &bad, why, sizeof(why));
	if (rc < 0) {
		zlog(ZLOG_ERROR, "ledger_refused", "reason=%s why=%s msg=\"the "
		    "energy ledger starts from 0; the file is kept as "
		    "ledger.refused\"", journal_bad_name(bad),
		    zlog_quote(q, sizeof(q), why));
		(void)ledger_store_set_aside(w->jdir);
	} else if (rc == 0 && bad == JOURNAL_OTHER_BOOT) {
		zlog(ZLOG_INFO, "ledger_taken_back", "users=%u boot=other "
		    "msg=\"the GPUs' counters restarted with the machine: the "
		    "totals carry on, unleased energy counts from now\"",
		    bk->s.nusers);
	} else if (rc == 0) {
		zlog(ZLOG_INFO, "ledger_taken_back", "users=%u boot=same",
		    bk->s.nusers);
	}
	/*
	 * A GPU without a base (a first start, another boot) gets one now:
	 * what it uses from here outside leases, zeusd down included, is
	 * nobody's. Read once per GPU, at start-up only.
	 */
	for (unsigned i = 0; i < bk->s.ngpu; i++) {
		uint64_t mj;
		struct zerr e;

		if (!bk->s.gpu[i].based &&
		    b->ops->get_energy_mj(b, i, &mj, &e) == 0)
			ledger_store_rebase(&bk->s, i, mj);
	}
	book_save(bk);		/* before any thread: no lock needed yet */
	w->book = bk;
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		w->gpu[i].book = bk;
}

/* The stop: the file a last time, and the book goes. */
void
wd_book_close(struct warden *w)
{
	if (w->book == NULL)
		return;
	pthread_mutex_lock(&w->book->lock);
	book_save(w->book);
	pthread_mutex_unlock(&w->book->lock);
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		w->gpu[i].book = NULL;
	pthread_mutex_destroy(&w->book->lock);
	free(w->book);
	w->book = NULL;
}

/* ---- What the network process serves ------------------------------------- */

int
wd_no_leases(struct zerr *err)
{
	return zerr_set(err, ZERR_NOT_FOUND, "GPU leases are not enabled on "
	    "this server (zeusd serve --gpu-leases)");
}

/* Every GPU's counter now, read before any lock (a device call each). */
static void
read_all(struct warden *w, uint64_t *mj, uint64_t *ok)
{
	*ok = 0;
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct zerr e;

		mj[i] = 0;
		if (w->b != NULL && w->b->ops->get_energy_mj(w->b, i, &mj[i],
		    &e) == 0)
			*ok |= 1ull << i;
	}
}

int
warden_leases(struct warden *w, struct psmsg_leases_reply *out,
    struct zerr *err)
{
	uint64_t mj[PSMSG_MAX_GPUS], ok;
	struct wbook *bk = w->book;

	if (!w->cfg.leases || bk == NULL)
		return wd_no_leases(err);
	read_all(w, mj, &ok);
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct wgpu *g = &w->gpu[i];
		bool mine = ok >> i & 1;

		pthread_mutex_lock(&g->lock);
		if (wgpu_held(w, g))
			wd_book_open_rec(g, mine, mj[i],
			    &out->rec[out->nopen++]);
		pthread_mutex_lock(&bk->lock);
		/* a GPU nobody's lease runs on: its energy is nobody's */
		if (mine && (!g->held || !g->energy_ok))
			ledger_store_unleased(&bk->s, i, mj[i]);
		if (bk->s.gpu[i].based) {
			out->unleased_ok |= 1ull << i;
			out->unleased_mj[i] = bk->s.gpu[i].unleased_mj;
		}
		pthread_mutex_unlock(&bk->lock);
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_lock(&bk->lock);
	for (unsigned k = 0; k < PSMSG_LEASES_ENDED && k < bk->nended; k++)
		out->rec[out->nopen + out->nended++] = bk->ended[(bk->nended -
		    1 - k) % PSMSG_LEASES_ENDED];
	pthread_mutex_unlock(&bk->lock);
	return 0;
}

int
warden_ledger_page(struct warden *w, uint32_t first,
    struct psmsg_ledger_reply *out, struct zerr *err)
{
	uint64_t mj[PSMSG_MAX_GPUS], ok, open_mj[PSMSG_MAX_GPUS];
	uid_t open_uid[PSMSG_MAX_GPUS];
	struct wbook *bk = w->book;

	if (!w->cfg.leases || bk == NULL)
		return wd_no_leases(err);
	read_all(w, mj, &ok);
	/* each open lease's energy so far, its user's too */
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		struct wgpu *g = &w->gpu[i];
		struct psmsg_lease r;

		open_mj[i] = 0;
		pthread_mutex_lock(&g->lock);
		if (wgpu_held(w, g)) {
			wd_book_open_rec(g, ok >> i & 1, mj[i], &r);
			open_mj[i] = r.energy_mj;
			open_uid[i] = g->uid;
		}
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_lock(&bk->lock);
	out->nusers = bk->s.nusers;
	for (uint32_t k = first; k < bk->s.nusers &&
	    out->n < PSMSG_LEDGER_USERS; k++) {
		const struct ledger_store_user *u = &bk->s.users[k];
		struct psmsg_ledger_user *o = &out->u[out->n++];

		o->uid = u->uid;
		snprintf(o->user, sizeof(o->user), "%s", u->name);
		for (unsigned i = 0; i < w->cfg.ngpu; i++) {
			o->mj[i] = u->mj[i];
			if (open_mj[i] != 0 && (open_uid[i] == (uid_t)u->uid ||
			    (u->uid == LEDGER_STORE_OTHER &&
			    k == LEDGER_STORE_USERS - 1)))
				o->mj[i] = ledger_store_sat_add(o->mj[i],
				    open_mj[i]);
		}
	}
	pthread_mutex_unlock(&bk->lock);
	return 0;
}
