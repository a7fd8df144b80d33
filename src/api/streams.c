/* SPDX-License-Identifier: Apache-2.0 */
/*
 * streams.c - SSE power streams: subscriber sets, sampling, fan-out (see
 * streams.h for the shape and docs/streams.md for the policies).
 *
 * Data flow of one sample:
 *   sampler thread  timer due -> read the device (own path, never the
 *                   worker queue) -> encode the event once into the device's
 *                   ring -> wake (resume) every suspended subscriber of the
 *                   devices that produced something, one batch per tick
 *   HTTP thread     libmicrohttpd calls streams_reader for a resumed
 *                   connection; it copies the ring events after the
 *                   subscriber's cursor into the connection's buffer, or,
 *                   with nothing to send, suspends the connection again
 *
 * A content reader that returns 0 without suspending makes libmicrohttpd
 * spin, so "nothing to send" always suspends; the sampler's resume and the
 * reader's suspend are serialised by the subscriber's lock so no wake-up is
 * lost. A suspended connection has no timeout and no disconnect detection,
 * hence the keepalive comment that wakes every subscriber periodically.
 *
 * Backpressure: a stale reading is worse than a gap, so nothing may pile up
 * where skip-oldest cannot reach it. Before copying, the reader asks how
 * much the socket still holds unsent (SIOCOUTQ, asked only when an upper
 * bound kept from the writes runs short) and hands at most the stream's
 * budget, about half of ZEUSD_SSE_MAX_UNSENT_MS at its full rate; the rest
 * waits in the rings, at most `keep` events per device, and older ones are
 * skipped, counted and announced with one `: skipped N` comment. A stream
 * with events but no room is "blocked": it suspends like an idle one and the
 * sampler wakes it at every tick of its devices to look again; since
 * libmicrohttpd's idle timeout does not run while suspended, the reader ends
 * a stream whose socket took nothing for the connection timeout, and one
 * whose client hung up at once (it writes nothing that could fail).
 *
 * Locks, always taken in this order, and held for copies only (and the
 * nudge's one eventfd write):
 *   st->lock        membership (device member arrays, the all-subscriber
 *                   array), device restart flags, the sampler's wake batch,
 *                   the nudge
 *   sub->lock       a subscriber's cursors, carry, suspended/closed flags
 *   dev->ring_lock  a device's ring and current sample
 * A subscriber is reference counted: libmicrohttpd's response holds one
 * reference, the sampler takes one for each subscriber it wakes, so it never
 * touches freed memory; `closed` (set when the response is freed) says the
 * connection may no longer be resumed.
 */
#include "api/streams.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/sock.h"
#include "devices/rapl.h"
#include "common/env.h"
#include "node/config.h"
#include "node/node.h"
#include "api/sampler.h"

#define STREAMS_EVENT_MAX 192		/* longest CPU event is ~130 bytes */
#define STREAMS_BLOCK_SIZE 256		/* libmicrohttpd's advisory block */
#define STREAMS_KEEPALIVE_TEXT ": keepalive\n\n"
#define STREAMS_KEEPALIVE_ENV "ZEUSD_SSE_KEEPALIVE_MS"
#define STREAMS_UNSENT_ENV "ZEUSD_SSE_MAX_UNSENT_MS"
#define STREAMS_NOTICE_MAX 40		/* ": skipped N\n\n" */
#define STREAMS_FRAMING 8		/* chunk size line and CRLFs */
#define STREAMS_GPU_EVENT_EST 72	/* GPU events are ~67 bytes */
#define STREAMS_CPU_EVENT_EST 96	/* CPU events are ~80-90 bytes */
#define STREAMS_UNSENT_CAP (64u * 1024)	/* socket budget, SIOCOUTQ units */
#define STREAMS_SKIP_LOG_NS (10ull * 1000000000ull)

struct streams_event {
	uint16_t len;
	char text[STREAMS_EVENT_MAX];
};

struct streams_sub;

/* One subscriber's membership in a device's set. */
struct streams_member {
	struct streams_sub *sub;
	unsigned ci;			/* index of the cursor in sub->cur */
};

struct streams_dev {
	enum streams_kind kind;
	unsigned idx;			/* GPU index or RAPL package index */
	unsigned id;			/* the API's gpu_id / cpu_id */
	/* st->lock */
	struct streams_member *members;
	unsigned nmembers, cap;
	bool restart;			/* re-armed: sampler resets its state */
	/* sampler thread only */
	bool wake;
	bool failing;
	bool have_last;
	uint32_t last_mw;
	uint64_t last_cpu_mw, last_dram_mw;
	bool have_prev;
	struct rapl_sample prev;
	atomic_uint nblocked;		/* members blocked on a full socket */
	bool poll;			/* sampler only: wake the blocked */
	/* ring_lock */
	pthread_mutex_t ring_lock;
	/* next event's sequence number; written under ring_lock, also read
	 * without it to count skips */
	atomic_uint_fast64_t head;
	uint64_t samples;		/* samples that produced a value */
	bool has_current;
	struct streams_event current;	/* the latest value, changed or not */
	struct streams_event ring[STREAMS_RING];
	/* subscribers still waiting for their first event */
	atomic_uint nfirst;
};

struct streams_cursor {
	struct streams_dev *dev;
	unsigned pos;			/* index in dev->members (st->lock) */
	uint64_t next;			/* next ring sequence to send */
	uint64_t join_samples;		/* dev->samples when subscribing */
	bool need_first;
};

struct streams_sub {
	struct streams *st;
	struct MHD_Connection *conn;
	atomic_uint refs;
	enum streams_kind kind;
	uint64_t t0_ns;
	struct streams_grant grant;	/* what let it open */
	atomic_bool revoked;		/* streams_revoke took it back */
	/* st->lock */
	bool registered;
	unsigned all_pos;
	uint64_t wake_tick;
	uint64_t events_at_ka;		/* `events` at the last keepalive tick */
	/* written by the reader, read by the keepalive tick */
	atomic_uint_fast64_t events;	/* reader calls that sent events */
	/* lock */
	pthread_mutex_t lock;
	bool suspended, closed;
	uint64_t ka_seen;
	uint64_t sent, skipped;
	uint16_t carry_len, carry_off;
	char carry[STREAMS_EVENT_MAX];
	/*
	 * Backpressure (lock; see streams_limit): the socket may hold at most
	 * `budget` unsent (SIOCOUTQ units), each device at most `keep` events
	 * in the ring; beyond that the oldest are skipped.
	 */
	int fd;				/* -1: cannot measure, no budget */
	bool unix_sock;
	unsigned keep;
	uint64_t budget, tick_cost;
	uint64_t outq_max;		/* upper bound of SIOCOUTQ now */
	uint64_t stall_ns;		/* the connection timeout; 0: none */
	uint64_t stall_since, stall_outq;
	uint64_t unreported;		/* skipped since the last notice */
	uint64_t unlogged, logged_ns;
	atomic_bool blocked;		/* also read by the sampler */
	unsigned ncur;
	struct streams_cursor cur[];
};

/* The sampler thread's scratch for one tick (sized at creation). */
struct streams_tick {
	bool *due;			/* [ndev] */
	unsigned *gpus, *pkgs;		/* indices to sample */
	struct node_sample res;
};

struct streams {
	/* told after subscribers were resumed (the HTTP loop's wake-up) */
	void (*nudge)(void *ctx);
	void *nudge_ctx;
	const struct zeusd_config *cfg;
	struct node *node;
	struct sampler *sampler;
	atomic_bool closing;
	atomic_uint_fast64_t ka_gen;	/* bumped at every keepalive tick */
	atomic_uint_fast64_t skipped[2];	/* by enum streams_kind */
	uint64_t ka_ns;
	uint64_t unsent_ms;		/* ZEUSD_SSE_MAX_UNSENT_MS */
	unsigned ka_timer;
	unsigned ndev;
	struct streams_dev *devs;	/* GPUs, then CPU packages */
	/* lock */
	pthread_mutex_t lock;
	struct streams_sub **all;
	unsigned nall, allcap;
	uint64_t tick;
	/* sampler thread only (grown under lock) */
	struct streams_tick t;
	struct streams_sub **wake;
	unsigned wakecap;
};

/* One reader call's output. */
struct streams_out {
	char *buf;
	size_t n;			/* bytes written */
	size_t limit;			/* what the socket budget allows */
	size_t max;			/* what libmicrohttpd's buffer holds */
	bool starved;			/* something waited for budget */
};

static const char *
streams_kind_name(enum streams_kind k)
{
	return k == STREAMS_GPU ? "gpu" : "cpu";
}

static int64_t
streams_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Subscriber references ----------------------------------------------- */

static void
streams_sub_ref(struct streams_sub *sub)
{
	atomic_fetch_add_explicit(&sub->refs, 1, memory_order_relaxed);
}

static void
streams_sub_unref(struct streams_sub *sub)
{
	if (atomic_fetch_sub_explicit(&sub->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&sub->lock);
	free((void *)sub->grant.pp);
	free(sub);
}

/* Resumes a suspended, still open subscriber. */
static void
streams_sub_wake(struct streams_sub *sub)
{
	pthread_mutex_lock(&sub->lock);
	if (sub->suspended && !sub->closed) {
		sub->suspended = false;
		MHD_resume_connection(sub->conn);
	}
	pthread_mutex_unlock(&sub->lock);
}

void
streams_set_nudge(struct streams *st, void (*nudge)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&st->lock);
	st->nudge_ctx = ctx;
	st->nudge = nudge;
	pthread_mutex_unlock(&st->lock);
}

/* Under the lock, so that once streams_set_nudge returns none is running. */
static void
streams_nudge(struct streams *st)
{
	pthread_mutex_lock(&st->lock);
	if (st->nudge != NULL)
		st->nudge(st->nudge_ctx);
	pthread_mutex_unlock(&st->lock);
}

/* ---- Sampling (sampler thread) ------------------------------------------- */

/*
 * Stores a sample's encoding as the device's current value and, when it
 * changed, appends it to the ring. Returns whether subscribers need a
 * wake-up: a new event, or someone waiting for a first value.
 */
static bool
streams_publish(struct streams_dev *dev, const char *text, int len,
    bool changed)
{
	if (len <= 0 || len >= STREAMS_EVENT_MAX)
		return false;	/* cannot happen with integer fields */
	pthread_mutex_lock(&dev->ring_lock);
	dev->current.len = (uint16_t)len;
	memcpy(dev->current.text, text, (size_t)len);
	dev->has_current = true;
	dev->samples++;
	if (changed) {
		uint64_t h = atomic_load_explicit(&dev->head,
		    memory_order_relaxed);

		dev->ring[h % STREAMS_RING] = dev->current;
		atomic_store_explicit(&dev->head, h + 1, memory_order_release);
	}
	pthread_mutex_unlock(&dev->ring_lock);
	return changed || atomic_load(&dev->nfirst) > 0;
}

/* Logs the first failure of a streak and the recovery, not every sample. */
static void
streams_sample_failed(struct streams_dev *dev, const struct zerr *err)
{
	char q[ZERR_MSG_MAX + 8];

	if (dev->failing)
		return;
	dev->failing = true;
	zlog(ZLOG_WARN, "stream_sample_failed", "kind=%s id=%u error=%s",
	    streams_kind_name(dev->kind), dev->id,
	    zlog_quote(q, sizeof(q), err->msg));
}

static void
streams_sample_ok(struct streams_dev *dev)
{
	if (!dev->failing)
		return;
	dev->failing = false;
	zlog(ZLOG_INFO, "stream_sample_recovered", "kind=%s id=%u",
	    streams_kind_name(dev->kind), dev->id);
}

static bool
streams_publish_gpu(struct streams_dev *dev, int rc, uint32_t mw,
    const struct zerr *err)
{
	char text[STREAMS_EVENT_MAX];
	bool changed;
	int len;

	if (rc != 0) {
		streams_sample_failed(dev, err);
		return false;
	}
	streams_sample_ok(dev);
	changed = !dev->have_last || mw != dev->last_mw;
	dev->have_last = true;
	dev->last_mw = mw;
	len = snprintf(text, sizeof(text), "data: {\"timestamp_ms\":%" PRId64
	    ",\"gpu_id\":%u,\"power_mw\":%" PRIu32 "}\n\n", streams_unix_ms(),
	    dev->id, mw);
	return streams_publish(dev, text, len, changed);
}

/* Power over the last period from RAPL counter deltas. */
static bool
streams_publish_cpu(struct streams_dev *dev, int rc,
    const struct rapl_sample *sp, const struct zerr *err)
{
	char text[STREAMS_EVENT_MAX], dram[24];
	struct rapl_sample s = *sp;
	uint64_t cpu_mw, dram_mw;
	bool changed;
	int len;

	if (rc != 0) {
		streams_sample_failed(dev, err);
		return false;
	}
	streams_sample_ok(dev);
	if (!dev->have_prev) {		/* the baseline: no event yet */
		dev->prev = s;
		dev->have_prev = true;
		return false;
	}
	if (rapl_power_mw(&dev->prev, &s, &cpu_mw, &dram_mw) != 0) {
		dev->prev = s;
		return false;
	}
	dev->prev = s;
	changed = !dev->have_last || cpu_mw != dev->last_cpu_mw ||
	    dram_mw != dev->last_dram_mw;
	dev->have_last = true;
	dev->last_cpu_mw = cpu_mw;
	dev->last_dram_mw = dram_mw;
	if (s.has_dram)
		snprintf(dram, sizeof(dram), "%" PRIu64, dram_mw);
	else
		snprintf(dram, sizeof(dram), "null");
	len = snprintf(text, sizeof(text), "data: {\"timestamp_ms\":%" PRId64
	    ",\"cpu_id\":%u,\"cpu_mw\":%" PRIu64 ",\"dram_mw\":%s}\n\n",
	    streams_unix_ms(), dev->id, cpu_mw, dram);
	return streams_publish(dev, text, len, changed);
}

/* Collects the subscribers to wake into st->wake, with a reference each. */
static unsigned
streams_collect_wakes(struct streams *st, const unsigned *due, unsigned n,
    bool all)
{
	unsigned nw = 0;

	pthread_mutex_lock(&st->lock);
	if (st->wakecap < st->nall) {
		struct streams_sub **w = realloc(st->wake, st->nall *
		    sizeof(*w));

		if (w == NULL) {
			pthread_mutex_unlock(&st->lock);
			zlog(ZLOG_ERROR, "stream_wake_alloc_failed",
			    "subscribers=%u", st->nall);
			return 0;
		}
		st->wake = w;
		st->wakecap = st->nall;
	}
	st->tick++;
	/*
	 * Keepalive: only streams that sent no event since the last tick need
	 * it (a busy stream notices a dead peer at its next write); waking
	 * every stream at once would be a burst for nothing. The device pass
	 * runs too when both fall due; wake_tick keeps one entry per
	 * subscriber (st->wake holds at most nall).
	 */
	for (unsigned i = 0; all && i < st->nall; i++) {
		struct streams_sub *sub = st->all[i];
		uint64_t ev = atomic_load_explicit(&sub->events,
		    memory_order_relaxed);

		if (ev != sub->events_at_ka) {
			sub->events_at_ka = ev;
			continue;
		}
		sub->wake_tick = st->tick;
		streams_sub_ref(sub);
		st->wake[nw++] = sub;
	}
	for (unsigned i = 0; i < n; i++) {
		struct streams_dev *dev;

		if (due[i] >= st->ndev || (!st->devs[due[i]].wake &&
		    !st->devs[due[i]].poll))
			continue;
		dev = &st->devs[due[i]];
		for (unsigned m = 0; m < dev->nmembers; m++) {
			struct streams_sub *sub = dev->members[m].sub;

			if (sub->wake_tick == st->tick)
				continue;	/* already in this batch */
			/* No event: only the blocked look at their socket. */
			if (!dev->wake && !atomic_load_explicit(&sub->blocked,
			    memory_order_relaxed))
				continue;
			sub->wake_tick = st->tick;
			streams_sub_ref(sub);
			st->wake[nw++] = sub;
		}
	}
	pthread_mutex_unlock(&st->lock);
	return nw;
}

/*
 * Samples every due device with one node_sample (one request to the device
 * process when the daemon is split), GPUs and packages in index order, and
 * publishes what each produced.
 */
static void
streams_sample_due(struct streams *st)
{
	struct streams_tick *t = &st->t;
	unsigned ng = 0, nc = 0;

	for (unsigned i = 0; i < st->ndev; i++) {
		if (!t->due[i])
			continue;
		if (st->devs[i].kind == STREAMS_GPU)
			t->gpus[ng++] = st->devs[i].idx;
		else
			t->pkgs[nc++] = st->devs[i].idx;
	}
	if (ng + nc == 0)
		return;
	node_sample(st->node, t->gpus, ng, t->pkgs, nc, &t->res);
	ng = nc = 0;
	for (unsigned i = 0; i < st->ndev; i++) {
		struct streams_dev *dev = &st->devs[i];

		if (!t->due[i])
			continue;
		t->due[i] = false;
		if (dev->kind == STREAMS_GPU) {
			dev->wake = streams_publish_gpu(dev, t->res.gpu_rc[ng],
			    t->res.gpu_mw[ng], &t->res.gpu_err);
			ng++;
		} else {
			dev->wake = streams_publish_cpu(dev, t->res.cpu_rc[nc],
			    &t->res.cpu[nc], &t->res.cpu_err);
			nc++;
		}
	}
}

/* The sampler callback: sample every due device, then one wake batch. */
static void
streams_on_timers(void *arg, const unsigned *due, unsigned n, uint64_t now)
{
	struct streams *st = arg;
	bool any = false, keepalive = false;
	unsigned nw;

	for (unsigned i = 0; i < n; i++) {
		struct streams_dev *dev;
		bool active, restart;

		if (due[i] == st->ka_timer) {
			atomic_fetch_add(&st->ka_gen, 1);
			keepalive = true;
			continue;
		}
		dev = &st->devs[due[i]];
		dev->wake = dev->poll = false;
		pthread_mutex_lock(&st->lock);
		active = dev->nmembers > 0;
		restart = dev->restart;
		dev->restart = false;
		pthread_mutex_unlock(&st->lock);
		if (!active)
			continue;	/* disarmed while we were due */
		if (restart)
			dev->have_last = dev->have_prev = false;
		st->t.due[due[i]] = true;
	}
	streams_sample_due(st);
	for (unsigned i = 0; i < n; i++) {
		struct streams_dev *dev;

		if (due[i] == st->ka_timer)
			continue;
		dev = &st->devs[due[i]];
		dev->poll = atomic_load_explicit(&dev->nblocked,
		    memory_order_relaxed) > 0;
		any |= dev->wake || dev->poll;
	}
	if (!any && !keepalive)
		return;
	nw = streams_collect_wakes(st, due, n, keepalive);
	for (unsigned i = 0; i < nw; i++) {
		streams_sub_wake(st->wake[i]);
		streams_sub_unref(st->wake[i]);
	}
	if (nw > 0)
		streams_nudge(st);
}

/* ---- Backpressure (HTTP thread, sub->lock) ------------------------------- */

/*
 * What the kernel charges one write of `n` bytes, in SIOCOUTQ's units. TCP
 * counts payload bytes. A Unix socket counts each write's whole buffer: the
 * data plus the skb's shared info rounded up to the allocator's power-of-two
 * class, plus the sk_buff itself (Linux 6.x: a 70-byte write costs 768, a
 * 520-byte one 1,280). Writes over about 3.7 KB go to page fragments and
 * cost less than this says: the bound then errs on the safe side.
 */
static uint64_t
streams_cost(const struct streams_sub *sub, uint64_t n)
{
	uint64_t c = 512;

	if (!sub->unix_sock)
		return n;
	while (c < n + 320)
		c <<= 1;
	return c + 256;
}

/* The longest reader output whose write costs at most `room`. */
static size_t
streams_fit(const struct streams_sub *sub, uint64_t room)
{
	uint64_t c = 512;

	if (!sub->unix_sock)
		return room > STREAMS_FRAMING ?
		    (size_t)(room - STREAMS_FRAMING) : 0;
	if (room < c + 256)
		return 0;
	while (2 * c + 256 <= room)
		c <<= 1;
	return (size_t)(c - 320 - STREAMS_FRAMING);
}

/* Asks the kernel what the socket still holds; no answer: no budget. */
static void
streams_outq_refresh(struct streams_sub *sub)
{
	int q;

	if (sock_unsent(sub->fd, &q) != 0) {
		zlog(ZLOG_DEBUG, "stream_outq_unavailable", "errno=%d", errno);
		sub->fd = -1;
		return;
	}
	sub->outq_max = (uint64_t)q;
}

/*
 * How many bytes this reader call may hand to libmicrohttpd so that the
 * socket holds at most the stream's budget. libmicrohttpd calls the reader
 * only once its own write buffer went to the kernel, so the kernel's queue
 * is all there is to count. `outq_max` is an upper bound kept without a
 * system call (the last SIOCOUTQ plus what was written since); the kernel is
 * asked only when that bound leaves less than two ticks of room, so a reader
 * that keeps up costs one ioctl every few ticks.
 */
static size_t
streams_limit(struct streams_sub *sub, size_t max, bool *fresh)
{
	uint64_t room;
	size_t fit;

	*fresh = false;
	if (sub->fd < 0)
		return max;
	room = sub->outq_max < sub->budget ? sub->budget - sub->outq_max : 0;
	if (room < 2 * sub->tick_cost) {
		streams_outq_refresh(sub);
		if (sub->fd < 0)
			return max;
		*fresh = true;
		room = sub->outq_max < sub->budget ?
		    sub->budget - sub->outq_max : 0;
	}
	fit = streams_fit(sub, room);
	return fit < max ? fit : max;
}

/*
 * A blocked subscriber (events waiting, no room in the socket) is woken at
 * every tick of its devices even when nothing changed, to look again.
 */
static void
streams_set_blocked(struct streams_sub *sub, bool on)
{
	if (atomic_load_explicit(&sub->blocked, memory_order_relaxed) == on)
		return;
	atomic_store_explicit(&sub->blocked, on, memory_order_relaxed);
	for (unsigned i = 0; i < sub->ncur; i++) {
		if (on)
			atomic_fetch_add(&sub->cur[i].dev->nblocked, 1);
		else
			atomic_fetch_sub(&sub->cur[i].dev->nblocked, 1);
	}
}

/* Skips a device's oldest events beyond the `keep` that may wait. */
static void
streams_skip(struct streams_sub *sub, struct streams_cursor *c,
    uint64_t head)
{
	uint64_t k;

	if (head - c->next <= sub->keep)
		return;
	k = head - sub->keep - c->next;
	c->next = head - sub->keep;
	sub->skipped += k;
	sub->unreported += k;
	atomic_fetch_add_explicit(&sub->st->skipped[sub->kind], k,
	    memory_order_relaxed);
}

/* ---- The content reader (HTTP thread) ------------------------------------ */

/*
 * Copies `len` bytes of `text` into buf at *n as far as they fit; the rest
 * goes to the carry, sent first next time. Only called with an empty carry.
 */
static void
streams_put(struct streams_sub *sub, char *buf, size_t max, size_t *n,
    const char *text, size_t len)
{
	size_t k = max - *n < len ? max - *n : len;

	memcpy(buf + *n, text, k);
	*n += k;
	if (k < len) {
		memcpy(sub->carry, text + k, len - k);
		sub->carry_len = (uint16_t)(len - k);
		sub->carry_off = 0;
	}
}

/*
 * Puts one event or comment whole if it fits under the call's limit. It
 * never straddles the socket budget: past it, the event waits whole in the
 * ring (where skip-oldest applies), so that what finally goes out is fresh
 * (*starved says so). Only an event larger than libmicrohttpd's entire
 * buffer is split through the carry, which cannot happen with 192-byte
 * events in at least a 256-byte block.
 */
static bool
streams_emit(struct streams_sub *sub, struct streams_out *o,
    const char *text, size_t len)
{
	if (len <= o->limit - o->n) {
		memcpy(o->buf + o->n, text, len);
		o->n += len;
		return true;
	}
	if (o->limit < o->max) {
		o->starved = true;
		return false;
	}
	if (o->n > 0)
		return false;		/* libmicrohttpd's buffer is full */
	streams_put(sub, o->buf, o->max, &o->n, text, len);
	return true;
}

static void
streams_drain_carry(struct streams_sub *sub, char *buf, size_t max,
    size_t *n)
{
	size_t left = (size_t)(sub->carry_len - sub->carry_off);
	size_t k = max - *n < left ? max - *n : left;

	memcpy(buf + *n, sub->carry + sub->carry_off, k);
	*n += k;
	sub->carry_off = (uint16_t)(sub->carry_off + k);
	if (sub->carry_off == sub->carry_len)
		sub->carry_len = sub->carry_off = 0;
}

static void
streams_first_done(struct streams_cursor *c)
{
	if (c->need_first) {
		c->need_first = false;
		atomic_fetch_sub(&c->dev->nfirst, 1);
	}
}

/* Copies the device's events after the cursor. Called with sub->lock. */
static void
streams_copy_dev(struct streams_sub *sub, struct streams_cursor *c,
    struct streams_out *o)
{
	struct streams_dev *dev = c->dev;
	uint64_t head;

	pthread_mutex_lock(&dev->ring_lock);
	head = atomic_load_explicit(&dev->head, memory_order_relaxed);
	streams_skip(sub, c, head);	/* it may have moved since pass one */
	while (c->next < head && o->n < o->limit && sub->carry_len == 0) {
		const struct streams_event *ev =
		    &dev->ring[c->next % STREAMS_RING];

		if (!streams_emit(sub, o, ev->text, ev->len))
			break;
		c->next++;
		sub->sent++;
		streams_first_done(c);
	}
	if (c->need_first && c->next == head && dev->has_current &&
	    dev->samples > c->join_samples && o->n < o->limit &&
	    sub->carry_len == 0 &&
	    streams_emit(sub, o, dev->current.text, dev->current.len)) {
		/* Unchanged since we joined: the current value, once. */
		sub->sent++;
		streams_first_done(c);
	}
	pthread_mutex_unlock(&dev->ring_lock);
}

/*
 * After skips, one comment before the next event says how many: clients
 * ignore comments, a person or a careful client can tell a gap from a
 * quiet device. Returns the count to log (rate-limited per stream), or 0.
 */
static uint64_t
streams_notice(struct streams_sub *sub, struct streams_out *o)
{
	char text[STREAMS_NOTICE_MAX];
	uint64_t now, k;
	int len;

	len = snprintf(text, sizeof(text), ": skipped %" PRIu64 "\n\n",
	    sub->unreported);
	if (len <= 0 || (size_t)len >= sizeof(text) ||
	    !streams_emit(sub, o, text, (size_t)len))
		return 0;
	sub->unlogged += sub->unreported;
	sub->unreported = 0;
	now = sampler_now_ns();
	if (sub->logged_ns != 0 && now - sub->logged_ns < STREAMS_SKIP_LOG_NS)
		return 0;
	sub->logged_ns = now;
	k = sub->unlogged;
	sub->unlogged = 0;
	return k;
}

/*
 * Whether the client is gone: POLLHUP or POLLERR on the socket, asked
 * without waiting. A blocked stream writes nothing, so nothing would tell
 * it that its client closed; one that never read closes with unread data,
 * and its kernel answers with a reset, after which the send queue never
 * shrinks: the stream (its connection, its peer's slot) stayed until the
 * no-progress limit. The fd is libmicrohttpd's, still open: the reader runs
 * on its thread, inside the connection. A half-close (FIN only) is no
 * hang-up here: such a client may still read.
 */
static bool
streams_peer_gone(const struct streams_sub *sub)
{
	return sock_peer_gone(sub->fd);
}

enum streams_stall { STALL_WAIT, STALL_NO_PROGRESS, STALL_PEER_GONE };

/*
 * A blocked stream is suspended, where libmicrohttpd's idle timeout does not
 * run, so its rule is applied here: a socket that took nothing (its queue
 * did not shrink) for the connection timeout ends the stream. While its
 * queue does not shrink it also looks whether the client is gone, at every
 * tick (the sampler wakes blocked streams at every tick of their devices):
 * a closed client's stream ends then, not at the timeout.
 */
static enum streams_stall
streams_stalled_out(struct streams_sub *sub, bool fresh, uint64_t *ms)
{
	uint64_t now = sampler_now_ns();
	bool stalling = true;

	if (!fresh && sub->fd >= 0)
		streams_outq_refresh(sub);
	if (!atomic_load_explicit(&sub->blocked, memory_order_relaxed) ||
	    sub->outq_max < sub->stall_outq) {
		sub->stall_since = now;
		sub->stall_outq = sub->outq_max;
		stalling = false;
	}
	streams_set_blocked(sub, true);
	*ms = (now - sub->stall_since) / 1000000;
	if (sub->stall_ns > 0 && now - sub->stall_since >= sub->stall_ns)
		return STALL_NO_PROGRESS;
	if (stalling && sub->fd >= 0 && streams_peer_gone(sub))
		return STALL_PEER_GONE;
	return STALL_WAIT;
}

static ssize_t
streams_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct streams_sub *sub = cls;
	struct streams *st = sub->st;
	struct streams_out o = { .buf = buf, .max = max };
	uint64_t logged = 0, total, stalled_ms = 0;
	enum streams_stall stall = STALL_WAIT;
	uint_fast64_t ka;
	bool fresh, expired, revoked;
	ssize_t ret;

	pthread_mutex_lock(&sub->lock);
	if (sub->carry_len > 0)
		streams_drain_carry(sub, buf, max, &o.n);
	/*
	 * A stream ends with its token, or when a reload took back what let
	 * it open: both were checked only when it opened.
	 */
	expired = sub->grant.until_s != INT64_MAX &&
	    (int64_t)time(NULL) > sub->grant.until_s;
	revoked = atomic_load(&sub->revoked);
	if (o.n == 0 && sub->carry_len == 0 && (expired || revoked ||
	    atomic_load(&st->closing))) {
		pthread_mutex_unlock(&sub->lock);
		if (expired || revoked)
			zlog(ZLOG_INFO, "stream_dropped", "kind=%s devices=%u "
			    "reason=%s", streams_kind_name(sub->kind),
			    sub->ncur, revoked ? "revoked" : "token_expired");
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	o.limit = streams_limit(sub, max, &fresh);
	if (o.limit < o.n)
		o.limit = o.n;
	/* Skips first, so that one notice can precede every event. */
	for (unsigned i = 0; i < sub->ncur; i++)
		streams_skip(sub, &sub->cur[i], atomic_load_explicit(
		    &sub->cur[i].dev->head, memory_order_acquire));
	if (sub->unreported > 0 && sub->carry_len == 0)
		logged = streams_notice(sub, &o);
	for (unsigned i = 0; i < sub->ncur && o.n < o.limit &&
	    sub->carry_len == 0 && !o.starved; i++)
		streams_copy_dev(sub, &sub->cur[i], &o);
	ka = atomic_load(&st->ka_gen);
	if (o.n > 0) {
		/* events are as good as a keepalive */
		sub->ka_seen = ka;
		atomic_fetch_add_explicit(&sub->events, 1, memory_order_relaxed);
	} else if (ka != sub->ka_seen && streams_emit(sub, &o,
	    STREAMS_KEEPALIVE_TEXT, sizeof(STREAMS_KEEPALIVE_TEXT) - 1)) {
		sub->ka_seen = ka;
	}
	if (o.n > 0) {
		sub->outq_max += streams_cost(sub, o.n + STREAMS_FRAMING);
		streams_set_blocked(sub, false);
		ret = (ssize_t)o.n;
	} else if (o.starved && (stall = streams_stalled_out(sub, fresh,
	    &stalled_ms)) != STALL_WAIT) {
		streams_set_blocked(sub, false);
		ret = MHD_CONTENT_READER_END_WITH_ERROR;
	} else {
		if (!o.starved)
			streams_set_blocked(sub, false);
		/* Sleep until the sampler resumes us (new events, or a tick
		 * to look at a full socket again). */
		sub->suspended = true;
		MHD_suspend_connection(sub->conn);
		ret = 0;
	}
	total = sub->skipped;
	pthread_mutex_unlock(&sub->lock);
	if (logged > 0)
		zlog(ZLOG_INFO, "stream_skipped", "kind=%s devices=%u skipped=%"
		    PRIu64 " total=%" PRIu64, streams_kind_name(sub->kind),
		    sub->ncur, logged, total);
	if (ret == MHD_CONTENT_READER_END_WITH_ERROR)
		zlog(ZLOG_INFO, "stream_dropped", "kind=%s devices=%u "
		    "reason=%s stalled_ms=%" PRIu64,
		    streams_kind_name(sub->kind), sub->ncur,
		    stall == STALL_PEER_GONE ? "peer_gone" : "no_progress",
		    stalled_ms);
	return ret;
}

/* ---- Membership (st->lock held) ------------------------------------------ */

static int
streams_member_add(struct streams *st, struct streams_sub *sub, unsigned ci)
{
	struct streams_cursor *c = &sub->cur[ci];
	struct streams_dev *dev = c->dev;

	if (dev->nmembers == dev->cap) {
		unsigned cap = dev->cap ? dev->cap * 2 : 8;
		struct streams_member *m = realloc(dev->members,
		    cap * sizeof(*m));

		if (m == NULL)
			return -1;
		dev->members = m;
		dev->cap = cap;
	}
	c->pos = dev->nmembers;
	dev->members[dev->nmembers++] = (struct streams_member){ sub, ci };
	pthread_mutex_lock(&dev->ring_lock);
	c->next = atomic_load_explicit(&dev->head, memory_order_relaxed);
	c->join_samples = dev->samples;
	pthread_mutex_unlock(&dev->ring_lock);
	c->need_first = true;
	atomic_fetch_add(&dev->nfirst, 1);
	if (dev->nmembers == 1) {
		uint64_t hz = dev->kind == STREAMS_GPU ?
		    st->cfg->gpu_power_poll_hz : st->cfg->cpu_power_poll_hz;

		dev->restart = true;
		sampler_arm(st->sampler, (unsigned)(dev - st->devs),
		    1000000000ull / (hz ? hz : 1), 0);
	}
	return 0;
}

static void
streams_member_remove(struct streams *st, struct streams_sub *sub,
    unsigned ci)
{
	struct streams_cursor *c = &sub->cur[ci];
	struct streams_dev *dev = c->dev;
	struct streams_member last = dev->members[--dev->nmembers];

	dev->members[c->pos] = last;
	last.sub->cur[last.ci].pos = c->pos;
	if (dev->nmembers == 0)
		sampler_disarm(st->sampler, (unsigned)(dev - st->devs));
}

static void
streams_all_remove(struct streams *st, struct streams_sub *sub)
{
	struct streams_sub *last = st->all[--st->nall];

	st->all[sub->all_pos] = last;
	last->all_pos = sub->all_pos;
	if (st->nall == 0)
		sampler_disarm(st->sampler, st->ka_timer);
}

static int
streams_register(struct streams *st, struct streams_sub *sub,
    struct zerr *err)
{
	unsigned added = 0;

	pthread_mutex_lock(&st->lock);
	if (atomic_load(&st->closing)) {
		pthread_mutex_unlock(&st->lock);
		return zerr_set(err, ZERR_INTERNAL, "The server is shutting down");
	}
	if (st->nall == st->allcap) {
		unsigned cap = st->allcap ? st->allcap * 2 : 64;
		struct streams_sub **a = realloc(st->all, cap * sizeof(*a));

		if (a == NULL)
			goto oom;
		st->all = a;
		st->allcap = cap;
	}
	for (; added < sub->ncur; added++)
		if (streams_member_add(st, sub, added) != 0)
			goto oom;
	sub->all_pos = st->nall;
	st->all[st->nall++] = sub;
	if (st->nall == 1)
		sampler_arm(st->sampler, st->ka_timer, st->ka_ns, st->ka_ns);
	sub->registered = true;
	sub->ka_seen = atomic_load(&st->ka_gen);
	pthread_mutex_unlock(&st->lock);
	return 0;
oom:
	while (added-- > 0) {
		streams_first_done(&sub->cur[added]);
		streams_member_remove(st, sub, added);
	}
	pthread_mutex_unlock(&st->lock);
	return zerr_set(err, ZERR_INTERNAL, "out of memory");
}

/* libmicrohttpd frees the response: the stream is over. */
static void
streams_release(void *cls)
{
	struct streams_sub *sub = cls;
	struct streams *st = sub->st;
	unsigned left = 0;
	bool was = false;

	pthread_mutex_lock(&st->lock);
	if (sub->registered) {
		for (unsigned i = 0; i < sub->ncur; i++)
			streams_member_remove(st, sub, i);
		streams_all_remove(st, sub);
		sub->registered = false;
		was = true;
	}
	left = st->nall;
	pthread_mutex_unlock(&st->lock);
	pthread_mutex_lock(&sub->lock);
	sub->closed = true;
	streams_set_blocked(sub, false);
	for (unsigned i = 0; i < sub->ncur; i++)
		streams_first_done(&sub->cur[i]);
	pthread_mutex_unlock(&sub->lock);
	if (was)
		zlog(ZLOG_INFO, "stream_closed", "kind=%s devices=%u sent=%"
		    PRIu64 " skipped=%" PRIu64 " dur_ms=%" PRIu64
		    " subscribers=%u", streams_kind_name(sub->kind), sub->ncur,
		    sub->sent, sub->skipped,
		    (sampler_now_ns() - sub->t0_ns) / 1000000, left);
	streams_sub_unref(sub);
}

/*
 * Sizes a new subscriber's backpressure. MAX_UNSENT_MS is split in two
 * halves: the socket may hold half of it at the stream's full rate (every
 * device an event per tick), each device's ring the other half; a reader
 * further behind skips its oldest events. The connection timeout becomes the
 * blocked stream's no-progress limit (streams_stalled_out).
 */
static void
streams_size_budget(struct streams *st, struct streams_sub *sub)
{
	const union MHD_ConnectionInfo *ci;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	uint64_t hz, ticks, per_tick, cap;

	hz = sub->kind == STREAMS_GPU ? st->cfg->gpu_power_poll_hz :
	    st->cfg->cpu_power_poll_hz;
	if (hz == 0)
		hz = 1;
	ticks = hz * st->unsent_ms / 2000;
	sub->keep = (unsigned)((hz * st->unsent_ms + 1999) / 2000);
	if (sub->keep > STREAMS_RING)
		sub->keep = STREAMS_RING;
	sub->fd = -1;
	ci = MHD_get_connection_info(sub->conn,
	    MHD_CONNECTION_INFO_CONNECTION_TIMEOUT);
	if (ci != NULL)
		sub->stall_ns = ci->connection_timeout * 1000000000ull;
	ci = MHD_get_connection_info(sub->conn,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL)
		return;
	sub->fd = ci->connect_fd;
	sub->unix_sock = getsockname(sub->fd, (struct sockaddr *)&ss,
	    &sl) == 0 && ss.ss_family == AF_UNIX;
	per_tick = sub->ncur > 0 ? sub->ncur * (uint64_t)(sub->kind ==
	    STREAMS_GPU ? STREAMS_GPU_EVENT_EST : STREAMS_CPU_EVENT_EST) :
	    sizeof(STREAMS_KEEPALIVE_TEXT) - 1;
	sub->tick_cost = streams_cost(sub, per_tick + STREAMS_FRAMING);
	sub->budget = (ticks < 2 ? 2 : ticks) * sub->tick_cost;
	cap = STREAMS_UNSENT_CAP > 2 * sub->tick_cost ? STREAMS_UNSENT_CAP :
	    2 * sub->tick_cost;
	if (sub->budget > cap)
		sub->budget = cap;
	sub->outq_max = sub->budget;	/* unknown: ask at the first call */
}

uint64_t
streams_skipped_total(struct streams *st, enum streams_kind kind)
{
	if (st == NULL)
		return 0;
	return atomic_load_explicit(&st->skipped[kind == STREAMS_CPU],
	    memory_order_relaxed);
}

/* ---- Public API ---------------------------------------------------------- */

int
streams_subscribe(struct streams *st, enum streams_kind kind,
    const unsigned *idx, unsigned n, struct MHD_Connection *conn,
    const struct streams_grant *g, struct MHD_Response **out,
    struct zerr *err)
{
	unsigned base = kind == STREAMS_GPU ? 0 : st->node->ngpu;
	unsigned limit = kind == STREAMS_GPU ? st->node->ngpu :
	    st->node->ncpu;
	struct MHD_Response *resp;
	struct streams_sub *sub;

	zerr_clear(err);
	for (unsigned i = 0; i < n; i++)
		if (idx[i] >= limit)
			return zerr_set(err, ZERR_INTERNAL,
			    "internal: stream device %u out of range", idx[i]);
	sub = calloc(1, sizeof(*sub) + n * sizeof(sub->cur[0]));
	if (sub == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	sub->st = st;
	sub->conn = conn;
	sub->kind = kind;
	sub->grant = *g;
	sub->grant.pp = NULL;
	if (g->by_policy) {
		struct policy_peer *pp = malloc(sizeof(*pp));

		if (pp == NULL) {
			free(sub);
			return zerr_set(err, ZERR_INTERNAL, "out of memory");
		}
		*pp = *g->pp;
		sub->grant.pp = pp;
	}
	atomic_init(&sub->revoked, false);
	sub->ncur = n;
	sub->t0_ns = sampler_now_ns();
	atomic_init(&sub->refs, 1);	/* the response's */
	atomic_init(&sub->blocked, false);
	pthread_mutex_init(&sub->lock, NULL);
	for (unsigned i = 0; i < n; i++)
		sub->cur[i].dev = &st->devs[base + idx[i]];
	streams_size_budget(st, sub);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN,
	    STREAMS_BLOCK_SIZE, streams_reader, sub, streams_release);
	if (resp == NULL) {
		streams_sub_unref(sub);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "text/event-stream") != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
	    "no-cache") != MHD_YES ||
	    streams_register(st, sub, err) != 0) {
		MHD_destroy_response(resp);	/* releases sub */
		if (err->kind == ZERR_NONE)
			zerr_set(err, ZERR_INTERNAL, "out of memory");
		return -1;
	}
	zlog(ZLOG_INFO, "stream_opened", "kind=%s devices=%u subscribers=%u",
	    streams_kind_name(kind), n, streams_subscribers(st));
	*out = resp;
	return 0;
}

unsigned
streams_revoke(struct streams *st, bool (*keep)(void *arg,
    const struct streams_grant *g, enum streams_kind kind,
    const unsigned *idx, unsigned n), void *arg)
{
	unsigned *idx, taken = 0;

	if (st == NULL || (idx = calloc(st->ndev ? st->ndev : 1,
	    sizeof(*idx))) == NULL)
		return 0;
	pthread_mutex_lock(&st->lock);
	for (unsigned i = 0; i < st->nall; i++) {
		struct streams_sub *sub = st->all[i];
		unsigned base = sub->kind == STREAMS_GPU ? 0 : st->node->ngpu;

		if (atomic_load(&sub->revoked))
			continue;
		for (unsigned k = 0; k < sub->ncur; k++)
			idx[k] = (unsigned)(sub->cur[k].dev - st->devs) - base;
		if (!keep(arg, &sub->grant, sub->kind, idx, sub->ncur)) {
			atomic_store(&sub->revoked, true);
			taken++;
		}
	}
	pthread_mutex_unlock(&st->lock);
	free(idx);
	return taken;
}

unsigned
streams_subscribers(struct streams *st)
{
	unsigned n;

	pthread_mutex_lock(&st->lock);
	n = st->nall;
	pthread_mutex_unlock(&st->lock);
	return n;
}

void
streams_end_all(struct streams *st)
{
	struct streams_sub **snap = NULL;
	unsigned n = 0, open;
	bool was;

	if (st == NULL)
		return;
	/*
	 * Counted as closing is set: a stream that sees it while the
	 * sampler stops below ends by itself and is gone from the snapshot,
	 * but was ended here all the same.
	 */
	pthread_mutex_lock(&st->lock);
	was = atomic_exchange(&st->closing, true);
	open = st->nall;
	pthread_mutex_unlock(&st->lock);
	if (was)
		return;
	if (open > 0)
		zlog(ZLOG_INFO, "streams_ending", "subscribers=%u", open);
	sampler_stop(st->sampler);	/* no more resumes from its thread */
	pthread_mutex_lock(&st->lock);
	if (st->nall > 0 && (snap = malloc(st->nall * sizeof(*snap))) != NULL)
		for (; n < st->nall; n++) {
			snap[n] = st->all[n];
			streams_sub_ref(snap[n]);
		}
	pthread_mutex_unlock(&st->lock);
	for (unsigned i = 0; i < n; i++) {
		streams_sub_wake(snap[i]);
		streams_sub_unref(snap[i]);
	}
	free(snap);
	if (n > 0)
		streams_nudge(st);
}

/* Both knobs, read and range-checked; see streams.h. */
static int
streams_read_env(uint64_t *ka_ms, uint64_t *unsent_ms, struct zerr *err)
{
	return env_uint(STREAMS_KEEPALIVE_ENV, STREAMS_KEEPALIVE_MIN_MS,
	    STREAMS_KEEPALIVE_MAX_MS, STREAMS_KEEPALIVE_MS, ka_ms, err) != 0 ||
	    env_uint(STREAMS_UNSENT_ENV, STREAMS_UNSENT_MIN_MS,
	    STREAMS_UNSENT_MAX_MS, STREAMS_UNSENT_MS, unsent_ms, err) != 0 ?
	    -1 : 0;
}

int
streams_check_env(struct zerr *err)
{
	uint64_t ka_ms, unsent_ms;

	return streams_read_env(&ka_ms, &unsent_ms, err);
}

static void
streams_tick_free(struct streams_tick *t)
{
	free(t->due);
	free(t->gpus);
	free(t->pkgs);
	free(t->res.gpu_rc);
	free(t->res.gpu_mw);
	free(t->res.cpu_rc);
	free(t->res.cpu);
}

static int
streams_tick_alloc(struct streams_tick *t, unsigned ndev)
{
	size_t n = ndev ? ndev : 1;

	memset(t, 0, sizeof(*t));
	t->due = calloc(n, sizeof(*t->due));
	t->gpus = calloc(n, sizeof(*t->gpus));
	t->pkgs = calloc(n, sizeof(*t->pkgs));
	t->res.gpu_rc = calloc(n, sizeof(*t->res.gpu_rc));
	t->res.gpu_mw = calloc(n, sizeof(*t->res.gpu_mw));
	t->res.cpu_rc = calloc(n, sizeof(*t->res.cpu_rc));
	t->res.cpu = calloc(n, sizeof(*t->res.cpu));
	if (t->due == NULL || t->gpus == NULL || t->pkgs == NULL ||
	    t->res.gpu_rc == NULL || t->res.gpu_mw == NULL ||
	    t->res.cpu_rc == NULL || t->res.cpu == NULL) {
		streams_tick_free(t);
		return -1;
	}
	return 0;
}

int
streams_create(const struct zeusd_config *cfg, struct node *node,
    struct streams **out, struct zerr *err)
{
	struct streams *st;
	uint64_t ka_ms, unsent_ms;

	if (streams_read_env(&ka_ms, &unsent_ms, err) != 0)
		return -1;
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	st->cfg = cfg;
	st->node = node;
	st->ndev = node->ngpu + node->ncpu;
	st->ka_timer = st->ndev;
	st->ka_ns = (uint64_t)ka_ms * 1000000ull;
	st->unsent_ms = unsent_ms;
	pthread_mutex_init(&st->lock, NULL);
	st->devs = calloc(st->ndev ? st->ndev : 1, sizeof(*st->devs));
	if (st->devs == NULL) {
		pthread_mutex_destroy(&st->lock);
		free(st);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (streams_tick_alloc(&st->t, st->ndev) != 0) {
		free(st->devs);
		pthread_mutex_destroy(&st->lock);
		free(st);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	for (unsigned i = 0; i < st->ndev; i++) {
		struct streams_dev *dev = &st->devs[i];

		dev->kind = i < node->ngpu ? STREAMS_GPU : STREAMS_CPU;
		dev->idx = i < node->ngpu ? i : i - node->ngpu;
		dev->id = dev->kind == STREAMS_GPU ? dev->idx :
		    rapl_package_id(node->rapl, dev->idx);
		pthread_mutex_init(&dev->ring_lock, NULL);
	}
	if (sampler_create(st->ndev + 1, streams_on_timers, st, &st->sampler,
	    err) != 0) {
		streams_destroy(st);
		return -1;
	}
	*out = st;
	return 0;
}

void
streams_destroy(struct streams *st)
{
	if (st == NULL)
		return;
	if (st->sampler != NULL)
		streams_end_all(st);
	sampler_destroy(st->sampler);
	if (st->nall > 0)
		zlog(ZLOG_WARN, "streams_leaked", "subscribers=%u", st->nall);
	for (unsigned i = 0; i < st->ndev; i++) {
		pthread_mutex_destroy(&st->devs[i].ring_lock);
		free(st->devs[i].members);
	}
	free(st->devs);
	streams_tick_free(&st->t);
	free(st->all);
	free(st->wake);
	pthread_mutex_destroy(&st->lock);
	free(st);
}
