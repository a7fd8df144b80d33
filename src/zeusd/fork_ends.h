/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork_ends.h - what the fork of a split daemon (split.c) leaves each of
 * its two processes: the ends of the channels between them, the network
 * process's pid or user. Its own header so that split.c can include both
 * process files and neither includes split.h.
 */
#ifndef ZEUS_FORK_ENDS_H
#define ZEUS_FORK_ENDS_H

#include <sys/socket.h>
#include <sys/types.h>

struct pschan_pool;
struct sandbox_user;

struct split_ends {
	int ctl;			/* this side's end of the control channel */
	/* the device process's */
	pid_t net;			/* the network process */
	const int *peer;		/* its ends of the device channels */
	unsigned nchan;
	/* the listening socket's address (getsockname; len 0: unknown) */
	const struct sockaddr_storage *listen_name;
	socklen_t listen_name_len;
	int log_fd;			/* the network process's stderr, read
					 * end (zeusd/logrelay.h); taken */
	/* the network process's */
	struct pschan_pool *pool;	/* its ends of the device channels */
	const struct sandbox_user *user;	/* to become; NULL: stay */
	int listen_fd;
};

#endif
