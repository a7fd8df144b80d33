/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse_load.c - SSE load generator for bench/stream_bench.sh.
 *
 * Opens `--conns` HTTP/1.1 streams on a Unix socket (one epoll loop, one
 * thread), decodes chunked transfer encoding, splits events on "\n\n" and,
 * during a measurement window after a warm-up, counts `data:` events and
 * the gaps between consecutive events of the same connection and device
 * (`"gpu_id":N`). With `--pid` it also reads that process's CPU time
 * (/proc/PID/stat utime+stime) over the window and its RSS at the end;
 * `--pid` may be given more than once (a server split into processes,
 * bench/privsep_bench.sh) and the figures are summed.
 * Prints one line of key=value figures.
 *
 *   sse_load --socket P --path TARGET --conns N [--duration S]
 *            [--warmup S] [--hz H] [--devices D] [--pid PID]...
 *
 * "expected" is conns x devices x hz x window: one event per device per
 * sample, which holds when the value changes at every sample.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LOAD_MAX_DEV 64
#define LOAD_EV_MAX 256
#define LOAD_HIST_US 100		/* histogram bucket: 0.1 ms */
#define LOAD_HIST_N 100000		/* up to 10 s */

enum chunk_state { CH_HEAD, CH_SIZE, CH_DATA, CH_CRLF, CH_END };

struct conn {
	int fd;
	bool connected, sent, dead;
	enum chunk_state st;
	uint64_t left;			/* bytes left in this chunk */
	char hdr[1024];
	size_t hlen;
	char ev[LOAD_EV_MAX];
	size_t evlen;
	char prev;
	uint64_t last[LOAD_MAX_DEV];	/* arrival ns of the last event */
};

static const char *opt_socket, *opt_path;
static unsigned opt_conns = 100, opt_hz = 20, opt_devices = 1;
static double opt_duration = 30, opt_warmup = 3;
#define LOAD_MAX_PIDS 8
static long opt_pids[LOAD_MAX_PIDS];
static unsigned opt_npids;

static uint64_t win_start, win_end;
static uint64_t n_events, n_keepalive, n_dropped, n_bad_status;
static uint64_t *hist;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool
in_window(uint64_t t)
{
	return win_start != 0 && t >= win_start && t < win_end;
}

static void
on_event(struct conn *c, uint64_t t)
{
	const char *p;
	unsigned long dev = 0;

	if (c->evlen >= 1 && c->ev[0] == ':') {
		n_keepalive += in_window(t);
		return;
	}
	if (c->evlen < 6 || memcmp(c->ev, "data: ", 6) != 0)
		return;
	c->ev[c->evlen < LOAD_EV_MAX ? c->evlen : LOAD_EV_MAX - 1] = '\0';
	if ((p = strstr(c->ev, "_id\":")) != NULL)
		dev = strtoul(p + 5, NULL, 10);
	if (dev >= LOAD_MAX_DEV)
		dev = 0;
	if (in_window(t)) {
		n_events++;
		if (c->last[dev] != 0 && c->last[dev] >= win_start) {
			uint64_t b = (t - c->last[dev]) / 1000 / LOAD_HIST_US;

			hist[b < LOAD_HIST_N ? b : LOAD_HIST_N - 1]++;
		}
	}
	c->last[dev] = t;
}

/* Body bytes (after de-chunking): split events on "\n\n". */
static void
on_body(struct conn *c, const char *p, size_t n, uint64_t t)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n' && c->prev == '\n') {
			on_event(c, t);
			c->evlen = 0;
			c->prev = 0;
			continue;
		}
		if (c->evlen < LOAD_EV_MAX - 1 && !(p[i] == '\n' &&
		    c->evlen == 0))
			c->ev[c->evlen++] = p[i];
		c->prev = p[i];
	}
}

static void
on_bytes(struct conn *c, const char *p, size_t n, uint64_t t)
{
	size_t i = 0;

	while (i < n) {
		switch (c->st) {
		case CH_HEAD:
			if (c->hlen < sizeof(c->hdr) - 1)
				c->hdr[c->hlen++] = p[i];
			i++;
			c->hdr[c->hlen] = '\0';
			if (c->hlen >= 4 && strcmp(c->hdr + c->hlen - 4,
			    "\r\n\r\n") == 0) {
				if (strncmp(c->hdr, "HTTP/1.1 200", 12) != 0)
					n_bad_status++;
				c->st = CH_SIZE;
				c->hlen = 0;
			}
			break;
		case CH_SIZE:
			if (p[i] == '\n') {
				c->hdr[c->hlen] = '\0';
				c->left = strtoull(c->hdr, NULL, 16);
				c->hlen = 0;
				c->st = c->left ? CH_DATA : CH_END;
			} else if (p[i] != '\r' && c->hlen < 30) {
				c->hdr[c->hlen++] = p[i];
			}
			i++;
			break;
		case CH_DATA: {
			size_t k = n - i < c->left ? n - i : (size_t)c->left;

			on_body(c, p + i, k, t);
			i += k;
			c->left -= k;
			if (c->left == 0)
				c->st = CH_CRLF;
			break;
		}
		case CH_CRLF:
			if (p[i] == '\n')
				c->st = CH_SIZE;
			i++;
			break;
		case CH_END:
			i = n;
			break;
		}
	}
}

static int
conn_open(struct conn *c, int ep)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", opt_socket);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
	    errno != EINPROGRESS) {
		int e = errno;

		close(c->fd);
		c->fd = -1;
		errno = e;
		return e == EAGAIN ? 1 : -1;	/* backlog full: retry */
	}
	ev.data.ptr = c;
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->connected = true;
	return 0;
}

static void
conn_send(struct conn *c, int ep)
{
	char req[1024];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: bench\r\n"
	    "\r\n", opt_path);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	if (write(c->fd, req, (size_t)n) == n) {
		c->sent = true;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	}
}

static void
conn_read(struct conn *c, int ep, char *buf, size_t size, uint64_t t)
{
	ssize_t n;

	while ((n = read(c->fd, buf, size)) > 0)
		on_bytes(c, buf, (size_t)n, t);
	if (n == 0 || (n < 0 && errno != EAGAIN)) {
		if (!c->dead && (win_start == 0 || t < win_end))
			n_dropped++;
		c->dead = true;
		epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	}
}

static bool
proc_cpu_ticks(long pid, uint64_t *ticks)
{
	char path[64], buf[2048], *p;
	unsigned long long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL)
		return false;
	/* fields after ")": state(3) ... utime(14) stime(15) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
	    "%llu", &ut, &st) != 2)
		return false;
	*ticks = ut + st;
	return true;
}

static long
proc_status_kib(long pid, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

/* Sums over the --pid processes: false / -1 when one cannot be read. */
static bool
pids_cpu_ticks(uint64_t *ticks)
{
	uint64_t sum = 0, t;

	for (unsigned i = 0; i < opt_npids; i++) {
		if (!proc_cpu_ticks(opt_pids[i], &t))
			return false;
		sum += t;
	}
	*ticks = sum;
	return true;
}

static long
pids_status_kib(const char *key)
{
	long sum = 0, v;

	for (unsigned i = 0; i < opt_npids; i++) {
		if ((v = proc_status_kib(opt_pids[i], key)) < 0)
			return -1;
		sum += v;
	}
	return sum;
}

static double
hist_pct(uint64_t total, double q)
{
	uint64_t want = (uint64_t)(q * (double)total), acc = 0;

	for (unsigned i = 0; i < LOAD_HIST_N; i++) {
		acc += hist[i];
		if (acc > want)
			return (i + 0.5) * LOAD_HIST_US / 1000.0;
	}
	return -1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: sse_load --socket P --path TARGET --conns N "
	    "[--duration S] [--warmup S] [--hz H] [--devices D] "
	    "[--pid PID]...\n");
	exit(2);
}

static void
parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL)
			usage();
		if (strcmp(k, "--socket") == 0)
			opt_socket = v;
		else if (strcmp(k, "--path") == 0)
			opt_path = v;
		else if (strcmp(k, "--conns") == 0)
			opt_conns = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--duration") == 0)
			opt_duration = strtod(v, NULL);
		else if (strcmp(k, "--warmup") == 0)
			opt_warmup = strtod(v, NULL);
		else if (strcmp(k, "--hz") == 0)
			opt_hz = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--devices") == 0)
			opt_devices = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--pid") == 0) {
			if (opt_npids == LOAD_MAX_PIDS)
				usage();
			opt_pids[opt_npids++] = strtol(v, NULL, 10);
		}
		else
			usage();
	}
	if (opt_socket == NULL || opt_path == NULL || opt_conns == 0 ||
	    strlen(opt_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		usage();
}

int
main(int argc, char **argv)
{
	static char buf[65536];
	struct epoll_event evs[512];
	uint64_t t0, ticks0 = 0, ticks1 = 0, hsum = 0;
	unsigned opened = 0, headers_ok;
	struct conn *conns;
	struct rlimit rl;
	int ep;

	parse_args(argc, argv);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	conns = calloc(opt_conns, sizeof(*conns));
	hist = calloc(LOAD_HIST_N, sizeof(*hist));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (conns == NULL || hist == NULL || ep < 0)
		return 1;
	t0 = now_ns();
	/* Connect (retrying while the listen backlog is full), send, read. */
	for (;;) {
		uint64_t t = now_ns();
		int n;

		while (opened < opt_conns) {
			int r = conn_open(&conns[opened], ep);

			if (r < 0) {
				perror("sse_load: connect");
				return 1;
			}
			if (r > 0)
				break;
			opened++;
		}
		headers_ok = 0;
		for (unsigned i = 0; i < opened; i++)
			headers_ok += conns[i].st != CH_HEAD;
		if (win_start == 0 && headers_ok == opt_conns) {
			win_start = t + (uint64_t)(opt_warmup * 1e9);
			win_end = win_start + (uint64_t)(opt_duration * 1e9);
			fprintf(stderr, "sse_load: %u streams up in %.2f s\n",
			    opt_conns, (t - t0) / 1e9);
		}
		if (win_start == 0 && t - t0 > 120000000000ull) {
			fprintf(stderr, "sse_load: only %u of %u streams up\n",
			    headers_ok, opt_conns);
			return 1;
		}
		if (win_start != 0 && ticks0 == 0 && t >= win_start &&
		    opt_npids > 0 && !pids_cpu_ticks(&ticks0))
			ticks0 = 1;
		if (win_start != 0 && t >= win_end)
			break;
		n = epoll_wait(ep, evs, 512, 5);
		t = now_ns();
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (!c->sent && (evs[i].events & EPOLLOUT))
				conn_send(c, ep);
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_read(c, ep, buf, sizeof(buf), t);
		}
	}
	if (opt_npids > 0)
		(void)pids_cpu_ticks(&ticks1);
	for (unsigned i = 0; i < LOAD_HIST_N; i++)
		hsum += hist[i];
	{
		double win = opt_duration;
		double expected = (double)opt_conns * opt_devices * opt_hz * win;
		double cpu = opt_npids > 0 && ticks1 >= ticks0 ?
		    100.0 * (double)(ticks1 - ticks0) /
		    (double)sysconf(_SC_CLK_TCK) / win : -1;

		printf("conns=%u dropped=%" PRIu64 " bad_status=%" PRIu64
		    " events=%" PRIu64 " expected=%.0f delivered=%.4f"
		    " keepalives=%" PRIu64 " gap_p50_ms=%.1f gap_p99_ms=%.1f"
		    " gap_p999_ms=%.1f cpu_pct=%.1f rss_mib=%.1f"
		    " hwm_mib=%.1f\n", opt_conns, n_dropped, n_bad_status,
		    n_events, expected, n_events / expected, n_keepalive,
		    hist_pct(hsum, 0.5), hist_pct(hsum, 0.99),
		    hist_pct(hsum, 0.999), cpu,
		    opt_npids > 0 ? pids_status_kib("VmRSS:") / 1024.0 : -1,
		    opt_npids > 0 ? pids_status_kib("VmHWM:") / 1024.0 : -1);
	}
	for (unsigned i = 0; i < opened; i++)
		close(conns[i].fd);
	free(conns);
	free(hist);
	return 0;
}
