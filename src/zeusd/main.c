/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - zeusd's entry point: the subcommands (cli.h), the flags of
 * `zeusd serve`, and the hand-over to the process that runs from there:
 *   - `zeusd serve ...`: the flags are parsed here, then the device process
 *     (device_proc.c) has the rest of the process's life;
 *   - `zeusd --network-process ...`: the network process, which the device
 *     process starts by fork and exec of this binary (netstart.h); it
 *     refuses to run by hand (network_proc.c).
 */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "zeusd/cli.h"
#include "zeusd/device_proc.h"
#include "zeusd/netstart.h"
#include "zeusd/network_proc.h"

static int
serve_main(int argc, char **argv)
{
	static struct zeusd_config cfg;
	struct zerr err;
	int rc = cli_parse_serve(argc, argv, &cfg, stdout, &err);

	if (rc == 1)
		return 0;	/* --help */
	if (rc != 0) {
		fprintf(stderr, "zeusd: %s\n", err.msg);
		return 2;
	}
	return device_proc_main(&cfg, argc, argv);
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], NETSTART_ARG) == 0)
		network_proc_main(argc, argv);
	(void)zlog_detect_journal();
	return cli_main(argc, argv, serve_main);
}
