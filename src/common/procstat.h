/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.h - this process's resource figures, as Prometheus's process_*
 * series report them: start time, CPU time, resident and virtual memory,
 * open and allowed file descriptors (from /proc/self and getrlimit).
 *
 * The daemon's /metrics shows the main process's figures (the device
 * process of a split daemon asks it over a channel: it has /proc/self of
 * its own) and the network process's next to them.
 */
#ifndef ZEUS_PROCSTAT_H
#define ZEUS_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

enum {
	PROCSTAT_STAT = 1u << 0,	/* start, cpu, rss, vsize are set */
	PROCSTAT_FDS = 1u << 1,		/* open_fds is set */
	PROCSTAT_MAX_FDS = 1u << 2,	/* max_fds is set */
	PROCSTAT_ALL = (1u << 3) - 1,
};

struct procstat {
	unsigned ok;			/* PROCSTAT_* bits */
	uint64_t start_ms;		/* since the Unix epoch */
	uint64_t cpu_ms;		/* user + system */
	uint64_t rss_bytes, vsize_bytes;
	uint64_t open_fds, max_fds;
};

/* Fills what it can read of this process; the rest stays unset (ok). */
void procstat_self(struct procstat *out);

/*
 * Opens /proc/self/stat once, for good: procstat_self then preads it
 * through this fd instead of opening it at each call, so that the
 * start, CPU and memory figures keep working in a process that has since
 * lost its filesystem (the network process of a split daemon). Call it in
 * the process whose figures are wanted (after a fork, in the child).
 * Returns 0, or -1 when it could not be opened (procstat_self then opens
 * it each time, as without this call).
 *
 * The open-descriptor count is not kept that way: it lists a directory,
 * and a directory fd kept from before a chroot is a way out of it (".."
 * walked from /proc/PID/fd reaches the real root). Such a process leaves
 * PROCSTAT_FDS unset and has its descriptors counted from outside
 * (procstat_count_fds with its pid, in the device process).
 */
int procstat_keep(void);

/*
 * Open descriptors of process `pid` (0: this one, not counting the one
 * the count itself uses), from /proc/PID/fd. 0, or -1 when that cannot be
 * listed.
 */
int procstat_count_fds(pid_t pid, uint64_t *out);

/*
 * The start time of process `pid` (> 0) in clock ticks after boot (field
 * 22 of /proc/PID/stat): with the pid, what tells one process from a later
 * one that reuses its number; on Windows its creation time (100 ns units
 * since 1601). 0, or -1 (no such process, no /proc, EMFILE: errno says).
 */
int procstat_start_ticks(pid_t pid, uint64_t *out);

#endif
