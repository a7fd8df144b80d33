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
 * Opens /proc/self/stat and /proc/self/fd once, for good: procstat_self
 * then reads them through these fds (pread, and getdents64 from the
 * start) instead of opening them at each call, so that it keeps working
 * in a process that has since lost its filesystem (the network process of
 * a split daemon). Call it in the process whose figures are wanted (after
 * a fork, in the child). Returns 0, or -1 when either could not be opened
 * (procstat_self then opens them each time, as without this call).
 */
int procstat_keep(void);

/*
 * The directory fd procstat_keep holds (/proc/PID/fd), or -1. A path
 * walked from it with ".." leads out of any chroot the process entered
 * since, so the network process's filter lets no call walk one from it
 * (sandbox.c).
 */
int procstat_kept_dirfd(void);

#endif
