/* SPDX-License-Identifier: Apache-2.0 */
/*
 * os_win.c - os.h on Windows. Winsock is started by curl_global_init
 * (libzeus does that first); the host name is the computer's NetBIOS name,
 * which needs no Winsock. A named pipe reaches curl as one end of a
 * loopback socket pair relayed to the pipe (common/pipe_relay_win.h, the
 * relay zeusd's pipe uses).
 */
#include "os.h"

#include <winsock2.h>
#include <windows.h>

#include <process.h>
#include <stdlib.h>
#include <string.h>

#include "common/pipe_relay_win.h"

#define OS_PIPE_NAME_MAX 256
#define OS_DEFAULT_PIPE "\\\\.\\pipe\\zeusd"

curl_socket_t
lib_os_socket(int family, int type, int protocol)
{
	return WSASocketW(family, type, protocol, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
}

void
lib_os_hostname(char *buf, size_t size)
{
	DWORD n = (DWORD)size;

	if (size == 0)
		return;
	if (!GetComputerNameA(buf, &n))
		buf[0] = '\0';
	buf[size - 1] = '\0';
}

/* Opens the pipe as a client, waiting up to wait_ms for a free instance. */
static HANDLE
os_pipe_open(const wchar_t *name, long wait_ms)
{
	DWORD t0 = GetTickCount();

	for (;;) {
		/* identification only: the server may not act as us */
		HANDLE h = CreateFileW(name, GENERIC_READ | GENERIC_WRITE, 0,
		    NULL, OPEN_EXISTING, FILE_FLAG_OVERLAPPED |
		    SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, NULL);

		if (h != INVALID_HANDLE_VALUE || GetLastError() !=
		    ERROR_PIPE_BUSY || (long)(GetTickCount() - t0) >= wait_ms)
			return h;
		(void)WaitNamedPipeW(name, 100);
	}
}

/*
 * A pipe connection being set up: curl connects its socket (bound to
 * `from`) to the listener, and this thread accepts it and relays it to
 * the pipe. (curl 7.88 cannot take a socket already connected: its
 * CURL_SOCKOPT_ALREADY_CONNECTED then still connects, and Winsock
 * refuses; curl issue 10626.)
 */
struct os_pipe_conn {
	HANDLE pipe;
	struct relay_listener rl;
	struct sockaddr_in from;
	long wait_ms;
};

static unsigned __stdcall
os_pipe_accept(void *arg)
{
	struct os_pipe_conn *pc = arg;
	unsigned strangers;
	SOCKET s;

	if (relay_accept(&pc->rl, &pc->from, pc->wait_ms, &s,
	    &strangers) == 0)
		(void)relay_start(pc->pipe, s, NULL, NULL, NULL);
	else
		CloseHandle(pc->pipe);
	relay_listener_close(&pc->rl);
	free(pc);
	return 0;
}

curl_socket_t
lib_os_pipe_socket(const char *name, long wait_ms, struct sockaddr *to,
    unsigned *tolen)
{
	wchar_t wname[OS_PIPE_NAME_MAX + 1];
	struct os_pipe_conn *pc;
	int len = sizeof(pc->from);
	SOCKET s = INVALID_SOCKET;
	HANDLE t;

	if (*tolen < sizeof(pc->rl.addr) ||
	    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, name, -1,
	    wname, OS_PIPE_NAME_MAX + 1) == 0 ||
	    (pc = calloc(1, sizeof(*pc))) == NULL)
		return CURL_SOCKET_BAD;
	pc->wait_ms = wait_ms;
	pc->rl.s = INVALID_SOCKET;
	if ((pc->pipe = os_pipe_open(wname, wait_ms)) == INVALID_HANDLE_VALUE)
		goto fail;
	pc->from.sin_family = AF_INET;
	pc->from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (relay_listener_open(&pc->rl) != 0 ||
	    (s = lib_os_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)) ==
	    INVALID_SOCKET ||
	    bind(s, (struct sockaddr *)&pc->from, sizeof(pc->from)) != 0 ||
	    getsockname(s, (struct sockaddr *)&pc->from, &len) != 0)
		goto fail;
	memcpy(to, &pc->rl.addr, sizeof(pc->rl.addr));
	*tolen = sizeof(pc->rl.addr);
	t = (HANDLE)_beginthreadex(NULL, 0, os_pipe_accept, pc, 0, NULL);
	if (t == NULL)
		goto fail;
	CloseHandle(t);
	return s;
fail:
	if (s != INVALID_SOCKET)
		closesocket(s);
	relay_listener_close(&pc->rl);
	if (pc->pipe != NULL && pc->pipe != INVALID_HANDLE_VALUE)
		CloseHandle(pc->pipe);
	free(pc);
	return CURL_SOCKET_BAD;
}

bool
lib_os_has_pipes(void)
{
	return true;
}

const char *
lib_os_default_pipe(void)
{
	/* served: an instance free, or all busy (the wait's timeout) */
	if (WaitNamedPipeW(L"" OS_DEFAULT_PIPE, 1) ||
	    GetLastError() == ERROR_SEM_TIMEOUT)
		return OS_DEFAULT_PIPE;
	return NULL;
}
