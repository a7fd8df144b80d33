/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit.h - the audit log (--audit-log): one JSON line per privileged
 * action (a GPU setting write), saying who asked, what, the value before
 * and the value requested, and how it ended.
 *
 * The file is opened O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC with mode 0640 and
 * reopened on SIGHUP, so logrotate can move it away and signal. Each line
 * goes out in one write(2) under a lock, so lines never interleave, and
 * only after its room in the file system is reserved (fallocate with
 * FALLOC_FL_KEEP_SIZE), so a full disk loses whole lines, never leaves half
 * of one. A lost line is logged (rate-limited) and counted for /metrics
 * (zeusd_audit_write_failures_total); it never fails the request, which
 * has already run. With --audit-required the GPU write handlers ask
 * audit_ready() first and refuse (503) while no line could be written.
 */
#ifndef ZEUS_AUDIT_H
#define ZEUS_AUDIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"


/* Who asked, captured on the HTTP thread when the request came in. */
struct audit_who {
	bool unix_peer;		/* uid/pid valid */
	uid_t uid;
	pid_t pid;
	char user[64];		/* "" when the uid has no passwd entry */
	char comm[32];		/* /proc/PID/comm at the connection's first
				 * request that needed it; "" when unreadable */
	char sub[257];		/* token sub, "" without a token */
	char addr[64];		/* TCP peer address, "" on the Unix socket */
};

/* `gpu` of a line that names no GPU (a refusal before ids were read). */
#define AUDIT_NO_GPU UINT32_MAX

/* Opens `path` (NULL: the audit log is off). */
int audit_open(const char *path, struct zerr *err);

/* Reopens the file at the same path (SIGHUP). Returns 0 or -1 (logged). */
int audit_reopen(void);

bool audit_enabled(void);

/*
 * The log's fd (-1: none), and a swap to a file opened elsewhere: the
 * network process of a split daemon writes the log but cannot open it, so
 * the device process reopens it on SIGHUP and passes the fd.
 */
int audit_fileno(void);
/* A new fd of the --audit-log file (SIGHUP), or -1 (logged). */
int audit_open_again(void);
void audit_replace_fd(int fd);

/*
 * A split daemon (docs/security.md, "Privilege separation"): the device
 * process writes every line, the network process's ones sent to it as
 * typed records (node_audit). The device process opens a read-only fd of
 * the file (audit_open_readonly: at start and at each SIGHUP) for the
 * network process, which keeps it (audit_set_readonly, with the path of
 * --audit-log: the log is on there too) only so that audit_ready can
 * check free space for --audit-required; a line this process would write
 * there is dropped and counted instead.
 */
int audit_open_readonly(void);
void audit_set_readonly(const char *path, int fd);
bool audit_readonly(void);

/*
 * Writes one line. `before`/`requested` are JSON texts (numbers, booleans,
 * objects) or NULL for null; `error` NULL means the result was ok.
 * `reason` is set for restores ("process_exit", "shutdown"): the line then
 * has "restore": true and "reason".
 */
void audit_write(const struct audit_who *w, unsigned gpu, const char *op,
    const char *before, const char *requested, const char *error,
    const char *reason);

/* The end of a GPU lease, for the energy ledger (lease.c). */
struct audit_lease {
	const char *cgroup;		/* the holder's; "" unknown */
	const char *label;		/* the client's, or NULL */
	const char *reason;		/* "process_exit", "release", ... */
	const char *settings;		/* changed: "power_limit,gpu_clocks" */
	bool left;			/* not restored (shutdown without it) */
	double duration_s;
	bool energy_ok;			/* false: the GPU has no counter */
	double energy_j;
};

/*
 * One "lease_end" line: the holder (uid, user, pid, cgroup), the GPU, the
 * lease's duration, its joules and average watts (null and "energy":
 * "unavailable" without a counter) and the settings restored (or, when
 * `left`, the settings left as the holder set them).
 */
void audit_write_lease(const struct audit_who *w, unsigned gpu,
    const struct audit_lease *le);

/* Room reserved by audit_ready(): more than any line takes. */
#define AUDIT_LINE_ROOM 4096

/*
 * Whether a line could be written now (true without an audit log): room
 * for one (AUDIT_LINE_ROOM) is reserved at the end of the file. A GPU
 * write under --audit-required asks first.
 */
bool audit_ready(void);

/* Whether the last write or audit_ready() failed (for /metrics). */
bool audit_down_now(void);

/* GPU writes refused by --audit-required (counted by the handler). */
void audit_count_refused(void);

/*
 * The words of a GPU write's refusal (503) under --audit-required while
 * the log cannot be written, the same from the network process (early)
 * and the device process: `err` set, -1 returned.
 */
int audit_refusal(struct zerr *err);
unsigned long audit_refused_writes(void);

/* Lines that could not be written since start. */
unsigned long audit_failures(void);

void audit_close(void);

#endif
