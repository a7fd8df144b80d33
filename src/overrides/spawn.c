/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.c - run one external command safely and capture its output (see
 * spawn.h for the rules).
 *
 * posix_spawn (glibc: clone(CLONE_VFORK) + exec, with the exec error
 * reported back) keeps the fork-in-a-threaded-process hazards out of our
 * code: nothing of ours runs in the child. Every descriptor we create is
 * O_CLOEXEC, so a command spawned concurrently by another thread never
 * inherits our pipes, and closefrom(3) in the child covers descriptors
 * that other code may have leaked.
 *
 * The child is watched without reaping it (waitid WNOWAIT, woken through a
 * pidfd when the kernel has one): while it is an unreaped zombie its pid
 * cannot be reused, so a late kill(-pid, SIGKILL) of its process group can
 * never hit an unrelated process. The child stays in the reaper's registry
 * until it has been reaped, so no sweep takes it for an escapee, and is
 * marked before the reaping starts, so shutdown never signals a pid that
 * may already have been reused.
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "reaper.h"

#define SPAWN_TICK_MS 10	/* exit polling when there is no pidfd */
#define SPAWN_READS_PER_ROUND 4	/* so one flooding pipe cannot starve */

/* 0 when path is an executable regular file, else an errno value. */
static int
spawn_executable(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return EACCES;
	if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) < 0)
		return errno;
	return 0;
}

/*
 * Finds the program: a name with a '/' is used as is, any other is looked
 * up in SPAWN_PATH (the command's PATH, not the daemon's). Checking before
 * spawning gives a clear reason (ENOENT, EACCES) even where posix_spawn
 * cannot report exec errors (the child would just exit 127). Returns 0 or
 * an errno value.
 */
static int
spawn_resolve(const char *prog, char *out, size_t size)
{
	const char *dir = SPAWN_PATH;

	if (prog == NULL || *prog == '\0')
		return ENOENT;
	if (strchr(prog, '/') != NULL) {
		/* The command runs in "/", so a relative path means that. */
		int n = snprintf(out, size, "%s%s", prog[0] == '/' ? "" : "/",
		    prog);

		if (n < 0 || (size_t)n >= size)
			return ENAMETOOLONG;
		return spawn_executable(out);
	}
	while (*dir != '\0') {
		size_t dlen = strcspn(dir, ":");
		int n = snprintf(out, size, "%.*s/%s", (int)dlen, dir, prog);

		if (n > 0 && (size_t)n < size && spawn_executable(out) == 0)
			return 0;
		dir += dlen;
		if (*dir == ':')
			dir++;
	}
	return ENOENT;
}

static int
spawn_output_init(struct spawn_output *o)
{
	memset(o, 0, sizeof(*o));
	o->data = malloc(SPAWN_CAPTURE_MAX + 1);
	if (o->data == NULL)
		return -1;
	o->data[0] = '\0';
	return 0;
}

/*
 * Reads what is available on fd into o (dropping what exceeds the cap).
 * Returns 1 at end of file (or on a read error), 0 otherwise.
 */
static int
spawn_drain(int fd, struct spawn_output *o)
{
	char junk[16384];

	for (int k = 0; k < SPAWN_READS_PER_ROUND; k++) {
		size_t room = SPAWN_CAPTURE_MAX - o->len;
		char *dst = room > 0 ? o->data + o->len : junk;
		ssize_t r = read(fd, dst, room > 0 ? room : sizeof(junk));

		if (r == 0)
			return 1;
		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : 1;
		o->total += (uint64_t)r;
		if (room > 0) {
			o->len += (size_t)r;
			o->data[o->len] = '\0';
		}
		o->truncated = o->total > o->len;
	}
	return 0;
}

/* True once the child has exited; leaves it unreaped. */
static bool
spawn_child_exited(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno != EINTR;	/* ECHILD: nothing left to watch */
	return si.si_pid != 0;
}

static int
spawn_start(char *const argv[], const char *path, int out_w, int err_w,
    pid_t *pid)
{
	static char *const envp[] = { "PATH=" SPAWN_PATH, "LANG=C", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
		return rc;
	if ((rc = posix_spawnattr_init(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
	    O_RDONLY, 0)) == 0 &&
	    (rc = posix_spawn_file_actions_adddup2(&fa, out_w, 1)) == 0 &&
	    (rc = posix_spawn_file_actions_adddup2(&fa, err_w, 2)) == 0 &&
	    (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
	    (rc = posix_spawn_file_actions_addchdir_np(&fa, "/")) == 0 &&
	    (rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0 &&
	    (rc = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
	    (rc = posix_spawnattr_setsigdefault(&attr, &all)) == 0)
		rc = posix_spawn(pid, path, &fa, &attr, argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* The state of one run while its output is read. */
struct spawn_watch {
	pid_t pid;
	struct reaper_entry entry;	/* registered while unreaped */
	int fd[2];		/* stdout, stderr read ends; -1 once closed */
	int pidfd;		/* -1 when the kernel has none */
	uint64_t deadline;	/* UINT64_MAX: no timeout */
	uint64_t grace_end;
	bool exited, timed_out;
};

/* Decides, before each poll, whether to kill or stop; returns 1 to stop. */
static int
spawn_check(struct spawn_watch *w, struct spawn_result *res, uint64_t now)
{
	if (!w->exited && spawn_child_exited(w->pid)) {
		w->exited = true;
		w->grace_end = now + SPAWN_GRACE_MS;
	}
	if (!w->exited && !w->timed_out && now >= w->deadline) {
		kill(-w->pid, SIGKILL);
		w->timed_out = true;
		w->grace_end = now + SPAWN_GRACE_MS;
	}
	if (w->fd[0] < 0 && w->fd[1] < 0 && (w->exited || w->timed_out))
		return 1;
	if ((w->exited || w->timed_out) && now >= w->grace_end &&
	    (w->fd[0] >= 0 || w->fd[1] >= 0)) {
		/* A leftover process holds the pipes: end it and stop. */
		kill(-w->pid, SIGKILL);
		res->killed_leftovers = true;
		return 1;
	}
	return 0;
}

static int
spawn_poll_ms(const struct spawn_watch *w, uint64_t now)
{
	uint64_t until = w->exited || w->timed_out ? w->grace_end :
	    w->deadline;
	uint64_t wait = until > now ? until - now : 0;

	if (!w->exited && !w->timed_out && w->pidfd < 0 &&
	    wait > SPAWN_TICK_MS)
		wait = SPAWN_TICK_MS;
	return wait > INT_MAX ? INT_MAX : (int)wait;
}

static void
spawn_loop(struct spawn_watch *w, struct spawn_result *res)
{
	struct spawn_output *outs[2] = { &res->out, &res->err };

	for (;;) {
		struct pollfd pfd[3];
		nfds_t n = 0;
		uint64_t now = zclock_now_ms();

		if (spawn_check(w, res, now))
			return;
		for (int i = 0; i < 2; i++)
			pfd[n++] = (struct pollfd){ .fd = w->fd[i],
			    .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = w->exited ? -1 : w->pidfd,
		    .events = POLLIN };
		if (poll(pfd, n, spawn_poll_ms(w, now)) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (w->fd[i] < 0 || pfd[i].revents == 0)
				continue;
			if (spawn_drain(w->fd[i], outs[i])) {
				close(w->fd[i]);
				w->fd[i] = -1;
			}
		}
	}
}

static void
spawn_reap(struct spawn_watch *w, struct spawn_result *res)
{
	int st = 0;

	while (waitpid(w->pid, &st, 0) < 0) {
		if (errno != EINTR) {
			res->status = SPAWN_EXEC_FAILED;
			res->code = errno;
			return;
		}
	}
	if (w->timed_out) {
		res->status = SPAWN_TIMED_OUT;
		res->code = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	} else if (WIFSIGNALED(st)) {
		res->status = SPAWN_SIGNALED;
		res->code = WTERMSIG(st);
	} else {
		res->status = SPAWN_EXITED;
		res->code = WEXITSTATUS(st);
	}
}

static int
spawn_pipes(int out[2], int errp[2], struct zerr *err)
{
	out[0] = out[1] = errp[0] = errp[1] = -1;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0) {
		int e = errno;

		for (int i = 0; i < 2; i++) {
			if (out[i] >= 0)
				close(out[i]);
			if (errp[i] >= 0)
				close(errp[i]);
		}
		return zerr_set(err, ZERR_INTERNAL, "cannot create pipes: %s",
		    strerror(e));
	}
	return 0;
}

int
spawn_run(char *const argv[], unsigned timeout_ms, struct spawn_result *res,
    struct zerr *err)
{
	struct spawn_watch w = { .pidfd = -1 };
	char path[PATH_MAX];
	int po[2], pe[2], rc;
	uint64_t t0 = zclock_now_ms();

	memset(res, 0, sizeof(*res));
	if (spawn_output_init(&res->out) < 0 ||
	    spawn_output_init(&res->err) < 0)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	res->status = SPAWN_EXEC_FAILED;
	if ((rc = spawn_resolve(argv[0], path, sizeof(path))) != 0) {
		res->code = rc;
		return 0;
	}
	if (spawn_pipes(po, pe, err) < 0)
		return -1;
	if (reaper_spawn_begin() < 0) {
		/* The daemon is shutting down: start nothing new. */
		for (int i = 0; i < 2; i++) {
			close(po[i]);
			close(pe[i]);
		}
		res->code = ECANCELED;
		return 0;
	}
	/* Registered before the lock is released: a sweep never sees this
	 * child unregistered, so never mistakes it for an escapee. */
	rc = spawn_start(argv, path, po[1], pe[1], &w.pid);
	reaper_spawn_end(&w.entry, rc == 0 ? w.pid : 0);
	close(po[1]);
	close(pe[1]);
	if (rc != 0) {
		close(po[0]);
		close(pe[0]);
		res->code = rc;
		return 0;
	}
	w.fd[0] = po[0];
	w.fd[1] = pe[0];
	w.pidfd = (int)syscall(SYS_pidfd_open, w.pid, 0);
	w.deadline = timeout_ms ? t0 + timeout_ms : UINT64_MAX;
	spawn_loop(&w, res);
	for (int i = 0; i < 2; i++)
		if (w.fd[i] >= 0)
			close(w.fd[i]);
	if (w.pidfd >= 0)
		close(w.pidfd);
	/* Still registered while reaped, so no sweep takes it for an
	 * escapee and steals its status; no longer signalled at shutdown. */
	reaper_reaping(&w.entry);
	spawn_reap(&w, res);
	reaper_remove(&w.entry);
	res->duration_ms = zclock_now_ms() - t0;
	if (res->killed_leftovers)
		zlog(ZLOG_WARN, "spawn_killed_leftovers", "pid=%d", (int)w.pid);
	/* Whatever the command left behind has been reparented to us by
	 * now (the subreaper): end it before answering. */
	(void)reaper_sweep(REAPER_GRACE_MS);
	return 0;
}

void
spawn_result_free(struct spawn_result *res)
{
	free(res->out.data);
	free(res->err.data);
	res->out.data = res->err.data = NULL;
}

const char *
spawn_describe(const struct spawn_result *res, unsigned timeout_ms,
    char *buf, size_t size)
{
	char eb[128];
	const char *abbrev;

	switch (res->status) {
	case SPAWN_EXITED:
		snprintf(buf, size, "exit code %d", res->code);
		break;
	case SPAWN_SIGNALED:
		abbrev = sigabbrev_np(res->code);
		snprintf(buf, size, "killed by signal %d%s%s%s", res->code,
		    abbrev ? " (SIG" : "", abbrev ? abbrev : "",
		    abbrev ? ")" : "");
		break;
	case SPAWN_TIMED_OUT:
		if (timeout_ms % 1000 == 0)
			snprintf(buf, size, "timed out after %u s",
			    timeout_ms / 1000);
		else
			snprintf(buf, size, "timed out after %u ms",
			    timeout_ms);
		break;
	default:
		if (res->code == ECANCELED)
			snprintf(buf, size, "not run: the daemon is shutting "
			    "down");
		else
			snprintf(buf, size, "could not be executed: %s",
			    strerror_r(res->code, eb, sizeof(eb)));
		break;
	}
	return buf;
}
