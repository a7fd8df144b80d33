/* SPDX-License-Identifier: Apache-2.0 */
/*
 * duration.c - parser for human durations (see duration.h).
 *
 * A hand-rolled scanner over a bounded string: digits, optional blanks, a
 * unit word looked up in a fixed table, repeat. Every multiplication and
 * addition is checked against INT64_MAX, so no input can wrap around into a
 * short (or negative) expiry.
 */
#include "duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct duration_unit {
	const char *name;
	int64_t seconds;
};

static const struct duration_unit duration_units[] = {
	{ "s", 1 }, { "sec", 1 }, { "secs", 1 }, { "second", 1 },
	{ "seconds", 1 },
	{ "m", 60 }, { "min", 60 }, { "mins", 60 }, { "minute", 60 },
	{ "minutes", 60 },
	{ "h", 3600 }, { "hr", 3600 }, { "hrs", 3600 }, { "hour", 3600 },
	{ "hours", 3600 },
	{ "d", 86400 }, { "day", 86400 }, { "days", 86400 },
	{ "w", 604800 }, { "week", 604800 }, { "weeks", 604800 },
};

#define DURATION_HINT \
	"expected terms like 90m, 1h 30m, 7d (units s, m, h, d, w), " \
	"or 'never' / '0' for no expiry"

static bool
duration_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool
duration_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
duration_is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Copies at most 24 bytes of s[0..len) for an error message, '?' for odd bytes. */
static void
duration_excerpt(const char *s, size_t len, char *buf, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len && i < 24 && o + 1 < size; i++)
		buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[o] = '\0';
}

static int
duration_unit_seconds(const char *word, size_t len, int64_t *out)
{
	for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]);
	    i++) {
		if (strlen(duration_units[i].name) == len &&
		    memcmp(duration_units[i].name, word, len) == 0) {
			*out = duration_units[i].seconds;
			return 0;
		}
	}
	return -1;
}

/* Reads the digits at *p into *value; fails on overflow. */
static int
duration_number(const char **p, int64_t *value, struct zerr *err)
{
	int64_t v = 0;

	while (duration_is_digit(**p)) {
		int d = **p - '0';

		if (v > (INT64_MAX - d) / 10)
			return zerr_set(err, ZERR_INVALID,
			    "invalid duration: number too large");
		v = v * 10 + d;
		(*p)++;
	}
	*value = v;
	return 0;
}

/* Parses one `<digits>[blanks]<unit>` term at *p and adds it to *total. */
static int
duration_term(const char **p, int64_t *total, struct zerr *err)
{
	const char *word;
	char ex[32];
	int64_t n = 0, unit = 1;

	if (!duration_is_digit(**p)) {
		duration_excerpt(*p, strlen(*p), ex, sizeof(ex));
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration near '%s': %s", ex, DURATION_HINT);
	}
	if (duration_number(p, &n, err) != 0)
		return -1;
	while (duration_is_blank(**p))
		(*p)++;
	word = *p;
	while (duration_is_alpha(**p))
		(*p)++;
	if (*p == word)
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration: a number needs a unit; %s", DURATION_HINT);
	if (duration_unit_seconds(word, (size_t)(*p - word), &unit) != 0) {
		duration_excerpt(word, (size_t)(*p - word), ex, sizeof(ex));
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration: unknown unit '%s'; %s", ex, DURATION_HINT);
	}
	if (n > INT64_MAX / unit || *total > INT64_MAX - n * unit)
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration: too large");
	*total += n * unit;
	return 0;
}

int
duration_parse(const char *s, int64_t *seconds, struct zerr *err)
{
	size_t len;
	int64_t total = 0;
	const char *p;

	if (s == NULL)
		return zerr_set(err, ZERR_INVALID, "invalid duration: empty");
	len = strnlen(s, DURATION_INPUT_MAX + 1);
	if (len > DURATION_INPUT_MAX)
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration: longer than %d characters",
		    DURATION_INPUT_MAX);
	while (len > 0 && duration_is_blank(s[len - 1]))
		len--;
	while (len > 0 && duration_is_blank(*s)) {
		s++;
		len--;
	}
	if (len == 0)
		return zerr_set(err, ZERR_INVALID, "invalid duration: empty; %s",
		    DURATION_HINT);
	if ((len == 5 && memcmp(s, "never", 5) == 0) ||
	    (len == 1 && s[0] == '0')) {
		*seconds = 0;
		return 0;
	}

	/* Work on a NUL-terminated copy without the trailing blanks. */
	char buf[DURATION_INPUT_MAX + 1];
	memcpy(buf, s, len);
	buf[len] = '\0';
	p = buf;
	while (*p != '\0') {
		if (duration_term(&p, &total, err) != 0)
			return -1;
		while (duration_is_blank(*p))
			p++;
	}
	if (total == 0)
		return zerr_set(err, ZERR_INVALID,
		    "invalid duration: must be positive "
		    "(use 'never' or '0' for no expiry)");
	*seconds = total;
	return 0;
}
