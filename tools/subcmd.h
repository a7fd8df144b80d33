/* SPDX-License-Identifier: Apache-2.0 */
/*
 * subcmd.h - the subcommands of `zeus` (measure.c, gauge.c, daemon.c), for
 * main.c, which dispatches to them: each takes argv from its own name on
 * and returns the exit status; each has its --help text.
 */
#ifndef ZEUS_SUBCMD_H
#define ZEUS_SUBCMD_H

extern const char measure_usage[];
extern const char gauge_usage[];
extern const char daemon_usage[];

int cmd_measure(int argc, char **argv);
int cmd_gauge(int argc, char **argv);
int cmd_daemon(int argc, char **argv);

#endif
