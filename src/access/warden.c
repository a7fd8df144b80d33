/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warden.c - the device process's decision on every GPU write (warden.h).
 *
 * Peers: a table of up to WARDEN_MAX_PEERS slots under one mutex, the
 * handle being the slot's index and a generation (never 0), so a stale or
 * guessed handle names nothing. A closed peer's slot stays for
 * WARDEN_CLOSED_GRACE_S (a non-blocking write it queued may still come)
 * in a FIFO, and is reused after that, or sooner when the table is full.
 *
 * A peer holds no descriptor: under --gpu-leases a non-root peer's process
 * is kept as its pid and start time (read while a pidfd, taken from the
 * socket for that moment, showed it alive), and a pidfd is opened only
 * when one of its writes runs, checked against that start time: a lease
 * then keeps it (at most WARDEN_MAX_PIDS a GPU). So no number of
 * connections, open or closed, costs this process a descriptor beyond the
 * moment each is looked at (issue 42, 4a: one pidfd per connection for 120
 * s let any local user fill the table and stop zeusd).
 *
 * GPUs: one mutex each, held across the decision and the write it allows,
 * so no other write on that GPU lands between them (the hardware is
 * serial anyway; the network process's worker sends one write per GPU at
 * a time). Nothing here polls: a holder's processes are looked at (pidfd
 * readable: exited) when a write or a restore asks, and each holder's
 * pidfd is armed once in the holders' watcher (pidwatch.h), whose thread
 * restores the lease when the last of them exits (holder_exited).
 *
 * This file: peers, tokens, the decision on every write, the network
 * process's events and the executor's calls; the lease record of each GPU
 * is warden_lease.c's, the ledger warden_book.c's (warden_int.h).
 */
#include "access/warden.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "access/audit.h"
#include "access/auth.h"
#include "access/journal.h"
#include "access/lease_text.h"
#include "access/peer.h"
#include "access/pidwatch.h"
#include "access/policy.h"
#include "access/slurmjobs.h"
#include "access/warden_int.h"
#include "common/clock.h"
#include "common/identity.h"
#include "common/log.h"
#include "common/procstat.h"
#include "common/sock.h"
#include "common/sockdiag.h"
#include "common/wipe.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"
#include "privsep/exec.h"
#include "privsep/msg.h"

#define NO_SLOT UINT32_MAX

struct wpeer {
	uint32_t gen;			/* 0: free */
	bool closed;
	uint32_t next_closed;		/* the FIFO of closed slots */
	time_t closed_at;		/* CLOCK_MONOTONIC seconds */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	/*
	 * The process, under --gpu-leases for a non-root peer: its start
	 * time (procstat_start_ticks); false when it could not be watched
	 * (exited before it was looked at, or pid 0: another namespace).
	 */
	bool proc_known;
	uint64_t start;
	struct identity id;
	struct policy_peer pp;
	/*
	 * The connection's socket as the kernel names it (sockdiag.h), so
	 * that this process sees for itself when it closed (diag: known),
	 * whatever the network process says; the writes decided for it so
	 * far; and once closed, how many may still come (those the network
	 * process had queued while it was open, as PSMSG_PEER_END says,
	 * bounded by WARDEN_QUEUED_AFTER_CLOSE).
	 */
	bool diag;
	uint32_t ino;
	uint64_t cookie;
	uint32_t seen;
	uint32_t allowed;
};

/* A verified token (the table is under w->lock). */
struct wtoken {
	uint32_t gen;			/* 0: free */
	unsigned key_gen;		/* the key it was verified with */
	uint8_t hash[SHA256_DIGEST_SIZE];
	time_t used;			/* CLOCK_MONOTONIC seconds */
	struct auth_claims c;
};

static time_t
mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

/* Whether the node policy says slurm_jobs = "confine" now. */
static bool
confining(struct warden *w)
{
	bool on;

	if (w->cfg.policy == NULL)
		return false;
	on = policy_slurm_confine(policy_holder_read(w->cfg.policy));
	policy_holder_done(w->cfg.policy);
	return on;
}

int
warden_create(const struct warden_config *cfg, struct warden **out,
    struct zerr *err)
{
	struct warden *w = calloc(1, sizeof(*w));

	if (w == NULL || (w->slot = calloc(WARDEN_MAX_PEERS,
	    sizeof(*w->slot))) == NULL || (w->freed = calloc(WARDEN_MAX_PEERS,
	    sizeof(*w->freed))) == NULL || (w->gpu = calloc(cfg->ngpu ?
	    cfg->ngpu : 1, sizeof(*w->gpu))) == NULL ||
	    (w->tok = calloc(WARDEN_MAX_TOKENS, sizeof(*w->tok))) == NULL ||
	    slurmjobs_create("", SLURMJOBS_GRACE_S, &w->jobs, err) != 0) {
		if (w != NULL) {
			free(w->slot);
			free(w->freed);
			free(w->gpu);
			free(w->tok);
		}
		free(w);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	w->cfg = *cfg;
	w->jdir = -1;
	w->events = WARDEN_EVENTS_BURST;
	w->events_ns = zclock_now_ns();
	w->diag_ok = sockdiag_unix_works();
	if (!w->diag_ok && cfg->unix_transport)
		zlog(ZLOG_WARN, "unix_diag_unavailable", "msg=\"the kernel "
		    "cannot tell this process when a client's connection "
		    "closed (netlink unix_diag); the network process's word "
		    "is taken\"");
	pthread_cond_init(&w->peer_ended, NULL);
	pthread_mutex_init(&w->lock, NULL);
	w->closed_head = w->closed_tail = NO_SLOT;
	/* a random start: a handle from an earlier run names nothing */
	w->next_gen = (uint32_t)(mono_s() ^ (time_t)getpid() << 16) | 1u;
	w->tok_gen = w->next_gen ^ 0x5a5a0000u;
	for (unsigned i = 0; i < cfg->ngpu; i++) {
		pthread_mutex_init(&w->gpu[i].lock, NULL);
		atomic_init(&w->gpu[i].holder_key, 0);
		w->gpu[i].idx = i;
	}
	atomic_init(&w->stopping, false);
	atomic_init(&w->refused, 0);
	if (cfg->leases && wd_watch_create(w, err) != 0) {
		warden_destroy(w);
		return -1;
	}
	if (cfg->state_dir != NULL && cfg->leases &&
	    (journal_boot_id(w->boot, err) != 0 ||
	    (w->jdir = journal_open_dir(cfg->state_dir, err)) < 0)) {
		w->jdir = -1;
		warden_destroy(w);
		return -1;
	}
	*out = w;
	return 0;
}

void
warden_destroy(struct warden *w)
{
	if (w == NULL)
		return;
	pidwatch_destroy(w->pw);	/* no restore runs from here on */
	w->pw = NULL;
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		w->gpu[i].pw = NULL;	/* its pidfds are closed below */
	wd_book_close(w);			/* the ledger's file, before its dir */
	if (w->jdir >= 0)
		close(w->jdir);
	pthread_cond_destroy(&w->peer_ended);
	for (uint32_t i = 0; i < w->nused; i++)
		free(w->slot[i]);
	for (unsigned i = 0; i < w->cfg.ngpu; i++) {
		wgpu_forget_pids(&w->gpu[i]);
		pthread_mutex_destroy(&w->gpu[i].lock);
	}
	for (unsigned i = 0; i < WARDEN_MAX_TOKENS; i++)
		if (w->tok[i] != NULL) {
			wipe(w->tok[i], sizeof(*w->tok[i]));
			free(w->tok[i]);
		}
	free(w->tok);
	slurmjobs_destroy(w->jobs);
	pthread_mutex_destroy(&w->lock);
	free(w->slot);
	free(w->freed);
	free(w->gpu);
	free(w);
}

void
warden_stopping(struct warden *w)
{
	atomic_store(&w->stopping, true);
}

unsigned long
warden_refused(const struct warden *w)
{
	return atomic_load(&((struct warden *)w)->refused);
}

/* ---- Peers (w->lock held unless said) ------------------------------------- */

static uint64_t
handle_of(uint32_t idx, uint32_t gen)
{
	return (uint64_t)gen << 32 | idx;
}

/* The live or closed slot `handle` names, or NULL. */
static struct wpeer *
slot_of(struct warden *w, uint64_t handle)
{
	uint32_t idx = (uint32_t)handle, gen = (uint32_t)(handle >> 32);

	if (gen == 0 || idx >= w->nused || w->slot[idx] == NULL ||
	    w->slot[idx]->gen != gen)
		return NULL;
	return w->slot[idx];
}

static void
slot_free(struct warden *w, uint32_t idx)
{
	memset(w->slot[idx], 0, sizeof(*w->slot[idx]));
	w->freed[w->nfreed++] = idx;
}

/* Frees closed slots past their grace (every one when `all`, up to one). */
static void
closed_sweep(struct warden *w, bool one)
{
	time_t now = mono_s();

	while (w->closed_head != NO_SLOT) {
		uint32_t idx = w->closed_head;
		struct wpeer *p = w->slot[idx];

		if (!one && now - p->closed_at < WARDEN_CLOSED_GRACE_S)
			break;
		w->closed_head = p->next_closed;
		if (w->closed_head == NO_SLOT)
			w->closed_tail = NO_SLOT;
		slot_free(w, idx);
		if (one)
			break;
	}
}

/* A free slot's index, or NO_SLOT when the table is full of open peers. */
static uint32_t
slot_take(struct warden *w)
{
	closed_sweep(w, false);
	if (w->nfreed == 0 && w->nused == WARDEN_MAX_PEERS)
		closed_sweep(w, true);	/* the oldest closed one, early */
	if (w->nfreed > 0)
		return w->freed[--w->nfreed];
	if (w->nused == WARDEN_MAX_PEERS)
		return NO_SLOT;
	if ((w->slot[w->nused] = calloc(1, sizeof(struct wpeer))) == NULL)
		return NO_SLOT;
	return w->nused++;
}

/*
 * Whether `fd` is a Unix stream socket accepted on zeusd's listening
 * socket: its own name is that socket's path. A socket pair the network
 * process made itself has no name.
 */
static int
peer_socket_check(const struct warden *w, int fd, struct zerr *err)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);

	if (!sock_is_unix_stream(fd))
		return zerr_set(err, ZERR_INVALID, "not a Unix stream socket");
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 ||
	    (size_t)len <= offsetof(struct sockaddr_un, sun_path) + 1 ||
	    sa.sun_path[0] == '\0' ||
	    strncmp(sa.sun_path, w->cfg.listen_path, sizeof(sa.sun_path)) != 0)
		return zerr_set(err, ZERR_INVALID, "not a connection to "
		    "zeusd's socket");
	return 0;
}

static bool
out_of_fds(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOMEM;
}

/*
 * The start time of the process that connected `fd` (p: its credentials),
 * read while a pidfd from the socket showed it alive, so a process that
 * took its number since is never the one recorded; the pidfd is closed
 * again. 1 with *start, 0 when it cannot be watched (exited, another PID
 * namespace), -1 with err when this process is out of descriptors.
 */
static int
proc_look(int fd, struct peer *p, uint64_t *start, struct zerr *err)
{
	int known = 0;

	if (p->pid <= 0)
		return 0;
	if (peer_take_pidfd(fd, p) != 0)
		return out_of_fds(errno) ? zerr_set(err, ZERR_BUSY,
		    "zeusd's device process has no descriptor free to look at "
		    "the connecting process; retry later") : 0;
	if (procstat_start_ticks(p->pid, start) == 0 &&
	    !pidwatch_exited(p->pidfd))
		known = 1;
	peer_release(p);
	return known;
}

/*
 * A pidfd of the peer's process for a lease to keep (pidfd_open on its
 * number, then its start time checked: a reused number names another
 * process, which is taken for gone). 0 with who->pidfd, or with who->gone
 * when it exited; -1 with err when this process is out of descriptors.
 */
static int
proc_watch(struct wwho *who, struct zerr *err)
{
	uint64_t start;
	int fd;

	who->pidfd = -1;
	who->gone = false;
	if ((fd = pidwatch_open(who->pid)) < 0) {
		if (out_of_fds(errno))
			return zerr_set(err, ZERR_BUSY, "zeusd's device process "
			    "has no descriptor free to watch the process that "
			    "asked; retry later");
		who->gone = true;
		return 0;
	}
	if (procstat_start_ticks(who->pid, &start) != 0 ||
	    start != who->start || pidwatch_exited(fd)) {
		close(fd);
		who->gone = true;
		return 0;
	}
	who->pidfd = fd;
	return 0;
}

/*
 * The kernel's name of the connection's socket (sockdiag.h), when this
 * process can ask unix_diag about it later: true with *ino and *cookie.
 * A client in another network namespace (a container given the socket
 * file) connects through a socket that belongs to its namespace, which
 * unix_diag here never finds: asked once now, while `fd` holds it open,
 * "no such socket" means it can never be asked, and the close is the
 * network process's word (PSMSG_PEER_END) for it, as before unix_diag.
 * Before, such a connection read as closed at its first write: every
 * write from a container was refused.
 */
static bool
peer_diag_id(const struct warden *w, int fd, uint32_t *ino, uint64_t *cookie)
{
	uint8_t sh = 0;

	if (sockdiag_unix_id(fd, ino, cookie) != 0)
		return false;
	return !w->diag_ok || sockdiag_unix_state(*ino, *cookie,
	    SOCKDIAG_TIMEOUT_MS, &sh) != 1;
}

int
warden_peer(struct warden *w, int fd, uint64_t refresh, struct identity *id,
    uint64_t *handle, struct zerr *err)
{
	struct peer p;
	struct wpeer *s;
	uint32_t idx, ino = 0;
	uint64_t start = 0, cookie = 0;
	int known = 0;
	bool diag;

	*handle = 0;
	if (peer_socket_check(w, fd, err) != 0)
		return -1;
	if (peer_identify(fd, NULL, 0, &p) != 0 || p.kind != PEER_UNIX)
		return zerr_set(err, ZERR_INVALID, "the socket has no peer "
		    "(it closed, or is not connected)");
	if (p.pid != 0 && p.pid == w->cfg.net)
		return zerr_set(err, ZERR_INVALID, "a connection of the "
		    "network process itself");
	/* the slow part (NSS), out of the lock */
	identity_lookup(p.uid, p.gid, p.pid, id);
	(void)peer_own_groups(fd, p.gid, id);
	if ((w->cfg.leases || confining(w)) && p.uid != 0 &&
	    (known = proc_look(fd, &p, &start, err)) < 0)
		return -1;
	diag = peer_diag_id(w, fd, &ino, &cookie);	/* netlink: unlocked */

	pthread_mutex_lock(&w->lock);
	s = refresh != 0 ? slot_of(w, refresh) : NULL;
	if (s != NULL && !s->closed && s->uid == p.uid && s->pid == p.pid) {
		/* the same connection's process after a reload */
		s->id = *id;
		if (!s->proc_known && known > 0) {
			s->proc_known = true;
			s->start = start;
		}
		policy_peer_init(&s->pp, s->uid, &s->id);
		*handle = refresh;
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if ((idx = slot_take(w)) == NO_SLOT) {
		pthread_mutex_unlock(&w->lock);
		return zerr_set(err, ZERR_BUSY, "too many connected peers");
	}
	s = w->slot[idx];
	if (++w->next_gen == 0)
		w->next_gen = 1;
	s->gen = w->next_gen;
	s->closed = false;
	s->diag = diag;
	s->ino = ino;
	s->cookie = cookie;
	s->seen = 0;
	s->allowed = 0;
	s->uid = p.uid;
	s->gid = p.gid;
	s->pid = p.pid;
	s->proc_known = known > 0;
	s->start = start;
	s->id = *id;
	policy_peer_init(&s->pp, s->uid, &s->id);
	*handle = handle_of(idx, s->gen);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void
warden_peer_end(struct warden *w, uint64_t handle, uint32_t queued)
{
	struct wpeer *s;
	uint32_t idx = (uint32_t)handle;

	pthread_mutex_lock(&w->lock);
	if ((s = slot_of(w, handle)) != NULL && !s->closed) {
		/* what it queued in all, less what came: what may still come */
		uint32_t left = queued > s->seen ? queued - s->seen : 0;

		s->allowed = s->seen + (left < WARDEN_QUEUED_AFTER_CLOSE ?
		    left : WARDEN_QUEUED_AFTER_CLOSE);
		pthread_cond_broadcast(&w->peer_ended);
		s->closed = true;
		s->closed_at = mono_s();
		s->next_closed = NO_SLOT;
		if (w->closed_tail != NO_SLOT)
			w->slot[w->closed_tail]->next_closed = idx;
		else
			w->closed_head = idx;
		w->closed_tail = idx;
	}
	closed_sweep(w, false);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Whether the connection `handle` names may still have a write decided,
 * counting it when so. An open connection may, as the kernel sees it (not
 * only the network process: a connection that closed without its
 * PSMSG_PEER_END is waited for a moment, then taken for closed); a closed
 * one only for the writes that were queued while it was open. 0, or -1
 * with err (403). An unknown handle passes here (peer_copy refuses it).
 */
static int
peer_may_write(struct warden *w, uint64_t handle, struct zerr *err)
{
	struct wpeer *s;
	uint32_t ino;
	uint64_t cookie;
	uint8_t sh = 0;
	bool ask, gone;

	pthread_mutex_lock(&w->lock);
	if ((s = slot_of(w, handle)) == NULL) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	ask = !s->closed && s->diag && w->diag_ok;
	ino = s->ino;
	cookie = s->cookie;
	pthread_mutex_unlock(&w->lock);
	/* the kernel's word, out of the lock (a netlink round trip) */
	gone = ask && (sockdiag_unix_state(ino, cookie, SOCKDIAG_TIMEOUT_MS,
	    &sh) == 1 || sh == 3);
	pthread_mutex_lock(&w->lock);
	if (gone) {
		struct timespec until = zclock_realtime_in(
		    WARDEN_PEER_END_WAIT_MS);

		while ((s = slot_of(w, handle)) != NULL && !s->closed)
			if (pthread_cond_timedwait(&w->peer_ended, &w->lock,
			    &until) != 0)
				break;
	}
	if ((s = slot_of(w, handle)) == NULL) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if ((gone && !s->closed) || (s->closed && s->seen >= s->allowed)) {
		pthread_mutex_unlock(&w->lock);
		return zerr_set(err, ZERR_FORBIDDEN, "Forbidden: the connection "
		    "that asked has closed, and nothing it queued while open "
		    "is left to run");
	}
	s->seen++;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static int wd_peer_copy_open(struct warden *w, uint64_t handle,
    struct wwho *out, bool open_only);

/* A copy of the peer `handle` names (no pidfd yet); -1 if none. */
static int
peer_copy(struct warden *w, uint64_t handle, struct wwho *out)
{
	return wd_peer_copy_open(w, handle, out, false);
}

/*
 * ... (`open_only`: a connection still open, for what a closed one's
 * handle may no longer ask: a release).
 */
static int
wd_peer_copy_open(struct warden *w, uint64_t handle, struct wwho *out,
    bool open_only)
{
	struct wpeer *s;

	memset(out, 0, sizeof(*out));
	out->pidfd = -1;
	pthread_mutex_lock(&w->lock);
	if ((s = slot_of(w, handle)) == NULL || (open_only && s->closed)) {
		pthread_mutex_unlock(&w->lock);
		return -1;
	}
	out->uid = s->uid;
	out->pid = s->pid;
	out->id = s->id;
	out->pp = s->pp;
	out->proc_known = s->proc_known;
	out->start = s->start;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* ---- Tokens (w->lock held unless said) ------------------------------------ */

_Static_assert(PSMSG_TOKEN_MAX == AUTH_TOKEN_MAX, "token sizes differ");
_Static_assert(PSMSG_SUB_MAX >= AUTH_SUB_MAX + 1, "sub does not fit");

static bool
tok_expired(const struct auth_claims *c, time_t now)
{
	return c->has_exp && (int64_t)now > c->exp + AUTH_LEEWAY_S;
}

/* The slot for `hash`: its own, a free one, an expired or the oldest. */
static unsigned
tok_slot(struct warden *w, const uint8_t *hash, time_t now, bool *same)
{
	unsigned pick = WARDEN_MAX_TOKENS, oldest = 0;

	*same = false;
	for (unsigned i = 0; i < WARDEN_MAX_TOKENS; i++) {
		struct wtoken *t = w->tok[i];

		if (t == NULL || t->gen == 0 || t->key_gen != w->key_gen ||
		    tok_expired(&t->c, now)) {
			if (pick == WARDEN_MAX_TOKENS)
				pick = i;
			continue;
		}
		if (memcmp(t->hash, hash, sizeof(t->hash)) == 0) {
			*same = true;
			return i;
		}
		if (w->tok[oldest] == NULL || t->used < w->tok[oldest]->used)
			oldest = i;
	}
	return pick != WARDEN_MAX_TOKENS ? pick : oldest;
}

int
warden_token(struct warden *w, const char *token, size_t len,
    struct auth_claims *c, uint64_t *handle, struct zerr *err)
{
	struct sha256_ctx h;
	uint8_t hash[SHA256_DIGEST_SIZE];
	time_t now = time(NULL);
	struct wtoken *t;
	unsigned i;
	bool same;

	*handle = 0;
	if (w->cfg.key == NULL)
		return zerr_set(err, ZERR_INTERNAL, "no signing key");
	if (auth_verify(w->cfg.key, token, len, now, c, err) != 0)
		return -1;
	sha256_init(&h);
	sha256_update(&h, len, (const uint8_t *)token);
	sha256_digest(&h, sizeof(hash), hash);
	pthread_mutex_lock(&w->lock);
	i = tok_slot(w, hash, now, &same);
	if (w->tok[i] == NULL && (w->tok[i] = calloc(1,
	    sizeof(*w->tok[i]))) == NULL) {
		pthread_mutex_unlock(&w->lock);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	t = w->tok[i];
	if (!same) {
		if (++w->tok_gen == 0)
			w->tok_gen = 1;
		t->gen = w->tok_gen;
		t->key_gen = w->key_gen;
		memcpy(t->hash, hash, sizeof(hash));
		t->c = *c;
	}
	t->used = mono_s();
	*handle = handle_of(i, t->gen);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void
warden_key_reloaded(struct warden *w)
{
	pthread_mutex_lock(&w->lock);
	w->key_gen++;
	pthread_mutex_unlock(&w->lock);
}

/*
 * The token a write names, when a signing key is set: verified here, not
 * expired, holding gpu-control. Copies its claims into *c. 0 or -1 with
 * err (401, 403).
 */
static int
tok_check(struct warden *w, uint64_t handle, struct auth_claims *c,
    struct zerr *err)
{
	uint32_t idx = (uint32_t)handle, gen = (uint32_t)(handle >> 32);
	struct wtoken *t;
	char msg[400];
	int rc = 0;

	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&w->lock);
	t = idx < WARDEN_MAX_TOKENS && gen != 0 ? w->tok[idx] : NULL;
	if (t == NULL || t->gen != gen || t->key_gen != w->key_gen)
		rc = zerr_set(err, ZERR_UNAUTHENTICATED, "No token the device "
		    "process verified (a missing, unknown or superseded "
		    "token handle).");
	else
		*c = t->c;
	pthread_mutex_unlock(&w->lock);
	if (rc != 0)
		return rc;
	if (tok_expired(c, time(NULL)))
		return zerr_set(err, ZERR_UNAUTHENTICATED, AUTH_MSG_EXPIRED);
	if (!(c->scopes & GROUP_BIT(GROUP_GPU_CONTROL))) {
		auth_format_forbidden(c, GROUP_GPU_CONTROL, msg, sizeof(msg));
		return zerr_set(err, ZERR_FORBIDDEN, "%s", msg);
	}
	return 0;
}

/* ---- Writes --------------------------------------------------------------- */

static void
who_of(const struct wwho *p, const struct auth_claims *c,
    struct audit_who *a)
{
	memset(a, 0, sizeof(*a));
	if (c != NULL && c->sub[0] != '\0')
		snprintf(a->sub, sizeof(a->sub), "%s", c->sub);
	if (p == NULL)
		return;
	a->unix_peer = true;
	a->uid = p->uid;
	a->pid = p->pid;
	snprintf(a->user, sizeof(a->user), "%s", p->id.user);
	snprintf(a->comm, sizeof(a->comm), "%s", p->id.comm);
}

/* The identity of a TCP writer: its token's sub, its address. */
static void
who_tcp(const struct auth_claims *c, const struct psmsg_request *rq,
    struct audit_who *a)
{
	who_of(NULL, c, a);
	if (rq->w_addr_kind == 4)
		(void)inet_ntop(AF_INET, rq->w_addr, a->addr, sizeof(a->addr));
	else if (rq->w_addr_kind == 6)
		(void)inet_ntop(AF_INET6, rq->w_addr, a->addr,
		    sizeof(a->addr));
}

/* The audit line's "requested" (JSON), or NULL for a write of no value. */
static const char *
requested(const struct gpu_write *wr, char *buf, size_t size)
{
	switch (wr->op) {
	case GPU_SET_POWER_LIMIT:
		snprintf(buf, size, "{\"power_limit_mw\":%u}",
		    (unsigned)wr->power_limit_mw);
		return buf;
	case GPU_SET_PERSISTENCE_MODE:
		snprintf(buf, size, "{\"enabled\":%s}", wr->enabled ? "true" :
		    "false");
		return buf;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		snprintf(buf, size, "{\"min_clock_mhz\":%u,\"max_clock_mhz\":"
		    "%u}", (unsigned)wr->min_clock_mhz,
		    (unsigned)wr->max_clock_mhz);
		return buf;
	default:
		return NULL;
	}
}

int
wd_peer_copy(struct warden *w, uint64_t handle, struct wwho *out)
{
	return wd_peer_copy_open(w, handle, out, true);
}

int
wd_refuse(struct warden *w, const struct wwho *p,
    const struct psmsg_request *rq, unsigned gpu, const char *op,
    struct zerr *err)
{
	struct audit_who a;
	char q[ZERR_MSG_MAX + 64];

	atomic_fetch_add(&w->refused, 1);
	zlog(ZLOG_WARN, "device_request_refused", "gpu=%d op=%s from=%u "
	    "uid=%ld error=%s", gpu == AUDIT_NO_GPU ? -1 : (int)gpu, op,
	    rq->w_from, p != NULL ? (long)p->uid : -1L, zlog_quote(q,
	    sizeof(q), err->msg));
	who_of(p, NULL, &a);
	if (p == NULL && rq->w_from == PSMSG_FROM_TCP)
		who_tcp(NULL, rq, &a);
	audit_write(&a, gpu, op, NULL, NULL, err->msg, "refused");
	return -1;
}

/* A refusal: logged, counted, audited; returns -1 with err set. */
static int
refuse(struct warden *w, const struct wwho *p, const struct auth_claims *c,
    unsigned gpu, const struct gpu_write *wr, const struct psmsg_request *rq,
    struct zerr *err)
{
	struct audit_who a;
	char q[ZERR_MSG_MAX + 64], req[96];

	atomic_fetch_add(&w->refused, 1);
	zlog(ZLOG_WARN, "device_write_refused", "gpu=%u op=%s from=%u uid=%ld "
	    "error=%s", gpu, gpu_write_op_name(wr->op), rq->w_from,
	    p != NULL ? (long)p->uid : -1L, zlog_quote(q, sizeof(q),
	    err->msg));
	if (p == NULL && rq->w_from == PSMSG_FROM_TCP)
		who_tcp(c, rq, &a);
	else
		who_of(p, c, &a);
	audit_write(&a, gpu, gpu_write_op_name(wr->op), NULL,
	    requested(wr, req, sizeof(req)), err->msg, "refused");
	return -1;
}

void
wd_before_read(struct gpu_backend *b, unsigned gpu, const struct gpu_write *wr,
    struct wbefore *bf)
{
	struct zerr e;

	memset(bf, 0, sizeof(*bf));
	if (wr->op == GPU_SET_POWER_LIMIT)
		bf->limit_ok = b->ops->get_power_limit_mw(b, gpu,
		    &bf->limit_mw, &e) == 0;
	else if (wr->op == GPU_SET_PERSISTENCE_MODE)
		bf->persist_ok = b->ops->get_persistence_mode(b, gpu,
		    &bf->persist, &e) == 0;
}

const char *const wd_reasons[PSMSG_REASON_END] = {
	[PSMSG_REASON_NONE] = "unspecified",
	[PSMSG_REASON_PROCESS_EXIT] = "process_exit",
	[PSMSG_REASON_RELEASE] = "release",
	[PSMSG_REASON_SHUTDOWN] = "shutdown",
	[PSMSG_REASON_HOLDER_GONE] = "holder_gone_while_zeusd_was_down",
};

/*
 * The audit line of a write the device process ran (ok or failed): who
 * as this process knows them, the value before as it read it.
 */
void
wd_audit_ran(const struct audit_who *a, unsigned gpu, const struct gpu_write *wr,
    const struct wbefore *bf, int rc, const struct zerr *err,
    const char *reason)
{
	char before[64], req[96];

	if (!audit_enabled())
		return;
	before[0] = '\0';
	if (bf->limit_ok)
		snprintf(before, sizeof(before), "{\"power_limit_mw\":%u}",
		    (unsigned)bf->limit_mw);
	else if (bf->persist_ok)
		snprintf(before, sizeof(before), "{\"enabled\":%s}",
		    bf->persist ? "true" : "false");
	audit_write(a, gpu, gpu_write_op_name(wr->op), before[0] ? before :
	    NULL, requested(wr, req, sizeof(req)), rc != 0 ? err->msg : NULL,
	    reason);
}

void
warden_set_network(struct warden *w, pid_t net, const char *listen_path)
{
	w->cfg.net = net;
	snprintf(w->cfg.listen_path, sizeof(w->cfg.listen_path), "%s",
	    listen_path);
}

/* The policy's word for a non-root Unix peer; 0 when it may. */
static int
policy_check(struct warden *w, const struct wwho *p, unsigned gpu,
    struct zerr *err)
{
	const struct policy *pol;
	bool ok;

	if (w->cfg.policy == NULL || p->uid == 0)
		return 0;
	pol = policy_holder_read(w->cfg.policy);
	ok = (policy_scopes(pol, &p->pp) & GROUP_BIT(GROUP_GPU_CONTROL)) &&
	    policy_allows(pol, &p->pp, GROUP_GPU_CONTROL, gpu);
	policy_holder_done(w->cfg.policy);
	if (ok)
		return 0;
	return zerr_set(err, ZERR_FORBIDDEN, "Forbidden: uid %u%s%s%s is not "
	    "granted gpu-control on GPU %u by the node policy", (unsigned)p->uid,
	    p->id.user[0] ? " (" : "", p->id.user, p->id.user[0] ? ")" : "",
	    gpu);
}

/*
 * The word of the Slurm job steps on a write by `p` (NULL: TCP) under
 * slurm_jobs = "confine" (slurmjobs.h); root is not asked. 0 when it may
 * go on.
 */
static int
slurm_check(struct warden *w, const struct wwho *p, unsigned gpu,
    struct zerr *err)
{
	struct slurmjobs_writer sw;

	if ((p != NULL && p->uid == 0) || !confining(w))
		return 0;
	memset(&sw, 0, sizeof(sw));
	if (p != NULL) {
		sw.process = true;
		sw.pid = p->pid;
		sw.known = p->proc_known;
		sw.start = p->start;
	}
	return slurmjobs_judge(w->jobs, gpu, &sw, err);
}

/*
 * A write that would lease GPU `gpu` to `uid`: refused (409) when the node
 * policy's max_leased_gpus are already leased to that user (the network
 * process answers the same first: lease.c).
 */
static int
lease_check_max(struct warden *w, uid_t uid, unsigned gpu, struct zerr *err)
{
	unsigned max = 0, held = 0;

	if (w->cfg.policy != NULL) {
		max = policy_max_leased_gpus(policy_holder_read(w->cfg.policy));
		policy_holder_done(w->cfg.policy);
	}
	if (max == 0)
		return 0;
	for (unsigned i = 0; i < w->cfg.ngpu; i++)
		held += i != gpu && atomic_load(&w->gpu[i].holder_key) ==
		    (uint64_t)uid + 1;
	if (held < max)
		return 0;
	return lease_text_max(err, uid, held, 1, max);
}

/*
 * A process in a pid namespace this one cannot see (zeusd in a container,
 * the client outside it or in a sibling one) has pid 0 by SO_PEERCRED: no
 * process to watch, so it cannot hold a lease, so it cannot write.
 */
static int
pid_unseen(struct zerr *err)
{
	return zerr_set(err, ZERR_FORBIDDEN, "the process that opened this "
	    "connection is in a pid namespace zeusd cannot see (its pid reads "
	    "as 0); a GPU lease is bound to a process zeusd can watch, so "
	    "with --gpu-leases GPU settings can only be changed from zeusd's "
	    "pid namespace or one below it");
}

/*
 * PSMSG_LEASE_CHECK: the early 409 of a whole write request (warden.h).
 * Reads each GPU's holder without waiting: a GPU whose lock is taken (a
 * write runs on it) refuses nothing here; its write is decided when it
 * runs.
 */
int
warden_lease_check(struct warden *w, const struct psmsg_request *rq,
    struct zerr *err)
{
	struct wwho who, *p = NULL;
	uint64_t key = 0;
	unsigned max = 0, held = 0, taking = 0, first = AUDIT_NO_GPU;
	int rc = 0;

	if (!w->cfg.leases)
		return 0;
	memset(&who, 0, sizeof(who));
	if (rq->w_from == PSMSG_FROM_UNIX) {
		if (peer_copy(w, rq->auth, &who) != 0 || who.uid == 0)
			return 0;	/* the write decides (403), or root */
		p = &who;
		key = (uint64_t)who.uid + 1;
	}
	for (unsigned i = 0; i < w->cfg.ngpu && rc == 0; i++) {
		struct wgpu *g = &w->gpu[i];
		uint64_t k;

		if (!(rq->gpu_mask >> i & 1))
			continue;
		if (first == AUDIT_NO_GPU)
			first = i;
		k = atomic_load(&g->holder_key);
		if (k == 0 || k == key) {
			taking += k == 0;
			continue;
		}
		taking++;
		if (pthread_mutex_trylock(&g->lock) != 0) {
			/*
			 * A write runs on it: the holder as its key says, not
			 * waited for (its name is the record's, under the lock)
			 */
			rc = lease_text_held(err, i, "", (uid_t)(k - 1), false);
			first = i;
			continue;
		}
		if (wgpu_held(w, g) && g->restoring && g->why[0] != '\0')
			rc = lease_text_restore_failed(err, i, g->user, g->uid,
			    g->why, g->attempts, WARDEN_RETRY_MAX_MS / 1000);
		else if (g->held && (p == NULL || g->uid != p->uid))
			rc = lease_text_held(err, i, g->user, g->uid,
			    g->npid == 0 || g->restoring);
		pthread_mutex_unlock(&g->lock);
		if (rc != 0)
			first = i;
	}
	if (rc == 0 && p != NULL && p->pid <= 0)
		rc = pid_unseen(err);
	if (rc == 0 && p != NULL && !p->proc_known)
		rc = zerr_set(err, ZERR_CONFLICT, "the process that asked "
		    "cannot be watched (it exited before its connection was "
		    "looked at, or runs in another PID namespace): with GPU "
		    "leases on, a change needs a holder");
	/*
	 * The lease would watch the process that opened the connection. If
	 * it has exited (a child that connected and handed the socket to its
	 * parent), nothing is left to watch: its pid may be another
	 * process's already. Refused before anything runs. (A write queued
	 * before its process exited still runs: warden_write.)
	 */
	if (rc == 0 && p != NULL && p->proc_known) {
		if (proc_watch(p, err) != 0)
			rc = -1;
		else if (p->gone)
			rc = zerr_set(err, ZERR_CONFLICT, "the process that "
			    "opened this connection (pid %ld) has exited; a GPU "
			    "lease is bound to that process, so GPU settings may "
			    "only be changed over a connection whose own process "
			    "is alive", (long)p->pid);
		if (p->pidfd >= 0)
			close(p->pidfd);
		p->pidfd = -1;
	}
	if (rc == 0 && p != NULL && taking > 0 && w->cfg.policy != NULL) {
		max = policy_max_leased_gpus(policy_holder_read(w->cfg.policy));
		policy_holder_done(w->cfg.policy);
		for (unsigned i = 0; max != 0 && i < w->cfg.ngpu; i++)
			held += atomic_load(&w->gpu[i].holder_key) == key;
		if (max != 0 && held + taking > max)
			rc = lease_text_max(err, p->uid, held, taking, max);
	}
	if (rc == 0)
		return 0;
	return wd_refuse(w, p, rq, first, gpu_write_op_name(
	    (enum gpu_write_op)rq->w_op), err);
}

/* The lease's word on a write (lock held); 0 when it may go on. */
static int
lease_check(struct warden *w, struct wgpu *g, const struct wwho *p,
    unsigned gpu, struct zerr *err)
{
	if (p != NULL && p->uid == 0)
		return 0;		/* root: never refused */
	if (p != NULL && p->pid <= 0)
		return pid_unseen(err);
	/*
	 * No process to hold it (gone before its connection was looked at,
	 * or in another PID namespace). One that exited since is let
	 * through, as leases.c lets its queued writes run: the lease then
	 * has no live holder and its restore follows.
	 */
	if (p != NULL && !p->proc_known)
		return zerr_set(err, ZERR_CONFLICT, "the process that asked "
		    "cannot be watched (it exited before its connection was "
		    "looked at, or runs in another PID namespace): with GPU "
		    "leases on, a change needs a holder");
	/* a restore that failed refuses everyone, its holder too */
	if (wgpu_held(w, g) && g->restoring && g->why[0] != '\0')
		return lease_text_restore_failed(err, gpu, g->user, g->uid,
		    g->why, g->attempts, WARDEN_RETRY_MAX_MS / 1000);
	if (g->held && (p == NULL || g->uid != p->uid))
		/* the user, not its pid: the holder's processes are its own
		 * (GET /gpu/leases shows them to root and the holder only);
		 * none of them left: its settings are on their way back */
		return lease_text_held(err, gpu, g->user, g->uid,
		    g->npid == 0 || g->restoring);
	if (p != NULL && !g->held)
		return lease_check_max(w, p->uid, gpu, err);
	return 0;
}

int
warden_write(struct warden *w, struct gpu_backend *b, unsigned gpu,
    const struct gpu_write *wr, const struct psmsg_request *rq,
    struct zerr *err)
{
	const uint32_t from = rq->w_from;
	const uint64_t auth = rq->auth, tok = rq->tok;
	struct auth_claims claims, *c = NULL;
	struct wwho who, *p = NULL;
	struct audit_who a;
	struct wbefore bf;
	struct wgpu *g;
	unsigned t;
	int rc;

	if (gpu >= w->cfg.ngpu) {
		zerr_set(err, ZERR_INTERNAL, "gpu index out of range");
		return -1;
	}
	g = &w->gpu[gpu];
	if ((from == PSMSG_FROM_UNIX || (from == PSMSG_FROM_RESTORE &&
	    auth != 0)) && peer_copy(w, auth, &who) == 0)
		p = &who;
	if (!(w->cfg.enabled & GROUP_BIT(GROUP_GPU_CONTROL))) {
		zerr_set(err, ZERR_FORBIDDEN, "gpu-control is not enabled "
		    "(--enable)");
		goto refused;
	}
	/* with a signing key every write but a restore needs its token */
	if (w->cfg.key != NULL && from != PSMSG_FROM_RESTORE) {
		int rc_tok = tok_check(w, tok, &claims, err);

		if (claims.sub[0] != '\0')
			c = &claims;
		if (rc_tok != 0)
			goto refused;
	}
	/* no room for its audit line: nothing runs (--audit-required) */
	if (w->cfg.audit_required && from != PSMSG_FROM_RESTORE &&
	    !audit_ready()) {
		audit_count_refused();
		(void)audit_refusal(err);
		goto refused;
	}
	switch (from) {
	case PSMSG_FROM_UNIX:
		if (p != NULL && peer_may_write(w, auth, err) != 0)
			goto refused;
		if (!w->cfg.unix_transport || p == NULL) {
			zerr_set(err, ZERR_FORBIDDEN, "Forbidden: %s",
			    p == NULL ? "the connection that asked is unknown "
			    "to the device process" : "zeusd serves no Unix "
			    "socket");
			goto refused;
		}
		if (policy_check(w, p, gpu, err) != 0)
			goto refused;
		break;
	case PSMSG_FROM_TCP:
		if (!w->cfg.tcp_transport) {
			zerr_set(err, ZERR_FORBIDDEN, "Forbidden: zeusd serves "
			    "no TCP");
			goto refused;
		}
		break;
	case PSMSG_FROM_PIPE:
		if (!w->cfg.pipe_transport) {
			zerr_set(err, ZERR_FORBIDDEN, "Forbidden: zeusd serves "
			    "no named pipe");
			goto refused;
		}
		break;
	default:
		zerr_set(err, ZERR_FORBIDDEN, "a write from nobody");
		goto refused;
	}

	if (slurm_check(w, p, gpu, err) != 0)
		goto refused;
	pthread_mutex_lock(&g->lock);
	if (w->cfg.leases && (lease_check(w, g, p, gpu, err) != 0 ||
	    (p != NULL && p->uid != 0 && proc_watch(p, err) != 0))) {
		pthread_mutex_unlock(&g->lock);
		goto refused;
	}
	/*
	 * The value it replaces: for the audit line, and for a lease's first
	 * change of a setting (the value to restore).
	 */
	t = gpu_write_touches(wr->op);
	memset(&bf, 0, sizeof(bf));
	if (audit_enabled() || (w->cfg.leases && p != NULL && p->uid != 0 &&
	    (((t & GPU_SETTING_POWER_LIMIT) && !(g->held && g->has_limit)) ||
	    ((t & GPU_SETTING_PERSISTENCE) && !(g->held && g->has_persist)))))
		wd_before_read(b, gpu, wr, &bf);
	/* a lease that begins: its start, for the ledger (and journal) */
	if (w->cfg.leases && p != NULL && p->uid != 0 && !g->held) {
		struct zerr e;

		bf.starts = true;
		bf.started_ms = wd_realtime_ms();
		bf.energy_ok = b->ops->get_energy_mj(b, gpu, &bf.energy_mj,
		    &e) == 0;
	}
	/* written ahead: on disk before the GPU changes (journal.h) */
	if (w->cfg.leases && p != NULL && p->uid != 0 &&
	    wd_journal_ahead(w, g, gpu, p, wr, &bf, rq->w_label, err) != 0) {
		pthread_mutex_unlock(&g->lock);
		goto refused;
	}
	rc = b->ops->write(b, gpu, wr, err);
	if (rc == 0 && w->cfg.leases && p != NULL && p->uid != 0) {
		bool fresh = !g->held;

		wgpu_take(g, p, wr, bf.limit_ok, bf.limit_mw, bf.persist_ok,
		    bf.persist);
		if (rq->w_label[0] != '\0')	/* checked (msg.c) */
			snprintf(g->label, sizeof(g->label), "%.*s",
			    LEASE_LABEL_MAX, rq->w_label);
		if (fresh && bf.starts) {
			g->has_start = true;
			g->started_ms = bf.started_ms;
			g->energy_ok = bf.energy_ok;
			g->energy_mj = bf.energy_mj;
			wd_book_start(g);
		}
	}
	else if (rc != 0 && w->cfg.leases && p != NULL && p->uid != 0)
		wd_journal_keep(w, g, gpu);	/* back to what holds */
	pthread_mutex_unlock(&g->lock);
	if (p != NULL)
		who_of(p, c, &a);
	else
		who_tcp(c, rq, &a);
	wd_audit_ran(&a, gpu, wr, &bf, rc, err, NULL);
	/*
	 * Its process had exited (a write queued before it did): no pidfd
	 * watches this lease, so the watcher's thread restores it now.
	 */
	if (rc == 0 && p != NULL && p->gone && w->pw != NULL)
		pidwatch_kick(w->pw);
	goto done;
refused:
	rc = refuse(w, p, c, gpu, wr, rq, err);
done:
	if (p != NULL && p->pidfd >= 0)
		close(p->pidfd);
	return rc;
}

/* ---- The network process's own lines --------------------------------------- */

/* Who a refusal or a dropped write was for, as a write names them. */
static void
who_named(struct warden *w, const struct psmsg_request *rq,
    struct audit_who *a)
{
	struct auth_claims claims, *c = NULL;
	struct wwho who;
	struct zerr e;

	if (w->cfg.key != NULL && rq->tok != 0 &&
	    (tok_check(w, rq->tok, &claims, &e) == 0 || claims.sub[0] != '\0'))
		c = &claims;
	if (rq->w_from == PSMSG_FROM_UNIX && peer_copy(w, rq->auth, &who) == 0) {
		who_of(&who, c, a);
		if (who.pidfd >= 0)
			close(who.pidfd);
	} else if (rq->w_from == PSMSG_FROM_TCP) {
		who_tcp(c, rq, a);
	} else {
		who_of(NULL, c, a);	/* nobody this process knows */
	}
}

/*
 * One of the network process's events, if the bucket has room: at most
 * WARDEN_EVENTS_BURST at once, refilled at WARDEN_EVENTS_PER_S; the rest
 * are counted and said once in a while, never written (a flood of them
 * must not fill the disk the audit log needs).
 */
static bool
event_room(struct warden *w)
{
	uint64_t now = zclock_now_ns();
	bool ok;

	pthread_mutex_lock(&w->lock);
	w->events += (double)(now - w->events_ns) / 1e9 * WARDEN_EVENTS_PER_S;
	if (w->events > WARDEN_EVENTS_BURST)
		w->events = WARDEN_EVENTS_BURST;
	w->events_ns = now;
	ok = w->events >= 1.0;
	if (ok) {
		w->events -= 1.0;
	} else {
		w->events_dropped++;
		if (mono_s() - w->events_said >= 10) {
			w->events_said = mono_s();
			zlog(ZLOG_WARN, "audit_events_dropped", "total=%lu "
			    "msg=\"the network process sends more events for "
			    "the audit log than the %d a second it may; the "
			    "rest are not written\"", w->events_dropped,
			    WARDEN_EVENTS_PER_S);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return ok;
}

/* The operations a refusal may name: the writes' (their routes) and release. */
static bool
refused_op_known(const char *op)
{
	for (unsigned i = 0; i < GPU_WRITE_OP_COUNT; i++)
		if (strcmp(op, gpu_write_op_name((enum gpu_write_op)i)) == 0)
			return true;
	return strcmp(op, "release") == 0;
}

/*
 * A refusal's line in this process's words, checked against what it knows
 * (its policy, its lease record, its audit log) where it can: 0 with the
 * text in `msg`, or -1 with err when what the network process says does
 * not hold here.
 */
static int
refusal_words(struct warden *w, const struct psmsg_audit *ra, unsigned gpu,
    char *msg, size_t size, struct zerr *err)
{
	const struct psmsg_request *rq = &ra->h;
	struct wwho p;
	bool peer = rq->w_from == PSMSG_FROM_UNIX &&
	    peer_copy(w, rq->auth, &p) == 0;
	const struct policy *pol;
	bool scope = false, on_gpu = false;
	char who[IDENTITY_USER_MAX + 32];

	if (peer)
		snprintf(who, sizeof(who), "uid %u%s%s%s", (unsigned)p.uid,
		    p.id.user[0] ? " (" : "", p.id.user,
		    p.id.user[0] ? ")" : "");
	switch (ra->code) {
	case PSMSG_REFUSAL_SCOPE:
	case PSMSG_REFUSAL_POLICY_GPU:
		if (!peer || w->cfg.policy == NULL || p.uid == 0)
			return zerr_set(err, ZERR_CONFLICT, "no node policy "
			    "refusal for that writer here");
		pol = policy_holder_read(w->cfg.policy);
		scope = (policy_scopes(pol, &p.pp) &
		    GROUP_BIT(GROUP_GPU_CONTROL)) != 0;
		on_gpu = scope && gpu < w->cfg.ngpu &&
		    policy_allows(pol, &p.pp, GROUP_GPU_CONTROL, gpu);
		policy_holder_done(w->cfg.policy);
		if (ra->code == PSMSG_REFUSAL_SCOPE && !scope) {
			snprintf(msg, size, "Forbidden: %s lacks scope "
			    "'gpu-control' on this node (the node policy)",
			    who);
			return 0;
		}
		if (ra->code == PSMSG_REFUSAL_POLICY_GPU && scope && !on_gpu &&
		    gpu < w->cfg.ngpu) {
			snprintf(msg, size, "Forbidden: %s holds scope "
			    "'gpu-control' but not on GPU %u (the node "
			    "policy)", who, gpu);
			return 0;
		}
		return zerr_set(err, ZERR_CONFLICT, "the node policy grants "
		    "that");
	case PSMSG_REFUSAL_AUDIT_DOWN:
		if (!w->cfg.audit_required || audit_ready())
			return zerr_set(err, ZERR_CONFLICT, "the audit log can "
			    "be written");
		{
			struct zerr e;

			(void)audit_refusal(&e);
			snprintf(msg, size, "%s", e.msg);
		}
		return 0;
	default:	/* a lease's or a release's: this process's own */
		return zerr_set(err, ZERR_CONFLICT, "refusal code %u",
		    ra->code);
	}
}

int
warden_audit(struct warden *w, const struct psmsg_audit *ra,
    struct zerr *err)
{
	const struct psmsg_request *rq = &ra->h;
	unsigned gpu = ra->no_gpu ? AUDIT_NO_GPU : rq->dev;
	struct gpu_write wr;
	struct audit_who a;
	char req[96], msg[ZERR_MSG_MAX];

	memset(&wr, 0, sizeof(wr));
	wr.op = (enum gpu_write_op)rq->w_op;
	wr.power_limit_mw = rq->w_power_limit_mw;
	wr.enabled = rq->w_enabled != 0;
	wr.min_clock_mhz = rq->w_min_mhz;
	wr.max_clock_mhz = rq->w_max_mhz;
	if (!event_room(w))
		return 0;
	switch (ra->kind) {
	case PSMSG_AUDIT_REFUSED:
		if (!refused_op_known(ra->op))
			return zerr_set(err, ZERR_INVALID, "no such operation");
		if (refusal_words(w, ra, gpu, msg, sizeof(msg), err) != 0) {
			zlog(ZLOG_WARN, "audit_record_refused", "gpu=%u code=%u "
			    "msg=\"a refusal that does not hold in the device "
			    "process\"", gpu, ra->code);
			return -1;
		}
		who_named(w, rq, &a);
		audit_write(&a, gpu, ra->op, NULL, NULL, msg, "refused");
		return 0;
	case PSMSG_AUDIT_SUPERSEDED:
		who_named(w, rq, &a);
		audit_write(&a, gpu, gpu_write_op_name(wr.op), NULL,
		    requested(&wr, req, sizeof(req)), "superseded by a newer "
		    "write before it ran", NULL);
		return 0;
	default:
		break;
	}
	/* a lease's lines are this process's own (msg.c refuses them) */
	return zerr_set(err, ZERR_INVALID, "audit kind %u", ra->kind);
}

/* ---- Slurm job steps ------------------------------------------------------ */

int
warden_slurm_step(struct warden *w, const struct psmsg_slurm_step *m,
    struct zerr *err)
{
	struct wwho who;

	if (peer_copy(w, m->who, &who) != 0 || who.uid != 0 || who.pid <= 0)
		return zerr_set(err, ZERR_FORBIDDEN, "Forbidden: only root "
		    "(zeus_spank.so in slurmstepd) may say which GPUs a Slurm "
		    "job step holds");
	if (!m->start) {
		(void)slurmjobs_end(w->jobs, m->job, m->step);
		return 0;
	}
	/* kept only while they decide something (a reload to "confine"
	 * applies to the steps that start after it) */
	if (!confining(w))
		return zerr_set(err, ZERR_NOT_FOUND, "Not found: the node "
		    "policy does not say slurm_jobs = \"confine\", so zeusd "
		    "keeps no Slurm job steps");
	return slurmjobs_start(w->jobs, m->job, m->step, (uid_t)m->uid,
	    m->gpus, who.pid, err);
}

/* ---- The executor's calls ------------------------------------------------- */

static int
guard_peer(void *ctx, int fd, uint64_t refresh, struct identity *id,
    uint64_t *handle, struct zerr *err)
{
	return warden_peer(ctx, fd, refresh, id, handle, err);
}

static void
guard_peer_end(void *ctx, uint64_t handle, uint32_t queued)
{
	warden_peer_end(ctx, handle, queued);
}

static int
guard_write(void *ctx, struct gpu_backend *b, unsigned gpu,
    const struct gpu_write *wr, const struct psmsg_request *rq,
    struct zerr *err)
{
	return warden_write(ctx, b, gpu, wr, rq, err);
}

static int
guard_token(void *ctx, const char *token, size_t len,
    struct psexec_claims *out, uint64_t *handle, struct zerr *err)
{
	struct auth_claims c;

	if (warden_token(ctx, token, len, &c, handle, err) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	snprintf(out->sub, sizeof(out->sub), "%s", c.sub);
	out->scopes = c.scopes;
	out->has_exp = c.has_exp;
	out->exp = c.exp;
	return 0;
}

static int
guard_audit_record(void *ctx, const struct psmsg_audit *a, struct zerr *err)
{
	return warden_audit(ctx, a, err);
}

static int
guard_slurm_step(void *ctx, const struct psmsg_slurm_step *m,
    struct zerr *err)
{
	return warden_slurm_step(ctx, m, err);
}

static int
guard_leases(void *ctx, struct psmsg_leases_reply *out, struct zerr *err)
{
	return warden_leases(ctx, out, err);
}

static int
guard_ledger(void *ctx, uint32_t first, struct psmsg_ledger_reply *out,
    struct zerr *err)
{
	return warden_ledger_page(ctx, first, out, err);
}

static int
guard_lease_check(void *ctx, const struct psmsg_request *req,
    struct zerr *err)
{
	return warden_lease_check(ctx, req, err);
}

static int
guard_release(void *ctx, const struct psmsg_request *req,
    struct psmsg_leases_reply *out, struct zerr *err)
{
	return warden_release(ctx, req, out, err);
}

static void
guard_audit(void *ctx, uint64_t *failures, uint64_t *refused, bool *down)
{
	(void)ctx;
	*failures = audit_failures();
	*refused = audit_refused_writes();
	*down = audit_down_now();
}

void
warden_guard(struct warden *w, struct psexec_guard *g)
{
	g->ctx = w;
	g->peer = guard_peer;
	g->peer_end = guard_peer_end;
	g->write = guard_write;
	g->token = guard_token;
	g->audit = guard_audit;
	g->audit_record = guard_audit_record;
	g->slurm_step = guard_slurm_step;
	g->leases = guard_leases;
	g->ledger = guard_ledger;
	g->release = guard_release;
	g->lease_check = guard_lease_check;
}
