/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden_book.c - the energy ledger's durable copy, kept by the device
 * process with a lease journal (--state-dir; warden_int.h, ledger_store.h
 * for the file; docs/design.md, "The ledger file").
 */
#include "access/warden.h"
#include "access/warden_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/ledger_store.h"
#include "access/pidwatch.h"
#include "common/log.h"
#include "devices/gpu.h"

/* ---- The energy ledger's copy (--state-dir, ledger_store.h) --------------- */

/*
 * The network process keeps the ledger /metrics shows but cannot write a
 * file, so this process keeps its durable copy from what it sees itself:
 * the GPU's energy counter read when a lease starts and when it ends (the
 * increments outside leases are nobody's, as in lease.c), the energy of
 * each lease end it accepts from the network process (warden_audit, which
 * bounds it by its own record), and that of a lease it took back and
 * ended itself, which the network process never heard of. Written at
 * each lease end (on the holders' watcher's thread: wd_book_flush) and at
 * the stop; handed to the next network process at start (warden_ledger).
 * Lock order: a GPU's lock, then the book's.
 */
struct wbook {
	pthread_mutex_t lock;
	struct ledger_store s;
	struct gpu_backend *b;		/* the counters (warden_recover's) */
	int dirfd;			/* the journal's directory */
	const char *boot;
	bool failing;			/* the last save failed (said once) */
	bool dirty;			/* changed since the file was written */
};

/* Writes the file (book locked); a failure is said once until one works. */
static void
book_save(struct wbook *bk)
{
	char q[ZERR_MSG_MAX + 64];
	struct zerr e;

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

	if (bk == NULL || !g->energy_ok)
		return;
	pthread_mutex_lock(&bk->lock);
	ledger_store_unleased(&bk->s, g->idx, g->energy_mj);
	pthread_mutex_unlock(&bk->lock);
}

/*
 * The lease ends (GPU lock held, g still held): the counter now is the
 * new base, and without a start reading the lease's energy is nobody's,
 * as lease.c counts it. A lease taken back and ended here gets its energy
 * charged to its holder, and the file is written; any other's comes with
 * the network process's lease_end (book_lease), which writes the file
 * with this base in it: one synced write per lease end, not two on a
 * release's path. (A lease_end that never comes, from a network process
 * gone wrong, leaves the base to the next write of the file: a crash
 * before it charges that lease's energy to nobody as well.)
 */
void
wd_book_end(struct wgpu *g)
{
	struct wbook *bk = g->book;
	uint64_t mj = 0;
	struct zerr e;

	if (bk == NULL || bk->b == NULL || !g->held ||
	    bk->b->ops->get_energy_mj(bk->b, g->idx, &mj, &e) != 0)
		return;
	pthread_mutex_lock(&bk->lock);
	if (g->energy_ok && mj >= g->energy_mj) {
		if (g->adopted)
			ledger_store_add(&bk->s, (uint32_t)g->uid, g->user,
			    g->idx, mj - g->energy_mj);
		ledger_store_rebase(&bk->s, g->idx, mj);
	} else {
		ledger_store_unleased(&bk->s, g->idx, mj);
	}
	if (g->adopted)
		book_save(bk);
	pthread_mutex_unlock(&bk->lock);
}

/*
 * A lease end the network process told, accepted: its energy, its user's.
 * The file is written on the holders' watcher's thread (wd_book_flush,
 * kicked here), not on this one: the network process tells a lease's end
 * before it answers the POST /gpu/release that waits for it, and a synced
 * write there cost that answer about 0.45 ms.
 */
void
wd_book_lease(struct warden *w, uid_t uid, const char *user, unsigned gpu,
    uint64_t mj)
{
	struct wbook *bk = w->book;

	if (bk == NULL)
		return;
	pthread_mutex_lock(&bk->lock);
	ledger_store_add(&bk->s, (uint32_t)uid, user, gpu, mj);
	bk->dirty = true;
	pthread_mutex_unlock(&bk->lock);
	if (w->pw != NULL)
		pidwatch_kick(w->pw);
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
 * Start-up, before the journal's leases are taken back: the file, or a
 * ledger from 0 when there is none or it is refused (set aside).
 */
void
wd_book_load(struct warden *w, struct gpu_backend *b)
{
	struct wbook *bk = calloc(1, sizeof(*bk));
	enum journal_bad bad;
	char why[160], q[200];
	int rc;

	if (bk == NULL) {
		zlog(ZLOG_ERROR, "ledger_not_kept", "msg=\"out of memory: the "
		    "energy ledger is not kept across a restart\"");
		return;
	}
	pthread_mutex_init(&bk->lock, NULL);
	bk->b = b;
	bk->dirfd = w->jdir;
	bk->boot = w->boot;
	rc = ledger_store_load(w->jdir, w->boot, w->cfg.ngpu, &bk->s, &bad,
	    why, sizeof(why));
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

int
warden_ledger(struct warden *w, struct ledger_store *out)
{
	if (w->book == NULL)
		return 0;
	pthread_mutex_lock(&w->book->lock);
	*out = w->book->s;
	pthread_mutex_unlock(&w->book->lock);
	return 1;
}
