/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.h - what the files of the `zeus` tool share (tool.c): its exit
 * statuses, message prefix, usage errors, log handler, number format and
 * the options more than one subcommand takes, so that each subcommand
 * (measure.c, gauge.c, daemon.c) and measure_cap.c speak like the rest of
 * the tool. Calls go one way: main.c calls the subcommands, they call
 * their helpers (measure_out.c, measure_cap.c), tool.c and os_*.c; os_*.c
 * calls tool.c for its prefix; tool.c calls libzeus only. See
 * docs/libzeus.md.
 */
#ifndef ZEUS_TOOL_H
#define ZEUS_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zeus/zeus.h"

/* Exit statuses besides the measured command's (docs/libzeus.md). */
#define EXIT_FAIL 1		/* zeusd unreachable, measuring failed, or
				 * settings left changed */
#define EXIT_USAGE 2
#define EXIT_HTTP_4XX 4		/* zeusd refused: a bad value (400, 404) */
#define EXIT_DENIED 5		/* zeusd refused: no permission (401, 403) */
#define EXIT_LEASED 6		/* zeusd refused: leased by another user */

/* The subcommand being run (main.c sets it), for messages: "zeus measure:
 * ...". NULL before one is known: "zeus: ...". */
void tool_set_cmd(const char *cmd);

/* "zeus CMD: " on f. */
void tool_prefix(FILE *f);

/* "zeus CMD: <msg>" and the pointer to CMD's help, on stderr; returns
 * EXIT_USAGE. */
int tool_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* "zeus CMD: [what: ]<message>" on stderr; returns EXIT_FAIL. */
int tool_fail(const char *what, const struct zeus_error *e);

/*
 * libzeus's log lines (tool_log_install, before anything else): warnings
 * and errors printed with the prefix and kept, so that a failure the
 * library already logged is not printed twice (tool_already_logged); the
 * INFO lines saying why there are no GPUs or no CPUs kept for
 * tool_log_why.
 */
void tool_log_install(void);
/* Whether a logged warning already said `msg`. */
bool tool_already_logged(const char *msg);
/* Why there are no GPUs and no CPUs, as the library said: "<gpus>; <cpus>",
 * either alone, or "" when it said neither. */
void tool_log_why(char *buf, size_t size);

/* x rounded to `decimals` places, in its shortest exact form; `nan` when
 * not finite. */
void fmt_num(char *buf, size_t size, double x, int decimals,
    const char *nan);

/* Joules to the µJ (RAPL's unit, finer than NVML's mJ); seconds to ns. */
#define J_DECIMALS 6
#define S_DECIMALS 9

/* ---- options ------------------------------------------------------------ */

/* A device list: all (ids NULL), none, or indices. */
struct idlist {
	unsigned ids[ZEUS_MAX_DEVICES];
	size_t n;
	bool all;
};

/* The options that more than one subcommand takes, parsed by tool.c:
 * --gpus always, --cpus, --source and --pushgateway --job --window
 * --instance where asked for (TOOL_OPTS_*), and zeusd's connection
 * (--socket, --host-port, --pipe-name, --token) always. */
struct tool_opts {
	struct idlist gpus, cpus;
	enum zeus_source source;
	const char *pushgateway, *job, *window, *instance;
	const char *socket, *host_port, *pipe_name, *token;
};

#define TOOL_OPTS_CPUS 1u
#define TOOL_OPTS_SOURCE 2u
#define TOOL_OPTS_PUSH 4u

/* A subcommand's own option; val at least TOOL_OPT_OWN. */
struct tool_opt {
	const char *name;
	bool has_arg;
	int val;
};

#define TOOL_OPT_OWN 512
#define TOOL_MAX_OWN 16

/*
 * Parsing argv after the subcommand (getopt's, so one parse at a time):
 *
 *	tool_args_begin(argc, argv, ...);
 *	while ((c = tool_args_next(&arg)) > 0)
 *		if (<c's value is bad>)
 *			return tool_args_bad(c, arg);
 *	if (c < 0)
 *		return EXIT_USAGE;
 *	<the subcommand's own checks of its options together>
 *	if ((first = tool_args_end()) < 0)
 *		return EXIT_USAGE;
 *
 * `shared`: TOOL_OPTS_*; `own`: the subcommand's options (at most
 * TOOL_MAX_OWN); --help prints `help` and exits 0. `permute`: options may
 * follow operands (daemon); else parsing stops at the first operand
 * (measure's command). *o is cleared, the device lists set to all.
 */
void tool_args_begin(int argc, char **argv, unsigned shared,
    const struct tool_opt *own, size_t nown, const char *help, bool permute,
    struct tool_opts *o);
/* The next of the subcommand's own options (its val; *arg its value or
 * NULL), after storing the shared ones into *o; 0 when the options end;
 * -1 after a usage error was printed. */
int tool_args_next(const char **arg);
/* "bad value for --NAME: 'ARG'" for the option `val`; returns EXIT_USAGE. */
int tool_args_bad(int val, const char *arg);
/* The checks of the shared options together; the index of the first
 * operand, or -1 after a usage error was printed. */
int tool_args_end(void);

/* Seconds (decimal, > 0, at most a day) to ms; 0 or -1 (--period,
 * --counter). */
int tool_parse_period(const char *s, unsigned *ms);

/* Where zeusd is, from the flags (all NULL: the environment decides). */
void conn_opts(const struct tool_opts *o, struct zeus_client_options *co);
/* The monitor of the flags' devices and source (*co: its zeusd, when a
 * flag names one). */
void monitor_opts(const struct tool_opts *o, struct zeus_monitor_options *mo,
    struct zeus_client_options *co);

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
