/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.h - GPU leases and restore on exit (--gpu-leases): the first GPU
 * setting change by a non-root Unix-socket peer gives its user a lease on
 * that GPU; while any process of that user that changed a setting on it
 * lives, other non-root writers get 409. When the last such process exits
 * the settings the user changed go back to the values in force before the
 * user's first change, through the GPU's own device queue (room there is
 * never refused to a restore), and the lease ends once every restore
 * succeeded: a failed one is retried with a backoff while the lease keeps
 * refusing others, the 409 naming the failure. See docs/security.md,
 * "Shared nodes".
 *
 * Processes are watched through the pidfd each connection took when it was
 * accepted (peer_take_pidfd: the process that connected, not its pid
 * number, which may be reused), on one small thread that sleeps in
 * epoll_wait: no polling. TCP peers have no process to watch: they never
 * take a lease (but are refused on a leased GPU like any non-root writer).
 */
#ifndef ZEUS_LEASE_H
#define ZEUS_LEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

struct leases;
struct node;
struct peer;
struct gpu_cmd;

int leases_create(struct node *node, struct leases **out, struct zerr *err);

/*
 * Stops the watcher thread: no restore starts after it. Call before the
 * device workers stop (restores already queued still run and complete
 * into `l`), and leases_destroy after they stopped.
 */
void leases_stop(struct leases *l);
void leases_destroy(struct leases *l);

/*
 * Loop thread, before a write is queued: for a writer that is not root on
 * the Unix socket, refuses (ZERR_CONFLICT, 409) when another user holds a
 * lease on one of `gpus`; for a non-root Unix peer, then takes or extends
 * its user's lease with the peer's process (p->pidfd). A non-root Unix
 * peer whose process has exited (or was gone at accept time: no pidfd) is
 * refused (ZERR_CONFLICT) before anything is taken. Root is never refused
 * and never takes a lease. Returns 0 or -1 with err.
 */
int leases_claim(struct leases *l, const struct peer *p, const char *user,
    const uint32_t *gpus, unsigned n, struct zerr *err);

/*
 * Loop thread, after a successful leases_claim: the write is now queued
 * (or was refused). Required once per successful claim with the same
 * arguments: a restore due while the write was between the two is queued
 * now, behind it.
 */
void leases_claim_done(struct leases *l, const struct peer *p,
    const uint32_t *gpus, unsigned n);

/*
 * Worker thread, after a write ran: records the value it replaced when it
 * is the first change of that setting under the lease (the value to
 * restore). `unix_peer`/`uid`: the writer. `l` may be NULL (no leases).
 */
void leases_note(struct leases *l, bool unix_peer, uid_t uid,
    const struct gpu_cmd *cmd);

/*
 * SIGTERM with --restore-on-shutdown: restores every leased GPU now and
 * waits up to `timeout_ms` for the restores to finish.
 */
void leases_restore_all(struct leases *l, unsigned timeout_ms);

#endif
