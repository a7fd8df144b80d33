/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.c - see fileio.h.
 */
#include "fileio.h"

#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

/*
 * The one read loop: until end of file or `size` bytes, retrying on EINTR.
 * With `at_start`, pread from offset 0 (the offset follows what was read)
 * instead of read from the current position.
 */
static ssize_t
fileio_read_loop(int fd, void *buf, size_t size, bool at_start)
{
	char *p = buf;
	size_t got = 0;

	while (got < size) {
		ssize_t n = at_start ?
		    pread(fd, p + got, size - got, (off_t)got) :
		    read(fd, p + got, size - got);

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

ssize_t
fileio_read_all(int fd, void *buf, size_t size)
{
	return fileio_read_loop(fd, buf, size, false);
}

ssize_t
fileio_pread_all(int fd, void *buf, size_t size)
{
	return fileio_read_loop(fd, buf, size, true);
}
