/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.h - the lease journal: what a GPU lease changed, on disk before
 * the change runs, so that a zeusd killed with the lease open can put the
 * GPU back (or keep the lease) when it starts again (docs/design.md,
 * "The lease journal"; docs/operations.md says where it lives).
 *
 * One small text file per leased GPU in the state directory
 * (`--state-dir`), `gpu-N.lease`, replaced whole (written to
 * `gpu-N.lease.tmp`, synced, renamed over, the directory synced), removed
 * when the lease ends. It holds the boot it was written in, the holder's
 * uid and processes (pid and start time, so a reused pid is never taken
 * for the holder), and each setting's value before the lease's first
 * change of it, closed by a SHA-256 of everything before it:
 *
 *   zeusd-lease 1
 *   boot 6f0c...-...
 *   gpu 0
 *   uid 1000
 *   cgroup 2f757365722e... (the holder's cgroup, hex; optional)
 *   label slurm:42.0         (the lease's label, lease_label.h; optional)
 *   started_ms 1796383683395 (when the lease began, Unix time; optional)
 *   energy_mj 123456789      (the GPU's energy counter then; optional)
 *   limit_mw 300000          (only when the power limit was changed)
 *   persistence 1            (likewise, the mode before: 0 or 1)
 *   gpu_clocks 1             (GPU clocks were locked: reset them)
 *   mem_clocks 1             (memory clocks were locked)
 *   pid 4242 123456          (each holder process: pid, start ticks)
 *   sum <64 hex digits>
 *
 * The reader (journal_parse) takes nothing else: every line known, in
 * that order, each number in range, the sum matching. It is fuzzed
 * (fuzz/fuzz_lease_journal.c).
 */
#ifndef ZEUS_ACCESS_JOURNAL_H
#define ZEUS_ACCESS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "common/lease_label.h"

#define JOURNAL_MAX_PIDS 64		/* WARDEN_MAX_PIDS */
#define JOURNAL_MAX_BYTES 4096		/* a file's size at most */
#define JOURNAL_BOOT_LEN 36		/* a boot id: 8-4-4-4-12 hex */
#define JOURNAL_MAX_GPU 63
#define JOURNAL_CGROUP_MAX 256		/* IDENTITY_CGROUP_MAX: with its NUL */

struct journal_rec {
	unsigned gpu;
	uint32_t uid;
	char cgroup[JOURNAL_CGROUP_MAX];	/* "" unknown */
	char label[LEASE_LABEL_MAX + 1];	/* "" none */
	bool has_start, has_energy;
	uint64_t started_ms, energy_mj;	/* the lease's beginning */
	bool has_limit, has_persist, gpu_clocks, mem_clocks;
	uint32_t limit_mw;
	bool persist;
	unsigned npid;
	int32_t pid[JOURNAL_MAX_PIDS];
	uint64_t start[JOURNAL_MAX_PIDS];
};

/* Whether `r` changed anything (a record that did not is never kept). */
bool journal_rec_pending(const struct journal_rec *r);

/*
 * `r` as the file's bytes, for the boot `boot` (JOURNAL_BOOT_LEN chars);
 * the length, or -1 when it does not fit `size`.
 */
int journal_format(const struct journal_rec *r, const char *boot, char *buf,
    size_t size);

/*
 * Why a file was not taken (journal_parse, journal_load).
 */
enum journal_bad {
	JOURNAL_OK = 0,
	JOURNAL_GARBLED,		/* truncated, unknown line, bad sum */
	JOURNAL_OTHER_BOOT,		/* written before the last reboot */
	JOURNAL_UNSAFE,			/* not root's, writable by others, a
					 * link, not a regular file */
};

/*
 * Reads the bytes of one file: JOURNAL_OK with *r and the boot it names in
 * boot[JOURNAL_BOOT_LEN + 1], or JOURNAL_GARBLED with `why`.
 */
enum journal_bad journal_parse(const char *buf, size_t len,
    struct journal_rec *r, char *boot, char *why, size_t whysz);

/* This boot's id (/proc/sys/kernel/random/boot_id): 0, or -1 with err. */
int journal_boot_id(char boot[JOURNAL_BOOT_LEN + 1], struct zerr *err);

/*
 * Opens the state directory `path` (created 0700 when missing): root's
 * (this process's user), not writable by group or others, not a link.
 * The directory fd, or -1 with err.
 */
int journal_open_dir(const char *path, struct zerr *err);

/* Writes and syncs GPU r->gpu's file (replaced whole); 0 or -1 with err. */
int journal_save(int dirfd, const struct journal_rec *r, const char *boot,
    struct zerr *err);

/* Removes GPU `gpu`'s file (none is fine) and syncs; 0 or -1 with err. */
int journal_remove(int dirfd, unsigned gpu, struct zerr *err);

/*
 * GPU `gpu`'s file: 1 when there is none, 0 with *r when it was taken, or
 * -1 with `bad` and `why` (its boot is not `boot`, it is garbled or
 * unsafe, or it names another GPU).
 */
int journal_load(int dirfd, unsigned gpu, const char *boot,
    struct journal_rec *r, enum journal_bad *bad, char *why, size_t whysz);

/*
 * Moves GPU `gpu`'s file aside as gpu-N.lease.refused (an operator's to
 * look at; it is not read again); 0 or -1.
 */
int journal_set_aside(int dirfd, unsigned gpu);

/* Renames `from` to `to` in the state directory; 0 or -1. */
int journal_rename(int dirfd, const char *from, const char *to);

/* ---- Shared with the state directory's other files (ledger_store.h) ---- */

#define JOURNAL_SUM_HEX 64		/* a SHA-256 in hex */

/* The SHA-256 of buf[0..len) in lowercase hex. */
void journal_sum(const char *buf, size_t len, char out[JOURNAL_SUM_HEX + 1]);

/*
 * [s, end) as a decimal number of at most `max`: no sign, no leading zero
 * (but "0"); false otherwise.
 */
bool journal_number(const char *s, const char *end, uint64_t max,
    uint64_t *out);

/* Appends s[0..n) in lowercase hex; false when it does not fit. */
bool journal_put_hex(char *buf, size_t size, size_t *at, const char *s,
    size_t n);

/*
 * [v, end) as lowercase hex of 1..max bytes, none of them NUL, decoded
 * into out (not terminated): the byte count, or -1 (any other spelling).
 */
int journal_hex_text(const char *v, const char *end, char *out, size_t max);

/* The word for `bad` in log lines ("garbled", "other_boot", "unsafe"). */
const char *journal_bad_name(enum journal_bad bad);

/* JOURNAL_GARBLED, with `why` formatted (a reader's refusal). */
enum journal_bad journal_garbled(char *why, size_t whysz, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

/* Appends a formatted text to buf at *at; false when it does not fit. */
bool journal_put(char *buf, size_t size, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether s[0..n) is a boot id (lowercase 8-4-4-4-12 hex). */
bool journal_boot_valid(const char *s, size_t n);

/*
 * `name` in the state directory replaced by buf[0..len) whole: written to
 * `name`.tmp, synced, renamed over, the directory synced. 0, or an errno.
 */
int journal_replace(int dirfd, const char *name, const char *buf, size_t len);

/*
 * `name` (a leftover `name`.tmp is removed first): 1 when there is none,
 * 0 with its bytes in buf[0..*n) when it is a regular file of this
 * process's user, mode 600, one link, at most size - 1 bytes; -1 with
 * `bad` (JOURNAL_UNSAFE, or JOURNAL_GARBLED when it cannot be read or is
 * too large) and `why`.
 */
int journal_read_private(int dirfd, const char *name, char *buf, size_t size,
    size_t *n, enum journal_bad *bad, char *why, size_t whysz);

#endif
