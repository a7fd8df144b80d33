/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.h - what the files of the `zeus` tool share: its exit statuses,
 * message prefix and number format (zeus.c), so that measure_cap.c speaks
 * like the rest of the tool. See docs/libzeus.md.
 */
#ifndef ZEUS_TOOL_H
#define ZEUS_TOOL_H

#include <stdbool.h>
#include <stdint.h>
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

/*
 * What differs per platform (os_posix.c, os_win.c; meson picks one):
 * running zeus measure's command, waiting for ^C in zeus gauge, and who
 * this process is as zeusd's leases name it.
 */
/* Runs argv; returns its status as a shell would (127: cannot run; on
 * Linux 128+N when killed by signal N). ^C goes to the command only. */
int tool_run_command(char **argv);
/* Before any thread starts: makes ^C (and SIGTERM) wait for
 * tool_stop_wait instead of killing the process. */
void tool_stop_prepare(void);
/* Returns once ^C (SIGINT, SIGTERM; the console's Ctrl-C, Ctrl-Break or
 * close on Windows) arrived. */
void tool_stop_wait(void);
/* Our uid (UINT32_MAX on Windows: zeusd knows no Windows user's uid),
 * whether we are root (never on Windows) and our pid. */
uint32_t tool_uid(void);
bool tool_is_root(void);
int64_t tool_pid(void);

#endif
