/* SPDX-License-Identifier: Apache-2.0 */
/*
 * streams.h - power streams over Server-Sent Events: per-device subscriber
 * sets, demand-driven sampling and fan-out of encoded events.
 *
 * Every GPU and every RAPL package is a stream device with a subscriber set
 * and a sampling timer (sampler.h). The first subscriber of a device arms
 * its timer, the last one disarms it: nothing is sampled while nobody
 * listens. Samples go straight to the backend (gpu ops->get_power_mw,
 * rapl_sample), which are safe concurrently with the device workers, so a
 * slow write queued on a GPU never delays its samples.
 *
 * A sample that produces an event is encoded once into the device's ring of
 * recent events; each subscriber only holds a cursor per device into those
 * rings, so fan-out is "wake the subscriber", and libmicrohttpd's content
 * reader copies the shared bytes into the connection. A subscriber that
 * falls behind by more than about ZEUSD_SSE_MAX_UNSENT_MS (half of it
 * waiting in its socket, half in the rings) skips its oldest events and is
 * told so in a `: skipped N` comment (see docs/streams.md for the whole
 * policy, the keepalive comment and what a new subscriber gets first).
 *
 * Threading: streams_subscribe and the readers run on the HTTP thread; the
 * sampler thread samples and wakes. streams_end_all (shutdown) runs on the
 * main thread before the HTTP daemon stops.
 */
#ifndef ZEUS_STREAMS_H
#define ZEUS_STREAMS_H

#include <stdint.h>

#include "common/err.h"
#include "access/policy.h"

struct MHD_Connection;
struct MHD_Response;
struct node;
struct zeusd_config;
struct streams;

enum streams_kind { STREAMS_GPU, STREAMS_CPU };

/* Default keepalive comment interval; ZEUSD_SSE_KEEPALIVE_MS overrides. */
#define STREAMS_KEEPALIVE_MS 15000u
/* Bounds of ZEUSD_SSE_KEEPALIVE_MS. */
#define STREAMS_KEEPALIVE_MIN_MS 10u
#define STREAMS_KEEPALIVE_MAX_MS 3600000u

/* Events kept per device: a subscriber further behind skips the oldest. */
#define STREAMS_RING 64u

/*
 * How far behind a reader may fall, about: half of it may wait in the
 * socket, half in the rings (at most STREAMS_RING events per device); the
 * rest is skipped. ZEUSD_SSE_MAX_UNSENT_MS overrides the default.
 */
#define STREAMS_UNSENT_MS 1000u
#define STREAMS_UNSENT_MIN_MS 100u
#define STREAMS_UNSENT_MAX_MS 60000u

/*
 * Creates the stream devices for `node` (which must outlive the streams)
 * and starts the sampler thread. Reads ZEUSD_SSE_KEEPALIVE_MS (milliseconds,
 * STREAMS_KEEPALIVE_MIN_MS..MAX) and ZEUSD_SSE_MAX_UNSENT_MS
 * (STREAMS_UNSENT_MIN_MS..MAX); an invalid value is an error.
 */
int streams_create(const struct zeusd_config *cfg, struct node *node,
    struct streams **out, struct zerr *err);

/*
 * Has `nudge(ctx)` called after subscribers were resumed from a thread of
 * streams' own (the sampler, streams_end_all): libmicrohttpd's loop must be
 * woken for a resume (server.h, server_loop_nudge). It runs under streams'
 * lock, so it must not call back into streams; after streams_set_nudge
 * returns, the previous one is not running and never runs again (NULL:
 * none).
 */
void streams_set_nudge(struct streams *st, void (*nudge)(void *ctx),
    void *ctx);

/* Checks those two knobs only, so startup can refuse before opening. */
int streams_check_env(struct zerr *err);

/*
 * What let a stream open, kept with it: a stream is one request that may
 * last for hours, while the token and the node policy that allowed it are
 * checked when it opens. It ends at `until_s`, and a reload may take it
 * back (streams_revoke).
 */
struct streams_grant {
	int64_t until_s;		/* the token's exp with its leeway, Unix
					 * seconds; INT64_MAX: never */
	bool by_token;			/* a token opened it */
	bool by_policy;			/* a Unix peer under the node policy */
	int group;			/* the route's API group (by_policy) */
	/*
	 * by_policy: the peer's ids. streams_subscribe keeps a copy of its
	 * own, out of line: 264 bytes a stream would be 2.6 MB over 10,000
	 * streams that mostly have none (docs/performance-history.md).
	 */
	const struct policy_peer *pp;
};

/*
 * Subscribes connection `conn` to devices `idx[0..n-1]` of `kind` (GPU
 * indices or RAPL package indices, valid and duplicate-free) and returns
 * the SSE response to queue (Content-Type and Cache-Control set). The
 * caller (handlers_reply_stream, handlers_stream.c) queues it and then destroys its
 * reference as usual; the subscription ends when libmicrohttpd frees the
 * response, or at the first event or keepalive after `g->until_s` or after
 * streams_revoke took it back (`g` is copied). Fails after
 * streams_end_all.
 */
int streams_subscribe(struct streams *st, enum streams_kind kind,
    const unsigned *idx, unsigned n, struct MHD_Connection *conn,
    const struct streams_grant *g, struct MHD_Response **out,
    struct zerr *err);

/*
 * After a reload: every open stream for which `keep(arg, grant, kind,
 * idx, n)` is false (idx: its device indices, as subscribed) ends at its
 * next event or keepalive, logging stream_dropped reason=revoked. Returns
 * how many were taken back. Any thread.
 */
unsigned streams_revoke(struct streams *st, bool (*keep)(void *arg,
    const struct streams_grant *g, enum streams_kind kind,
    const unsigned *idx, unsigned n), void *arg);

/*
 * Shutdown, before the HTTP daemon stops: stops sampling, refuses new
 * subscribers, and ends every stream (resuming suspended connections so
 * libmicrohttpd can finish and close them). Idempotent.
 */
void streams_end_all(struct streams *st);

/* Calls streams_end_all and frees; after the HTTP daemon stopped. */
void streams_destroy(struct streams *st);

/* Open subscriptions right now (for logs and tests). */
unsigned streams_subscribers(struct streams *st);

/* Events skipped by readers that fell behind, since startup (NULL: 0). */
uint64_t streams_skipped_total(struct streams *st, enum streams_kind kind);

#endif
