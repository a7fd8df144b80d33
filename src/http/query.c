/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.c - strict query-string parsing (see query.h).
 *
 * Hand-written because the rules are ours (strictness, repeated parameters,
 * error messages); it has a fuzz target (fuzz/fuzz_query.c).
 *
 * Refusals use the phrases of the upstream Rust daemon's query decoder
 * ("unknown field `x`", "missing field `x`", "duplicate field `x`",
 * "invalid value ... not `true` or `false`", "... expected u32"), which Zeus's
 * clients and tests look for, after our "Invalid query: " and always with the
 * parameter's name. Echoed input is shown printable-ASCII only (see
 * query_show): the message goes into a JSON string, which must be UTF-8.
 */
#include "http/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"

/* How much of a refused name or value a message quotes. */
#define QUERY_SHOW_MAX 40

long
query_unescape(const char *s, size_t len, bool plus_space, char *out,
    size_t size)
{
	size_t o = 0;

	if (size <= len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -1;
			hi = hex_digit_value(s[i + 1]);
			lo = hex_digit_value(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = (char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		} else if (c == '\0') {
			return -1;
		}
		out[o++] = c;
	}
	out[o] = '\0';
	return (long)o;
}

/*
 * Writes [s, s+len) for a message: printable ASCII as is, any other byte
 * (and the backtick that quotes it) as \xNN, cut at QUERY_SHOW_MAX bytes
 * with "...". `out` holds at least QUERY_SHOW_MAX * 4 + 4 bytes.
 */
static const char *
query_show(const char *s, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t i = 0; i < len && i < QUERY_SHOW_MAX; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '`') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (len > QUERY_SHOW_MAX) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static int
query_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Parses a plain decimal u32 from [s, s+len): no sign, no spaces. */
static int
query_u32(const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 10)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int
query_parse_ids(const char *s, size_t len, struct id_list *out,
    const char *what, struct zerr *err)
{
	char shown[QUERY_SHOW_MAX * 4 + 4];
	size_t i = 0;

	out->n = 0;
	for (;;) {
		size_t start = i, end;
		uint32_t id;

		while (i < len && s[i] != ',')
			i++;
		end = i;
		while (start < end && s[start] == ' ')
			start++;
		while (end > start && s[end - 1] == ' ')
			end--;
		if (start == end)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value `%s` for field `%s`: "
			    "empty element", query_show(s, len, shown), what);
		if (query_u32(s + start, end - start, &id) != 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value `%s` in field `%s`: "
			    "not a non-negative integer (expected u32)",
			    query_show(s + start, end - start, shown), what);
		if (out->n == QUERY_MAX_IDS)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value for field `%s`: "
			    "more than %d elements", what, QUERY_MAX_IDS);
		out->ids[out->n++] = id;
		if (i == len)
			break;
		i++;
	}
	qsort(out->ids, out->n, sizeof(out->ids[0]), query_cmp_u32);
	unsigned w = 1;
	for (unsigned r = 1; r < out->n; r++)
		if (out->ids[r] != out->ids[w - 1])
			out->ids[w++] = out->ids[r];
	out->n = w;
	return 0;
}

static int
query_value_set(const struct query_spec *sp, struct query_value *qv,
    struct id_list *store, const char *val, size_t vlen, struct zerr *err)
{
	char shown[QUERY_SHOW_MAX * 4 + 4];

	switch (sp->type) {
	case Q_BOOL:
		if (vlen == 4 && memcmp(val, "true", 4) == 0)
			qv->b = true;
		else if (vlen == 5 && memcmp(val, "false", 5) == 0)
			qv->b = false;
		else
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value `%s` for field `%s`: "
			    "not `true` or `false`",
			    query_show(val, vlen, shown), sp->name);
		return 0;
	case Q_U32:
		if (query_u32(val, vlen, &qv->u32) != 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value `%s` for field `%s`: "
			    "expected u32 (a decimal integer from 0 to "
			    "4294967295)", query_show(val, vlen, shown),
			    sp->name);
		return 0;
	case Q_IDS:
		qv->ids = store;
		return query_parse_ids(val, vlen, store, sp->name, err);
	}
	return zerr_set(err, ZERR_INTERNAL, "internal: bad query spec");
}

/* "unknown field `x`, expected one of `a`, `b`" (or what fits). */
static int
query_unknown(const char *name, size_t nlen, const struct query_spec *spec,
    unsigned nspec, struct zerr *err)
{
	char shown[QUERY_SHOW_MAX * 4 + 4], list[512];
	size_t o = 0;

	list[0] = '\0';
	for (unsigned k = 0; k < nspec; k++) {
		int w = snprintf(list + o, sizeof(list) - o, "%s`%s`",
		    k ? ", " : "", spec[k].name);

		if (w < 0 || (size_t)w >= sizeof(list) - o)
			break;
		o += (size_t)w;
	}
	query_show(name, nlen, shown);
	if (nspec == 0)
		return zerr_set(err, ZERR_INVALID, "Invalid query: unknown "
		    "field `%s`: this endpoint takes no parameters", shown);
	return zerr_set(err, ZERR_INVALID, "Invalid query: unknown field "
	    "`%s`, expected %s%s", shown, nspec > 1 ? "one of " : "", list);
}

int
query_parse(const char *raw, size_t len, const struct query_spec *spec,
    struct query_values *values, struct zerr *err)
{
	char name[QUERY_MAX_LEN + 1], val[QUERY_MAX_LEN + 1];
	char shown[QUERY_SHOW_MAX * 4 + 4];
	unsigned nspec = 0, nstore = 0;
	size_t i = 0;

	memset(values->v, 0, sizeof(values->v));
	while (spec[nspec].name != NULL)
		nspec++;
	if (len > QUERY_MAX_LEN)
		return zerr_set(err, ZERR_INVALID, "Invalid query: query "
		    "string longer than %d bytes", QUERY_MAX_LEN);
	while (i < len) {
		size_t start = i, eq, end;
		long nlen, vlen;
		unsigned k;

		while (i < len && raw[i] != '&')
			i++;
		end = i++;
		if (end == start)	/* "a=1&&b=2" or a trailing '&' */
			continue;
		for (eq = start; eq < end && raw[eq] != '='; eq++)
			;
		nlen = query_unescape(raw + start, eq - start, true, name,
		    sizeof(name));
		if (nlen <= 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: malformed parameter name `%s`",
			    query_show(raw + start, eq - start, shown));
		for (k = 0; k < nspec; k++)
			if (strcmp(spec[k].name, name) == 0)
				break;
		if (k == nspec)
			return query_unknown(name, (size_t)nlen, spec, nspec,
			    err);
		if (values->v[k].present)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: duplicate field `%s`",
			    spec[k].name);
		/* "block" without "=" is "block=": refused by its type. */
		vlen = eq == end ? 0 : query_unescape(raw + eq + 1,
		    end - eq - 1, true, val, sizeof(val));
		if (vlen < 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: invalid value for field `%s`: "
			    "malformed percent-encoding", spec[k].name);
		val[vlen] = '\0';
		if (spec[k].type == Q_IDS && nstore == 2)
			return zerr_set(err, ZERR_INTERNAL,
			    "internal: too many id lists in spec");
		if (query_value_set(&spec[k], &values->v[k],
		    spec[k].type == Q_IDS ? &values->id_store[nstore++] : NULL,
		    val, (size_t)vlen, err) != 0)
			return -1;
		values->v[k].present = true;
	}
	for (unsigned k = 0; k < nspec; k++)
		if (spec[k].required && !values->v[k].present)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid query: missing field `%s`", spec[k].name);
	return 0;
}
