/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hex.h - the value of one hexadecimal digit, for the project's hand-written
 * parsers (percent-decoding, TOML \u escapes).
 */
#ifndef ZEUS_HEX_H
#define ZEUS_HEX_H

/* 0..15, or -1 when `c` is not a hex digit. */
static inline int
hex_digit_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
