/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.h - run one external command safely and capture what it says.
 *
 * Used by the GPU command overrides (overrides.h) on the per-GPU worker
 * threads, so it is thread-safe. Its only process-wide state is the
 * registry of running commands in reaper.h, which lets the daemon kill
 * them at shutdown and kill whatever they leave behind; it installs no
 * SIGCHLD handler, never calls waitpid(-1) (only waitpid of its own child
 * and of escapees the sweep chose) and changes no environment.
 *
 * The command runs directly with posix_spawn, never through a shell:
 *   - argv[0] without a '/' is looked up in the fixed PATH below, not in the
 *     daemon's PATH;
 *   - environment: exactly SPAWN_PATH and LANG=C;
 *   - a new session (setsid), hence its own process group and no TTY;
 *   - the working directory is "/" (a relative program path with a '/'
 *     is taken from there);
 *   - stdin is /dev/null; every descriptor above 2 is closed; signal
 *     dispositions and the signal mask are reset to defaults;
 *   - stdout and stderr are read concurrently (poll) so a chatty command
 *     never blocks on a full pipe; each is captured up to SPAWN_CAPTURE_MAX
 *     bytes, the rest is read and dropped;
 *   - at the timeout the whole process group gets SIGKILL;
 *   - once the command itself has exited, output is read for at most
 *     SPAWN_GRACE_MS more; if a leftover process (a grandchild) still holds
 *     the pipes then, its process group gets SIGKILL and reading stops, so
 *     a background process can never hang the caller;
 *   - the command is registered (reaper.h) from the moment it is spawned
 *     until it is reaped; after it, when the process is a subreaper
 *     (reaper_enable), every descendant it left behind, whether still in
 *     its process group or escaped with setsid(), is killed and reaped
 *     (reaper_sweep) before spawn_run returns;
 *   - once reaper_shutdown has begun, nothing more is started: the result
 *     is SPAWN_EXEC_FAILED with ECANCELED.
 *
 * The caller's process must not set SIGCHLD to SIG_IGN (children would be
 * reaped by the kernel and their exit status lost).
 */
#ifndef ZEUS_SPAWN_H
#define ZEUS_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define SPAWN_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:" \
    "/sbin:/bin"
#define SPAWN_CAPTURE_MAX (64 * 1024)
#define SPAWN_GRACE_MS 200

enum spawn_status {
	SPAWN_EXITED,		/* code = exit status */
	SPAWN_SIGNALED,		/* code = signal number */
	SPAWN_TIMED_OUT,	/* killed at the timeout; code = signal */
	SPAWN_EXEC_FAILED,	/* never ran; code = errno (ENOENT, ...) */
};

struct spawn_output {
	char *data;		/* NUL-terminated; may hold other NULs */
	size_t len;		/* bytes kept (<= SPAWN_CAPTURE_MAX) */
	uint64_t total;		/* bytes the command wrote */
	bool truncated;		/* total > len */
};

struct spawn_result {
	enum spawn_status status;
	int code;
	uint64_t duration_ms;
	bool killed_leftovers;	/* pipes held past the grace period */
	struct spawn_output out, err;
};

/*
 * Runs argv (argv[0] is the program) with a timeout in milliseconds
 * (0 means none). Returns 0 when the command was run or could not be
 * executed (see res->status); -1 with ZERR_INTERNAL only when the daemon
 * itself failed (no pipes, no memory). Free res with spawn_result_free
 * either way.
 */
int spawn_run(char *const argv[], unsigned timeout_ms,
    struct spawn_result *res, struct zerr *err);

void spawn_result_free(struct spawn_result *res);

/*
 * Writes the outcome as a short phrase ("exit code 3", "killed by signal
 * 9", "timed out after 5 s", "could not be executed: No such file or
 * directory") into buf.
 */
const char *spawn_describe(const struct spawn_result *res,
    unsigned timeout_ms, char *buf, size_t size);

#endif
