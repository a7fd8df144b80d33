/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token.h - the `zeusd token` subcommand: issue and verify JWTs offline.
 *
 *   zeusd token issue --signing-key-path FILE --user NAME --scope LIST
 *                     --expires DUR
 *   zeusd token verify --signing-key-path FILE   (token read from stdin)
 *
 * main() calls token_main with argv[0] == "token". Exit status: 0 success,
 * 1 runtime failure (unreadable key, signing failure, token rejected by
 * verify), 2 usage error (unknown or missing option, bad scope, bad duration,
 * bad user name). Errors are one line on stderr.
 */
#ifndef ZEUS_TOKEN_H
#define ZEUS_TOKEN_H

#define TOKEN_EXIT_OK		0
#define TOKEN_EXIT_RUNTIME	1
#define TOKEN_EXIT_USAGE	2

int token_main(int argc, char **argv);

#endif
