/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - the `zeus` command-line tool, a thin shell over libzeus:
 *
 *   zeus measure [opts] -- COMMAND...   energy of one command (monitor +
 *                                       optional histogram push; measure.c)
 *   zeus gauge --pushgateway URL --job NAME [--period S]
 *                                       pushes GPU power until SIGINT/TERM
 *                                       (gauge.c)
 *   zeus daemon discover|power|energy|...
 *                                       queries a zeusd (client; daemon.c)
 *
 * Every subcommand has its own --help; a usage error is one line naming the
 * subcommand plus a pointer to that help, and exits 2. libzeus's warnings
 * come through the tool's log handler (tool.c), which prints each failure
 * once. This file only dispatches: the subcommands call tool.c (what they
 * share) and their own helpers, never back into another. See
 * docs/libzeus.md.
 */
#include <stdio.h>
#include <string.h>

#include "subcmd.h"
#include "tool.h"
#include "zeus/zeus.h"

static const char main_usage[] =
    "usage: zeus measure [options] -- COMMAND...\n"
    "       zeus gauge --pushgateway URL --job NAME [options]\n"
    "       zeus daemon VERB [options]\n"
    "       zeus --version | --help\n"
    "\n"
    "'zeus SUBCOMMAND --help' describes each.\n";

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} subcmds[] = {
	{ "measure", cmd_measure },
	{ "gauge", cmd_gauge },
	{ "daemon", cmd_daemon },
};

int
main(int argc, char **argv)
{
	tool_log_install();
	if (argc < 2)
		return tool_usage_error("needs a subcommand (measure, gauge, "
		    "daemon)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		printf("%s\n%s\n%s\n%s", main_usage, measure_usage,
		    gauge_usage, daemon_usage);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("zeus %s\n", zeus_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++)
		if (strcmp(argv[1], subcmds[i].name) == 0) {
			tool_set_cmd(argv[1]);
			return subcmds[i].run(argc - 1, argv + 1);
		}
	return tool_usage_error("unknown subcommand '%s'", argv[1]);
}
