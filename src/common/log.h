/*
 * log.h - one line per event, key=value fields, on stderr.
 *
 * The level comes from ZEUSD_LOG (debug|info|warn|error; default info).
 * Callers format their own fields; any value that comes from outside (a path,
 * a user name, a driver string) must go through zlog_quote first so a line
 * can never be split or forged.
 */
#ifndef ZEUS_LOG_H
#define ZEUS_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum zlog_level { ZLOG_DEBUG, ZLOG_INFO, ZLOG_WARN, ZLOG_ERROR };

/* Reads ZEUSD_LOG. Returns -1 (and keeps "info") on an unknown value. */
int zlog_init_from_env(void);
void zlog_set_level(enum zlog_level level);
bool zlog_enabled(enum zlog_level level);

/* Emits `ts=... level=... event=<event> <fields>`. */
void zlog(enum zlog_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Writes `s` as a double-quoted value with ", \ and control bytes escaped,
 * truncated to fit `size`. Returns `buf`.
 */
const char *zlog_quote(char *buf, size_t size, const char *s);

#endif
