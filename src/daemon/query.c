/*
 * query.c - strict query-string parsing (see query.h).
 *
 * Hand-written because the rules are ours (strictness, repeated parameters,
 * error messages); it has a fuzz target (fuzz/fuzz_query.c).
 */
#include "query.h"

#include <stdlib.h>
#include <string.h>

#include "../common/hex.h"

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
			    "Invalid %s: empty element in '%.*s'", what,
			    (int)(len > 64 ? 64 : len), s);
		if (query_u32(s + start, end - start, &id) != 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid %s: '%.*s' is not a non-negative integer",
			    what, (int)(end - start > 32 ? 32 : end - start),
			    s + start);
		if (out->n == QUERY_MAX_IDS)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid %s: more than %d elements", what,
			    QUERY_MAX_IDS);
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
	switch (sp->type) {
	case Q_BOOL:
		if (vlen == 4 && memcmp(val, "true", 4) == 0)
			qv->b = true;
		else if (vlen == 5 && memcmp(val, "false", 5) == 0)
			qv->b = false;
		else
			return zerr_set(err, ZERR_INVALID,
			    "Invalid value for parameter '%s': expected true "
			    "or false", sp->name);
		return 0;
	case Q_U32:
		if (query_u32(val, vlen, &qv->u32) != 0)
			return zerr_set(err, ZERR_INVALID,
			    "Invalid value for parameter '%s': expected an "
			    "integer from 0 to 4294967295", sp->name);
		return 0;
	case Q_IDS:
		qv->ids = store;
		return query_parse_ids(val, vlen, store, sp->name, err);
	}
	return zerr_set(err, ZERR_INTERNAL, "internal: bad query spec");
}

int
query_parse(const char *raw, size_t len, const struct query_spec *spec,
    struct query_values *values, struct zerr *err)
{
	char name[64], val[QUERY_MAX_LEN + 1];
	unsigned nspec = 0, nstore = 0;
	size_t i = 0;

	memset(values->v, 0, sizeof(values->v));
	while (spec[nspec].name != NULL)
		nspec++;
	if (len > QUERY_MAX_LEN)
		return zerr_set(err, ZERR_INVALID, "Query string too long");
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
			    "Malformed query parameter name");
		for (k = 0; k < nspec; k++)
			if (strcmp(spec[k].name, name) == 0)
				break;
		if (k == nspec)
			return zerr_set(err, ZERR_INVALID,
			    "Unknown query parameter '%.48s'", name);
		if (values->v[k].present)
			return zerr_set(err, ZERR_INVALID,
			    "Query parameter '%s' given more than once",
			    spec[k].name);
		if (eq == end)
			return zerr_set(err, ZERR_INVALID,
			    "Query parameter '%s' has no value", spec[k].name);
		vlen = query_unescape(raw + eq + 1, end - eq - 1, true, val,
		    sizeof(val));
		if (vlen < 0)
			return zerr_set(err, ZERR_INVALID,
			    "Malformed value for query parameter '%s'",
			    spec[k].name);
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
			    "Missing required query parameter '%s'",
			    spec[k].name);
	return 0;
}
