/* SPDX-License-Identifier: Apache-2.0 */
/*
 * <sys/un.h> of the Windows build: struct sockaddr_un from <afunix.h>
 * (see sys/socket.h here). zeusd on Windows never listens on a Unix
 * socket; the type is named by shared code paths that Windows does not
 * take (server.c's watchdog probe).
 */
#ifndef ZEUS_WIN_SYS_UN_H
#define ZEUS_WIN_SYS_UN_H
#include <winsock2.h>
#include <afunix.h>
#endif
