/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.h - what the files of the `zeus` tool share: its exit statuses,
 * message prefix and number format (zeus.c), so that measure_cap.c speaks
 * like the rest of the tool. See docs/libzeus.md.
 */
#ifndef ZEUS_TOOL_H
#define ZEUS_TOOL_H

#include <stdio.h>

/* Exit statuses besides the measured command's (docs/libzeus.md). */
#define EXIT_FAIL 1		/* zeusd unreachable, measuring failed, or
				 * settings left changed */
#define EXIT_USAGE 2
#define EXIT_HTTP_4XX 4		/* zeusd refused: a bad value (400, 404) */
#define EXIT_DENIED 5		/* zeusd refused: no permission (401, 403) */
#define EXIT_LEASED 6		/* zeusd refused: leased by another user */

/* "zeus CMD: " on f. */
void tool_prefix(FILE *f);

/* x rounded to `decimals` places, in its shortest exact form; `nan` when
 * not finite. */
void fmt_num(char *buf, size_t size, double x, int decimals,
    const char *nan);

/* Joules to the µJ (RAPL's unit, finer than NVML's mJ); seconds to ns. */
#define J_DECIMALS 6
#define S_DECIMALS 9

#endif
