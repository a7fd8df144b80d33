/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pidwatch.h - a thread that says when watched processes exit (Linux).
 *
 * The device process's warden keeps its lease holders as pidfds; this
 * tells it, without polling, when one became readable (its process
 * exited), so the device process restores a lease's GPU itself when the
 * holder is gone, whatever the network process does. Each pidfd is
 * armed once (EPOLLONESHOT) under a caller's tag: an exit is told once,
 * on this module's thread, and the caller looks at its own records then
 * (the pidfd may have been closed meanwhile: a tag names no fd). The same
 * thread runs the caller's retries (a tick at a time it sets, or at once
 * when kicked).
 */
#ifndef ZEUS_ACCESS_PIDWATCH_H
#define ZEUS_ACCESS_PIDWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

struct pidwatch;

/*
 * A pidfd of process `pid` (pidfd_open), close-on-exec: its fd, or -1 with
 * errno (ESRCH: no such process; EMFILE and the like: out of descriptors;
 * ENOSYS where processes have no pidfds, as on Windows).
 */
int pidwatch_open(pid_t pid);

/* Whether the process of `pidfd` exited (its pidfd is readable), now. */
bool pidwatch_exited(int pidfd);

/*
 * `exited(ctx, tag)` runs on the watcher's thread, for one pidfd at a
 * time; `tick(ctx)` too, when a time set by pidwatch_tick_in came (a
 * retry). 0, or -1 with err.
 */
int pidwatch_create(void (*exited)(void *ctx, uint32_t tag),
    void (*tick)(void *ctx), void *ctx, struct pidwatch **out,
    struct zerr *err);

/*
 * `tick` runs in `ms` (or sooner, if an earlier one is set). Only before
 * pidwatch_start or from the watcher's own thread (inside `exited` or
 * `tick`).
 */
void pidwatch_tick_in(struct pidwatch *pw, unsigned ms);

/*
 * Watches `pidfd` (still the caller's) under `tag`; any thread, before or
 * after pidwatch_start. 0, or -1 with err (the exit is then not told).
 */
int pidwatch_add(struct pidwatch *pw, int pidfd, uint32_t tag,
    struct zerr *err);

/* Forgets `pidfd`: call it before closing one that was added. */
void pidwatch_remove(struct pidwatch *pw, int pidfd);

/*
 * `tick` runs on the watcher's thread as soon as it can (any thread may
 * ask: a record it changed now needs a look there).
 */
void pidwatch_kick(struct pidwatch *pw);

/* Starts the thread. 0, or -1 with err. */
int pidwatch_start(struct pidwatch *pw, struct zerr *err);

/*
 * Stops the thread (waits for a call of `exited` under way) and frees.
 * NULL is fine.
 */
void pidwatch_destroy(struct pidwatch *pw);

#endif
