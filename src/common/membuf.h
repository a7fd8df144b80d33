/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membuf.h - a FILE that writes into memory, for text built with fprintf
 * (/metrics): open_memstream on Linux (os/membuf_posix.c); on Windows,
 * which has none, a temporary file that is deleted when closed and read
 * back whole (os/membuf_win.c).
 */
#ifndef ZEUS_MEMBUF_H
#define ZEUS_MEMBUF_H

#include <stddef.h>
#include <stdio.h>

struct membuf {
	FILE *f;
	char *text;
	size_t len;
};

/* The stream to write to, or NULL (out of memory, no temporary file). */
FILE *membuf_open(struct membuf *mb);

/*
 * Closes the stream; 0 with what was written in *text (NUL-terminated,
 * the caller frees it) and *len, or -1 with nothing to free.
 */
int membuf_close(struct membuf *mb, char **text, size_t *len);

#endif
