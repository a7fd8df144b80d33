/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_proxy.c - a test tool (tests/integration/test_windows_pipe.py):
 * Linux processes cannot open a named pipe of wine's, so this program,
 * run under wine, listens on a loopback TCP port and relays each
 * connection to its own connection on the pipe, byte for byte, both
 * ways; the Linux black-box tests then drive zeusd.exe's pipe as they
 * drive TCP. One TCP connection is one pipe client for its whole life
 * (keep-alive on one is keep-alive on the other); when zeusd closes the
 * pipe, the TCP connection's sending side is shut down, so the test
 * sees the end.
 *
 *   pipe_proxy.exe PIPE PORT      prints "port=N" (PORT 0: any), serves
 *
 * A pipe whose instances are all busy is waited for (WaitNamedPipe) up
 * to 10 s; then the TCP connection is closed unanswered, and a line
 * "pipe_open_failed error=N waited_ms=M" on stderr says so (the tests
 * tell the proxy's silence from zeusd's by it).
 *
 * Ctrl-C is ignored: wine hands a Ctrl-C sent to zeusd.exe (SIGINT) to
 * every process of the console, and the proxy must outlive zeusd's stop
 * so that the test sees zeusd, not the proxy, end the connections. The
 * tests end it with SIGKILL.
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <process.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROXY_BUF 16384
#define PROXY_OPEN_MS 10000

struct proxy_conn {
	SOCKET s;
	HANDLE pipe;
	volatile LONG closing;
};

static wchar_t proxy_pipe[300];

/* Opens the pipe, waiting for a free instance; INVALID_HANDLE_VALUE. */
static HANDLE
proxy_open(void)
{
	DWORD t0 = GetTickCount();

	for (;;) {
		HANDLE h = CreateFileW(proxy_pipe, GENERIC_READ | GENERIC_WRITE,
		    0, NULL, OPEN_EXISTING, FILE_FLAG_OVERLAPPED, NULL);
		DWORD e;

		if (h != INVALID_HANDLE_VALUE)
			return h;
		e = GetLastError();
		if (GetTickCount() - t0 > PROXY_OPEN_MS ||
		    (e != ERROR_PIPE_BUSY && e != ERROR_FILE_NOT_FOUND)) {
			fprintf(stderr, "pipe_open_failed error=%lu "
			    "waited_ms=%lu\n", (unsigned long)e,
			    (unsigned long)(GetTickCount() - t0));
			fflush(stderr);
			return INVALID_HANDLE_VALUE;
		}
		if (e == ERROR_PIPE_BUSY)
			(void)WaitNamedPipeW(proxy_pipe, 500);
		else
			Sleep(50);
	}
}

/* One overlapped pipe operation, waited for; bytes moved, or -1. */
static long
proxy_pipe_io(HANDLE h, char *buf, DWORD len, bool write)
{
	OVERLAPPED ov;
	DWORD n = 0;
	BOOL ok;

	memset(&ov, 0, sizeof(ov));
	ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
	if (ov.hEvent == NULL)
		return -1;
	ok = write ? WriteFile(h, buf, len, NULL, &ov) :
	    ReadFile(h, buf, len, NULL, &ov);
	if (ok || GetLastError() == ERROR_IO_PENDING)
		ok = GetOverlappedResult(h, &ov, &n, TRUE);
	CloseHandle(ov.hEvent);
	return ok ? (long)n : -1;
}

/* pipe -> TCP, until the pipe ends; then the TCP side is told. */
static unsigned __stdcall
proxy_down(void *arg)
{
	struct proxy_conn *c = arg;
	char buf[PROXY_BUF];
	long n;

	while (!c->closing &&
	    (n = proxy_pipe_io(c->pipe, buf, sizeof(buf), false)) > 0) {
		for (long off = 0; off < n; ) {
			int k = send(c->s, buf + off, (int)(n - off), 0);

			if (k <= 0)
				return 0;
			off += k;
		}
	}
	(void)shutdown(c->s, SD_SEND);
	return 0;
}

/* TCP -> pipe, on the connection's own thread. */
static unsigned __stdcall
proxy_conn_main(void *arg)
{
	struct proxy_conn *c = arg;
	char buf[PROXY_BUF];
	HANDLE down;
	int n;

	if ((c->pipe = proxy_open()) == INVALID_HANDLE_VALUE) {
		closesocket(c->s);
		free(c);
		return 0;
	}
	down = (HANDLE)_beginthreadex(NULL, 0, proxy_down, c, 0, NULL);
	if (down != NULL)
		while ((n = recv(c->s, buf, sizeof(buf), 0)) > 0)
			if (proxy_pipe_io(c->pipe, buf, (DWORD)n, true) != n)
				break;
	InterlockedExchange(&c->closing, 1);
	(void)shutdown(c->s, SD_BOTH);
	while (down != NULL && WaitForSingleObject(down, 100) == WAIT_TIMEOUT)
		(void)CancelIoEx(c->pipe, NULL);
	if (down != NULL)
		CloseHandle(down);
	CloseHandle(c->pipe);
	closesocket(c->s);
	free(c);
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	int len = sizeof(sin);
	WSADATA wsa;
	SOCKET ls;

	if (argc != 3 || MultiByteToWideChar(CP_UTF8, 0, argv[1], -1,
	    proxy_pipe, 300) == 0) {
		fprintf(stderr, "usage: pipe_proxy PIPE PORT\n");
		return 2;
	}
	if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0)
		return 1;
	(void)SetConsoleCtrlHandler(NULL, TRUE);
	ls = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((u_short)atoi(argv[2]));
	if (ls == INVALID_SOCKET || bind(ls, (struct sockaddr *)&sin,
	    sizeof(sin)) != 0 || listen(ls, SOMAXCONN) != 0 ||
	    getsockname(ls, (struct sockaddr *)&sin, &len) != 0) {
		fprintf(stderr, "pipe_proxy: cannot listen (error %d)\n",
		    WSAGetLastError());
		return 1;
	}
	printf("port=%u\n", (unsigned)ntohs(sin.sin_port));
	fflush(stdout);
	for (;;) {
		SOCKET s = accept(ls, NULL, NULL);
		struct proxy_conn *c;
		HANDLE t;
		BOOL on = TRUE;

		if (s == INVALID_SOCKET)
			continue;
		(void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY,
		    (const char *)&on, sizeof(on));
		if ((c = calloc(1, sizeof(*c))) == NULL) {
			closesocket(s);
			continue;
		}
		c->s = s;
		t = (HANDLE)_beginthreadex(NULL, 64 * 1024, proxy_conn_main, c,
		    STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
		if (t == NULL) {
			closesocket(s);
			free(c);
			continue;
		}
		CloseHandle(t);
	}
}
