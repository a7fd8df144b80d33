/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - what the files of the overrides module share and nobody
 * else sees: the loaded file's layout and the functions one file of the
 * module calls in another (the prefix scheme is in overrides.h).
 *
 * Nothing outside src/overrides/ includes this: the daemon, the tests and
 * the fuzzers go through overrides.h, so the layout below can change
 * without touching them.
 */
#ifndef ZEUS_OVERRIDES_INTERNAL_H
#define ZEUS_OVERRIDES_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif

#include <pcre2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "overrides.h"
#include "words.h"

/* ---- the loaded file (load.c builds it, the rest only read it) ------- */

struct overrides_cmd {
	struct words argv;	/* split, not yet substituted */
	unsigned line;
};

struct overrides_op {
	bool present;
	struct overrides_cmd *cmds;
	size_t n_cmds;
	pcre2_code *re;		/* NULL without error_pattern */
	unsigned timeout_s;
};

struct overrides {
	struct overrides_op ops[GPU_WRITE_OP_COUNT];
	atomic_uint refs;	/* overrides_free drops one; see ovb_acquire */
};

/* ---- placeholders (expand.c) ----------------------------------------- */

/* Room for one substituted word: a value is at most 10 digits and its
 * shortest placeholder 8 bytes, so twice the input always suffices. */
#define OVEXP_WORD_MAX (2 * WORDS_MAX_INPUT + 1)

/* The placeholders, as indexes into the values of one write. */
enum ovexp_ph {
	OVEXP_GPU_ID,
	OVEXP_POWER_LIMIT_MW,
	OVEXP_POWER_LIMIT_W,
	OVEXP_MIN_CLOCK_MHZ,
	OVEXP_MAX_CLOCK_MHZ,
	OVEXP_ENABLED,
	OVEXP_COUNT
};

/*
 * Validates the placeholders of `word` for `op` and, when `vals` is not
 * NULL, writes the substituted word into out. `{{` and `}}` stand for
 * literal braces. Returns 0, or -1 with `why` filled in.
 */
int ovexp_expand(const char *word, enum gpu_write_op op, const uint64_t *vals,
    char *out, size_t size, char *why, size_t whysize);

/* The value of every placeholder for write `w` on GPU `gpu`. */
void ovexp_values(unsigned gpu, const struct gpu_write *w,
    uint64_t vals[OVEXP_COUNT]);

/* ---- making command output printable (sanitize.c) -------------------- */

/*
 * Copies s (n bytes) into out, trimmed of surrounding white space and cut
 * to its last `keep` bytes, with control bytes (other than newline and
 * tab) and broken UTF-8 replaced by '?': the message stays readable and is
 * always valid UTF-8, as a JSON answer needs.
 */
void ovsan_text(const char *s, size_t n, size_t keep, char *out,
    size_t size);

/* The argv as a shell would need it quoted, for messages and logs. */
void ovsan_argv(char *const argv[], char *out, size_t size);

#endif
