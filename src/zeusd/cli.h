/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - command-line parsing for `zeusd serve` and value parsers shared
 * with other subcommands.
 */
#ifndef ZEUS_CLI_H
#define ZEUS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "common/env.h"	/* env_parse_uint, env_uint */
#include "common/err.h"
#include "node/config.h"

/*
 * Parses `serve` arguments (argv[0] is "serve"). Returns 0 on success, 1 when
 * help was printed to `out` (exit 0), -1 with `err` on a bad flag or value
 * (exit 2).
 */
int cli_parse_serve(int argc, char **argv, struct zeusd_config *cfg,
    FILE *out, struct zerr *err);

/*
 * On TCP, this node's own name (cli_os_host_name, and its first label
 * when it has dots) is accepted as Host besides --tcp-allowed-hosts: a
 * client that reaches the node by its name works unconfigured, and a page
 * doing DNS rebinding cannot send it (its Host is the attacker's domain,
 * never this node's name). Appends it to cfg->tcp_allowed_hosts; a name
 * that is not a plain host name is left out.
 */
void cli_own_host_names(struct zeusd_config *cfg);

/* On TCP, logs the names accepted as Host (event=tcp_host_check). */
void cli_log_host_names(const struct zeusd_config *cfg);

/*
 * zeusd's command line, on every platform (main.c, main_win.c): the log
 * level from ZEUSD_LOG, --version, --help, then `serve` (the platform's
 * `serve`, called with argv from "serve" on) or `token`; anything else is
 * a usage error. Returns the exit status.
 */
int cli_main(int argc, char **argv, int (*serve)(int argc, char **argv));

/* Usage text of `zeusd` and `zeusd serve`. */
void cli_print_usage(FILE *out);
void cli_print_serve_usage(FILE *out);

/*
 * Octal permission bits such as "666" or "0660"; at most 0777 (setuid,
 * setgid and sticky bits are refused).
 */
int cli_parse_permissions(const char *s, unsigned *out, struct zerr *err);

/*
 * A socket owner: a decimal id, or a user (`user`) or group name looked up
 * through NSS. Unknown names are refused.
 */
int cli_parse_owner(const char *s, bool user, uint64_t *out, struct zerr *err);

#endif
