/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse_ref.c - the reference SSE server for bench/stream_bench.sh.
 *
 * The least a libmicrohttpd server can do to push zeusd's power events:
 * same HTTP library, same mode (one epoll thread, suspend/resume), same
 * per-connection memory pool, same event text and rate, but no devices, no
 * router, no auth, no subscriber sets. One ticker thread encodes one batch
 * of `--devices` events per tick (the value changes every tick) into a small
 * ring and resumes every suspended subscriber; the content reader copies the
 * batches after the subscriber's cursor. zeusd's figures divided by these
 * are the price of everything zeusd does on top.
 *
 *   sse_ref --socket-path P [--devices N] [--hz H] [--memory-limit BYTES]
 *
 * Runs until SIGINT/SIGTERM.
 */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REF_RING 16
#define REF_BATCH_MAX 8192

struct ref_batch {
	size_t len;
	char text[REF_BATCH_MAX];
};

struct ref_sub {
	struct MHD_Connection *conn;
	bool suspended, closed;
	uint64_t gen;			/* next batch to send */
	size_t off;			/* bytes of it already sent */
	unsigned pos;
};

static pthread_mutex_t ref_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ref_batch ref_ring[REF_RING];
static uint64_t ref_head;		/* batches produced */
static struct ref_sub **ref_subs;
static unsigned ref_nsubs, ref_cap;
static unsigned ref_devices = 1, ref_hz = 20;
static volatile sig_atomic_t ref_stop;

static uint64_t
ref_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static ssize_t
ref_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct ref_sub *s = cls;
	size_t n = 0;

	pthread_mutex_lock(&ref_lock);
	if (ref_stop) {
		pthread_mutex_unlock(&ref_lock);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	if (ref_head - s->gen > REF_RING) {
		s->gen = ref_head - 1;
		s->off = 0;
	}
	while (s->gen < ref_head && n < max) {
		const struct ref_batch *b = &ref_ring[s->gen % REF_RING];
		size_t k = b->len - s->off < max - n ? b->len - s->off : max - n;

		memcpy(buf + n, b->text + s->off, k);
		n += k;
		s->off += k;
		if (s->off == b->len) {
			s->gen++;
			s->off = 0;
		}
	}
	if (n == 0) {
		s->suspended = true;
		MHD_suspend_connection(s->conn);
	}
	pthread_mutex_unlock(&ref_lock);
	return (ssize_t)n;
}

static void
ref_free(void *cls)
{
	struct ref_sub *s = cls;

	pthread_mutex_lock(&ref_lock);
	ref_subs[s->pos] = ref_subs[--ref_nsubs];
	ref_subs[s->pos]->pos = s->pos;
	pthread_mutex_unlock(&ref_lock);
	free(s);
}

static enum MHD_Result
ref_access(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **req_cls)
{
	struct MHD_Response *resp;
	struct ref_sub *s;
	enum MHD_Result r;

	if (*req_cls == NULL) {
		*req_cls = conn;	/* answer on the second call */
		return MHD_YES;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return MHD_NO;
	s->conn = conn;
	pthread_mutex_lock(&ref_lock);
	if (ref_nsubs == ref_cap) {
		unsigned cap = ref_cap ? ref_cap * 2 : 1024;
		struct ref_sub **a = realloc(ref_subs, cap * sizeof(*a));

		if (a == NULL) {
			pthread_mutex_unlock(&ref_lock);
			free(s);
			return MHD_NO;
		}
		ref_subs = a;
		ref_cap = cap;
	}
	s->pos = ref_nsubs;
	ref_subs[ref_nsubs++] = s;
	s->gen = ref_head;
	pthread_mutex_unlock(&ref_lock);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 512,
	    ref_reader, s, ref_free);
	if (resp == NULL) {
		ref_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	r = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

/* One batch per tick on absolute deadlines, then wake everyone. */
static void *
ref_ticker(void *arg)
{
	uint64_t next = ref_ns(CLOCK_MONOTONIC), period = 1000000000ull / ref_hz;
	uint64_t tick = 0;

	while (!ref_stop) {
		struct ref_batch b;
		struct timespec ts;
		int64_t ms = (int64_t)(ref_ns(CLOCK_REALTIME) / 1000000);

		next += period;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
		    NULL) == EINTR)
			;
		b.len = 0;
		tick++;
		for (unsigned d = 0; d < ref_devices; d++) {
			int k = snprintf(b.text + b.len, sizeof(b.text) - b.len,
			    "data: {\"timestamp_ms\":%" PRId64 ",\"gpu_id\":%u,"
			    "\"power_mw\":%" PRIu64 "}\n\n", ms, d,
			    60000 + (tick * 7919 + d * 104729) % 300000);

			if (k > 0 && (size_t)k < sizeof(b.text) - b.len)
				b.len += (size_t)k;
		}
		pthread_mutex_lock(&ref_lock);
		ref_ring[ref_head % REF_RING] = b;
		ref_head++;
		for (unsigned i = 0; i < ref_nsubs; i++)
			if (ref_subs[i]->suspended) {
				ref_subs[i]->suspended = false;
				MHD_resume_connection(ref_subs[i]->conn);
			}
		pthread_mutex_unlock(&ref_lock);
	}
	return NULL;
}

static void
ref_on_signal(int sig)
{
	ref_stop = 1;
}

static int
ref_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 4096) != 0)
		return -1;
	return fd;
}

static unsigned
ref_uint(const char *s, unsigned lo, unsigned hi, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v < lo || v > hi) {
		fprintf(stderr, "sse_ref: bad %s\n", what);
		exit(2);
	}
	return (unsigned)v;
}

int
main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned memlimit = 16384;
	struct MHD_Daemon *d;
	struct rlimit rl;
	pthread_t th;
	int fd;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--socket-path") == 0)
			path = argv[i + 1];
		else if (strcmp(argv[i], "--devices") == 0)
			ref_devices = ref_uint(argv[i + 1], 1, 64, "--devices");
		else if (strcmp(argv[i], "--hz") == 0)
			ref_hz = ref_uint(argv[i + 1], 1, 1000, "--hz");
		else if (strcmp(argv[i], "--memory-limit") == 0)
			memlimit = ref_uint(argv[i + 1], 4096, 1 << 20,
			    "--memory-limit");
		else
			path = NULL, i = argc;
	}
	if (path == NULL) {
		fprintf(stderr, "usage: sse_ref --socket-path P [--devices N] "
		    "[--hz H] [--memory-limit BYTES]\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, ref_on_signal);
	signal(SIGTERM, ref_on_signal);
	if ((fd = ref_listen(path)) < 0) {
		perror("sse_ref: listen");
		return 1;
	}
	d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
	    MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO, 0, NULL, NULL,
	    ref_access, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)memlimit,
	    MHD_OPTION_CONNECTION_LIMIT, 16384u, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "sse_ref: cannot start libmicrohttpd\n");
		return 1;
	}
	pthread_create(&th, NULL, ref_ticker, NULL);
	while (!ref_stop)
		pause();
	pthread_join(th, NULL);
	pthread_mutex_lock(&ref_lock);
	for (unsigned i = 0; i < ref_nsubs; i++)
		if (ref_subs[i]->suspended) {
			ref_subs[i]->suspended = false;
			MHD_resume_connection(ref_subs[i]->conn);
		}
	pthread_mutex_unlock(&ref_lock);
	usleep(200000);		/* let the resumed streams end */
	MHD_stop_daemon(d);
	unlink(path);
	free(ref_subs);
	return 0;
}
