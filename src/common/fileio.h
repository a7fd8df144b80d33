/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.h - reading a whole small file (a key, a config, a sysfs counter)
 * from an fd; who may change a file; closing every fd of a process but a
 * few.
 */
#ifndef ZEUS_FILEIO_H
#define ZEUS_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
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

/*
 * The rule for a file whose contents decide what zeusd lets others do (the
 * node policy, the signing key), from its fstat: owned by root or by
 * `owner` (zeusd's user), and writable by nobody else (no group or world
 * write bit). The path to it is pathwalk_trusted's (common/pathwalk.h).
 */
bool fileio_owner_only(const struct stat *st, uid_t owner);

/*
 * Closes every open fd of the process except the `n` in `keep`, as listed
 * in /proc/self/fd: for a process just forked from one that holds what it
 * must not (device files, counters, a key, whatever a driver library
 * opened), so nothing is missed because nobody knew of it. Returns 0, or
 * -1 with errno when /proc/self/fd cannot be read (then some fds may be
 * left open: the caller must not go on). A thread opening fds meanwhile
 * could keep one: call it right after fork(), when there is no other.
 */
int fileio_close_all_but(const int *keep, unsigned n);

#endif
