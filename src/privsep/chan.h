/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chan.h - the network process's side of the channels to the device
 * process (docs/design.md, "Two processes").
 *
 * A channel is one SOCK_SEQPACKET socketpair: one request, one reply, then
 * the next request. The pool holds one per thread that may call the device
 * process at the same time (GPU and CPU workers, the shared readers, the
 * stream sampler, the HTTP thread), so a caller normally finds a free
 * channel at once and the device process needs no queue and no
 * demultiplexing: its concurrency is exactly ours. A caller that finds none
 * free waits for one.
 *
 * The device process going away (end of file, an error on a channel, a
 * reply that does not check out) is fatal: the network process has nothing
 * useful left to do, so pschan_call logs why and exits non-zero.
 */
#ifndef ZEUS_PRIVSEP_CHAN_H
#define ZEUS_PRIVSEP_CHAN_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/err.h"
#include "msg.h"

#define PSCHAN_EXIT_PEER 1	/* exit status: the device process is gone,
				 * as when the control channel says so */

struct pschan_pool;
struct psexec;

/*
 * One process (zeusd.exe; chan_direct.c, which builds instead of chan.c):
 * a pool of n work areas whose calls run `x`'s boundary table directly on
 * the caller's thread, each request checked by its row and each reply as
 * a channel's. No descriptors, no asynchronous channel (pschan_async_open
 * fails). `x` and `lim` are the device half's and outlive the pool.
 * chan_direct.c defines the calls a direct pool answers and no more: not
 * pschan_pool_create, _adopt, _fd, nor pschan_async_send/_recv and their
 * writes forms (remote_read.c and remote_write.c are not linked with it).
 */
int pschan_pool_direct(const struct psexec *x, const struct psmsg_limits *lim,
    unsigned n, struct pschan_pool **out, struct zerr *err);

/*
 * Makes n socketpairs: our ends stay in the pool, the device process's ends
 * are stored in peer[0..n-1] (the caller passes them on and closes them
 * here). All close-on-exec.
 */
int pschan_pool_create(unsigned n, struct pschan_pool **out, int *peer,
    struct zerr *err);

/*
 * A pool of the n channel ends fds[0..n-1] that a process was started with
 * (the network process, exec'd with its ends at fixed numbers): taken, and
 * made close-on-exec.
 */
int pschan_pool_adopt(const int *fds, unsigned n, struct pschan_pool **out,
    struct zerr *err);

/* Number of channels. */
unsigned pschan_pool_size(const struct pschan_pool *p);

/* Channel i's fd (0..size-1), to keep it open across an fd cleanup. */
int pschan_pool_fd(const struct pschan_pool *p, unsigned i);

/*
 * pschan_call on a channel free now: -1 (nothing sent) when every one is
 * taken, instead of waiting for one. For the loop thread's one call
 * (PSMSG_LEASE_CHECK), which the device process answers without waiting.
 */
int pschan_call_now(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep);

/*
 * Sends `req` (its id is assigned here) and waits for the reply, which is
 * checked against the request (psmsg_reply_check) before it is returned.
 * Any thread. Does not return when the device process is gone.
 */
void pschan_call(struct pschan_pool *p, struct psmsg_request *req,
    struct psmsg_reply *rep);

/*
 * pschan_call with descriptor `pass` sent along (SCM_RIGHTS; PSMSG_PEER's
 * connected socket). The caller keeps `pass` and closes it.
 */
void pschan_call_fd(struct pschan_pool *p, struct psmsg_request *req,
    int pass, struct psmsg_reply *rep);

/* pschan_call for the larger requests, PSMSG_TOKEN, PSMSG_AUDIT,
 * PSMSG_TCP_OWNER and PSMSG_SLURM_STEP. */
void pschan_call_token(struct pschan_pool *p, struct psmsg_token *t,
    struct psmsg_reply *rep);
void pschan_call_audit(struct pschan_pool *p, struct psmsg_audit *a,
    struct psmsg_reply *rep);
void pschan_call_tcp_owner(struct pschan_pool *p, struct psmsg_tcp_owner *o,
    struct psmsg_reply *rep);
void pschan_call_slurm_step(struct pschan_pool *p,
    struct psmsg_slurm_step *m, struct psmsg_reply *rep);

/*
 * A PSMSG_GPU_WRITES of w->n (2..PSMSG_WRITES_MAX) writes, its header's
 * id assigned here, and its reply, checked (psmsg_writes_reply_check)
 * into *out. Does not return when the device process is gone.
 */
void pschan_call_writes(struct pschan_pool *p, struct psmsg_writes *w,
    struct psmsg_writes_reply *out);

/*
 * The lease record's requests (privsep/msg.h): `req` a PSMSG_LEASES or a
 * PSMSG_RELEASE, filled but for its id (assigned here), and its reply,
 * checked (psmsg_leases_reply_check, against the node's `ngpu`) into
 * *out; or a PSMSG_LEDGER (req->dev the first user) and its page of
 * users (psmsg_ledger_reply_check). The replies are large (about 45 and
 * 10 KiB): they are received on the heap, and *out is the caller's. 0, or
 * -1 when there is no memory to receive them (nothing was sent). Does not
 * return when the device process is gone or answers nonsense.
 */
int pschan_call_leases(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_leases_reply *out);
int pschan_call_ledger(struct pschan_pool *p, struct psmsg_request *req,
    uint32_t ngpu, struct psmsg_ledger_reply *out);

/*
 * A channel kept by one caller that does not wait for the reply: it sends,
 * and reads the reply once the fd is readable (the HTTP loop watches it).
 * One request is out at a time. Failures are fatal, as for pschan_call.
 */
struct pschan_async {
	struct pschan_pool *pool;
	int fd;				/* watch for EPOLLIN */
	/*
	 * A request awaits its reply. The sender and the reader of the
	 * reply may be different threads: `out` is set (release) after
	 * `req`, and whatever the sender wrote before, and read (acquire)
	 * before the reply is.
	 */
	atomic_bool out;
	struct psmsg_request req;	/* that request (a writes' header) */
	uint32_t nwrites;		/* a PSMSG_GPU_WRITES's n, else 0 */
};

/*
 * Takes a free channel out of the pool for good (the pool keeps at least
 * one for pschan_call); the pool still closes it.
 */
int pschan_async_open(struct pschan_pool *p, struct pschan_async *a,
    struct zerr *err);

/*
 * A blocking round trip on a channel of one's own (pschan_async_open's,
 * used by one thread only, never with pschan_async_send): as pschan_call.
 */
void pschan_own_call(struct pschan_async *a, struct psmsg_request *req,
    struct psmsg_reply *rep);

/* Sends `req` (its id is assigned here); nothing may be out already. */
void pschan_async_send(struct pschan_async *a, struct psmsg_request *req);

/*
 * The reply to the request out, checked against it, into *rep: 0, or -1
 * when nothing is out or the reply has not come yet (never blocks).
 */
int pschan_async_recv(struct pschan_async *a, struct psmsg_reply *rep);

/*
 * A PSMSG_GPU_WRITES of w->n writes (2..PSMSG_WRITES_MAX; its header's id
 * assigned here), not waited for; nothing may be out already.
 */
void pschan_async_send_writes(struct pschan_async *a, struct psmsg_writes *w);
/*
 * The reply to the writes out, as results: those of a PSMSG_GPU_WRITES
 * (pschan_async_send_writes), or the one of a PSMSG_GPU_WRITE sent with
 * pschan_async_send (out->n 1, its reply's rc, kind, message and lost
 * flag in out->r[0]). 0, or -1 as pschan_async_recv; checked as
 * pschan_call_writes and pschan_call check theirs.
 */
int pschan_async_recv_writes(struct pschan_async *a,
    struct psmsg_writes_reply *out);
/* Closes every channel (the device process sees end of file) and frees. */
void pschan_pool_destroy(struct pschan_pool *p);

#endif
