/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.h - reading a whole small file (a key, a config, a sysfs counter)
 * from an fd.
 */
#ifndef ZEUS_FILEIO_H
#define ZEUS_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Reads until end of file or until `size` bytes, retrying on EINTR.
 * Returns the number of bytes read, or -1 with errno. A caller that wants
 * to tell "exactly at the limit" from "too large" asks for one byte more.
 */
ssize_t fileio_read_all(int fd, void *buf, size_t size);

/*
 * The same from offset 0 with pread, whatever the file position (which it
 * leaves alone): for a file kept open and read again and again, such as a
 * RAPL energy counter.
 */
ssize_t fileio_pread_all(int fd, void *buf, size_t size);

#endif
