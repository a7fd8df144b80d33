/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.c - see fileio.h.
 */
#include "fileio.h"

#include <errno.h>
#include <unistd.h>

ssize_t
fileio_read_all(int fd, void *buf, size_t size)
{
	char *p = buf;
	size_t got = 0;

	while (got < size) {
		ssize_t n = read(fd, p + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}
