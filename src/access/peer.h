/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.h - who is on the other end of a connection, as far as the kernel
 * can tell: the uid/gid/pid of a Unix-socket peer (SO_PEERCRED, taken at
 * accept time) or the address of a TCP peer.
 *
 * The identity is what per-peer limits count (peer_limit.h, by peer_same:
 * a local user by its uid, whether on the Unix socket or on loopback TCP
 * where the kernel told who owns the client's socket; the rest of
 * loopback as one; an IPv6 address by its /64) and what the logs name
 * (the whole address). IPv4-mapped IPv6 addresses count as their IPv4
 * address, so a dual-stack listener cannot be used to double a peer's
 * allowance.
 */
#ifndef ZEUS_PEER_H
#define ZEUS_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/identity.h"

/*
 * PEER_PIPE: a Windows named-pipe client (http/pipe_win.c), known by the
 * process id the pipe reports (GetNamedPipeClientProcessId) in `pid`; the
 * pipe's DACL decided who may connect at all.
 */
enum peer_kind { PEER_UNKNOWN, PEER_UNIX, PEER_INET4, PEER_INET6, PEER_PIPE };

struct sockdiag_tuple;

struct peer {
	enum peer_kind kind;
	/*
	 * PEER_UNIX: SO_PEERCRED's. PEER_INET4/6 on loopback with `owned`:
	 * the uid that owns the client's socket (peer_set_owner).
	 */
	uid_t uid;
	gid_t gid;
	pid_t pid;		/* PEER_UNIX, PEER_PIPE */
	/*
	 * PEER_UNIX, taken by peer_take_pidfd (the device process's look-up
	 * of a connection, warden.c, for that moment only):
	 * the connecting process itself, which a pid number is not (a number
	 * is reused once its process is reaped). Owned by the connection
	 * (struct conn), closed by peer_release; a copy of the struct (the
	 * per-peer table's) does not own it. -1: none.
	 */
	int pidfd;
	uint8_t addr[16];	/* PEER_INET4: 4 bytes, PEER_INET6: 16 */
	/*
	 * A loopback TCP peer whose client socket's owner the kernel told
	 * (common/sockdiag.h, at accept: http/server.c): counted by `uid`,
	 * as a Unix peer is. It says who the connection counts as, never
	 * what it may do: authorisation on TCP stays the token's.
	 */
	bool owned;
};

/*
 * Fills `p` from a connected socket and the address accept() returned
 * (`sa` may be NULL). Returns 0, or -1 when the peer cannot be identified
 * (then p->kind is PEER_UNKNOWN).
 */
int peer_identify(int fd, const struct sockaddr *sa, socklen_t salen,
    struct peer *p);

/*
 * A Unix peer: takes a pidfd of the process that connected, into
 * p->pidfd: SO_PEERPIDFD (Linux 6.5: the kernel pinned that process at
 * connect(2), so the pidfd is for it even after its pid number is reused),
 * else pidfd_open(2) of the SO_PEERCRED pid right after accept (a kernel
 * before 6.5: a process that exits and whose pid number is reused between
 * its connect and this call is mistaken for the new holder of the number;
 * docs/security.md, "Leases"). Returns 0, or -1 with errno (the peer had
 * already exited: ESRCH, EINVAL) and p->pidfd -1.
 */
int peer_take_pidfd(int fd, struct peer *p);

/*
 * The groups the kernel recorded for the Unix peer on `fd` when it
 * connected (SO_PEERGROUPS, Linux 4.13), in id->gids: `gid` (its
 * effective gid, SO_PEERCRED's) first, then its supplementary groups, the
 * first IDENTITY_MAX_GROUPS in all. They replace the user database's
 * list: a process that dropped a group is judged without it, and one that
 * holds a group it is not listed in (newgrp, a setgid program) with it,
 * as the kernel judges its file access. Returns 0, or -1 with `id` left
 * as it was when the kernel cannot tell.
 */
int peer_own_groups(int fd, gid_t gid, struct identity *id);

/*
 * The platform's part (peer_unix.c, peer_win.c): a Unix-socket peer's
 * credentials into p; -1 when the system will not say.
 */
int peer_identify_unix(int fd, struct peer *p);

/* Whether the process of p->pidfd has exited (true when there is none). */
bool peer_exited(const struct peer *p);

/* Closes p->pidfd, if any. */
void peer_release(struct peer *p);

/*
 * Same peer for counting purposes: a local user by its uid, on the Unix
 * socket or on loopback TCP where its owner is known (`owned`: one count
 * per user, whichever way it connects); on a named pipe the client's
 * process id; on TCP the rest of loopback (127.0.0.0/8 and ::1, owner
 * unknown) is one peer (any local user may bind every address of
 * 127.0.0.0/8), an IPv4 address is one, and so is an IPv6 /64 (a host may
 * use any address of its /64). The address itself is kept whole for the
 * logs (peer_format).
 */
bool peer_same(const struct peer *a, const struct peer *b);

/* Hash of what peer_same compares. */
uint32_t peer_hash(const struct peer *p);

/* A TCP peer on 127.0.0.0/8 or ::1, its owner known or not. */
bool peer_is_loopback(const struct peer *p);

/*
 * The TCP connection of `fd` as its client's socket has it (its address
 * and port as the client end, ours as the server end; IPv4-mapped
 * addresses as IPv4), for asking who owns that socket. 0, or -1 when it is
 * not a TCP connection on loopback at both ends.
 */
int peer_loopback_tuple(int fd, struct sockdiag_tuple *t);

/* A loopback TCP peer: counts from now on as the user `uid` (`owned`). */
void peer_set_owner(struct peer *p, uid_t uid);

/* Root on the Unix socket: never limited. */
bool peer_is_root(const struct peer *p);

/* "uid=1000 pid=42", "pipe_pid=42", "addr=127.0.0.1" / "addr=::1", or
 * "addr=127.0.0.1 uid=1000" (an owned loopback peer), for log lines. */
const char *peer_format(const struct peer *p, char *buf, size_t size);

#endif
