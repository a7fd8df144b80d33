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

bool
zlog_journal_format(void)
{
	return zlog_journal;
}

size_t
zlog_timestamp(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(buf, size, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
	if (n < 0 || size == 0)
		return 0;
	return (size_t)n < size ? (size_t)n : size - 1;
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
		n = (int)zlog_timestamp(line, sizeof(line));
		n += snprintf(line + n, sizeof(line) - (size_t)n,
		    " level=%s event=%s", zlog_names[level], event);
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

/*
 * The code point of the UTF-8 character at `s` if it is one a quoted
 * string must not carry raw, else 0; its length in `n`. Those are the C1
 * controls (U+0080-U+009F, NEL among them), the line and paragraph
 * separators (U+2028, U+2029), which some viewers break lines at, and the
 * bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069), with which a client's string (a token's sub, a path)
 * could make a log line read otherwise than it is (Trojan Source).
 */
static unsigned
zlog_invisible(const char *s, size_t *n)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) {
		*n = 2;
		return u[1];
	}
	if (u[0] == 0xd8 && u[1] == 0x9c) {
		*n = 2;
		return 0x061c;
	}
	if (u[0] != 0xe2 || u[1] == '\0' || u[2] == '\0')
		return 0;
	*n = 3;
	if (u[1] == 0x80 && (u[2] == 0x8e || u[2] == 0x8f ||
	    (u[2] >= 0xa8 && u[2] <= 0xae)))
		return 0x2000 | (u[2] & 0x3f);
	if (u[1] == 0x81 && u[2] >= 0xa6 && u[2] <= 0xa9)
		return 0x2040 | (u[2] & 0x3f);
	return 0;
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
		char tmp[6];
		size_t k = 0, n, skip = 0;
		unsigned cp;

		if (c == '"' || c == '\\') {
			tmp[k++] = '\\';
			tmp[k++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			tmp[k++] = '\\';
			tmp[k++] = 'x';
			tmp[k++] = hex[c >> 4];
			tmp[k++] = hex[c & 15];
		} else if ((cp = zlog_invisible(s, &n)) != 0) {
			tmp[k++] = '\\';
			tmp[k++] = 'u';
			tmp[k++] = hex[cp >> 12];
			tmp[k++] = hex[(cp >> 8) & 15];
			tmp[k++] = hex[(cp >> 4) & 15];
			tmp[k++] = hex[cp & 15];
			skip = n - 1;
		} else {
			tmp[k++] = (char)c;
		}
		if (o + k + 2 > size)
			break;
		memcpy(buf + o, tmp, k);
		o += k;
		s += skip;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
