/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_store.h - the energy ledger's durable copy (--gpu-leases
 * --state-dir): what /metrics and GET /gpu/leases count since zeusd began
 * keeping the ledger, so that a crash, a SIGKILL, a restart or a stop and
 * start continue the counters instead of resetting them (docs/design.md,
 * "The ledger file").
 *
 * The device process keeps the ledger (access/warden_book.c) from what it
 * sees itself: the energy of each lease's end, per user and GPU, and per
 * GPU the energy counter's increments outside leases
 * (unleased) with the reading they are based on. One file, `ledger`, in
 * the lease journal's directory, replaced whole as the journal's files are
 * (journal.h), root's and private:
 *
 *   zeusd-ledger 1
 *   boot 6f0c...-...
 *   gpus 2
 *   gpu 0 123456 98765432      (unleased mJ, the counter it is based on)
 *   gpu 1 0 -                  (no base: no reading yet)
 *   user 1000 616c696365 5000 0  (uid, name in hex or -, mJ per GPU)
 *   user 4294967295 286f7468657229 7 0  (the 256th: "(other)")
 *   sum <64 hex digits>
 *
 * At most LEDGER_STORE_USERS users, distinct, in the order they came; the
 * 256th is "(other)" (uid 4294967295), the sum of every later user. The reader takes nothing else (every line known, in order,
 * each number in range and canonical, the sum matching); it is fuzzed
 * (fuzz/fuzz_ledger_store.c). A file of another boot keeps its totals and
 * drops the counters' bases (they restart at a reboot).
 */
#ifndef ZEUS_ACCESS_LEDGER_STORE_H
#define ZEUS_ACCESS_LEDGER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access/journal.h"
#include "common/err.h"

#define LEDGER_STORE_USERS 256		/* PSMSG_LEDGER_MAX */
#define LEDGER_STORE_GPUS (JOURNAL_MAX_GPU + 1)
#define LEDGER_STORE_NAME 64		/* a user's name, with its NUL */
#define LEDGER_STORE_OTHER UINT32_MAX	/* the "(other)" slot's uid */
/* the largest file: 256 users of 64 GPUs, every number at its longest */
#define LEDGER_STORE_MAX_BYTES (448 * 1024)

struct ledger_store_gpu {
	bool based;			/* last_mj is a reading */
	uint64_t last_mj;		/* the counter at the last boundary */
	uint64_t unleased_mj;		/* charged to nobody */
};

struct ledger_store_user {
	uint32_t uid;
	char name[LEDGER_STORE_NAME];	/* "" unknown */
	uint64_t mj[LEDGER_STORE_GPUS];	/* ended leases' energy, per GPU */
};

struct ledger_store {
	unsigned ngpu;			/* <= LEDGER_STORE_GPUS */
	unsigned nusers;		/* <= LEDGER_STORE_USERS */
	struct ledger_store_gpu gpu[LEDGER_STORE_GPUS];
	struct ledger_store_user users[LEDGER_STORE_USERS];
};

/* An empty ledger of `ngpu` GPUs (at most LEDGER_STORE_GPUS). */
void ledger_store_init(struct ledger_store *s, unsigned ngpu);

/* a + b, or UINT64_MAX when that overflows (every total here adds so). */
uint64_t ledger_store_sat_add(uint64_t a, uint64_t b);

/*
 * `mj` of a lease of `uid` (named `name`) on `gpu`, added to its total
 * (saturating); a user past the 255th goes to "(other)".
 */
void ledger_store_add(struct ledger_store *s, uint32_t uid, const char *name,
    unsigned gpu, uint64_t mj);

/*
 * A counter reading `mj` of `gpu` with no lease running: the increase
 * since the base is nobody's, and `mj` is the new base (a counter that
 * went back starts a new base: lease.c's ledger_unleased).
 */
void ledger_store_unleased(struct ledger_store *s, unsigned gpu, uint64_t mj);

/* A reading that ends a lease: the new base, charged to nobody. */
void ledger_store_rebase(struct ledger_store *s, unsigned gpu, uint64_t mj);

/* The counters restarted (another boot): every base is dropped. */
void ledger_store_unbase(struct ledger_store *s);

/*
 * `s` as the file's bytes, for the boot `boot` (JOURNAL_BOOT_LEN chars);
 * the length, or -1 when it does not fit `size`.
 */
int ledger_store_format(const struct ledger_store *s, const char *boot,
    char *buf, size_t size);

/*
 * Reads the bytes of one file: JOURNAL_OK with *s and the boot it names in
 * boot[JOURNAL_BOOT_LEN + 1], or JOURNAL_GARBLED with `why` (and *s empty).
 */
enum journal_bad ledger_store_parse(const char *buf, size_t len,
    struct ledger_store *s, char *boot, char *why, size_t whysz);

/* Writes and syncs the file (replaced whole); 0 or -1 with err. */
int ledger_store_save(int dirfd, const struct ledger_store *s,
    const char *boot, struct zerr *err);

/*
 * The file, fitted to `ngpu` GPUs: 1 when there is none (*s empty), 0
 * with *s when taken (*bad JOURNAL_OTHER_BOOT when it was written before
 * the last reboot: its bases are dropped), or -1 with `bad` and `why` when
 * refused (garbled, or not root's and private) with *s empty.
 */
int ledger_store_load(int dirfd, const char *boot, unsigned ngpu,
    struct ledger_store *s, enum journal_bad *bad, char *why, size_t whysz);

/* Moves the file aside as ledger.refused; 0 or -1. */
int ledger_store_set_aside(int dirfd);

#endif
