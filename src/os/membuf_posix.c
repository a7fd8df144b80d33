/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membuf_posix.c - membuf.h over open_memstream(3).
 */
#include "common/membuf.h"

#include <stdlib.h>

FILE *
membuf_open(struct membuf *mb)
{
	mb->text = NULL;
	mb->len = 0;
	mb->f = open_memstream(&mb->text, &mb->len);
	return mb->f;
}

int
membuf_close(struct membuf *mb, char **text, size_t *len)
{
	int rc = fclose(mb->f);

	mb->f = NULL;
	if (rc != 0) {
		free(mb->text);
		mb->text = NULL;
		return -1;
	}
	*text = mb->text;
	*len = mb->len;
	mb->text = NULL;
	return 0;
}
