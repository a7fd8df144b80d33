/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - key=value line logger (see log.h).
 *
 * A line is formatted into a stack buffer and written with one write(2), so
 * lines from different threads never interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int zlog_min_level = ZLOG_INFO;

static _Atomic bool zlog_journal;

static _Atomic(zlog_sink_fn) zlog_sink;

static const char *const zlog_names[] = { "debug", "info", "warn", "error" };

/* syslog(3) priorities: LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR. */
static const int zlog_priorities[] = { 7, 6, 4, 3 };

int
zlog_init_from_env(void)
{
	const char *v = getenv("ZEUSD_LOG");

	if (v == NULL || *v == '\0')
		return 0;
	for (int i = ZLOG_DEBUG; i <= ZLOG_ERROR; i++) {
		if (strcasecmp(v, zlog_names[i]) == 0) {
			zlog_min_level = i;
			return 0;
		}
	}
	return -1;
}

bool
zlog_detect_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (v == NULL || sscanf(v, "%llu:%llu%c", &dev, &ino, &tail) != 2 ||
	    fstat(STDERR_FILENO, &st) != 0)
		return false;
	zlog_journal = (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
	return zlog_journal;
}

void
zlog_set_level(enum zlog_level level)
{
	zlog_min_level = level;
}

void
zlog_set_sink(zlog_sink_fn fn)
{
	zlog_sink = fn;
}

bool
zlog_enabled(enum zlog_level level)
{
	return zlog_sink != NULL || (int)level >= zlog_min_level;
}

void
zlog(enum zlog_level level, const char *event, const char *fmt, ...)
{
	zlog_sink_fn sink = zlog_sink;
	char line[4096];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if (!zlog_enabled(level))
		return;
	if (sink != NULL) {
		line[0] = '\0';
		if (fmt != NULL && *fmt != '\0') {
			va_start(ap, fmt);
			vsnprintf(line, sizeof(line), fmt, ap);
			va_end(ap);
		}
		sink(level, event, line);
		return;
	}
	if (zlog_journal) {
		/* journald parses "<P>" and keeps its own timestamp */
		n = snprintf(line, sizeof(line), "<%d>level=%s event=%s",
		    zlog_priorities[level], zlog_names[level], event);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:"
		    "%02d.%03ldZ level=%s event=%s", tm.tm_year + 1900,
		    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		    tm.tm_sec, ts.tv_nsec / 1000000L, zlog_names[level], event);
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	if (fmt != NULL && *fmt != '\0') {
		line[n++] = ' ';
		va_start(ap, fmt);
		m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += m;
		if ((size_t)n > sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
	}
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

const char *
zlog_quote(char *buf, size_t size, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (size < 3) {
		if (size > 0)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	for (; s != NULL && *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char tmp[4];
		size_t k = 0;

		if (c == '"' || c == '\\') {
			tmp[k++] = '\\';
			tmp[k++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			tmp[k++] = '\\';
			tmp[k++] = 'x';
			tmp[k++] = hex[c >> 4];
			tmp[k++] = hex[c & 15];
		} else {
			tmp[k++] = (char)c;
		}
		if (o + k + 2 > size)
			break;
		memcpy(buf + o, tmp, k);
		o += k;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
