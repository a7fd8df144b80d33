/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadgen.c - keep-alive HTTP/1.1 load generator for `make bench`.
 *
 * Drives N keep-alive connections (UDS or TCP) from one epoll thread, so it
 * uses at most one core and leaves the other to the server under test. Each
 * connection has exactly one request in flight (no pipelining): the next
 * request goes out as soon as the previous answer is complete, which makes
 * the per-request latency the server's turnaround plus the kernel hop.
 *
 * Every answer is parsed just enough to be correct: the status line, the
 * Content-Length header (zeusd and nginx both send it; chunked or
 * length-less answers are counted as protocol errors), and the body is
 * skipped by length. Non-2xx answers are counted as errors.
 *
 * bench/run.sh builds it with `cc -O2` and reads the one machine-readable
 * line it prints per run (key=value pairs). With -P PID it also reports the
 * CPU time the server process used during the measured window, per request
 * (utime+stime from /proc/PID/stat); -P may be given more than once (a
 * server split into processes, bench/privsep_bench.sh) and the processes'
 * times are summed.
 *
 * Usage: loadgen (-u PATH | -t HOST:PORT) [-c CONNS] [-d SECONDS | -n COUNT]
 *                [-w WARMUP_S] [-m GET|POST] [-p TARGET] [-P PID]
 *                [-l LABEL] [-b]
 *   -b  print the body of the first answer and exit (run.sh uses it to make
 *       nginx serve same-sized bodies)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LG_MAX_CONNS 1024
#define LG_BUF_SIZE 16384 /* status line + headers must fit */
#define LG_MAX_TARGET 2048
#define LG_MAX_ERRORS 1000 /* transport errors before giving up */
#define LG_MAX_PIDS 8      /* -P given more than once: times summed */

struct lg_opts {
	const char *uds_path;
	struct sockaddr_in tcp_addr;
	bool tcp;
	unsigned conns;
	double duration_s;
	double warmup_s;
	uint64_t count; /* 0: run for duration_s */
	const char *method;
	const char *target;
	const char *label;
	long server_pids[LG_MAX_PIDS];
	unsigned nserver_pids;
	bool print_body;
};

struct lg_conn {
	int fd;
	bool busy;          /* a request is in flight */
	size_t sent;        /* bytes of the request written so far */
	char buf[LG_BUF_SIZE];
	size_t have;        /* bytes in buf (headers not complete yet) */
	bool in_body;
	uint64_t body_left; /* body bytes still to skip */
	int status;
	bool close_after;   /* server said Connection: close */
	uint64_t start_ns;
};

struct lg_stats {
	uint64_t done;      /* answers counted in the window */
	uint64_t non2xx;
	uint64_t status_count[6]; /* by class 1xx..5xx, index 1..5 */
	uint64_t transport_errors;
	uint64_t *samples;  /* latency in ns, one per counted answer */
	size_t nsamples, cap;
};

struct lg {
	struct lg_opts o;
	char req[LG_MAX_TARGET + 256];
	size_t req_len;
	int ep;
	struct lg_conn *conns;
	struct lg_stats st;
	uint64_t window_start_ns; /* start of the current phase */
	uint64_t stop_ns;         /* no new requests after this (by time) */
	uint64_t drain_deadline_ns; /* give up on missing answers after this */
	uint64_t issued;          /* requests started in this phase */
	uint64_t count;           /* this phase's request count, 0: by time */
	bool stopping;
	bool body_printed;
};

static uint64_t
lg_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
lg_die(const char *what)
{
	fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
lg_usage(void)
{
	fprintf(stderr, "usage: loadgen (-u PATH | -t HOST:PORT) [-c CONNS] "
	    "[-d SECONDS | -n COUNT] [-w WARMUP_S] [-m GET|POST] [-p TARGET] "
	    "[-P PID]... [-l LABEL] [-b]\n");
	exit(2);
}

static uint64_t
lg_parse_u64(const char *s, uint64_t max)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v > max || s[0] == '-')
		lg_usage();
	return v;
}

static double
lg_parse_secs(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0 && v <= 3600))
		lg_usage();
	return v;
}

/* "A.B.C.D:PORT" only: the bench always uses a numeric loopback address. */
static void
lg_parse_tcp(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		lg_usage();
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)lg_parse_u64(colon + 1, 65535));
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		lg_usage();
}

static void
lg_parse_args(int argc, char **argv, struct lg_opts *o)
{
	*o = (struct lg_opts){ .conns = 1, .duration_s = 2, .warmup_s = 0.2,
	    .method = "GET", .target = "/time", .label = "-" };
	int c;
	while ((c = getopt(argc, argv, "u:t:c:d:n:w:m:p:P:l:b")) != -1) {
		switch (c) {
		case 'u': o->uds_path = optarg; break;
		case 't': o->tcp = true; lg_parse_tcp(optarg, &o->tcp_addr); break;
		case 'c': o->conns = (unsigned)lg_parse_u64(optarg, LG_MAX_CONNS); break;
		case 'd': o->duration_s = lg_parse_secs(optarg); break;
		case 'n': o->count = lg_parse_u64(optarg, UINT64_MAX / 2); break;
		case 'w': o->warmup_s = lg_parse_secs(optarg); break;
		case 'm': o->method = optarg; break;
		case 'p': o->target = optarg; break;
		case 'P':
			if (o->nserver_pids == LG_MAX_PIDS)
				lg_usage();
			o->server_pids[o->nserver_pids++] =
			    (long)lg_parse_u64(optarg, INT_MAX);
			break;
		case 'l': o->label = optarg; break;
		case 'b': o->print_body = true; break;
		default: lg_usage();
		}
	}
	if (optind != argc || (!o->uds_path) == (!o->tcp) || o->conns == 0)
		lg_usage();
	if (strcmp(o->method, "GET") != 0 && strcmp(o->method, "POST") != 0)
		lg_usage();
	if (strlen(o->target) > LG_MAX_TARGET || o->target[0] != '/' ||
	    strpbrk(o->target, " \r\n"))
		lg_usage();
	if (o->print_body) {
		o->conns = 1;
		o->count = 1;
		o->warmup_s = 0;
	}
}

/* The request is the same bytes every time; build it once. */
static void
lg_build_request(struct lg *g)
{
	const char *body_hdr = strcmp(g->o.method, "POST") == 0 ?
	    "Content-Length: 0\r\n" : "";
	int n = snprintf(g->req, sizeof(g->req),
	    "%s %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n",
	    g->o.method, g->o.target, body_hdr);
	if (n < 0 || (size_t)n >= sizeof(g->req)) {
		fprintf(stderr, "loadgen: request too long\n");
		exit(2);
	}
	g->req_len = (size_t)n;
}

static int
lg_connect(const struct lg_opts *o)
{
	int fd;
	if (o->tcp) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			lg_die("socket");
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (const struct sockaddr *)&o->tcp_addr,
		    sizeof(o->tcp_addr)) != 0)
			lg_die("connect");
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(o->uds_path) >= sizeof(sa.sun_path)) {
			fprintf(stderr, "loadgen: socket path too long\n");
			exit(2);
		}
		strcpy(sa.sun_path, o->uds_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			lg_die("socket");
		if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) != 0)
			lg_die("connect");
	}
	/* Connected blocking (simple, done before the clock starts), then
	 * non-blocking for the epoll loop. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
		lg_die("fcntl");
	return fd;
}

static void
lg_watch(struct lg *g, struct lg_conn *c, int op, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (epoll_ctl(g->ep, op, c->fd, &ev) != 0)
		lg_die("epoll_ctl");
}

static void
lg_open_conn(struct lg *g, struct lg_conn *c)
{
	c->fd = lg_connect(&g->o);
	c->busy = false;
	lg_watch(g, c, EPOLL_CTL_ADD, EPOLLIN);
}

static void
lg_sample(struct lg_stats *st, uint64_t ns)
{
	if (st->nsamples == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 65536;
		uint64_t *p = realloc(st->samples, cap * sizeof(*p));
		if (!p)
			lg_die("realloc");
		st->samples = p;
		st->cap = cap;
	}
	st->samples[st->nsamples++] = ns;
}

static bool
lg_want_more(struct lg *g, uint64_t now)
{
	if (g->stopping)
		return false;
	if (g->count)
		return g->issued < g->count;
	return now < g->stop_ns;
}

/* Writes what is left of the request; EPOLLOUT only while a write is short. */
static int
lg_send(struct lg *g, struct lg_conn *c)
{
	while (c->sent < g->req_len) {
		ssize_t n = send(c->fd, g->req + c->sent, g->req_len - c->sent,
		    MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			lg_watch(g, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
			return 0;
		}
		if (n <= 0)
			return -1;
		c->sent += (size_t)n;
	}
	return 0;
}

static int
lg_start_request(struct lg *g, struct lg_conn *c, uint64_t now)
{
	c->busy = true;
	c->sent = 0;
	c->have = 0;
	c->in_body = false;
	c->close_after = false;
	c->start_ns = now;
	g->issued++;
	return lg_send(g, c);
}

/* Case-insensitive header lookup inside [hdrs, end); value trimmed. */
static const char *
lg_header(const char *hdrs, const char *end, const char *name, size_t *vlen)
{
	size_t nlen = strlen(name);
	const char *line = hdrs;
	while (line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > nlen && line[nlen] == ':' &&
		    strncasecmp(line, name, nlen) == 0) {
			const char *v = line + nlen + 1;
			const char *ve = eol;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' ||
			    ve[-1] == '\t'))
				ve--;
			*vlen = (size_t)(ve - v);
			return v;
		}
		line = eol + 1;
	}
	return NULL;
}

/* Parses the head once "\r\n\r\n" is in buf. Returns head length, 0 when
 * more bytes are needed, -1 on a malformed or unsupported answer. */
static long
lg_parse_head(struct lg_conn *c)
{
	char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
	if (!end)
		return c->have == sizeof(c->buf) ? -1 : 0;
	size_t head_len = (size_t)(end - c->buf) + 4;
	if (head_len < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0 ||
	    c->buf[8] != ' ')
		return -1;
	int st = 0;
	for (int i = 9; i < 12; i++) {
		if (c->buf[i] < '0' || c->buf[i] > '9')
			return -1;
		st = st * 10 + (c->buf[i] - '0');
	}
	c->status = st;
	const char *hdrs = memchr(c->buf, '\n', head_len);
	const char *hend = c->buf + head_len;
	size_t vlen;
	const char *v = lg_header(hdrs + 1, hend, "transfer-encoding", &vlen);
	if (v)
		return -1; /* chunked: not needed for zeusd or nginx */
	v = lg_header(hdrs + 1, hend, "connection", &vlen);
	c->close_after = v && vlen == 5 && strncasecmp(v, "close", 5) == 0;
	v = lg_header(hdrs + 1, hend, "content-length", &vlen);
	if (!v) {
		if (st == 204 || st == 304 || st < 200)
			c->body_left = 0;
		else
			return -1; /* body up to close: not keep-alive */
	} else {
		uint64_t len = 0;
		if (vlen == 0 || vlen > 15)
			return -1;
		for (size_t i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return -1;
			len = len * 10 + (uint64_t)(v[i] - '0');
		}
		c->body_left = len;
	}
	return (long)head_len;
}

static void
lg_count_answer(struct lg *g, struct lg_conn *c, uint64_t now)
{
	struct lg_stats *st = &g->st;
	st->done++;
	int cls = c->status / 100;
	if (cls >= 1 && cls <= 5)
		st->status_count[cls]++;
	if (cls != 2)
		st->non2xx++;
	lg_sample(st, now - c->start_ns);
}

static void
lg_print_body(const char *p, size_t n)
{
	fwrite(p, 1, n, stdout);
}

/* Consumes n bytes just read into c->buf + c->have. Returns 1 when the answer
 * is complete, 0 when more is needed, -1 on a protocol error. */
static int
lg_consume(struct lg *g, struct lg_conn *c, size_t n)
{
	if (!c->in_body) {
		c->have += n;
		long head = lg_parse_head(c);
		if (head <= 0)
			return (int)head;
		size_t rest = c->have - (size_t)head;
		c->in_body = true;
		if (rest > c->body_left)
			return -1; /* bytes past the answer: we never pipeline */
		if (g->o.print_body)
			lg_print_body(c->buf + head, rest);
		c->body_left -= rest;
	} else {
		if (n > c->body_left)
			return -1;
		if (g->o.print_body)
			lg_print_body(c->buf, n);
		c->body_left -= n;
	}
	return c->body_left == 0 ? 1 : 0;
}

static void
lg_drop_conn(struct lg *g, struct lg_conn *c)
{
	epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->busy = false;
}

static void
lg_transport_error(struct lg *g, struct lg_conn *c, const char *why)
{
	if (++g->st.transport_errors == 1)
		fprintf(stderr, "loadgen: %s (first transport error)\n", why);
	if (g->st.transport_errors > LG_MAX_ERRORS) {
		fprintf(stderr, "loadgen: too many transport errors\n");
		exit(1);
	}
	lg_drop_conn(g, c);
	if (!g->stopping)
		lg_open_conn(g, c);
}

static void
lg_on_readable(struct lg *g, struct lg_conn *c)
{
	for (;;) {
		char *dst = c->in_body ? c->buf : c->buf + c->have;
		size_t room = c->in_body ? sizeof(c->buf) : sizeof(c->buf) - c->have;
		ssize_t n = recv(c->fd, dst, room, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			lg_transport_error(g, c, n == 0 ?
			    "server closed the connection" : strerror(errno));
			return;
		}
		if (!c->busy) {
			lg_transport_error(g, c, "bytes with no request");
			return;
		}
		int r = lg_consume(g, c, (size_t)n);
		if (r < 0) {
			lg_transport_error(g, c, "malformed answer");
			return;
		}
		if (r == 0)
			continue;
		uint64_t now = lg_now_ns();
		lg_count_answer(g, c, now);
		c->busy = false;
		if (c->close_after) {
			lg_drop_conn(g, c);
			if (!lg_want_more(g, now))
				return;
			lg_open_conn(g, c);
		}
		if (!lg_want_more(g, now))
			return;
		if (lg_start_request(g, c, now) != 0)
			lg_transport_error(g, c, "send failed");
		return;
	}
}

static unsigned
lg_busy_count(const struct lg *g)
{
	unsigned n = 0;
	for (unsigned i = 0; i < g->o.conns; i++)
		n += g->conns[i].busy;
	return n;
}

/* utime+stime of a process in clock ticks, or -1. The comm field may hold
 * spaces and parentheses, so fields are counted after the last ')'. */
static long long
lg_proc_cpu_ticks(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* after ')': state(3) ... utime is field 14, stime 15 */
	unsigned long long ut, stt;
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	    &ut, &stt) != 2)
		return -1;
	return (long long)(ut + stt);
}

/* The sum over the -P processes, or -1 (none given, or one is gone). */
static long long
lg_server_cpu_ticks(const struct lg_opts *o)
{
	long long sum = 0;
	if (o->nserver_pids == 0)
		return -1;
	for (unsigned i = 0; i < o->nserver_pids; i++) {
		long long t = lg_proc_cpu_ticks(o->server_pids[i]);
		if (t < 0)
			return -1;
		sum += t;
	}
	return sum;
}

static int
lg_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static double
lg_percentile_us(const struct lg_stats *st, double q)
{
	if (!st->nsamples)
		return 0;
	size_t i = (size_t)(q * (double)(st->nsamples - 1) + 0.5);
	return (double)st->samples[i] / 1000.0;
}

static void
lg_loop(struct lg *g)
{
	struct epoll_event evs[64];
	for (;;) {
		uint64_t now = lg_now_ns();
		if (!g->count && now >= g->stop_ns)
			g->stopping = true;
		if (g->stopping || (g->count && g->issued >= g->count)) {
			if (lg_busy_count(g) == 0)
				return;
			if (!g->drain_deadline_ns)
				g->drain_deadline_ns = now + 10ull * 1000000000u;
			if (now > g->drain_deadline_ns) {
				fprintf(stderr, "loadgen: answers still missing "
				    "10 s after the end\n");
				g->st.transport_errors += lg_busy_count(g);
				return;
			}
		}
		int n = epoll_wait(g->ep, evs, 64, 50);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			lg_die("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct lg_conn *c = evs[i].data.ptr;
			if (c->fd < 0)
				continue;
			if (evs[i].events & EPOLLOUT) {
				lg_watch(g, c, EPOLL_CTL_MOD, EPOLLIN);
				if (lg_send(g, c) != 0) {
					lg_transport_error(g, c, "send failed");
					continue;
				}
			}
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				lg_on_readable(g, c);
		}
	}
}

static void
lg_report(struct lg *g, uint64_t end_ns, long long cpu_ticks)
{
	struct lg_stats *st = &g->st;
	qsort(st->samples, st->nsamples, sizeof(*st->samples), lg_cmp_u64);
	double secs = (double)(end_ns - g->window_start_ns) / 1e9;
	double rps = secs > 0 ? (double)st->done / secs : 0;
	printf("label=%s transport=%s conns=%u method=%s target=%s "
	    "requests=%" PRIu64 " secs=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f "
	    "max_us=%.1f non2xx=%" PRIu64 " s2xx=%" PRIu64 " s4xx=%" PRIu64
	    " s5xx=%" PRIu64 " transport_errors=%" PRIu64,
	    g->o.label, g->o.tcp ? "tcp" : "uds", g->o.conns, g->o.method,
	    g->o.target, st->done, secs, rps, lg_percentile_us(st, 0.50),
	    lg_percentile_us(st, 0.99), lg_percentile_us(st, 1.0), st->non2xx,
	    st->status_count[2], st->status_count[4], st->status_count[5],
	    st->transport_errors);
	if (cpu_ticks >= 0 && st->done) {
		double us = (double)cpu_ticks * 1e6 /
		    (double)sysconf(_SC_CLK_TCK) / (double)st->done;
		printf(" server_cpu_us_per_req=%.2f", us);
	}
	printf("\n");
}

/* One measured (or warm-up) phase: start a request on every connection,
 * run until the duration or count is reached, drain what is in flight. */
static void
lg_phase(struct lg *g, double secs, uint64_t count)
{
	uint64_t now = lg_now_ns();
	g->stopping = false;
	g->drain_deadline_ns = 0;
	g->issued = 0;
	g->count = count;
	g->window_start_ns = now;
	g->stop_ns = now + (uint64_t)(secs * 1e9);
	for (unsigned i = 0; i < g->o.conns && lg_want_more(g, now); i++) {
		struct lg_conn *c = &g->conns[i];
		if (c->fd < 0)
			lg_open_conn(g, c);
		if (lg_start_request(g, c, now) != 0)
			lg_transport_error(g, c, "send failed");
	}
	lg_loop(g);
}

int
main(int argc, char **argv)
{
	struct lg g = { .ep = -1 };
	lg_parse_args(argc, argv, &g.o);
	lg_build_request(&g);
	g.ep = epoll_create1(EPOLL_CLOEXEC);
	if (g.ep < 0)
		lg_die("epoll_create1");
	g.conns = calloc(g.o.conns, sizeof(*g.conns));
	if (!g.conns)
		lg_die("calloc");
	for (unsigned i = 0; i < g.o.conns; i++)
		lg_open_conn(&g, &g.conns[i]);

	if (g.o.warmup_s > 0) {
		lg_phase(&g, g.o.warmup_s, 0);
		free(g.st.samples);
		g.st = (struct lg_stats){ 0 };
	}
	long long cpu0 = lg_server_cpu_ticks(&g.o);
	lg_phase(&g, g.o.duration_s, g.o.count);
	uint64_t end = lg_now_ns();
	long long cpu1 = lg_server_cpu_ticks(&g.o);
	int rc = 0;
	if (g.o.print_body)
		rc = g.st.non2xx || g.st.transport_errors ? 1 : 0;
	else
		lg_report(&g, end, cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1);
	for (unsigned i = 0; i < g.o.conns; i++)
		if (g.conns[i].fd >= 0)
			close(g.conns[i].fd);
	close(g.ep);
	free(g.st.samples);
	free(g.conns);
	return rc;
}
