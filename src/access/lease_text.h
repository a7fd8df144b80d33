/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_text.h - the words of a GPU lease's refusals (409), in one place
 * for both processes: the network process's early answer (lease.c) and
 * the device process's decision (warden.c) say the same thing in the same
 * words, so a client sees one text whichever refused it. Each sets `err`
 * (ZERR_CONFLICT) and returns -1.
 */
#ifndef ZEUS_ACCESS_LEASE_TEXT_H
#define ZEUS_ACCESS_LEASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

/*
 * GPU `gpu` is another user's (`user` "" when it has no name):
 * `restoring` when its holder's processes are gone and its settings are
 * on their way back.
 */
int lease_text_held(struct zerr *err, unsigned gpu, const char *user,
    uid_t uid, bool restoring);

/* ... and its restore failed (`why`), retried `attempts` times so far. */
int lease_text_restore_failed(struct zerr *err, unsigned gpu,
    const char *user, uid_t uid, const char *why, unsigned attempts,
    unsigned retry_max_s);

/* Only the holder or root may end it (POST /gpu/release, a restore). */
int lease_text_not_yours(struct zerr *err, unsigned gpu, const char *user,
    uid_t uid);

/*
 * The node policy's max_leased_gpus: `uid` holds `held` and the write
 * would lease `taking` more.
 */
int lease_text_max(struct zerr *err, uid_t uid, unsigned held,
    unsigned taking, unsigned max);

/* A lease's settings (GPU_SETTING_* bits) as text: "power_limit,gpu_clocks"
 * ("" for none). */
void lease_settings_format(unsigned settings, char *buf, size_t size);

#endif
