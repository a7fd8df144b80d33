/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server_win.c - server.h's Windows part: libmicrohttpd's own polling
 * thread over Winsock (select, or WSAPoll where its build has it; no
 * epoll). zeusd.exe never drives its own loop (its device half is called
 * directly: there is no channel to watch), and has no systemd watchdog.
 */
#include "http/server.h"

#include <microhttpd.h>

unsigned long
server_os_fd_limit(void)
{
	return 0;		/* no descriptor table to size from */
}

unsigned
server_os_mhd_flags(bool own_loop)
{
	(void)own_loop;
	return MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD;
}
