/* SPDX-License-Identifier: Apache-2.0 */
/*
 * overrides.h - GPU command overrides (`--gpu-command-overrides FILE`).
 *
 * On clusters that never grant the daemon root, an administrator blesses a
 * few commands (sudoers rules around nvidia-smi, say) and lists them in a
 * TOML file, one table per write operation. This module loads that file
 * (trust check, parse, validation of every placeholder, all at startup so
 * a bad file stops the daemon instead of failing a request later) and
 * provides a backend wrapper that runs those commands in place of the
 * driver's writes, forwarding everything else to the inner backend.
 *
 * The user documentation (file format, placeholders, execution and
 * security rules) is docs/overrides.md.
 *
 * The loaded `struct overrides` is immutable, so it is safe to use from
 * every GPU worker thread at once. It is reference-counted so that a reload
 * (overrides_swap, on SIGHUP) can replace it under running writes.
 *
 * The module, one job a file (src/overrides/), and its prefixes:
 *
 *   overrides.h  overrides_*  the public API below, defined in the file
 *                             that does the job (load.c, run.c, backend.c)
 *   internal.h                what the module's files share: the loaded
 *                             file's layout, the cross-file functions
 *   load.c       ovload_      trust check, reading, parsing, validation
 *   expand.c     ovexp_       placeholders: allowed per operation, checked
 *                             at load, substituted at run time
 *   run.c        ovrun_       argv, spawn, judge the outcome, log, errors
 *   sanitize.c   ovsan_       output and command lines made printable
 *   backend.c    ovb_         the wrapping gpu_backend, reference counting
 *   toml.c       toml_ / tp_  the strict TOML subset parser (toml.h)
 *   words.c      words_ / ws_ shell-style word splitting (words.h)
 *   spawn.c      spawn_       running one command safely (spawn.h)
 *   reaper.c     reaper_      no override process outlives it (reaper.h)
 *
 * Every function, static ones included, carries its file's prefix, so a
 * name says where it is defined.
 */
#ifndef ZEUS_OVERRIDES_H
#define ZEUS_OVERRIDES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "devices/gpu.h"

#define OVERRIDES_MAX_COMMANDS 32	/* per operation */
#define OVERRIDES_DEFAULT_TIMEOUT_S 60
#define OVERRIDES_MAX_TIMEOUT_S 86400

struct overrides;

/*
 * Opens `path`, checks that it may be trusted (a regular file owned by
 * root or the effective user and not world-writable: ZERR_FORBIDDEN
 * otherwise; group-writable only logs a warning), then parses and
 * validates it (ZERR_INVALID naming the line, operation, command and
 * placeholder at fault). On success *out holds the overrides.
 */
int overrides_load(const char *path, struct overrides **out,
    struct zerr *err);

/*
 * Parses and validates file contents without the trust check (tests,
 * fuzzing). `name` prefixes error messages.
 */
int overrides_parse(const char *text, size_t len, const char *name,
    struct overrides **out, struct zerr *err);

/* Whether the file has a table for `op`. */
bool overrides_has(const struct overrides *ov, enum gpu_write_op op);

/* How many operations are overridden (0..GPU_WRITE_OP_COUNT). */
unsigned overrides_count(const struct overrides *ov);

/*
 * Runs the override of w->op for GPU index `gpu`: its commands in order,
 * stopping at the first failure (non-zero exit, killed, timed out, or
 * error_pattern found in stdout or stderr). A failure is ZERR_INTERNAL
 * with the operation, GPU, command, reason, stdout and stderr. Calling it
 * for an operation without an override is ZERR_INTERNAL too.
 */
int overrides_run(const struct overrides *ov, unsigned gpu,
    const struct gpu_write *w, struct zerr *err);

/*
 * Builds in *out a backend that runs the overridden writes and forwards
 * every read, and every write without an override, to `inner`.
 * reset_locked_clocks without its own table, when reset_gpu_locked_clocks
 * or reset_mem_locked_clocks has one, runs the GPU domain's reset then the
 * memory domain's (each through its override or through `inner`), trying
 * the second even if the first failed and reporting the first error.
 * `inner.ops` may be NULL (no driver at all): count() is then 0 and reads
 * fail. On success the wrapper owns `ov` and `inner`; out->ops->destroy
 * frees both. Returns -1 only when out of memory (nothing is taken then).
 */
int overrides_wrap(struct overrides *ov, struct gpu_backend inner,
    struct gpu_backend *out);

/*
 * Replaces the overrides inside `b` (a backend made by overrides_wrap) with
 * `ov`, taking it over, and hands the previous ones back in *old: the
 * caller's reference, to look at and then overrides_free. A write running
 * meanwhile finishes with the overrides it started with (it holds its own
 * reference). Returns -1, taking nothing, when `b` is not such a backend.
 */
int overrides_swap(struct gpu_backend *b, struct overrides *ov,
    struct overrides **old);

/* Drops a reference; the last one frees. NULL is fine. */
void overrides_free(struct overrides *ov);

#endif
