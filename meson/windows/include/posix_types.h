/* SPDX-License-Identifier: Apache-2.0 */
/*
 * posix_types.h - included first in every file of the Windows build
 * (meson.build's Windows block, -include): the two POSIX id types that
 * shared structures carry (a Unix-socket peer's uid and gid, which never
 * exist on Windows, where zeusd has no Unix socket). mingw-w64 has pid_t
 * but not these.
 */
#ifndef ZEUS_WIN_POSIX_TYPES_H
#define ZEUS_WIN_POSIX_TYPES_H
#include <sys/types.h>
typedef unsigned int uid_t;
typedef unsigned int gid_t;
#endif
