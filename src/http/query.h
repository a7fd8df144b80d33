/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.h - the one strict query-string parser every handler uses.
 *
 * A handler declares its parameters (name, type, required) in a table;
 * query_parse() decodes the raw query string against it and refuses, with a
 * 400 naming the parameter: an unknown or repeated parameter, a missing
 * required one, a boolean that is not `true`/`false`, an integer that is not
 * a plain decimal in u32 range, or an id list with an empty or non-integer
 * element. A parameter without "=" has the empty value. The messages read
 * "Invalid query: unknown field `x`, expected one of ...", "... missing
 * field `x`", "... duplicate field `x`", "... invalid value `v` for field
 * `x`: ..." (docs/api.md); echoed input is printable ASCII.
 */
#ifndef ZEUS_QUERY_H
#define ZEUS_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define QUERY_MAX_PARAMS 8
#define QUERY_MAX_IDS 256
#define QUERY_MAX_LEN 4096

enum query_type { Q_BOOL, Q_U32, Q_IDS };

struct query_spec {
	const char *name;
	enum query_type type;
	bool required;
};

/* A sorted, duplicate-free list of device indices. */
struct id_list {
	unsigned n;
	uint32_t ids[QUERY_MAX_IDS];
};

struct query_value {
	bool present;
	bool b;
	uint32_t u32;
	struct id_list *ids;	/* Q_IDS: points into query_values.id_store */
};

struct query_values {
	struct query_value v[QUERY_MAX_PARAMS];
	struct id_list id_store[2];
};

/*
 * Parses `raw` (the part after '?', not NUL-terminated; may be empty) against
 * `spec` (terminated by a NULL name, at most QUERY_MAX_PARAMS entries, at most
 * two of type Q_IDS). values->v[i] corresponds to spec[i].
 */
int query_parse(const char *raw, size_t len, const struct query_spec *spec,
    struct query_values *values, struct zerr *err);

/* Parses an id list such as "0, 2,1" (trimmed, duplicates collapse). */
int query_parse_ids(const char *s, size_t len, struct id_list *out,
    const char *what, struct zerr *err);

/*
 * Percent-decodes [s, s+len) into `out` (size > len), '+' meaning space when
 * `plus_space` (query strings; not paths). Fails on a malformed escape or a
 * NUL, encoded or not. Returns the decoded length or -1.
 */
long query_unescape(const char *s, size_t len, bool plus_space, char *out,
    size_t size);

#endif
