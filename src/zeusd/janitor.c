/* SPDX-License-Identifier: Apache-2.0 */
/*
 * janitor.c - the process that removes the socket file after the device
 * process (see janitor.h).
 *
 * It is a fork of the device process, so it starts with the device
 * process's memory and fds: it gets rid of the fds at once and never calls
 * into anything it inherited but the logger and listen.c's removal. It
 * leaves with _exit, never exit: the driver libraries' atexit handlers and
 * destructors must not run in a copy of the process that owns the devices.
 */
#include "zeusd/janitor.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "overrides/reaper.h"
#include "privsep/sandbox.h"
#include "zeusd/listen.h"

/* How long janitor_stop waits for it to exit before SIGKILL. */
#define JANITOR_STOP_MS 1000
#define JANITOR_TICK_MS 5

static struct {
	pid_t pid;		/* 0: none */
	int wfd;		/* the pipe's write end; -1: none */
} janitor = { .pid = 0, .wfd = -1 };

/*
 * Everything the janitor does once the filter is in (strace of both ends,
 * removal and not): wait on the pipe (read), stat and remove the file
 * (fstatat is newfstatat on x86_64 and arm64, fstatat64 or statx
 * elsewhere), close the directory fd, write the log line (write;
 * clock_gettime for its time stamp, normally the vDSO's and no system
 * call), and _exit (exit_group). Names this architecture lacks are
 * skipped.
 */
static const char *const janitor_allow[] = {
	"read", "write", "close",
	"newfstatat", "fstatat64", "statx", "unlinkat",
	"clock_gettime", "clock_gettime64",
	"exit_group",
};

/*
 * Sanitizer builds only (SANDBOX_ASAN): ASan's runtime asks for the
 * alternate signal stack (sigaltstack) on the way out of _exit (seen with
 * strace; without it the janitor of an ASan build dies of SIGSYS at every
 * stop).
 */
static const char *const janitor_allow_asan[] = {
	"sigaltstack",
};

static int
janitor_seccomp(void)
{
	scmp_filter_ctx ctx;
	int rc;

	/* libseccomp sets no_new_privs first: needed without root */
	if ((ctx = seccomp_init(SCMP_ACT_KILL_PROCESS)) == NULL)
		return -ENOMEM;
	/* another architecture's calling convention (int 0x80, x32) */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS);
	if (rc == 0)
		rc = sandbox_allow_names(ctx, janitor_allow,
		    sizeof(janitor_allow) / sizeof(janitor_allow[0]));
	if (rc == 0 && SANDBOX_ASAN)
		rc = sandbox_allow_names(ctx, janitor_allow_asan,
		    sizeof(janitor_allow_asan) / sizeof(janitor_allow_asan[0]));
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

static _Noreturn void
janitor_fail(const char *step, int e)
{
	zlog(ZLOG_ERROR, "janitor_failed", "step=%s error=\"%s\" msg=\"the "
	    "socket file will stay should the device process be killed\"",
	    step, strerror(e));
	_exit(1);
}

/* The janitor itself: the child side of janitor_start. */
static _Noreturn void
janitor_main(int rfd)
{
	int keep[] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, rfd,
	    listen_socket_dirfd() };
	const char *path = listen_socket_path();
	char q[512], c;
	struct tm tm;
	sigset_t all;
	time_t t = 0;
	ssize_t n;
	int rc;

	/*
	 * First, so that a signal meant for the whole process group (a
	 * Ctrl-C, systemd's SIGTERM to every process of the unit) does not end
	 * it: it ends when the pipe says so. SIGKILL and SIGSTOP cannot be
	 * blocked; a fault still kills.
	 */
	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, NULL) != 0)
		janitor_fail("sigprocmask", errno);
	if (prctl(PR_SET_NAME, "zeusd-janitor", 0, 0, 0) != 0)
		janitor_fail("prctl", errno);
	/* device files, RAPL counters, the channels, the driver's own fds */
	if (fileio_close_all_but(keep, sizeof(keep) / sizeof(keep[0])) != 0)
		janitor_fail("close_fds", errno);
	zlog_quote(q, sizeof(q), path);
	/*
	 * The log line's time stamp (gmtime_r) loads the time zone on its
	 * first use, which opens files; the device process has normally done
	 * so already, but not when its log level hid every line.
	 */
	(void)gmtime_r(&t, &tm);
	if ((rc = janitor_seccomp()) != 0)
		janitor_fail("seccomp", -rc);
	/*
	 * Nothing is ever written to the pipe (bytes would be ignored): only
	 * its end of file counts. EINTR cannot come with every signal
	 * blocked; retried all the same.
	 */
	while ((n = read(rfd, &c, 1)) > 0 || (n < 0 && errno == EINTR))
		;
	if (n < 0) {
		/* the device process may still be serving: touch nothing */
		zlog(ZLOG_ERROR, "janitor_failed", "step=read error=\"%s\"",
		    strerror(errno));
		_exit(1);
	}
	if (listen_remove_socket())
		zlog(ZLOG_WARN, "socket_removed_by_janitor", "path=%s "
		    "msg=\"the device process ended without removing the "
		    "socket file (killed?); its janitor removed it\"", q);
	_exit(0);
}

int
janitor_start(struct zerr *err)
{
	int p[2];
	pid_t pid;

	if (janitor.pid > 0 || listen_socket_dirfd() < 0)
		return 0;	/* no file of ours: TCP, systemd's socket */
	/*
	 * The write end is close-on-exec (no override command holds it) and
	 * stays in this process only: the janitor closes it, and the network
	 * process was forked before it existed. Its end of file therefore
	 * means this process is gone.
	 */
	if (pipe2(p, O_CLOEXEC) != 0)
		return zerr_set(err, ZERR_INTERNAL, "janitor: pipe: %s",
		    strerror(errno));
	/* no buffered line printed twice */
	(void)fflush(stdout);
	(void)fflush(stderr);
	if ((pid = fork()) < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return zerr_set(err, ZERR_INTERNAL, "janitor: fork: %s",
		    strerror(e));
	}
	if (pid == 0) {
		close(p[1]);
		janitor_main(p[0]);
	}
	close(p[0]);
	janitor.pid = pid;
	janitor.wfd = p[1];
	/* no sweep can run before this: no device thread exists yet */
	if (reaper_spare(pid) != 0) {
		janitor_stop();
		return zerr_set(err, ZERR_INTERNAL, "janitor: the reaper "
		    "spares %d children at most", REAPER_MAX_SPARED);
	}
	zlog(ZLOG_DEBUG, "janitor", "pid=%d", (int)pid);
	return 0;
}

pid_t
janitor_pid(void)
{
	return janitor.pid;
}

void
janitor_stop(void)
{
	uint64_t until = zclock_now_ms() + JANITOR_STOP_MS;
	int wstatus = 0;
	pid_t r;

	if (janitor.pid <= 0)
		return;
	close(janitor.wfd);		/* its end of file */
	janitor.wfd = -1;
	for (;;) {
		r = waitpid(janitor.pid, &wstatus, WNOHANG);
		if (r == janitor.pid || (r < 0 && errno != EINTR))
			break;
		if (r == 0 && zclock_now_ms() >= until) {
			zlog(ZLOG_WARN, "janitor_killed", "pid=%d msg=\"did "
			    "not exit within %d ms of the end of file\"",
			    (int)janitor.pid, JANITOR_STOP_MS);
			(void)kill(janitor.pid, SIGKILL);
			do
				r = waitpid(janitor.pid, &wstatus, 0);
			while (r < 0 && errno == EINTR);
			wstatus = 0;	/* reported already */
			break;
		}
		if (r == 0)
			zclock_sleep_ms(JANITOR_TICK_MS);
	}
	if (r < 0)
		zlog(ZLOG_WARN, "janitor_not_reaped", "pid=%d error=\"%s\"",
		    (int)janitor.pid, strerror(errno));
	else if (WIFSIGNALED(wstatus))
		zlog(ZLOG_WARN, "janitor_died", "pid=%d signal=%d msg=\"it "
		    "ended before the device process; the socket file would "
		    "have stayed had the device process been killed\"",
		    (int)janitor.pid, WTERMSIG(wstatus));
	else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)
		zlog(ZLOG_WARN, "janitor_died", "pid=%d exit=%d",
		    (int)janitor.pid, WEXITSTATUS(wstatus));
	reaper_unspare(janitor.pid);
	janitor.pid = 0;
}
