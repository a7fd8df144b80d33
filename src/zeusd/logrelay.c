/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logrelay.c - the network process's log lines, tagged (logrelay.h).
 */
#include "zeusd/logrelay.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define TAG "proc=network "
#define TAG_LEN (sizeof(TAG) - 1)
/* what goes before a line's own text: our timestamp, the tag */
#define PREFIX_MAX (ZLOG_TS_MAX + 1 + TAG_LEN)

struct logrelay {
	int fd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t done_cv;
	bool done;
	bool journal;			/* zlog's format: no timestamp */
	char stamp[ZLOG_TS_MAX];	/* "ts=..." of this read, plain format */
	size_t nstamp;
	char in[LOGRELAY_LINE_MAX];	/* the line so far */
	size_t n;
	/*
	 * Tagged lines waiting for one write: what one read brought is
	 * written at once (a busy network process logs a line per request;
	 * one write per read, not per line), never a line cut in two.
	 */
	char out[4 * (LOGRELAY_LINE_MAX + PREFIX_MAX + 1)];
	size_t nout;
};

static void
relay_flush(struct logrelay *r)
{
	size_t off = 0;

	while (off < r->nout) {
		ssize_t w = write(STDERR_FILENO, r->out + off, r->nout - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;		/* stderr is gone: nothing to do */
		off += (size_t)w;
	}
	r->nout = 0;
}

/* The time the lines read now are stamped with (the plain format). */
static void
relay_stamp(struct logrelay *r)
{
	if (!r->journal)
		r->nstamp = zlog_timestamp(r->stamp, sizeof(r->stamp));
}

static void
relay_put(struct logrelay *r, const char *s, size_t n)
{
	memcpy(r->out + r->nout, s, n);
	r->nout += n;
}

/*
 * One line (without its '\n') into the batch, as logrelay.h says: its
 * "<P>" kept, its own leading ts= fields dropped, the tag, and in the
 * plain format our timestamp first.
 */
static void
relay_line(struct logrelay *r, const char *line, size_t n)
{
	size_t prio = 0, at;
	const char *sp;

	if (n >= 3 && line[0] == '<' && line[1] >= '0' && line[1] <= '7' &&
	    line[2] == '>')
		prio = 3;
	for (at = prio; n - at >= 3 && memcmp(line + at, "ts=", 3) == 0; )
		at = (sp = memchr(line + at, ' ', n - at)) != NULL ?
		    (size_t)(sp - line) + 1 : n;
	if (sizeof(r->out) - r->nout < n + PREFIX_MAX + 1)
		relay_flush(r);
	if (r->journal) {
		relay_put(r, line, prio);	/* journald's priority */
		relay_put(r, TAG, TAG_LEN);
	} else {
		relay_put(r, r->stamp, r->nstamp);
		relay_put(r, " " TAG, 1 + TAG_LEN);
		relay_put(r, line, prio);	/* text here */
	}
	relay_put(r, line + at, n - at);
	relay_put(r, "\n", 1);
}

static void
relay_bytes(struct logrelay *r, const char *buf, size_t len)
{
	relay_stamp(r);
	while (len > 0) {
		const char *nl = memchr(buf, '\n', len);
		size_t take = nl != NULL ? (size_t)(nl - buf) : len;

		/* a piece of a long line goes as a line of its own */
		if (take > sizeof(r->in) - r->n)
			take = sizeof(r->in) - r->n;
		memcpy(r->in + r->n, buf, take);
		r->n += take;
		buf += take;
		len -= take;
		if (len > 0 && *buf == '\n') {
			buf++;
			len--;
			relay_line(r, r->in, r->n);
			r->n = 0;
		} else if (r->n == sizeof(r->in)) {
			relay_line(r, r->in, r->n);
			r->n = 0;
		}
	}
	relay_flush(r);
}

static void *
relay_main(void *arg)
{
	struct logrelay *r = arg;
	static char buf[LOGRELAY_LINE_MAX];
	ssize_t got;

	for (;;) {
		got = read(r->fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		relay_bytes(r, buf, (size_t)got);
		/*
		 * A busy network process logs a line per request: waking for
		 * each would cost this process more than the line. Lines that
		 * come meanwhile wait in the pipe and go in the next batch.
		 */
		if ((size_t)got < sizeof(buf))
			zclock_sleep_ms(LOGRELAY_BATCH_MS);
	}
	if (r->n > 0) {			/* a last line without its '\n' */
		relay_stamp(r);
		relay_line(r, r->in, r->n);
		relay_flush(r);
	}
	pthread_mutex_lock(&r->lock);
	r->done = true;
	pthread_cond_signal(&r->done_cv);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int
logrelay_start(int rfd, struct logrelay **out, struct zerr *err)
{
	struct logrelay *r = calloc(1, sizeof(*r));
	int e;

	if (r == NULL) {
		close(rfd);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	r->fd = rfd;
	r->journal = zlog_journal_format();
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->done_cv, NULL);
	if ((e = pthread_create(&r->thread, NULL, relay_main, r)) != 0) {
		close(rfd);
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->done_cv);
		free(r);
		return zerr_set(err, ZERR_INTERNAL, "cannot start the log "
		    "relay: %s", strerror(e));
	}
	*out = r;
	return 0;
}

void
logrelay_stop(struct logrelay *r, unsigned timeout_ms)
{
	struct timespec until;
	bool done;

	if (r == NULL)
		return;
	until = zclock_realtime_in(timeout_ms);
	pthread_mutex_lock(&r->lock);
	while (!r->done && pthread_cond_timedwait(&r->done_cv, &r->lock,
	    &until) == 0)
		;
	done = r->done;
	pthread_mutex_unlock(&r->lock);
	if (!done)
		return;		/* a writer lives on: leave the thread be */
	pthread_join(r->thread, NULL);
	close(r->fd);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->done_cv);
	free(r);
}
