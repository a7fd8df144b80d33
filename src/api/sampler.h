/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sampler.h - one thread that fires periodic timers on absolute deadlines.
 *
 * Streams give each device a timer (and one more for the keepalive comment).
 * A timer runs only while armed: the first subscriber of a device arms it,
 * the last one disarms it, so an idle device is never touched. Deadlines are
 * absolute CLOCK_MONOTONIC times advanced by whole periods, so the rate does
 * not drift with the time the callback takes; a deadline missed by more than
 * a period is skipped rather than fired in a burst.
 *
 * The callback runs on the sampler thread without the sampler's lock, with
 * every timer that fell due at that moment, so devices sampled on the same
 * schedule are handled (and their subscribers woken) as one batch.
 */
#ifndef ZEUS_SAMPLER_H
#define ZEUS_SAMPLER_H

#include <stdint.h>

#include "common/err.h"

struct sampler;

/* Called with the `n` timers (ascending) due now; `now_ns` is monotonic. */
typedef void (*sampler_fn)(void *arg, const unsigned *due, unsigned n,
    uint64_t now_ns);

/* Creates `ntimers` disarmed timers and starts the thread. */
int sampler_create(unsigned ntimers, sampler_fn fn, void *arg,
    struct sampler **out, struct zerr *err);

/*
 * Arms timer `t` (re-arming restarts it): first due `first_ns` from now,
 * then every `period_ns` (> 0). Safe from any thread, also from the
 * callback.
 */
void sampler_arm(struct sampler *s, unsigned t, uint64_t period_ns,
    uint64_t first_ns);

/* Disarms timer `t`; a callback already running may still report it. */
void sampler_disarm(struct sampler *s, unsigned t);

/* Stops and joins the thread (idempotent), then frees. NULL is fine. */
void sampler_destroy(struct sampler *s);

/* Stops and joins the thread without freeing (idempotent). */
void sampler_stop(struct sampler *s);

/* Deadlines skipped because the thread was late (for logs and tests). */
uint64_t sampler_skipped(struct sampler *s);

/* CLOCK_MONOTONIC now, in ns. */
uint64_t sampler_now_ns(void);

#endif
