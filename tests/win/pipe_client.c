/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipe_client.c - a native named-pipe client for raw checks of zeusd.exe's
 * pipe (tests/integration/test_windows_pipe.py, bench/pipe_bench.sh), run
 * under wine:
 *
 *   pipe_client.exe idle PIPE
 *       connects, writes nothing, reads until the server closes the pipe;
 *       prints "closed_after_ms=N bytes=B" (B: what the server sent)
 *   pipe_client.exe hold PIPE N MS
 *       opens up to N clients at once (each waits up to 3 s for a free
 *       instance, 0.5 s once one did not get any), prints "opened=K
 *       busy=B other=O" (busy: no instance), holds them MS milliseconds,
 *       closes them, then asks GET /time on a new client (retrying up
 *       to 5 s while no instance exists) and prints "after=STATUS"
 *   pipe_client.exe bench TARGET PATH SECONDS THREADS
 *       TARGET pipe:NAME or tcp:HOST:PORT; each thread one keep-alive
 *       connection asking GET PATH in a loop; prints "requests=N rps=R
 *       p50_us=P p99_us=Q errors=E"
 *   pipe_client.exe get PIPE PATH COUNT
 *       COUNT requests on one keep-alive client; prints each status
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <process.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_MAX_HOLD 1024
#define CLIENT_RESP_MAX 65536
#define CLIENT_MAX_SAMPLES 2000000

static wchar_t client_pipe[300];

/* A connection: a pipe handle or a socket. */
struct client_conn {
	HANDLE h;
	SOCKET s;
	char buf[CLIENT_RESP_MAX];
	size_t len;
};

static HANDLE
client_open_pipe(DWORD wait_ms)
{
	DWORD t0 = GetTickCount();

	for (;;) {
		HANDLE h = CreateFileW(client_pipe, GENERIC_READ |
		    GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
		DWORD e;

		if (h != INVALID_HANDLE_VALUE || wait_ms == 0)
			return h;
		e = GetLastError();
		if (GetTickCount() - t0 > wait_ms)
			return INVALID_HANDLE_VALUE;
		if (e == ERROR_PIPE_BUSY)
			(void)WaitNamedPipeW(client_pipe, 200);
		else
			Sleep(50);
		SetLastError(e);
	}
}

static int
client_write(struct client_conn *c, const char *p, size_t n)
{
	while (n > 0) {
		DWORD k = 0;

		if (c->h != INVALID_HANDLE_VALUE) {
			if (!WriteFile(c->h, p, (DWORD)n, &k, NULL) || k == 0)
				return -1;
		} else {
			int r = send(c->s, p, (int)n, 0);

			if (r <= 0)
				return -1;
			k = (DWORD)r;
		}
		p += k;
		n -= k;
	}
	return 0;
}

static long
client_read(struct client_conn *c, char *p, size_t n)
{
	DWORD k = 0;

	if (c->h != INVALID_HANDLE_VALUE)
		return ReadFile(c->h, p, (DWORD)n, &k, NULL) ? (long)k : -1;
	return recv(c->s, p, (int)n, 0);
}

/* One GET on the connection; the status, or -1. */
static int
client_get(struct client_conn *c, const char *path)
{
	char req[512], *end;
	size_t need;
	long cl = -1;
	int status = -1;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\n"
	    "\r\n", path);
	if (client_write(c, req, strlen(req)) != 0)
		return -1;
	c->len = 0;
	for (;;) {
		long k;

		c->buf[c->len] = '\0';
		if ((end = strstr(c->buf, "\r\n\r\n")) != NULL)
			break;
		if (c->len >= sizeof(c->buf) - 1 ||
		    (k = client_read(c, c->buf + c->len,
		    sizeof(c->buf) - 1 - c->len)) <= 0)
			return -1;
		c->len += (size_t)k;
	}
	(void)sscanf(c->buf, "HTTP/1.%*d %d", &status);
	for (char *q = c->buf; q < end; q++)
		if (_strnicmp(q, "\r\nContent-Length:", 17) == 0)
			cl = atol(q + 17);
	if (cl < 0 || cl > (long)sizeof(c->buf))
		return -1;
	need = (size_t)(end + 4 - c->buf) + (size_t)cl;
	while (c->len < need) {
		long k;

		if (need > sizeof(c->buf) - 1 || (k = client_read(c,
		    c->buf + c->len, sizeof(c->buf) - 1 - c->len)) <= 0)
			return -1;
		c->len += (size_t)k;
	}
	return status;
}

static int
client_idle(void)
{
	HANDLE h = client_open_pipe(5000);
	DWORD t0 = GetTickCount(), k;
	char buf[4096];
	size_t total = 0;

	if (h == INVALID_HANDLE_VALUE) {
		printf("open_error=%lu\n", (unsigned long)GetLastError());
		return 1;
	}
	while (ReadFile(h, buf, sizeof(buf), &k, NULL) && k > 0)
		total += k;
	printf("closed_after_ms=%lu bytes=%zu\n",
	    (unsigned long)(GetTickCount() - t0), total);
	CloseHandle(h);
	return 0;
}

static int
client_hold(int n, int ms)
{
	static HANDLE hs[CLIENT_MAX_HOLD];
	static struct client_conn c;
	int opened = 0, busy = 0, other = 0, status = -1;
	DWORD t0;

	if (n > CLIENT_MAX_HOLD)
		n = CLIENT_MAX_HOLD;
	for (int i = 0; i < n; i++) {
		HANDLE h = client_open_pipe(busy + other > 0 ? 500 : 3000);
		DWORD e = GetLastError();

		if (h != INVALID_HANDLE_VALUE)
			hs[opened++] = h;
		else if (e == ERROR_PIPE_BUSY || e == ERROR_FILE_NOT_FOUND)
			busy++;
		else
			other++;
	}
	printf("opened=%d busy=%d other=%d\n", opened, busy, other);
	fflush(stdout);
	Sleep((DWORD)ms);
	for (int i = 0; i < opened; i++)
		CloseHandle(hs[i]);
	t0 = GetTickCount();
	c.s = INVALID_SOCKET;
	while (GetTickCount() - t0 < 5000) {
		if ((c.h = client_open_pipe(1000)) == INVALID_HANDLE_VALUE)
			continue;
		status = client_get(&c, "/time");
		CloseHandle(c.h);
		if (status > 0)
			break;
	}
	printf("after=%d\n", status);
	return status == 200 ? 0 : 1;
}

static int
client_get_many(const char *path, int count)
{
	static struct client_conn c;

	c.s = INVALID_SOCKET;
	if ((c.h = client_open_pipe(5000)) == INVALID_HANDLE_VALUE) {
		printf("open_error=%lu\n", (unsigned long)GetLastError());
		return 1;
	}
	for (int i = 0; i < count; i++)
		printf("status=%d\n", client_get(&c, path));
	CloseHandle(c.h);
	return 0;
}

/* ---- bench ------------------------------------------------------------ */

struct bench_thread {
	const char *target, *path;
	DWORD end;
	unsigned *lat_us;		/* this thread's samples */
	size_t n, cap;
	unsigned errors;
};

static int
bench_connect(const char *target, struct client_conn *c)
{
	char host[64];
	unsigned port;
	struct sockaddr_in sin;
	BOOL on = TRUE;

	c->h = INVALID_HANDLE_VALUE;
	c->s = INVALID_SOCKET;
	if (strncmp(target, "pipe:", 5) == 0)
		return (c->h = client_open_pipe(5000)) ==
		    INVALID_HANDLE_VALUE ? -1 : 0;
	if (sscanf(target, "tcp:%63[^:]:%u", host, &port) != 2)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((u_short)port);
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return -1;
	c->s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
	(void)setsockopt(c->s, IPPROTO_TCP, TCP_NODELAY, (const char *)&on,
	    sizeof(on));
	return connect(c->s, (struct sockaddr *)&sin, sizeof(sin));
}

static unsigned __stdcall
bench_main(void *arg)
{
	struct bench_thread *t = arg;
	struct client_conn *c = calloc(1, sizeof(*c));
	LARGE_INTEGER f, a, b;

	QueryPerformanceFrequency(&f);
	if (c == NULL || bench_connect(t->target, c) != 0) {
		t->errors++;
		free(c);
		return 0;
	}
	while (GetTickCount() < t->end && t->n < t->cap) {
		QueryPerformanceCounter(&a);
		if (client_get(c, t->path) != 200) {
			t->errors++;
			break;
		}
		QueryPerformanceCounter(&b);
		t->lat_us[t->n++] = (unsigned)((b.QuadPart - a.QuadPart) *
		    1000000 / f.QuadPart);
	}
	if (c->h != INVALID_HANDLE_VALUE)
		CloseHandle(c->h);
	if (c->s != INVALID_SOCKET)
		closesocket(c->s);
	free(c);
	return 0;
}

static int
bench_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

static int
client_bench(const char *target, const char *path, int secs, int nthreads)
{
	struct bench_thread *ts;
	HANDLE *hs;
	unsigned *all;
	size_t total = 0, k = 0, cap;
	unsigned errors = 0;
	DWORD t0;

	if (nthreads < 1 || nthreads > 64 || secs < 1 || secs > 60)
		return 2;
	cap = CLIENT_MAX_SAMPLES / (size_t)nthreads;
	ts = calloc((size_t)nthreads, sizeof(*ts));
	hs = calloc((size_t)nthreads, sizeof(*hs));
	all = calloc(CLIENT_MAX_SAMPLES, sizeof(*all));
	if (ts == NULL || hs == NULL || all == NULL)
		return 1;
	t0 = GetTickCount();
	for (int i = 0; i < nthreads; i++) {
		ts[i] = (struct bench_thread){ .target = target, .path = path,
		    .end = t0 + (DWORD)secs * 1000, .lat_us = all + k,
		    .cap = cap };
		k += cap;
		hs[i] = (HANDLE)_beginthreadex(NULL, 0, bench_main, &ts[i], 0,
		    NULL);
	}
	for (int i = 0; i < nthreads; i++) {
		if (hs[i] != NULL)
			(void)WaitForSingleObject(hs[i], INFINITE);
		errors += ts[i].errors;
	}
	t0 = GetTickCount() - t0;
	/* compact the samples, then their median and 99th percentile */
	for (int i = 0; i < nthreads; i++) {
		memmove(all + total, ts[i].lat_us, ts[i].n * sizeof(*all));
		total += ts[i].n;
	}
	qsort(all, total, sizeof(*all), bench_cmp);
	printf("requests=%zu rps=%.0f p50_us=%u p99_us=%u errors=%u\n", total,
	    t0 > 0 ? (double)total * 1000.0 / t0 : 0.0,
	    total ? all[total / 2] : 0, total ? all[total * 99 / 100] : 0,
	    errors);
	return errors == 0 && total > 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	WSADATA wsa;
	const char *name = argc > 2 ? argv[2] : "";

	if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0)
		return 1;
	if (strncmp(name, "pipe:", 5) == 0)
		name += 5;
	if (argc < 3 || MultiByteToWideChar(CP_UTF8, 0, name, -1, client_pipe,
	    300) == 0)
		goto usage;
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(argv[1], "idle") == 0 && argc == 3)
		return client_idle();
	if (strcmp(argv[1], "hold") == 0 && argc == 5)
		return client_hold(atoi(argv[3]), atoi(argv[4]));
	if (strcmp(argv[1], "get") == 0 && argc == 5)
		return client_get_many(argv[3], atoi(argv[4]));
	if (strcmp(argv[1], "bench") == 0 && argc == 6)
		return client_bench(argv[2], argv[3], atoi(argv[4]),
		    atoi(argv[5]));
usage:
	fprintf(stderr, "usage: pipe_client idle PIPE | hold PIPE N MS | "
	    "get PIPE PATH COUNT | bench TARGET PATH SECONDS THREADS\n");
	return 2;
}
