/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_win.c - the Windows named pipe (pipe_win.h).
 *
 * The pipe: overlapped instances in byte mode that reject remote clients,
 * at most PIPE_MAX_INSTANCES of them, the first created with
 * FILE_FLAG_FIRST_PIPE_INSTANCE (a second zeusd on the same name fails at
 * startup, naming the pipe), all with the security descriptor of
 * --pipe-sddl. One instance at a time waits for a client (the acceptor
 * thread); as soon as a client connects, its replacement is created, so
 * the next client never finds the pipe missing. When no instance can be
 * made (the limit reached, resources), the acceptor logs and retries
 * every second; clients meanwhile get ERROR_PIPE_BUSY and wait
 * (WaitNamedPipe).
 *
 * One HTTP implementation: a connected client gets a checked loopback
 * socket pair (common/pipe_relay_win.h), one end handed to libmicrohttpd
 * with server_add_connection, the other relayed to and from the pipe by
 * a thread of its own with overlapped I/O on both. The server learns
 * the connection's peer, the pipe client's process id, from
 * pipe_listen_peer (server_hooks.peer), and counts the per-peer cap and
 * arms the request deadline on it as for any connection: when the server
 * closes its end (a deadline, the idle timeout, a refusal, shutdown), the
 * relay sees the socket end and closes the pipe.
 *
 * Every byte from the pipe is untrusted and only copied into the socket:
 * the server parses it as it parses TCP.
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <process.h>
#include <sddl.h>

#include "http/pipe_win.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/peer.h"
#include "common/log.h"
#include "common/pipe_relay_win.h"
#include "http/server.h"
#include "node/config.h"

#define PIPE_MAX_INSTANCES 254
#define PIPE_IO_BUFFER (64 * 1024)	/* the system's pipe buffers */
#define PIPE_RETRY_MS 1000
#define PIPE_CLOSE_WAIT_MS 5000

/* A connected client, from its relay's start to its end. */
struct pipe_client {
	struct pipe_listener *pl;
	SOCKET mhd_sock;		/* the server's: pipe_listen_peer's key */
	DWORD pid;
	bool peer_pending;		/* pipe_listen_peer not asked yet */
	struct pipe_client *prev, *next;
};

struct pipe_listener {
	wchar_t wname[ZEUSD_PIPE_NAME_MAX + 1];
	char name[ZEUSD_PIPE_NAME_MAX + 1];
	PSECURITY_DESCRIPTOR sd;
	SECURITY_ATTRIBUTES sa;
	HANDLE waiting;			/* the instance a client may connect to */
	struct relay_listener pair;	/* the socket pairs' */
	struct server *srv;
	HANDLE quiesce, stop, idle;	/* manual-reset events */
	HANDLE acceptor;
	CRITICAL_SECTION lock;		/* clients, nclients, peer_pending */
	struct pipe_client *clients;
	unsigned nclients;
};

/* ---- Instances ------------------------------------------------------------ */

static HANDLE
pipe_instance(struct pipe_listener *pl, bool first)
{
	return CreateNamedPipeW(pl->wname, PIPE_ACCESS_DUPLEX |
	    FILE_FLAG_OVERLAPPED | (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0),
	    PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT |
	    PIPE_REJECT_REMOTE_CLIENTS, PIPE_MAX_INSTANCES, PIPE_IO_BUFFER,
	    PIPE_IO_BUFFER, 0, &pl->sa);
}

int
pipe_listen_open(const char *name, const char *sddl,
    struct pipe_listener **out, struct zerr *err)
{
	struct pipe_listener *pl;
	wchar_t *wsddl = NULL;
	DWORD e = 0;
	int n;

	*out = NULL;
	if ((pl = calloc(1, sizeof(*pl))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	pl->waiting = INVALID_HANDLE_VALUE;
	pl->pair.s = INVALID_SOCKET;
	InitializeCriticalSection(&pl->lock);
	snprintf(pl->name, sizeof(pl->name), "%s", name);
	if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, name, -1,
	    pl->wname, ZEUSD_PIPE_NAME_MAX + 1) == 0) {
		zerr_set(err, ZERR_INVALID, "invalid --pipe-name '%.64s': not "
		    "UTF-8, or too long", name);
		goto fail;
	}
	n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, sddl, -1, NULL,
	    0);
	if (n > 0 && (wsddl = calloc((size_t)n, sizeof(*wsddl))) != NULL)
		n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, sddl, -1,
		    wsddl, n);
	if (n <= 0 || wsddl == NULL ||
	    !ConvertStringSecurityDescriptorToSecurityDescriptorW(wsddl,
	    SDDL_REVISION_1, &pl->sd, NULL)) {
		zerr_set(err, ZERR_INVALID, "invalid --pipe-sddl '%.200s': not "
		    "a security descriptor in SDDL (error %lu); the default is "
		    "%s", sddl, (unsigned long)GetLastError(),
		    ZEUSD_DEFAULT_PIPE_SDDL);
		free(wsddl);
		goto fail;
	}
	free(wsddl);
	pl->sa.nLength = sizeof(pl->sa);
	pl->sa.lpSecurityDescriptor = pl->sd;
	pl->sa.bInheritHandle = FALSE;
	pl->quiesce = CreateEventW(NULL, TRUE, FALSE, NULL);
	pl->stop = CreateEventW(NULL, TRUE, FALSE, NULL);
	pl->idle = CreateEventW(NULL, TRUE, TRUE, NULL);
	if (pl->quiesce == NULL || pl->stop == NULL || pl->idle == NULL) {
		zerr_set(err, ZERR_INTERNAL, "cannot create the named pipe's "
		    "events (error %lu)", (unsigned long)GetLastError());
		goto fail;
	}
	/*
	 * FILE_FLAG_FIRST_PIPE_INSTANCE refuses a name another process
	 * serves; wine ignores the flag, so ask first whether the pipe has
	 * an instance (free, or all busy: WaitNamedPipe's timeout).
	 */
	if (WaitNamedPipeW(pl->wname, 1) || GetLastError() == ERROR_SEM_TIMEOUT)
		e = ERROR_PIPE_BUSY;
	else if ((pl->waiting = pipe_instance(pl, true)) ==
	    INVALID_HANDLE_VALUE)
		e = GetLastError();
	if (pl->waiting == INVALID_HANDLE_VALUE) {
		zerr_set(err, ZERR_INTERNAL, "cannot create the named pipe "
		    "%s: %s (error %lu)", name, e == ERROR_ACCESS_DENIED ||
		    e == ERROR_PIPE_BUSY ? "another process already serves "
		    "it (another zeusd?)" : "the system refused it",
		    (unsigned long)e);
		goto fail;
	}
	if (relay_listener_open(&pl->pair) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot open the named pipe's "
		    "loopback relay listener: Winsock error %d",
		    WSAGetLastError());
		goto fail;
	}
	*out = pl;
	return 0;
fail:
	pipe_listen_close(pl);
	return -1;
}

/* A relay's end (pipe_relay_win.h's done): the client is forgotten. */
static void
pipe_client_done(void *arg)
{
	struct pipe_client *c = arg;
	struct pipe_listener *pl = c->pl;

	EnterCriticalSection(&pl->lock);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		pl->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (--pl->nclients == 0)
		(void)SetEvent(pl->idle);
	LeaveCriticalSection(&pl->lock);
	free(c);
}

/* ---- Accepting ------------------------------------------------------------- */

/* A client connected on `h`: its relay, and its connection to the server. */
static void
pipe_client_start(struct pipe_listener *pl, HANDLE h)
{
	struct pipe_client *c = calloc(1, sizeof(*c));
	unsigned strangers = 0;
	SOCKET mine, theirs;

	if (c == NULL || relay_pair(&pl->pair, &mine, &theirs,
	    &strangers) != 0) {
		zlog(ZLOG_WARN, "pipe_client_failed", "msg=\"no relay for a "
		    "named pipe client (Winsock error %d); its pipe is "
		    "closed\"", WSAGetLastError());
		free(c);
		(void)DisconnectNamedPipe(h);
		CloseHandle(h);
		return;
	}
	if (strangers > 0)
		zlog(ZLOG_WARN, "pipe_pair_stranger", "count=%u msg=\""
		    "connections to the named pipe's private relay port that "
		    "zeusd did not make; closed\"", strangers);
	c->pl = pl;
	c->mhd_sock = theirs;
	if (!GetNamedPipeClientProcessId(h, &c->pid))
		c->pid = 0;
	c->peer_pending = true;
	EnterCriticalSection(&pl->lock);
	c->next = pl->clients;
	if (pl->clients != NULL)
		pl->clients->prev = c;
	pl->clients = c;
	pl->nclients++;
	(void)ResetEvent(pl->idle);
	LeaveCriticalSection(&pl->lock);
	if (relay_start(h, mine, pl->stop, pipe_client_done, c) != 0) {
		zlog(ZLOG_WARN, "pipe_client_failed", "msg=\"no relay thread "
		    "for a named pipe client; its pipe is closed\"");
		closesocket(theirs);
		pipe_client_done(c);
		return;
	}
	/*
	 * c is the relay's now (it frees it at its end). Refused, the server
	 * closed its end and the relay ends with it; until then c stays
	 * listed with a socket value that may be reused, but a newer
	 * client's entry comes first in the list (pipe_listen_peer).
	 */
	(void)server_add_connection(pl->srv, (int)theirs);
}

/*
 * Waits for a client on the waiting instance: true with the instance
 * connected, false when quiescing or on the instance's failure (then
 * pl->waiting is closed).
 */
static bool
pipe_wait_client(struct pipe_listener *pl, OVERLAPPED *ov, bool *quiesced)
{
	HANDLE hs[2] = { pl->quiesce, ov->hEvent };
	DWORD e, n;

	(void)ResetEvent(ov->hEvent);
	if (ConnectNamedPipe(pl->waiting, ov))
		return true;
	e = GetLastError();
	if (e == ERROR_PIPE_CONNECTED)
		return true;
	if (e == ERROR_IO_PENDING) {
		if (WaitForMultipleObjects(2, hs, FALSE, INFINITE) ==
		    WAIT_OBJECT_0 + 1 &&
		    GetOverlappedResult(pl->waiting, ov, &n, FALSE))
			return true;
		if (WaitForSingleObject(pl->quiesce, 0) == WAIT_OBJECT_0)
			*quiesced = true;
		(void)CancelIoEx(pl->waiting, ov);
		(void)GetOverlappedResult(pl->waiting, ov, &n, TRUE);
		e = GetLastError();
	}
	/* ERROR_NO_DATA: the client came and went; any other: a new one */
	if (!*quiesced && e != ERROR_NO_DATA && e != ERROR_OPERATION_ABORTED)
		zlog(ZLOG_WARN, "pipe_connect_failed", "pipe=%s error=%lu",
		    pl->name, (unsigned long)e);
	(void)DisconnectNamedPipe(pl->waiting);
	CloseHandle(pl->waiting);
	pl->waiting = INVALID_HANDLE_VALUE;
	return false;
}

/* A new waiting instance; on failure logs and waits a second. */
static void
pipe_replace(struct pipe_listener *pl, unsigned *failures)
{
	DWORD e;

	pl->waiting = pipe_instance(pl, false);
	if (pl->waiting != INVALID_HANDLE_VALUE) {
		if (*failures > 0)
			zlog(ZLOG_INFO, "pipe_instance_ok", "pipe=%s "
			    "failed_tries=%u", pl->name, *failures);
		*failures = 0;
		return;
	}
	e = GetLastError();
	/* the first failure, then one line a minute while it lasts */
	if ((*failures)++ % 60 == 0)
		zlog(ZLOG_WARN, "pipe_instance_failed", "pipe=%s error=%lu "
		    "instances_max=%d msg=\"%s; retrying every second\"",
		    pl->name, (unsigned long)e, PIPE_MAX_INSTANCES,
		    e == ERROR_PIPE_BUSY ? "every instance of the pipe is in "
		    "use" : "cannot create an instance of the pipe");
	(void)WaitForSingleObject(pl->quiesce, PIPE_RETRY_MS);
}

static unsigned __stdcall
pipe_acceptor(void *arg)
{
	struct pipe_listener *pl = arg;
	OVERLAPPED ov;
	unsigned failures = 0;
	bool quiesced = false;
	HANDLE h;

	memset(&ov, 0, sizeof(ov));
	if ((ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL)) == NULL) {
		zlog(ZLOG_ERROR, "pipe_acceptor_failed", "error=%lu",
		    (unsigned long)GetLastError());
		return 1;
	}
	while (WaitForSingleObject(pl->quiesce, 0) != WAIT_OBJECT_0) {
		if (pl->waiting == INVALID_HANDLE_VALUE) {
			pipe_replace(pl, &failures);
			continue;
		}
		if (!pipe_wait_client(pl, &ov, &quiesced))
			continue;
		h = pl->waiting;
		/* the replacement first: the pipe never goes missing */
		pipe_replace(pl, &failures);
		pipe_client_start(pl, h);
	}
	if (pl->waiting != INVALID_HANDLE_VALUE) {
		CloseHandle(pl->waiting);
		pl->waiting = INVALID_HANDLE_VALUE;
	}
	CloseHandle(ov.hEvent);
	return 0;
}

int
pipe_listen_start(struct pipe_listener *pl, struct server *srv,
    struct zerr *err)
{
	pl->srv = srv;
	pl->acceptor = (HANDLE)_beginthreadex(NULL, 0, pipe_acceptor, pl, 0,
	    NULL);
	if (pl->acceptor == NULL)
		return zerr_set(err, ZERR_INTERNAL, "cannot start the named "
		    "pipe's thread");
	return 0;
}

int
pipe_listen_peer(void *ctx, int fd, struct peer *p)
{
	struct pipe_listener *pl = ctx;
	int rc = -1;

	EnterCriticalSection(&pl->lock);
	/* newest first: a refused client's stale entry comes after */
	for (struct pipe_client *c = pl->clients; c != NULL; c = c->next) {
		if (!c->peer_pending || c->mhd_sock != (SOCKET)fd)
			continue;
		memset(p, 0, sizeof(*p));
		p->pidfd = -1;
		p->kind = PEER_PIPE;
		p->pid = (pid_t)c->pid;
		c->peer_pending = false;
		rc = 0;
		break;
	}
	LeaveCriticalSection(&pl->lock);
	return rc;
}

void
pipe_listen_quiesce(struct pipe_listener *pl)
{
	if (pl == NULL)
		return;
	(void)SetEvent(pl->quiesce);
	if (pl->acceptor != NULL) {
		(void)WaitForSingleObject(pl->acceptor, INFINITE);
		CloseHandle(pl->acceptor);
		pl->acceptor = NULL;
	}
}

void
pipe_listen_close(struct pipe_listener *pl)
{
	bool idle = true;

	if (pl == NULL)
		return;
	if (pl->quiesce != NULL)
		pipe_listen_quiesce(pl);
	if (pl->stop != NULL) {
		(void)SetEvent(pl->stop);
		idle = WaitForSingleObject(pl->idle, PIPE_CLOSE_WAIT_MS) ==
		    WAIT_OBJECT_0;
	}
	/* a relay's last step is its LeaveCriticalSection */
	EnterCriticalSection(&pl->lock);
	LeaveCriticalSection(&pl->lock);
	if (!idle) {
		/* the relays still hold the listener: leave it to the exit */
		zlog(ZLOG_WARN, "pipe_relays_stuck", "clients=%u",
		    pl->nclients);
		return;
	}
	if (pl->waiting != INVALID_HANDLE_VALUE)
		CloseHandle(pl->waiting);
	relay_listener_close(&pl->pair);
	if (pl->sd != NULL)
		LocalFree(pl->sd);
	if (pl->quiesce != NULL)
		CloseHandle(pl->quiesce);
	if (pl->stop != NULL)
		CloseHandle(pl->stop);
	if (pl->idle != NULL)
		CloseHandle(pl->idle);
	DeleteCriticalSection(&pl->lock);
	free(pl);
}

void
pipe_listen_describe(const struct pipe_listener *pl, char *buf, size_t size)
{
	snprintf(buf, size, "pipe:%s", pl->name);
}
