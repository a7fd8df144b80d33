/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server_posix.c - server.h's Linux part: libmicrohttpd in its epoll mode,
 * and server_loop_alive, the systemd watchdog's question (zeusd/watchdog.c):
 * a connection from a socketpair of this process, which the loop must take
 * and see closed. Windows: server_win.c.
 */
#include "http/server.h"

#include <microhttpd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/loop.h"

unsigned long
server_os_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (unsigned long)rl.rlim_cur;
}

bool
server_loop_alive(struct server *srv, unsigned timeout_ms)
{
	unsigned long before = atomic_load(&srv->loop_beats);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int sv[2], old;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == 0) {
		if (!loop_running(srv->ctx.loop)) {
			/* libmicrohttpd's thread: it takes it from any thread,
			 * and closes sv[0] itself, even when it refuses it */
			(void)MHD_add_connection(srv->mhd, sv[0],
			    (const struct sockaddr *)&sun, sizeof(sun));
		} else if ((old = atomic_exchange(&srv->loop_probe_fd,
		    sv[0])) >= 0)
			close(old);	/* a probe not taken yet is dropped */
		if (loop_running(srv->ctx.loop))
			loop_ask(srv->ctx.loop, SERVER_LOOP_PROBE);
		close(sv[1]);	/* the loop reads EOF and closes its end */
	}
	for (unsigned waited = 0; waited < timeout_ms; waited += 5) {
		if (atomic_load(&srv->loop_beats) - before >= 2)
			return true;
		usleep(5000);
	}
	return atomic_load(&srv->loop_beats) - before >= 2;
}

unsigned
server_os_mhd_flags(bool own_loop)
{
	return own_loop ? MHD_USE_EPOLL : MHD_USE_EPOLL_INTERNAL_THREAD;
}
