/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toml.c - a small, strict parser for the TOML subset of the override file
 * (see toml.h for what is accepted).
 *
 * A hand-written recursive-descent-free scanner: one pass over the bytes,
 * one line at a time, no recursion (nested arrays are refused), so depth
 * and memory are bounded by the input size limit and the count limits.
 * Every error names the line where the scanner stood.
 */
#include "toml.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"

struct tp {
	const char *s;
	size_t len;
	size_t pos;
	unsigned line;
	struct zerr *err;
	struct toml_doc *doc;
	struct toml_table *cur;		/* table that takes new keys */
	unsigned flags;			/* TOML_ALLOW_* */
};

/* A growable byte buffer for string values. */
struct tp_buf {
	char *b;
	size_t n, cap;
};

static int tp_fail(struct tp *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
tp_fail(struct tp *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return zerr_set(p->err, ZERR_INVALID, "line %u: %s", p->line, msg);
}

static int
tp_oom(struct tp *p)
{
	return zerr_set(p->err, ZERR_INTERNAL, "line %u: out of memory",
	    p->line);
}

/* The byte at pos+off, or -1 past the end. */
static int
tp_peek(const struct tp *p, size_t off)
{
	if (p->pos + off >= p->len)
		return -1;
	return (unsigned char)p->s[p->pos + off];
}

static bool
tp_starts(const struct tp *p, const char *lit)
{
	size_t n = strlen(lit);

	return p->len - p->pos >= n && memcmp(p->s + p->pos, lit, n) == 0;
}

/* A printable description of byte `c` for error messages. */
static const char *
tp_chdesc(int c, char *buf, size_t size)
{
	if (c < 0)
		snprintf(buf, size, "end of file");
	else if (c == '\n' || c == '\r')
		snprintf(buf, size, "end of line");
	else if (c > 0x20 && c < 0x7f && c != '\'')
		snprintf(buf, size, "'%c'", c);
	else
		snprintf(buf, size, "byte 0x%02x", (unsigned)c);
	return buf;
}

static int
tp_unexpected(struct tp *p, const char *where)
{
	char d[32];

	return tp_fail(p, "unexpected %s %s",
	    tp_chdesc(tp_peek(p, 0), d, sizeof(d)), where);
}

static bool
tp_is_bare_key_char(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Control characters TOML forbids in strings and comments (tab is fine). */
static bool
tp_is_bad_control(int c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

/*
 * Checks that the whole input is UTF-8 (no overlong forms, no surrogates,
 * nothing past U+10FFFF) and holds no NUL, counting lines for the error.
 */
static int
tp_check_utf8(struct tp *p)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t i = 0;

	while (i < p->len) {
		unsigned c = s[i], n, cp, min;

		if (c == '\n')
			p->line++;
		if (c == 0)
			return tp_fail(p, "NUL byte in file");
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1; cp = c & 0x1f; min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2; cp = c & 0x0f; min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return tp_fail(p, "invalid UTF-8");
		}
		if (p->len - i <= n)
			return tp_fail(p, "invalid UTF-8");
		for (unsigned k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return tp_fail(p, "invalid UTF-8");
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return tp_fail(p, "invalid UTF-8");
		i += n + 1;
	}
	p->line = 1;
	return 0;
}

static int
tp_buf_put(struct tp *p, struct tp_buf *b, const char *data, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 32;
		char *nb;

		while (cap < b->n + n + 1)
			cap *= 2;
		nb = realloc(b->b, cap);
		if (nb == NULL)
			return tp_oom(p);
		b->b = nb;
		b->cap = cap;
	}
	memcpy(b->b + b->n, data, n);
	b->n += n;
	b->b[b->n] = '\0';
	return 0;
}

static void
tp_skip_ws(struct tp *p)
{
	while (tp_peek(p, 0) == ' ' || tp_peek(p, 0) == '\t')
		p->pos++;
}

/* Skips a comment if one starts here; it runs to the end of the line. */
static int
tp_skip_comment(struct tp *p)
{
	int c;

	if (tp_peek(p, 0) != '#')
		return 0;
	p->pos++;
	while ((c = tp_peek(p, 0)) >= 0 && c != '\n') {
		if (c == '\r' && tp_peek(p, 1) == '\n')
			break;
		if (tp_is_bad_control(c))
			return tp_fail(p, "control character in comment");
		p->pos++;
	}
	return 0;
}

/* Consumes one line end (LF or CRLF) if one starts here. */
static int
tp_newline(struct tp *p, bool *got)
{
	*got = false;
	if (tp_peek(p, 0) == '\r') {
		if (tp_peek(p, 1) != '\n')
			return tp_fail(p, "carriage return not followed by "
			    "line feed");
		p->pos++;
	}
	if (tp_peek(p, 0) == '\n') {
		p->pos++;
		p->line++;
		*got = true;
	}
	return 0;
}

/* After a header or a key/value: spaces, a comment, then a line end. */
static int
tp_end_of_line(struct tp *p)
{
	bool got;

	tp_skip_ws(p);
	if (tp_skip_comment(p) < 0 || tp_newline(p, &got) < 0)
		return -1;
	if (!got && tp_peek(p, 0) >= 0)
		return tp_unexpected(p, "after value (expected end of line)");
	return 0;
}

/* Spaces, comments and line ends, as allowed inside arrays. */
static int
tp_skip_blank(struct tp *p)
{
	bool got;

	do {
		tp_skip_ws(p);
		if (tp_skip_comment(p) < 0 || tp_newline(p, &got) < 0)
			return -1;
	} while (got);
	return 0;
}

static int
tp_bare_key(struct tp *p, char *out, size_t size, const char *what,
    const char *where)
{
	size_t n = 0;
	int c = tp_peek(p, 0);

	if (c == '"' || c == '\'')
		return tp_fail(p, "quoted keys are not supported");
	while (tp_is_bare_key_char(tp_peek(p, 0))) {
		if (n + 1 >= size)
			return tp_fail(p, "%s longer than %zu bytes", what,
			    size - 1);
		out[n++] = p->s[p->pos++];
	}
	out[n] = '\0';
	if (n == 0)
		return tp_unexpected(p, where);
	tp_skip_ws(p);
	if (tp_peek(p, 0) == '.')
		return tp_fail(p, "dotted keys are not supported");
	return 0;
}

/* \uXXXX or \UXXXXXXXX (the u/U already consumed): appends UTF-8. */
static int
tp_unicode_escape(struct tp *p, struct tp_buf *b, unsigned digits)
{
	unsigned long cp = 0;
	char u[4];
	size_t n;

	for (unsigned k = 0; k < digits; k++) {
		int h = hex_digit_value(tp_peek(p, 0));

		if (h < 0)
			return tp_fail(p, "\\%c escape needs %u hex digits",
			    digits == 4 ? 'u' : 'U', digits);
		cp = cp << 4 | (unsigned)h;
		p->pos++;
	}
	if (cp == 0)
		return tp_fail(p, "NUL (\\u0000) is not allowed in strings");
	if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return tp_fail(p, "escape is not a Unicode scalar value");
	if (cp < 0x80) {
		u[0] = (char)cp; n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f)); n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
	}
	return tp_buf_put(p, b, u, n);
}

static int
tp_escape(struct tp *p, struct tp_buf *b)
{
	static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
	int c = tp_peek(p, 0);
	const char *hit;
	char d[32];

	if (c == 'u' || c == 'U') {
		p->pos++;
		return tp_unicode_escape(p, b, c == 'u' ? 4 : 8);
	}
	if (c > 0 && (hit = strchr(from, c)) != NULL) {
		p->pos++;
		return tp_buf_put(p, b, &to[hit - from], 1);
	}
	return tp_fail(p, "invalid escape \\ followed by %s",
	    tp_chdesc(c, d, sizeof(d)));
}

/* A basic "..." or literal '...' string starting at the quote. */
static int
tp_string(struct tp *p, struct toml_value *v)
{
	const int q = tp_peek(p, 0);
	struct tp_buf b = { 0 };
	int c;

	if (tp_starts(p, q == '"' ? "\"\"\"" : "'''")) {
		return tp_fail(p, "multi-line strings are not supported");
	}
	p->pos++;
	if (tp_buf_put(p, &b, "", 0) < 0)
		return -1;
	for (;;) {
		c = tp_peek(p, 0);
		if (c < 0 || c == '\n' || c == '\r') {
			free(b.b);
			return tp_fail(p, "unterminated string");
		}
		if (c == q) {
			p->pos++;
			break;
		}
		if (tp_is_bad_control(c)) {
			free(b.b);
			return tp_fail(p, "control character in string");
		}
		p->pos++;
		if (c == '\\' && q == '"') {
			if (tp_escape(p, &b) < 0) {
				free(b.b);
				return -1;
			}
		} else if (tp_buf_put(p, &b, &p->s[p->pos - 1], 1) < 0) {
			free(b.b);
			return -1;
		}
	}
	v->type = TOML_STRING;
	v->str = b.b;
	return 0;
}

/* Reads the digits of a decimal integer into `mag`, checking the forms. */
static int
tp_digits(struct tp *p, uint64_t limit, uint64_t *mag)
{
	bool prev_digit = false;
	int c;

	if (tp_peek(p, 0) == '0' && (tp_peek(p, 1) == 'x' ||
	    tp_peek(p, 1) == 'o' || tp_peek(p, 1) == 'b'))
		return tp_fail(p, "only decimal integers are supported");
	c = tp_peek(p, 1);
	if (tp_peek(p, 0) == '0' && ((c >= '0' && c <= '9') || c == '_'))
		return tp_fail(p, "leading zeros are not allowed");
	*mag = 0;
	while ((c = tp_peek(p, 0)) == '_' || (c >= '0' && c <= '9')) {
		if (c == '_') {
			if (!prev_digit || tp_peek(p, 1) < '0' ||
			    tp_peek(p, 1) > '9')
				return tp_fail(p, "'_' must sit between digits");
			prev_digit = false;
		} else {
			unsigned d = (unsigned)(c - '0');

			if (*mag > (limit - d) / 10)
				return tp_fail(p, "integer out of range");
			*mag = *mag * 10 + d;
			prev_digit = true;
		}
		p->pos++;
	}
	if (!prev_digit)
		return tp_unexpected(p, "in integer");
	return 0;
}

static int
tp_integer(struct tp *p, struct toml_value *v)
{
	bool neg = false;
	uint64_t mag = 0;
	int c = tp_peek(p, 0);

	if (c == '+' || c == '-') {
		neg = c == '-';
		p->pos++;
		c = tp_peek(p, 0);
		if (c == 'i' || c == 'n')
			return tp_fail(p, "floats are not supported");
	}
	if (tp_digits(p, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX,
	    &mag) < 0)
		return -1;
	c = tp_peek(p, 0);
	if (c == '.' || c == 'e' || c == 'E')
		return tp_fail(p, "floats are not supported");
	if (c == '-' || c == ':')
		return tp_fail(p, "dates and times are not supported");
	v->type = TOML_INT;
	v->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return 0;
}

static int
tp_array_item(struct tp *p, struct toml_value *arr, size_t *cap)
{
	int c = tp_peek(p, 0);

	bool is_int = c == '+' || c == '-' || (c >= '0' && c <= '9');

	if (c == '[')
		return tp_fail(p, "nested arrays are not supported");
	if (c != '"' && c != '\'' && !(is_int &&
	    (p->flags & TOML_ALLOW_INT_ITEMS)))
		return tp_fail(p, (p->flags & TOML_ALLOW_INT_ITEMS) ?
		    "arrays may only hold strings and integers" :
		    "arrays may only hold strings");
	if (arr->n_items == TOML_MAX_ITEMS)
		return tp_fail(p, "more than %d items in array",
		    TOML_MAX_ITEMS);
	if (arr->n_items == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4;
		struct toml_value *ni = realloc(arr->items,
		    ncap * sizeof(*ni));

		if (ni == NULL)
			return tp_oom(p);
		arr->items = ni;
		*cap = ncap;
	}
	memset(&arr->items[arr->n_items], 0, sizeof(*arr->items));
	arr->items[arr->n_items].line = p->line;
	if ((is_int ? tp_integer(p, &arr->items[arr->n_items]) :
	    tp_string(p, &arr->items[arr->n_items])) < 0)
		return -1;
	arr->n_items++;
	return 0;
}

/* An array of strings starting at '['; may span lines. */
static int
tp_array(struct tp *p, struct toml_value *v)
{
	size_t cap = 0;

	v->type = TOML_ARRAY;
	p->pos++;
	for (;;) {
		if (tp_skip_blank(p) < 0)
			return -1;
		if (tp_peek(p, 0) == ']')
			break;
		if (tp_peek(p, 0) < 0)
			return tp_fail(p, "unterminated array");
		if (tp_array_item(p, v, &cap) < 0 || tp_skip_blank(p) < 0)
			return -1;
		if (tp_peek(p, 0) == ',') {
			p->pos++;
			continue;
		}
		if (tp_peek(p, 0) == ']')
			break;
		if (tp_peek(p, 0) < 0)
			return tp_fail(p, "unterminated array");
		return tp_unexpected(p, "in array (expected ',' or ']')");
	}
	p->pos++;
	return 0;
}

static int
tp_value(struct tp *p, struct toml_value *v)
{
	int c = tp_peek(p, 0);

	v->line = p->line;
	if (c == '"' || c == '\'')
		return tp_string(p, v);
	if (c == '[')
		return tp_array(p, v);
	if (c == '{')
		return tp_fail(p, "inline tables are not supported");
	if (c == '+' || c == '-' || (c >= '0' && c <= '9'))
		return tp_integer(p, v);
	if (tp_starts(p, "true") || tp_starts(p, "false"))
		return tp_fail(p, "booleans are not supported");
	if (tp_starts(p, "inf") || tp_starts(p, "nan"))
		return tp_fail(p, "floats are not supported");
	if (c < 0 || c == '\n' || c == '\r' || c == '#')
		return tp_fail(p, "missing value after '='");
	return tp_unexpected(p, "where a value was expected");
}

static struct toml_table *
tp_find_table(const struct toml_doc *d, const char *name)
{
	for (size_t i = 0; i < d->n_tables; i++)
		if (strcmp(d->tables[i].name, name) == 0)
			return &d->tables[i];
	return NULL;
}

static const struct toml_key *
tp_find_key(const struct toml_table *t, const char *name)
{
	for (size_t i = 0; i < t->n_keys; i++)
		if (strcmp(t->keys[i].name, name) == 0)
			return &t->keys[i];
	return NULL;
}

static int
tp_add_table(struct tp *p, const char *name)
{
	struct toml_doc *d = p->doc;
	struct toml_table *nt;

	if (d->n_tables > TOML_MAX_TABLES)
		return tp_fail(p, "more than %d tables", TOML_MAX_TABLES);
	nt = realloc(d->tables, (d->n_tables + 1) * sizeof(*nt));
	if (nt == NULL)
		return tp_oom(p);
	d->tables = nt;
	nt = &d->tables[d->n_tables];
	memset(nt, 0, sizeof(*nt));
	nt->name = strdup(name);
	if (nt->name == NULL)
		return tp_oom(p);
	nt->line = p->line;
	d->n_tables++;
	p->cur = nt;
	return 0;
}

static int
tp_header(struct tp *p)
{
	char name[TOML_MAX_KEY_LEN + 1];
	unsigned line = p->line;
	const struct toml_table *prev;
	bool array = false;

	p->pos++;
	if (tp_peek(p, 0) == '[') {
		if (!(p->flags & TOML_ALLOW_TABLE_ARRAYS))
			return tp_fail(p, "arrays of tables ([[...]]) are not "
			    "supported");
		array = true;
		p->pos++;
	}
	tp_skip_ws(p);
	if (tp_bare_key(p, name, sizeof(name), "table name",
	    "in table header") < 0)
		return -1;
	if (tp_peek(p, 0) != ']' || (array && tp_peek(p, 1) != ']'))
		return tp_unexpected(p, array ? "in table header (expected "
		    "']]')" : "in table header (expected ']')");
	p->pos += array ? 2 : 1;
	prev = tp_find_table(p->doc, name);
	if (prev != NULL && !(array && prev->array))
		return tp_fail(p, prev->array || array ? "[%s] is both a "
		    "table and an array of tables" : "duplicate table [%s]",
		    name);
	if (tp_find_key(&p->doc->tables[0], name) != NULL)
		return tp_fail(p, "table [%s] redefines a key", name);
	if (tp_add_table(p, name) < 0)
		return -1;
	p->cur->line = line;
	p->cur->array = array;
	return 0;
}

static int
tp_keyval(struct tp *p)
{
	char name[TOML_MAX_KEY_LEN + 1];
	struct toml_table *t = p->cur;
	struct toml_key *nk;

	if (tp_bare_key(p, name, sizeof(name), "key",
	    "where a key was expected") < 0)
		return -1;
	if (tp_peek(p, 0) != '=')
		return tp_unexpected(p, "after key (expected '=')");
	p->pos++;
	tp_skip_ws(p);
	if (tp_find_key(t, name) != NULL)
		return tp_fail(p, "duplicate key '%s'", name);
	if (t->n_keys == TOML_MAX_KEYS)
		return tp_fail(p, "more than %d keys in one table",
		    TOML_MAX_KEYS);
	nk = realloc(t->keys, (t->n_keys + 1) * sizeof(*nk));
	if (nk == NULL)
		return tp_oom(p);
	t->keys = nk;
	nk = &t->keys[t->n_keys];
	memset(nk, 0, sizeof(*nk));
	nk->line = p->line;
	nk->name = strdup(name);
	if (nk->name == NULL)
		return tp_oom(p);
	t->n_keys++;
	return tp_value(p, &nk->v);
}

static int
tp_line(struct tp *p)
{
	int c;
	bool got;

	tp_skip_ws(p);
	c = tp_peek(p, 0);
	if (c == '#')
		return tp_skip_comment(p) < 0 ? -1 : tp_end_of_line(p);
	if (c == '\n' || c == '\r')
		return tp_newline(p, &got);
	if (c == '[') {
		if (tp_header(p) < 0)
			return -1;
	} else if (tp_keyval(p) < 0) {
		return -1;
	}
	return tp_end_of_line(p);
}

int
toml_parse(const char *text, size_t len, struct toml_doc **out,
    struct zerr *err)
{
	return toml_parse_ext(text, len, 0, out, err);
}

int
toml_parse_ext(const char *text, size_t len, unsigned flags,
    struct toml_doc **out, struct zerr *err)
{
	struct tp p = { .s = text, .len = len, .line = 1, .err = err,
	    .flags = flags };

	*out = NULL;
	if (len > TOML_MAX_INPUT)
		return zerr_set(err, ZERR_INVALID, "file larger than %d bytes",
		    TOML_MAX_INPUT);
	if (tp_check_utf8(&p) < 0)
		return -1;
	p.doc = calloc(1, sizeof(*p.doc));
	if (p.doc == NULL)
		return tp_oom(&p);
	if (tp_add_table(&p, "") < 0)
		goto fail;
	p.doc->tables[0].line = 0;
	while (p.pos < p.len)
		if (tp_line(&p) < 0)
			goto fail;
	*out = p.doc;
	return 0;
fail:
	toml_free(p.doc);
	return -1;
}

static void
toml_value_clear(struct toml_value *v)
{
	free(v->str);
	for (size_t i = 0; i < v->n_items; i++)
		free(v->items[i].str);
	free(v->items);
}

void
toml_free(struct toml_doc *doc)
{
	if (doc == NULL)
		return;
	for (size_t i = 0; i < doc->n_tables; i++) {
		struct toml_table *t = &doc->tables[i];

		for (size_t k = 0; k < t->n_keys; k++) {
			free(t->keys[k].name);
			toml_value_clear(&t->keys[k].v);
		}
		free(t->keys);
		free(t->name);
	}
	free(doc->tables);
	free(doc);
}
