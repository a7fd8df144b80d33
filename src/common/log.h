/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - one line per event, key=value fields, on stderr.
 *
 * The level comes from ZEUSD_LOG (debug|info|warn|error; default info).
 * When stderr is the systemd journal (zlog_detect_journal), each line starts
 * with its syslog priority ("<3>" error, "<4>" warn, "<6>" info, "<7>"
 * debug) instead of a timestamp: journald strips the prefix into PRIORITY=
 * (so `journalctl -p warning` works) and stamps every line itself.
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

/*
 * Switches to the journal format when $JOURNAL_STREAM ("DEV:INODE", set by
 * systemd for a service whose stderr is the journal) names the file that
 * stderr is now, as sd_journal_stream_fd(3) recommends: a redirected stderr
 * (2>file in ExecStart, a test harness) keeps the plain format. Returns
 * whether the journal format is on.
 */
bool zlog_detect_journal(void);
bool zlog_enabled(enum zlog_level level);

/* Whether lines are in the journal format (zlog_detect_journal found it). */
bool zlog_journal_format(void);

/*
 * The plain format's first field for now, "ts=2026-01-01T00:00:00.000Z"
 * (CLOCK_REALTIME, UTC), into buf (ZLOG_TS_MAX bytes hold it); returns
 * its length.
 */
#define ZLOG_TS_MAX 32
size_t zlog_timestamp(char *buf, size_t size);

/* Emits `ts=... level=... event=<event> <fields>` (journal: `<P>level=...`). */
void zlog(enum zlog_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * A sink takes every line instead of stderr: the level, the event and the
 * formatted fields (no timestamp). While one is set, zlog_enabled() is true
 * at every level and the sink does its own filtering. NULL: back to stderr.
 * libzeus sets one so that lines from the device code it shares with the
 * daemon reach the host program's log handler, never its stderr.
 */
typedef void (*zlog_sink_fn)(enum zlog_level level, const char *event,
    const char *fields);
void zlog_set_sink(zlog_sink_fn fn);

/*
 * Writes `s` as a double-quoted value with ", \ and control bytes escaped
 * (\xNN), and the characters that could make a line read otherwise than it
 * is as \uNNNN: C1 controls (NEL), U+2028/U+2029 and the bidirectional
 * controls (U+061C, U+200E/F, U+202A-E, U+2066-9). Truncated to fit `size`,
 * never inside an escape. Returns `buf`.
 */
const char *zlog_quote(char *buf, size_t size, const char *s);

#endif
