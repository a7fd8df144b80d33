/* SPDX-License-Identifier: Apache-2.0 */
/*
 * expand.c - the placeholders of override commands: which operation may use
 * which, checking a word's placeholders at load, and substituting a write's
 * values at run time (the syntax is in docs/overrides.md).
 *
 * Both uses run the same scanner, so a word that passed the load-time
 * check cannot fail to expand later except by running out of room, which
 * OVEXP_WORD_MAX rules out.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const ovexp_names[OVEXP_COUNT] = {
	[OVEXP_GPU_ID] = "gpu_id",
	[OVEXP_POWER_LIMIT_MW] = "power_limit_mw",
	[OVEXP_POWER_LIMIT_W] = "power_limit_w",
	[OVEXP_MIN_CLOCK_MHZ] = "min_clock_mhz",
	[OVEXP_MAX_CLOCK_MHZ] = "max_clock_mhz",
	[OVEXP_ENABLED] = "enabled",
};

/* The placeholders each operation may use, as a bit set of enum ovexp_ph. */
static unsigned
ovexp_allowed(enum gpu_write_op op)
{
	unsigned m = 1u << OVEXP_GPU_ID;

	switch (op) {
	case GPU_SET_POWER_LIMIT:
		return m | 1u << OVEXP_POWER_LIMIT_MW |
		    1u << OVEXP_POWER_LIMIT_W;
	case GPU_SET_PERSISTENCE_MODE:
		return m | 1u << OVEXP_ENABLED;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		return m | 1u << OVEXP_MIN_CLOCK_MHZ |
		    1u << OVEXP_MAX_CLOCK_MHZ;
	default:
		return m;
	}
}

static void
ovexp_allowed_list(enum gpu_write_op op, char *buf, size_t size)
{
	unsigned m = ovexp_allowed(op);
	size_t o = 0;

	buf[0] = '\0';
	for (int i = 0; i < OVEXP_COUNT && o < size; i++)
		if (m & 1u << i)
			o += (size_t)snprintf(buf + o, size - o, "%s{%s}",
			    o ? ", " : "", ovexp_names[i]);
}

static int
ovexp_lookup(const char *name, size_t len)
{
	for (int i = 0; i < OVEXP_COUNT; i++)
		if (strlen(ovexp_names[i]) == len &&
		    memcmp(ovexp_names[i], name, len) == 0)
			return i;
	return -1;
}

static int
ovexp_put(char *out, size_t size, size_t *o, const char *s, size_t n)
{
	if (out == NULL)
		return 0;
	if (*o + n >= size)
		return -1;
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
	return 0;
}

/*
 * Reads the placeholder starting at word[*i] == '{'. Returns its index,
 * or -1 with `why` describing the fault.
 */
static int
ovexp_scan_one(const char *word, size_t *i, enum gpu_write_op op, char *why,
    size_t whysize)
{
	size_t s = *i + 1, j = s + strcspn(word + s, "{}");
	int n = (int)(j - s > 64 ? 64 : j - s);
	char allowed[160];
	int ph;

	if (word[j] == '\0') {
		snprintf(why, whysize, "unterminated placeholder '{%.*s' "
		    "(write '{{' for a literal brace)", n, word + s);
		return -1;
	}
	if (word[j] == '{') {
		snprintf(why, whysize, "malformed placeholder '{%.*s{' (write "
		    "'{{' and '}}' for literal braces)", n, word + s);
		return -1;
	}
	if (j == s) {
		snprintf(why, whysize, "empty placeholder '{}'");
		return -1;
	}
	ph = ovexp_lookup(word + s, j - s);
	if (ph < 0) {
		snprintf(why, whysize, "unknown placeholder '{%.*s}'", n,
		    word + s);
		return -1;
	}
	if (!(ovexp_allowed(op) & 1u << ph)) {
		ovexp_allowed_list(op, allowed, sizeof(allowed));
		snprintf(why, whysize, "placeholder '{%s}' is not allowed for "
		    "%s (allowed: %s)", ovexp_names[ph], gpu_write_op_name(op),
		    allowed);
		return -1;
	}
	*i = j + 1;
	return ph;
}

/* See internal.h. Run with vals NULL at load, so that a bad word stops the
 * daemon at startup; with the write's values at run time. */
int
ovexp_expand(const char *word, enum gpu_write_op op, const uint64_t *vals,
    char *out, size_t size, char *why, size_t whysize)
{
	size_t i = 0, o = 0;

	if (out != NULL)
		out[0] = '\0';
	while (word[i] != '\0') {
		char c = word[i];
		int ph;

		if ((c == '{' || c == '}') && word[i + 1] == c) {
			i += 2;
		} else if (c == '}') {
			snprintf(why, whysize, "unbalanced '}' (write '}}' for "
			    "a literal brace)");
			return -1;
		} else if (c == '{') {
			char num[24];

			ph = ovexp_scan_one(word, &i, op, why, whysize);
			if (ph < 0)
				return -1;
			if (vals == NULL)
				continue;
			snprintf(num, sizeof(num), "%" PRIu64, vals[ph]);
			if (ovexp_put(out, size, &o, num, strlen(num)) < 0)
				goto long_word;
			continue;
		} else {
			i++;
		}
		if (ovexp_put(out, size, &o, &c, 1) < 0)
			goto long_word;
	}
	return 0;
long_word:
	snprintf(why, whysize, "substituted word too long");
	return -1;
}

void
ovexp_values(unsigned gpu, const struct gpu_write *w,
    uint64_t vals[OVEXP_COUNT])
{
	vals[OVEXP_GPU_ID] = gpu;
	vals[OVEXP_POWER_LIMIT_MW] = w->power_limit_mw;
	vals[OVEXP_POWER_LIMIT_W] = w->power_limit_mw / 1000;
	vals[OVEXP_MIN_CLOCK_MHZ] = w->min_clock_mhz;
	vals[OVEXP_MAX_CLOCK_MHZ] = w->max_clock_mhz;
	vals[OVEXP_ENABLED] = w->enabled ? 1 : 0;
}
