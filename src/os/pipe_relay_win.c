/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_relay_win.c - pipe_relay_win.h: socket pairs on a private loopback
 * listener, and the relay thread.
 *
 * The relay is one thread per pipe client with one overlapped operation
 * outstanding per direction: "up" reads the pipe and sends what it read
 * to the socket, "down" receives from the socket and writes to the pipe.
 * A direction never reads again before its last bytes are written, so
 * each holds at most one buffer and a side that stops reading holds the
 * other back (as TCP would), never memory. Every byte is only copied:
 * the HTTP library behind the socket parses it.
 */
#include "common/pipe_relay_win.h"

#include <ws2tcpip.h>
#include <process.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RELAY_BUF_SIZE (16 * 1024)	/* each way */
#define RELAY_STACK (64 * 1024)
#define RELAY_PAIR_TRIES 16		/* strangers accepted before giving up */
#define RELAY_CANCEL_WAIT_MS 5000
#define RELAY_ACCEPT_MS 5000		/* our own connect is already queued */

int
relay_listener_open(struct relay_listener *rl)
{
	int len = sizeof(rl->addr);
	BOOL on = TRUE;

	rl->s = WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
	if (rl->s == INVALID_SOCKET)
		return -1;
	(void)setsockopt(rl->s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE,
	    (const char *)&on, sizeof(on));
	memset(&rl->addr, 0, sizeof(rl->addr));
	rl->addr.sin_family = AF_INET;
	rl->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(rl->s, (struct sockaddr *)&rl->addr, sizeof(rl->addr)) != 0 ||
	    getsockname(rl->s, (struct sockaddr *)&rl->addr, &len) != 0 ||
	    listen(rl->s, SOMAXCONN) != 0) {
		int e = WSAGetLastError();

		closesocket(rl->s);
		rl->s = INVALID_SOCKET;
		WSASetLastError(e);
		return -1;
	}
	return 0;
}

void
relay_listener_close(struct relay_listener *rl)
{
	if (rl->s != INVALID_SOCKET)
		closesocket(rl->s);
	rl->s = INVALID_SOCKET;
}

static bool
relay_same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
	    a->sin_addr.s_addr == b->sin_addr.s_addr;
}

int
relay_accept(struct relay_listener *rl, const struct sockaddr_in *from,
    long timeout_ms, SOCKET *out, unsigned *strangers)
{
	struct sockaddr_in peer;
	int len;
	SOCKET a;
	BOOL on = TRUE;

	*strangers = 0;
	for (int i = 0; i < RELAY_PAIR_TRIES; i++) {
		struct timeval tv = { timeout_ms / 1000,
		    (timeout_ms % 1000) * 1000 };
		fd_set rd;

		FD_ZERO(&rd);
		FD_SET(rl->s, &rd);
		if (select(0, &rd, NULL, NULL, &tv) != 1) {
			WSASetLastError(WSAETIMEDOUT);
			return -1;
		}
		len = sizeof(peer);
		if ((a = accept(rl->s, (struct sockaddr *)&peer, &len)) ==
		    INVALID_SOCKET)
			return -1;
		if (len == sizeof(peer) && relay_same_addr(&peer, from)) {
			(void)SetHandleInformation((HANDLE)a,
			    HANDLE_FLAG_INHERIT, 0);
			(void)setsockopt(a, IPPROTO_TCP, TCP_NODELAY,
			    (const char *)&on, sizeof(on));
			*out = a;
			return 0;
		}
		(*strangers)++;
		closesocket(a);
	}
	WSASetLastError(WSAECONNREFUSED);
	return -1;
}

int
relay_pair(struct relay_listener *rl, SOCKET *mine, SOCKET *theirs,
    unsigned *strangers)
{
	struct sockaddr_in local;
	int len = sizeof(local);
	SOCKET c;
	BOOL on = TRUE;

	*strangers = 0;
	c = WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
	if (c == INVALID_SOCKET)
		return -1;
	if (connect(c, (struct sockaddr *)&rl->addr, sizeof(rl->addr)) != 0 ||
	    getsockname(c, (struct sockaddr *)&local, &len) != 0 ||
	    relay_accept(rl, &local, RELAY_ACCEPT_MS, theirs,
	    strangers) != 0) {
		int e = WSAGetLastError();

		closesocket(c);
		WSASetLastError(e);
		return -1;
	}
	(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, (const char *)&on,
	    sizeof(on));
	*mine = c;
	return 0;
}

/* ---- The relay --------------------------------------------------------------- */

/*
 * One direction: reading from one side into `buf`, then writing what was
 * read to the other, one overlapped operation at a time on `ov`. `busy`:
 * an operation is outstanding.
 */
struct relay_dir {
	OVERLAPPED ov;
	char *buf;
	DWORD len, off;
	bool writing, busy;
};

struct relay {
	HANDLE pipe;
	SOCKET sock;
	HANDLE stop;
	void (*done)(void *);
	void *arg;
	char up_buf[RELAY_BUF_SIZE];	/* pipe -> socket */
	char down_buf[RELAY_BUF_SIZE];	/* socket -> pipe */
};

/* Whether `d`'s current operation is on the pipe (else the socket). */
static bool
relay_on_pipe(const struct relay_dir *d, bool up)
{
	return up != d->writing;
}

/* Starts the next operation of a direction; false when it cannot. */
static bool
relay_next(struct relay *r, struct relay_dir *d, bool up)
{
	WSABUF wb;
	DWORD flags = 0;
	int rc;
	BOOL ok;

	(void)ResetEvent(d->ov.hEvent);
	if (relay_on_pipe(d, up)) {
		ok = d->writing ? WriteFile(r->pipe, d->buf + d->off,
		    d->len - d->off, NULL, &d->ov) : ReadFile(r->pipe, d->buf,
		    RELAY_BUF_SIZE, NULL, &d->ov);
		d->busy = ok || GetLastError() == ERROR_IO_PENDING;
	} else {
		wb.buf = d->buf + (d->writing ? d->off : 0);
		wb.len = d->writing ? d->len - d->off : RELAY_BUF_SIZE;
		rc = d->writing ? WSASend(r->sock, &wb, 1, NULL, 0, &d->ov,
		    NULL) : WSARecv(r->sock, &wb, 1, NULL, &flags, &d->ov, NULL);
		d->busy = rc == 0 || WSAGetLastError() == WSA_IO_PENDING;
	}
	return d->busy;
}

/* The outstanding operation of `d` completed: the next one, or false. */
static bool
relay_done(struct relay *r, struct relay_dir *d, bool up)
{
	DWORD n = 0, flags = 0;
	BOOL ok;

	d->busy = false;
	if (relay_on_pipe(d, up))
		ok = GetOverlappedResult(r->pipe, &d->ov, &n, FALSE);
	else
		ok = WSAGetOverlappedResult(r->sock, &d->ov, &n, FALSE, &flags);
	if (!ok || n == 0)
		return false;		/* an error, or that side's end */
	if (!d->writing) {
		d->len = n;
		d->off = 0;
		d->writing = true;
	} else if ((d->off += n) >= d->len)
		d->writing = false;
	return relay_next(r, d, up);
}

/* Cancels an outstanding operation; false if it never let go of `d`. */
static bool
relay_cancel(struct relay *r, struct relay_dir *d, bool up)
{
	if (!d->busy)
		return true;
	(void)CancelIoEx(relay_on_pipe(d, up) ? r->pipe : (HANDLE)r->sock,
	    &d->ov);
	return WaitForSingleObject(d->ov.hEvent, RELAY_CANCEL_WAIT_MS) ==
	    WAIT_OBJECT_0;
}

static unsigned __stdcall
relay_main(void *arg)
{
	struct relay *r = arg;
	struct relay_dir up = { .buf = r->up_buf }, down = { .buf = r->down_buf };
	HANDLE hs[3];
	DWORD nh = 0;
	bool ok, idle;

	up.ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
	down.ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
	hs[nh++] = up.ov.hEvent;
	hs[nh++] = down.ov.hEvent;
	if (r->stop != NULL)
		hs[nh++] = r->stop;
	ok = up.ov.hEvent != NULL && down.ov.hEvent != NULL &&
	    relay_next(r, &up, true) && relay_next(r, &down, false);
	while (ok) {
		DWORD w = WaitForMultipleObjects(nh, hs, FALSE, INFINITE);

		if (w == WAIT_OBJECT_0)
			ok = relay_done(r, &up, true);
		else if (w == WAIT_OBJECT_0 + 1)
			ok = relay_done(r, &down, false);
		else
			ok = false;	/* stop, or the wait failed */
	}
	/*
	 * Either side ended. The pipe's client has every byte the socket
	 * sent (a write completes once the pipe holds it, and closing the
	 * handle keeps what the client has not read yet).
	 */
	idle = relay_cancel(r, &up, true) && relay_cancel(r, &down, false);
	(void)shutdown(r->sock, SD_BOTH);
	closesocket(r->sock);
	CloseHandle(r->pipe);
	if (up.ov.hEvent != NULL)
		CloseHandle(up.ov.hEvent);
	if (down.ov.hEvent != NULL)
		CloseHandle(down.ov.hEvent);
	if (r->done != NULL)
		r->done(r->arg);
	if (idle)		/* else an operation still holds its buffer */
		free(r);
	return 0;
}

int
relay_start(HANDLE pipe, SOCKET sock, HANDLE stop,
    void (*done)(void *), void *arg)
{
	struct relay *r = calloc(1, sizeof(*r));
	HANDLE t = NULL;

	if (r != NULL) {
		r->pipe = pipe;
		r->sock = sock;
		r->stop = stop;
		r->done = done;
		r->arg = arg;
		t = (HANDLE)_beginthreadex(NULL, RELAY_STACK, relay_main, r,
		    STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
	}
	if (t == NULL) {
		free(r);
		closesocket(sock);
		CloseHandle(pipe);
		return -1;
	}
	CloseHandle(t);
	return 0;
}
