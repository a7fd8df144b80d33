/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_os.h - what the command line of `zeusd serve` has per platform
 * (cli.c calls these): which platform this is (the flags of cli.c's help
 * table that exist here), the transports `--mode` names and its default,
 * the Unix-socket flags, the default `--enable`, and owner names. Linux:
 * cli_os_posix.c (uds|tcp, socket files owned by a user or group name);
 * Windows: cli_os_win.c (named-pipe|tcp as upstream, no socket files, no
 * cpu-read by default). meson picks one.
 */
#ifndef ZEUS_CLI_OS_H
#define ZEUS_CLI_OS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "node/config.h"

/*
 * The platforms a flag of `zeusd serve` exists on (cli.c's help table), and
 * this build's, CLI_OS_LINUX or CLI_OS_WINDOWS: a flag is printed in the
 * help and accepted where its bit is set in cli_os_this.
 */
#define CLI_OS_LINUX	0x1u
#define CLI_OS_WINDOWS	0x2u
#define CLI_OS_ALL	(CLI_OS_LINUX | CLI_OS_WINDOWS)
extern const unsigned cli_os_this;

/* The platform's defaults, after config_defaults' common ones. */
void cli_os_defaults(struct zeusd_config *cfg);

/* Parses `--mode ARG`; -1 (err, a usage error) for a name not known here. */
int cli_os_mode(const char *arg, enum transport_mode *mode, struct zerr *err);

/*
 * Called for each of --socket-path, --socket-permissions, --socket-uid and
 * --socket-gid (`flag` is its name): 0 where Unix sockets exist, else -1
 * with a usage error in err.
 */
int cli_os_socket_flag(const char *flag, struct zerr *err);

/*
 * The same for --pipe-name and --pipe-sddl: 0 where named pipes exist
 * (Windows), else -1 with a usage error.
 */
int cli_os_pipe_flag(const char *flag, struct zerr *err);

/* `--socket-uid/--socket-gid NAME`: a user's or group's id by name. */
int cli_os_owner_by_name(const char *s, bool user, uint64_t *out,
    struct zerr *err);

/* This node's host name, NUL-terminated: 0, or -1 when there is none. */
int cli_os_host_name(char *buf, size_t size);

/* The "Transport:" lines of `zeusd serve --help` and the --enable default. */
void cli_os_print_transport(FILE *out);
extern const char cli_os_enable_default[];

#endif
