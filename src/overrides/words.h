/* SPDX-License-Identifier: Apache-2.0 */
/*
 * words.h - shell-style word splitting without any expansion.
 *
 * An override command is one string in the TOML file; it runs directly
 * (never through a shell), so it has to be split into an argv here. The
 * rules are the quoting rules of POSIX sh and nothing else:
 *
 *   - space, tab and newline separate words;
 *   - '...' is literal up to the next single quote;
 *   - "..." is literal except that a backslash escapes $ ` " \ and
 *     newline (backslash-newline disappears); other backslashes stay;
 *   - outside quotes a backslash makes the next character literal
 *     (backslash-newline disappears);
 *   - quoted parts and unquoted parts next to each other form one word, and
 *     '' or "" alone is an empty word.
 *
 * There is no expansion of any kind and no operators: $HOME, *, ~, |, ;,
 * &, > and the like are ordinary characters. An unterminated quote or a
 * trailing backslash is an error, as is any control character other than
 * tab and newline. Lengths and word counts are bounded.
 */
#ifndef ZEUS_WORDS_H
#define ZEUS_WORDS_H

#include <stddef.h>

#include "common/err.h"

#define WORDS_MAX_INPUT 8192	/* bytes in one command string */
#define WORDS_MAX_COUNT 256	/* words in one command */

struct words {
	char **v;		/* n words, then NULL (an argv) */
	size_t n;
};

/*
 * Splits `s` into words. On success fills *out (free with words_free) and
 * returns 0; on failure returns -1 with ZERR_INVALID and leaves *out empty.
 */
int words_split(const char *s, struct words *out, struct zerr *err);

void words_free(struct words *w);

#endif
