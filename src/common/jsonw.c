/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonw.c - the JSON writer of jsonw.h.
 */
#include "common/jsonw.h"

#include <stdlib.h>
#include <string.h>

/* The first allocation: every read's body at 8 GPUs or 2 packages fits. */
#define JSONW_FIRST 256u

void
jsonw_init(struct jsonw *w)
{
	memset(w, 0, sizeof(*w));
}

static void
jsonw_fail(struct jsonw *w)
{
	w->failed = true;
}

/* Room for n more bytes and the NUL; false (failed) when there is none. */
static bool
jsonw_room(struct jsonw *w, size_t n)
{
	size_t cap;
	char *p;

	if (w->failed)
		return false;
	/* len <= JSONW_MAX always, so len + n + 1 cannot overflow below */
	if (n > JSONW_MAX - w->len) {
		jsonw_fail(w);
		return false;
	}
	if (w->cap > w->len + n)
		return true;
	for (cap = w->cap ? w->cap : JSONW_FIRST; cap <= w->len + n;)
		cap *= 2;
	if ((p = realloc(w->buf, cap)) == NULL) {
		jsonw_fail(w);
		return false;
	}
	w->buf = p;
	w->cap = cap;
	return true;
}

static void
jsonw_put(struct jsonw *w, const char *s, size_t n)
{
	if (!jsonw_room(w, n))
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

/* Before a value: a key is due for it, or it is the body itself. */
static bool
jsonw_value_ok(struct jsonw *w)
{
	if (w->failed)
		return false;
	if (w->want_value || (w->depth == 0 && w->len == 0)) {
		w->want_value = false;
		return true;
	}
	jsonw_fail(w);
	return false;
}

void
jsonw_open(struct jsonw *w)
{
	if (!jsonw_value_ok(w))
		return;
	if (w->depth >= JSONW_DEPTH) {
		jsonw_fail(w);
		return;
	}
	w->depth++;
	w->members &= ~(UINT32_C(1) << (w->depth - 1));
	jsonw_put(w, "{", 1);
}

void
jsonw_close(struct jsonw *w)
{
	if (w->failed)
		return;
	if (w->depth == 0 || w->want_value) {
		jsonw_fail(w);
		return;
	}
	w->depth--;
	jsonw_put(w, "}", 1);
}

/* The comma before a member, then `"`, the key's text, `":`. */
static void
jsonw_member(struct jsonw *w, const char *key, size_t n)
{
	uint32_t bit;

	if (w->failed)
		return;
	if (w->depth == 0 || w->want_value) {
		jsonw_fail(w);
		return;
	}
	bit = UINT32_C(1) << (w->depth - 1);
	if (!jsonw_room(w, n + 4))
		return;
	if (w->members & bit)
		w->buf[w->len++] = ',';
	w->members |= bit;
	w->buf[w->len++] = '"';
	memcpy(w->buf + w->len, key, n);
	w->len += n;
	w->buf[w->len++] = '"';
	w->buf[w->len++] = ':';
	w->buf[w->len] = '\0';
	w->want_value = true;
}

void
jsonw_key(struct jsonw *w, const char *key)
{
	size_t n = 0;

	/* only what JSON writes as itself: printable ASCII, no '"' or '\' */
	for (; key[n] != '\0'; n++)
		if ((unsigned char)key[n] < 0x20 ||
		    (unsigned char)key[n] > 0x7e || key[n] == '"' ||
		    key[n] == '\\' || n >= 256) {
			jsonw_fail(w);
			return;
		}
	jsonw_member(w, key, n);
}

/* v's decimal digits, ending at end (exclusive); the first one. */
static char *
jsonw_digits(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return end;
}

void
jsonw_key_u(struct jsonw *w, unsigned key)
{
	char t[24];
	char *p = jsonw_digits(t + sizeof(t), key);

	jsonw_member(w, p, (size_t)(t + sizeof(t) - p));
}

void
jsonw_int(struct jsonw *w, int64_t v)
{
	char t[24];
	/* the magnitude as unsigned: INT64_MIN has no positive int64 */
	uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char *p = jsonw_digits(t + sizeof(t), m);

	if (v < 0)
		*--p = '-';
	if (jsonw_value_ok(w))
		jsonw_put(w, p, (size_t)(t + sizeof(t) - p));
}

void
jsonw_key_int(struct jsonw *w, const char *key, int64_t v)
{
	jsonw_key(w, key);
	jsonw_int(w, v);
}

void
jsonw_bool(struct jsonw *w, bool v)
{
	if (jsonw_value_ok(w))
		jsonw_put(w, v ? "true" : "false", v ? 4 : 5);
}

void
jsonw_null(struct jsonw *w)
{
	if (jsonw_value_ok(w))
		jsonw_put(w, "null", 4);
}

char *
jsonw_finish(struct jsonw *w, size_t *len)
{
	char *body = w->buf;

	if (w->failed || w->depth != 0 || w->want_value || w->len == 0) {
		jsonw_discard(w);
		return NULL;
	}
	*len = w->len;
	jsonw_init(w);
	return body;
}

void
jsonw_discard(struct jsonw *w)
{
	free(w->buf);
	jsonw_init(w);
}
