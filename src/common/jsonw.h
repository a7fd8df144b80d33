/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonw.h - a JSON body of objects, integers, booleans and nulls written
 * straight into a growing buffer, for the answers of the device reads
 * (api/handlers_gpu.c, handlers_cpu.c).
 *
 * Those bodies are small fixed shapes ({"0":{"cpu_energy_uj":N,...},...})
 * filled with numbers, and they are answered for every read. Building
 * them as a jansson tree and dumping it cost 2.8-5.2 µs a body on the CI
 * machine, writing them here 0.23-0.48 µs (bench/json_body.c;
 * docs/performance-history.md, "Bodies without a tree"); a one-connection
 * GET /time takes 17-22 µs. The output is the
 * bytes json_dumps(..., JSON_COMPACT) gives for the same tree (members in
 * the order written), which tests/unit/test_jsonw.c checks against jansson
 * itself.
 *
 * Nothing here takes a string from a client: keys are our literals or
 * unsigned numbers, and a key with a character JSON would need escaped
 * ('"', '\', a control or non-ASCII byte) fails the body instead of being
 * written. Everything else (parsing, bodies with strings) stays jansson's.
 *
 * Misuse (a value where a key is due, closing more than was opened) and
 * running out of memory or of JSONW_MAX fail the body too: every call after
 * a failure does nothing, and jsonw_finish returns NULL.
 */
#ifndef ZEUS_JSONW_H
#define ZEUS_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest body (bytes, the NUL aside) and the deepest nesting. */
#define JSONW_MAX (256u * 1024u)
#define JSONW_DEPTH 8

struct jsonw {
	char *buf;		/* malloc'd; NULL before the first write */
	size_t len, cap;
	bool failed;
	bool want_value;	/* a key was written; its value is due */
	unsigned depth;		/* objects open */
	/* bit d: the object open at depth d+1 has a member already */
	uint32_t members;
};

/* An empty writer (no allocation yet). */
void jsonw_init(struct jsonw *w);

/* '{' (as a value: after a key, or the body itself) and its '}'. */
void jsonw_open(struct jsonw *w);
void jsonw_close(struct jsonw *w);

/* A member's key: a literal (see above), or an unsigned number as text. */
void jsonw_key(struct jsonw *w, const char *key);
void jsonw_key_u(struct jsonw *w, unsigned key);

/* Values. */
void jsonw_int(struct jsonw *w, int64_t v);
/* A member with an integer value: jsonw_key, then jsonw_int. */
void jsonw_key_int(struct jsonw *w, const char *key, int64_t v);
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);

/*
 * The body, NUL-terminated, handed to the caller (free()) with its length
 * in *len; NULL when the writer failed or an object is still open (the
 * buffer is freed then). The writer is empty again afterwards.
 */
char *jsonw_finish(struct jsonw *w, size_t *len);

/* Frees what the writer holds (a body abandoned half-way). */
void jsonw_discard(struct jsonw *w);

#endif
