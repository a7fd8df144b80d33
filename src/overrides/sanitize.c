/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sanitize.c - making what an override command printed (and the command
 * line itself) fit for an error message, a JSON answer and a log line.
 *
 * A command's output is whatever bytes the program wrote: control bytes,
 * terminal escapes, broken UTF-8, megabytes. What reaches a client or the
 * log is trimmed, cut to its tail (where errors usually are) and always
 * valid UTF-8 without control characters other than newline and tab.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at u (n bytes left), 0 if invalid. */
static size_t
ovsan_utf8_len(const unsigned char *u, size_t n)
{
	size_t len = 0;
	uint32_t cp, min;

	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf) {
		len = 2; cp = u[0] & 0x1f; min = 0x80;
	} else if (u[0] >= 0xe0 && u[0] <= 0xef) {
		len = 3; cp = u[0] & 0x0f; min = 0x800;
	} else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
		len = 4; cp = u[0] & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((u[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (u[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static bool
ovsan_space(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* See internal.h. */
void
ovsan_text(const char *s, size_t n, size_t keep, char *out, size_t size)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (n > 0 && ovsan_space(u[n - 1]))
		n--;
	while (i < n && ovsan_space(u[i]))
		i++;
	if (n - i > keep) {
		i = n - keep;
		while (i < n && (u[i] & 0xc0) == 0x80)
			i++;	/* start on a character boundary */
		o = (size_t)snprintf(out, size, "[...]");
	}
	while (i < n && o + 5 < size) {
		size_t len = ovsan_utf8_len(u + i, n - i);

		if (len == 1 && u[i] != '\n' && u[i] != '\t' &&
		    (u[i] < 0x20 || u[i] == 0x7f))
			len = 0;
		if (len == 0) {
			out[o++] = '?';
			i++;
			continue;
		}
		memcpy(out + o, u + i, len);
		o += len;
		i += len;
	}
	out[o] = '\0';
}

/* See internal.h. The quoted line is cut, like output, through ovsan_text. */
void
ovsan_argv(char *const argv[], char *out, size_t size)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-";
	char raw[1024];
	size_t o = 0;

	raw[0] = '\0';
	for (size_t w = 0; argv[w] != NULL && o + 4 < sizeof(raw); w++) {
		const char *a = argv[w];
		bool plain = *a != '\0' && strspn(a, safe) == strlen(a);

		if (w > 0)
			raw[o++] = ' ';
		if (!plain)
			raw[o++] = '\'';
		for (; *a != '\0' && o + 6 < sizeof(raw); a++) {
			if (*a == '\'' && !plain) {
				memcpy(raw + o, "'\\''", 4);
				o += 4;
			} else {
				raw[o++] = *a;
			}
		}
		if (!plain)
			raw[o++] = '\'';
		raw[o] = '\0';
	}
	ovsan_text(raw, o, size > 8 ? size - 8 : 0, out, size);
}

