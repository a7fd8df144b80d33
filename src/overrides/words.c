/* SPDX-License-Identifier: Apache-2.0 */
/*
 * words.c - shell-style word splitting without any expansion (see words.h).
 *
 * One pass over the string; the current word is built in a scratch buffer
 * as long as the input (a word never grows past its source text), and a
 * word is emitted when a separator ends it, provided anything was seen:
 * a character or a pair of quotes (so '' is an empty word, while a lone
 * backslash-newline is nothing).
 */
#include "words.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct wsplit {
	const char *s;
	size_t i;		/* read position in s */
	char *buf;		/* the word being built */
	size_t len;
	bool started;		/* the current word exists (maybe empty) */
	struct words *out;
	struct zerr *err;
};

static bool
ws_is_sep(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static int
ws_char(struct wsplit *w, char c)
{
	unsigned char u = (unsigned char)c;

	if ((u < 0x20 && c != '\t' && c != '\n') || u == 0x7f)
		return zerr_set(w->err, ZERR_INVALID, "control character "
		    "0x%02x at offset %zu", u, w->i - 1);
	w->buf[w->len++] = c;
	w->started = true;
	return 0;
}

static int
ws_single(struct wsplit *w)
{
	size_t open = w->i++;

	w->started = true;
	for (;;) {
		char c = w->s[w->i];

		if (c == '\0')
			return zerr_set(w->err, ZERR_INVALID, "unterminated "
			    "single quote (opened at offset %zu)", open);
		w->i++;
		if (c == '\'')
			return 0;
		if (ws_char(w, c) < 0)
			return -1;
	}
}

/* Inside "...": a backslash escapes only $ ` " \ and newline. */
static int
ws_double(struct wsplit *w)
{
	size_t open = w->i++;

	w->started = true;
	for (;;) {
		char c = w->s[w->i];

		if (c == '\0')
			return zerr_set(w->err, ZERR_INVALID, "unterminated "
			    "double quote (opened at offset %zu)", open);
		w->i++;
		if (c == '"')
			return 0;
		if (c == '\\' && w->s[w->i] != '\0' &&
		    strchr("$`\"\\\n", w->s[w->i]) != NULL) {
			c = w->s[w->i++];
			if (c == '\n')
				continue;	/* line continuation */
		}
		if (ws_char(w, c) < 0)
			return -1;
	}
}

/* Outside quotes: a backslash makes the next character literal. */
static int
ws_backslash(struct wsplit *w)
{
	char c = w->s[w->i + 1];

	if (c == '\0')
		return zerr_set(w->err, ZERR_INVALID, "trailing backslash");
	w->i += 2;
	if (c == '\n')
		return 0;		/* line continuation */
	return ws_char(w, c);
}

static int
ws_emit(struct wsplit *w)
{
	char **nv;

	if (w->out->n == WORDS_MAX_COUNT)
		return zerr_set(w->err, ZERR_INVALID, "more than %d words",
		    WORDS_MAX_COUNT);
	nv = realloc(w->out->v, (w->out->n + 2) * sizeof(*nv));
	if (nv == NULL)
		return zerr_set(w->err, ZERR_INTERNAL, "out of memory");
	w->out->v = nv;
	/* strndup is not in the Windows C runtime */
	if ((nv[w->out->n] = malloc(w->len + 1)) == NULL)
		return zerr_set(w->err, ZERR_INTERNAL, "out of memory");
	memcpy(nv[w->out->n], w->buf, w->len);
	nv[w->out->n][w->len] = '\0';
	nv[++w->out->n] = NULL;
	w->len = 0;
	w->started = false;
	return 0;
}

static int
ws_word(struct wsplit *w)
{
	char c;

	while ((c = w->s[w->i]) != '\0' && !ws_is_sep(c)) {
		int rc;

		if (c == '\'')
			rc = ws_single(w);
		else if (c == '"')
			rc = ws_double(w);
		else if (c == '\\')
			rc = ws_backslash(w);
		else
			rc = ws_char(w, w->s[w->i++]);
		if (rc < 0)
			return -1;
	}
	return w->started ? ws_emit(w) : 0;
}

int
words_split(const char *s, struct words *out, struct zerr *err)
{
	size_t n = strnlen(s, WORDS_MAX_INPUT + 1);
	struct wsplit w = { .s = s, .out = out, .err = err };
	int rc = 0;

	out->v = NULL;
	out->n = 0;
	if (n > WORDS_MAX_INPUT)
		return zerr_set(err, ZERR_INVALID, "command longer than %d "
		    "bytes", WORDS_MAX_INPUT);
	w.buf = malloc(n + 1);
	out->v = calloc(1, sizeof(*out->v));
	if (w.buf == NULL || out->v == NULL) {
		rc = zerr_set(err, ZERR_INTERNAL, "out of memory");
		goto done;
	}
	while (rc == 0) {
		while (ws_is_sep(s[w.i]))
			w.i++;
		if (s[w.i] == '\0')
			break;
		rc = ws_word(&w);
	}
done:
	free(w.buf);
	if (rc < 0)
		words_free(out);
	return rc;
}

void
words_free(struct words *w)
{
	if (w->v != NULL)
		for (size_t i = 0; i < w->n; i++)
			free(w->v[i]);
	free(w->v);
	w->v = NULL;
	w->n = 0;
}
