/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logrelay.h - the network process's log lines, passed on by the device
 * process with the network process's name on each (docs/security.md,
 * "Privilege separation").
 *
 * The network process's stderr is a pipe whose other end the device
 * process reads here; every line that comes out of it is written to the
 * device process's stderr (the journal, a file) with `proc=network` as its
 * second field, and its time is the device process's: in the plain format
 * the line starts with the device process's own `ts=` field (the clock
 * when it read the line), then the tag; in the journal format (which
 * journald stamps itself) with the line's "<P>" priority, if it has one,
 * then the tag. Whatever `ts=` fields the line itself starts with (after
 * its "<P>") are dropped, so a line cannot claim a time of its own choice
 * (issue 42, item 4d); the rest follows the tag as it was written (in the
 * plain format a "<P>" too). The network process can write what it likes
 * into the pipe, but no line it writes reaches the log without the tag
 * and our time, so a taken over network process cannot pass a line off as
 * the device process's, nor as one written at another time.
 * Lines are split at '\n' and at LOGRELAY_LINE_MAX bytes (each piece gets
 * the tag); NUL and other control bytes pass as they are (zlog_quote
 * escapes what the network process's own code logs). After each read the
 * thread waits LOGRELAY_BATCH_MS, so that under load one read and one
 * write carry many lines: the cost per line is then a copy, and a line's
 * time is that of the read that brought it (at most a batch late).
 */
#ifndef ZEUS_ZEUSD_LOGRELAY_H
#define ZEUS_ZEUSD_LOGRELAY_H

#include "common/err.h"

#define LOGRELAY_LINE_MAX 8192
#define LOGRELAY_BATCH_MS 2	/* after a read, what comes is gathered */

struct logrelay;

/* Starts a thread that relays `rfd` (taken) to stderr until end of file. */
int logrelay_start(int rfd, struct logrelay **out, struct zerr *err);

/*
 * Waits (up to timeout_ms) for end of file, which comes once every writer
 * (the network process) has gone, relaying what is left, and frees. Past
 * the timeout the thread is left to the process's exit.
 */
void logrelay_stop(struct logrelay *r, unsigned timeout_ms);

#endif
