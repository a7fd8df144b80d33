/* SPDX-License-Identifier: Apache-2.0 */
/*
 * <netdb.h> of the Windows build (meson.build's Windows block puts this folder
 * first on the include path): Winsock's declarations under the POSIX name,
 * so that the shared sources name socket types and address functions the
 * same way on both platforms. Calls whose meaning differs on Windows
 * (close, shutdown, send flags, the unsent-bytes ioctl, poll) are not
 * here: they go through common/sock.h.
 */
#ifndef ZEUS_WIN_NETDB_H
#define ZEUS_WIN_NETDB_H
#include <winsock2.h>
#include <ws2tcpip.h>
#endif
