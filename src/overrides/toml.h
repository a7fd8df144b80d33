/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toml.h - a small, strict parser for the TOML subset of the override file.
 *
 * There is no C TOML library in Debian, and the GPU command-overrides file
 * (see overrides.h) needs only a sliver of TOML, so this parser accepts
 * exactly that sliver and rejects everything else with "line N: ...":
 *
 *   - `[table]` headers with bare keys (A-Z a-z 0-9 _ -);
 *   - `key = value` with a bare key;
 *   - values: basic strings "..." (escapes \" \\ \n \t \r \b \f \uXXXX
 *     \UXXXXXXXX), literal strings '...', decimal integers (optional sign,
 *     `_` between digits, int64 range), and arrays of strings that may span
 *     lines and hold comments and a trailing comma;
 *   - `#` comments and blank lines; LF or CRLF line ends; UTF-8 only.
 *
 * Floats, booleans, dates, inline tables, arrays of tables, dotted or quoted
 * keys and multi-line strings are errors, as are duplicate keys and tables.
 * Input size and counts are bounded (TOML_MAX_*), since the file is
 * untrusted input until it has been validated.
 *
 * The result is a plain in-memory document; it knows nothing about what
 * the keys mean (the overrides' load.c and the daemon's policy.c do).
 */
#ifndef ZEUS_TOML_H
#define ZEUS_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define TOML_MAX_INPUT (1024 * 1024)	/* bytes */
#define TOML_MAX_TABLES 64
#define TOML_MAX_KEYS 64		/* per table */
#define TOML_MAX_ITEMS 256		/* per array */
#define TOML_MAX_KEY_LEN 128

enum toml_type { TOML_STRING, TOML_INT, TOML_ARRAY };

struct toml_value {
	enum toml_type type;
	unsigned line;			/* where the value starts (1-based) */
	char *str;			/* TOML_STRING: NUL-terminated UTF-8 */
	int64_t i;			/* TOML_INT */
	struct toml_value *items;	/* TOML_ARRAY: strings (and integers
					 * with TOML_ALLOW_INT_ITEMS) */
	size_t n_items;
};

struct toml_key {
	char *name;
	unsigned line;
	struct toml_value v;
};

struct toml_table {
	char *name;			/* "" for the keys before any header */
	unsigned line;			/* line of the header; 0 for the root */
	bool array;			/* a [[name]] element */
	struct toml_key *keys;
	size_t n_keys;
};

struct toml_doc {
	struct toml_table *tables;	/* tables[0] is always the root */
	size_t n_tables;
};

/*
 * Parses `len` bytes of `text` (need not be NUL-terminated). On success
 * stores a new document in *out and returns 0; on failure returns -1 with
 * ZERR_INVALID and a message "line N: ...".
 */
int toml_parse(const char *text, size_t len, struct toml_doc **out,
    struct zerr *err);

/*
 * The same with extensions the policy file (src/access/policy.h) needs and
 * the overrides file refuses: TOML_ALLOW_TABLE_ARRAYS takes `[[name]]`
 * headers (each one a new table with `array` set, in file order; a name
 * may not be both a table and an array of tables); TOML_ALLOW_INT_ITEMS
 * lets arrays hold integers as well as strings, mixed.
 */
#define TOML_ALLOW_TABLE_ARRAYS 0x1u
#define TOML_ALLOW_INT_ITEMS 0x2u
int toml_parse_ext(const char *text, size_t len, unsigned flags,
    struct toml_doc **out, struct zerr *err);

void toml_free(struct toml_doc *doc);

#endif
