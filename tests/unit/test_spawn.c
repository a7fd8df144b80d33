/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_spawn.c - running external commands: real processes from the helper
 * scripts in tests/integration/helpers (exit codes, signals, timeouts that
 * kill the whole process group, grandchildren holding the pipes, floods,
 * the fixed environment, concurrency), and the reaper (reaper.h): the
 * /proc parser, the sweep of escaped descendants (this test process
 * becomes a subreaper), the registry that keeps the sweep off running
 * commands, and shutdown. Shutdown is one-way, so its test runs last.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "overrides/reaper.h"
#include "overrides/spawn.h"

static char helpers[PATH_MAX];
static char tmpdir[PATH_MAX];

/*
 * The helper scripts live in the source tree: $ZEUS_TEST_HELPERS, or found
 * from this file's path (relative to the build directory meson compiles
 * and runs tests in).
 */
static int
setup(void **state)
{
	const char *env = getenv("ZEUS_TEST_HELPERS");
	char buf[PATH_MAX], *slash;

	(void)state;
	if (env != NULL) {
		snprintf(helpers, sizeof(helpers), "%s", env);
	} else {
		snprintf(buf, sizeof(buf), "%s", __FILE__);
		slash = strrchr(buf, '/');
		if (slash != NULL)
			*slash = '\0';
		snprintf(helpers, sizeof(helpers), "%.3000s/../integration/helpers",
		    slash != NULL ? buf : ".");
	}
	if (realpath(helpers, buf) == NULL) {
		fprintf(stderr, "helpers not found at %s (set "
		    "ZEUS_TEST_HELPERS)\n", helpers);
		return -1;
	}
	snprintf(helpers, sizeof(helpers), "%s", buf);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/zeus-spawn-XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *
helper(const char *name)
{
	static _Thread_local char path[8][PATH_MAX];
	static _Thread_local int next;
	char *p = path[next++ % 8];

	snprintf(p, PATH_MAX, "%.3000s/%.64s", helpers, name);
	return p;
}

static void
run_ok(char **argv, unsigned timeout_ms, struct spawn_result *res)
{
	struct zerr err = { 0 };

	if (spawn_run(argv, timeout_ms, res, &err) != 0)
		fail_msg("spawn_run: %s", err.msg);
}

static void
test_exit_code_and_output(void **state)
{
	char *argv[] = { helper("exit-with"), "3", "to stdout", "to stderr",
	    NULL };
	struct spawn_result r;
	char d[128];

	(void)state;
	run_ok(argv, 5000, &r);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_int_equal(r.code, 3);
	assert_string_equal(r.out.data, "to stdout\n");
	assert_string_equal(r.err.data, "to stderr\n");
	assert_false(r.out.truncated);
	assert_false(r.killed_leftovers);
	assert_string_equal(spawn_describe(&r, 5000, d, sizeof(d)),
	    "exit code 3");
	spawn_result_free(&r);
}

static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void
test_environment_and_isolation(void **state)
{
	char *argv[] = { helper("print-env"), NULL };
	struct spawn_result r;
	int fd = open("/dev/null", O_RDONLY);	/* no O_CLOEXEC on purpose */
	long pid, pgrp, sid;
	const char *ids;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, 50), 50);
	setenv("ZEUS_SHOULD_NOT_LEAK", "1", 1);
	run_ok(argv, 5000, &r);
	close(50);
	close(fd);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_int_equal(r.code, 0);
	assert_true(has_line(r.out.data, "PATH=" SPAWN_PATH));
	assert_true(has_line(r.out.data, "LANG=C"));
	assert_true(has_line(r.out.data, "cwd: /"));
	assert_null(strstr(r.out.data, "ZEUS_SHOULD_NOT_LEAK"));
	assert_null(strstr(r.out.data, "HOME="));
	assert_null(strstr(r.out.data, " 50 "));
	assert_non_null(strstr(r.out.data, "stdin: /dev/null\n"));
	ids = strstr(r.out.data, "ids: ");
	assert_non_null(ids);
	assert_int_equal(sscanf(ids, "ids: %ld %ld %ld", &pid, &pgrp, &sid),
	    3);
	assert_int_equal(pid, pgrp);	/* its own process group ... */
	assert_int_equal(pid, sid);	/* ... and session: no TTY */
	spawn_result_free(&r);
}

static void
test_path_lookup_uses_fixed_path(void **state)
{
	char *argv[] = { "sh", "-c", "echo hi; echo $PATH", NULL };
	struct spawn_result r;
	char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;

	(void)state;
	setenv("PATH", "/nonexistent", 1);	/* ours must not matter */
	run_ok(argv, 5000, &r);
	if (old != NULL)
		setenv("PATH", old, 1);
	free(old);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_string_equal(r.out.data, "hi\n" SPAWN_PATH "\n");
	spawn_result_free(&r);
	argv[0] = "bin/sh";		/* relative to "/", the command's cwd */
	run_ok(argv, 5000, &r);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_string_equal(r.out.data, "hi\n" SPAWN_PATH "\n");
	spawn_result_free(&r);
}

static void
test_exec_failures(void **state)
{
	char noexec[PATH_MAX];
	char *argv1[] = { "/nonexistent/program", NULL };
	char *argv2[] = { "zeus-no-such-program", "x", NULL };
	char *argv3[] = { noexec, NULL };
	char *argv4[] = { "", NULL };
	struct spawn_result r;
	char d[128];
	FILE *f;

	(void)state;
	run_ok(argv1, 1000, &r);
	assert_int_equal(r.status, SPAWN_EXEC_FAILED);
	assert_int_equal(r.code, ENOENT);
	assert_string_equal(spawn_describe(&r, 1000, d, sizeof(d)),
	    "could not be executed: No such file or directory");
	spawn_result_free(&r);
	run_ok(argv2, 1000, &r);
	assert_int_equal(r.status, SPAWN_EXEC_FAILED);
	assert_int_equal(r.code, ENOENT);
	spawn_result_free(&r);
	run_ok(argv4, 1000, &r);
	assert_int_equal(r.status, SPAWN_EXEC_FAILED);
	spawn_result_free(&r);

	snprintf(noexec, sizeof(noexec), "%.3000s/noexec", tmpdir);
	f = fopen(noexec, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\necho no\n", f);
	fclose(f);
	chmod(noexec, 0644);
	run_ok(argv3, 1000, &r);
	assert_int_equal(r.status, SPAWN_EXEC_FAILED);
	assert_int_equal(r.code, EACCES);
	spawn_result_free(&r);
}

static void
test_killed_by_signal(void **state)
{
	char *argv[] = { "sh", "-c", "echo before; kill -TERM $$", NULL };
	struct spawn_result r;
	char d[128];

	(void)state;
	run_ok(argv, 5000, &r);
	assert_int_equal(r.status, SPAWN_SIGNALED);
	assert_int_equal(r.code, SIGTERM);
	assert_string_equal(r.out.data, "before\n");
	assert_string_equal(spawn_describe(&r, 5000, d, sizeof(d)),
	    "killed by signal 15 (SIGTERM)");
	spawn_result_free(&r);
}

static void
test_timeout(void **state)
{
	char *argv[] = { helper("sleep-for"), "30", NULL };
	struct spawn_result r;
	char d[128];

	(void)state;
	run_ok(argv, 300, &r);
	assert_int_equal(r.status, SPAWN_TIMED_OUT);
	assert_int_equal(r.code, SIGKILL);
	assert_true(r.duration_ms >= 300 && r.duration_ms < 3000);
	assert_string_equal(r.out.data, "sleeping\n");
	assert_string_equal(spawn_describe(&r, 300, d, sizeof(d)),
	    "timed out after 300 ms");
	assert_string_equal(spawn_describe(&r, 5000, d, sizeof(d)),
	    "timed out after 5 s");
	spawn_result_free(&r);
}

static void
test_timeout_after_closing_pipes(void **state)
{
	char *argv[] = { "sh", "-c", "exec >&- 2>&-; sleep 30", NULL };
	struct spawn_result r;

	(void)state;
	run_ok(argv, 300, &r);
	assert_int_equal(r.status, SPAWN_TIMED_OUT);
	assert_true(r.duration_ms < 3000);
	spawn_result_free(&r);
}

static long
read_pid(const char *path)
{
	char buf[32] = { 0 };
	FILE *f = fopen(path, "r");
	long pid;

	if (f == NULL)
		fail_msg("no pid file %s", path);
	if (fgets(buf, sizeof(buf), f) == NULL || sscanf(buf, "%ld", &pid) != 1)
		fail_msg("bad pid file %s", path);
	fclose(f);
	return pid;
}

/* Gone, or a zombie nobody has reaped yet (PID 1 of a container may not). */
static int
process_gone(long pid)
{
	char path[64], buf[512], *p;
	FILE *f;

	for (int i = 0; i < 100; i++) {
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			return 1;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "r");
		if (f != NULL) {
			p = fgets(buf, sizeof(buf), f);
			fclose(f);
			if (p != NULL && (p = strrchr(buf, ')')) != NULL &&
			    (p[2] == 'Z' || p[2] == 'X'))
				return 1;
		}
		usleep(10000);
	}
	return 0;
}

static void
test_grandchild_holding_pipes_after_exit(void **state)
{
	char pidfile[PATH_MAX];
	char *argv[] = { helper("hold-pipes"), pidfile, "30", NULL };
	struct spawn_result r;

	(void)state;
	snprintf(pidfile, sizeof(pidfile), "%.3000s/gc1.pid", tmpdir);
	run_ok(argv, 20000, &r);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_int_equal(r.code, 0);
	assert_true(r.killed_leftovers);
	assert_true(r.duration_ms < 3000);
	assert_string_equal(r.out.data, "parent-done\n");
	assert_true(process_gone(read_pid(pidfile)));
	spawn_result_free(&r);
}

static void
test_timeout_kills_grandchild(void **state)
{
	char pidfile[PATH_MAX];
	char *argv[] = { helper("hold-pipes"), pidfile, "30", "30", NULL };
	struct spawn_result r;

	(void)state;
	snprintf(pidfile, sizeof(pidfile), "%.3000s/gc2.pid", tmpdir);
	run_ok(argv, 500, &r);
	assert_int_equal(r.status, SPAWN_TIMED_OUT);
	assert_true(r.duration_ms < 3000);
	assert_true(process_gone(read_pid(pidfile)));
	spawn_result_free(&r);
}

static void
test_flood_is_bounded(void **state)
{
	char *argv[] = { helper("flood"), "12", NULL };
	struct spawn_result r;

	(void)state;
	run_ok(argv, 60000, &r);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_int_equal(r.code, 0);
	assert_int_equal(r.out.len, SPAWN_CAPTURE_MAX);
	assert_int_equal(r.err.len, SPAWN_CAPTURE_MAX);
	assert_true(r.out.total == 12u * 1024 * 1024);
	assert_true(r.err.total == 12u * 1024 * 1024);
	assert_true(r.out.truncated);
	assert_true(r.err.truncated);
	spawn_result_free(&r);
}

static void *
worker(void *arg)
{
	long id = (long)(intptr_t)arg;
	char code[8], text[32];
	char *argv[] = { helper("exit-with"), code, text, text, NULL };
	struct spawn_result r;
	struct zerr err;
	int bad = 0;

	for (int i = 0; i < 10; i++) {
		snprintf(code, sizeof(code), "%ld", id);
		snprintf(text, sizeof(text), "worker %ld run %d", id, i);
		if (spawn_run(argv, 10000, &r, &err) != 0)
			bad++;
		else if (r.status != SPAWN_EXITED || r.code != id ||
		    strncmp(r.out.data, text, strlen(text)) != 0 ||
		    strncmp(r.err.data, text, strlen(text)) != 0)
			bad++;
		spawn_result_free(&r);
	}
	return (void *)(intptr_t)bad;
}

static void
test_concurrent_runs(void **state)
{
	pthread_t t[8];

	(void)state;
	for (long i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker,
		    (void *)(intptr_t)i), 0);
	for (int i = 0; i < 8; i++) {
		void *bad;

		assert_int_equal(pthread_join(t[i], &bad), 0);
		assert_int_equal((intptr_t)bad, 0);
	}
}

/* --- the reaper ------------------------------------------------------- */

static uint64_t
ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
test_parse_stat(void **state)
{
	struct reaper_stat st;
	const char *ok = "4242 (sleep) S 17 4242 4242 0 -1 4194560 97 0 0\n";
	const char *odd = "7 (a) b (c)) Z 1 0 7 0";
	const char *bad[] = { "", "x (a) S 1 1", "0 (a) S 1 1", "12 a S 1 1",
	    "12 (a S 1 1", "12 (a) S", "12 (a) S x 1", "12 (a) S 1",
	    "12 (a)S 1 1", "99999999999 (a) S 1 1",
	    "12 (a) S 1 1x", "12 (a) S -1 1" };
	char longname[] = "5 (0123456789abcdef0123456789abcdefXYZ) R 9 5 5";

	(void)state;
	assert_int_equal(reaper_parse_stat(ok, strlen(ok), &st), 0);
	assert_int_equal(st.pid, 4242);
	assert_int_equal(st.ppid, 17);
	assert_int_equal(st.pgrp, 4242);
	assert_int_equal(st.state, 'S');
	assert_string_equal(st.comm, "sleep");
	/* a process may name itself "a) b (c)": comm ends at the last ')' */
	assert_int_equal(reaper_parse_stat(odd, strlen(odd), &st), 0);
	assert_string_equal(st.comm, "a) b (c)");
	assert_int_equal(st.state, 'Z');
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.pgrp, 0);
	assert_int_equal(reaper_parse_stat(longname, strlen(longname), &st),
	    0);
	assert_int_equal(strlen(st.comm), sizeof(st.comm) - 1);
	assert_int_equal(st.ppid, 9);
	/* PR_SET_NAME may make it empty */
	assert_int_equal(reaper_parse_stat("12 () S 1 1", 11, &st), 0);
	assert_string_equal(st.comm, "");
	/* only len bytes count: the same line cut short is refused */
	assert_int_equal(reaper_parse_stat(ok, 14, &st), -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (reaper_parse_stat(bad[i], strlen(bad[i]), &st) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

/* A child that sleeps 30 s, optionally ignoring SIGTERM. */
static pid_t
fork_sleeper(bool ignore_term)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (ignore_term)
			signal(SIGTERM, SIG_IGN);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * An escapee: a grandchild that calls setsid() and whose parent exits at
 * once, so it is reparented to us (a subreaper by then) or to init.
 */
static pid_t
fork_escapee(void)
{
	int p[2], st;
	pid_t mid, gc = -1;

	assert_int_equal(pipe(p), 0);
	mid = fork();
	assert_true(mid >= 0);
	if (mid == 0) {
		pid_t g = fork();

		if (g == 0) {
			close(p[0]);
			close(p[1]);
			setsid();
			execl("/bin/sleep", "sleep", "30", (char *)NULL);
			_exit(127);
		}
		_exit(write(p[1], &g, sizeof(g)) == sizeof(g) ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &gc, sizeof(gc)), sizeof(gc));
	close(p[0]);
	assert_int_equal(waitpid(mid, &st, 0), mid);
	return gc;
}

static bool
is_our_child(pid_t pid)
{
	char path[64], buf[512];
	struct reaper_stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && reaper_parse_stat(buf, (size_t)n, &st) == 0 &&
	    st.ppid == getpid();
}

static void
test_sweep_needs_enable(void **state)
{
	pid_t pid = fork_sleeper(false);
	int st;

	(void)state;
	/* A program that only runs commands never has its children
	 * killed: sweeping is off until reaper_enable. */
	assert_false(reaper_enabled());
	assert_int_equal(reaper_sweep(100), 0);
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void
test_enable(void **state)
{
	struct zerr err;

	(void)state;
	if (reaper_enable(&err) != 0)
		fail_msg("%s", err.msg);
	assert_true(reaper_enabled());
	assert_int_equal(reaper_sweep(100), 0);	/* nothing to do */
}

static void
test_sweep_kills_escapees_spares_registered(void **state)
{
	struct reaper_entry e;
	pid_t reg, direct, esc;
	int st;

	(void)state;
	assert_int_equal(reaper_spawn_begin(), 0);
	reg = fork_sleeper(false);
	reaper_spawn_end(&e, reg);
	direct = fork_sleeper(false);	/* ours, unregistered */
	esc = fork_escapee();
	for (int i = 0; i < 500 && !is_our_child(esc); i++)
		usleep(10000);
	assert_true(is_our_child(esc));	/* reparented: we are a subreaper */
	assert_int_equal(reaper_sweep(2000), 2);
	/* both reaped by the sweep, never left as zombies */
	assert_int_equal(waitpid(direct, &st, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	assert_int_equal(kill(esc, 0), -1);
	assert_int_equal(errno, ESRCH);
	/* the registered one untouched, its status ours to collect */
	assert_int_equal(waitpid(reg, &st, WNOHANG), 0);
	kill(reg, SIGUSR1);
	reaper_reaping(&e);
	assert_int_equal(waitpid(reg, &st, 0), reg);
	reaper_remove(&e);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGUSR1);
}

/* Waits until pid runs `comm` (it has exec'd, so set up its signals). */
static void
wait_exec(pid_t pid, const char *comm)
{
	char path[64], buf[512];
	struct reaper_stat st;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 1000; i++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

		if (fd >= 0)
			close(fd);
		if (n > 0 && reaper_parse_stat(buf, (size_t)n, &st) == 0 &&
		    strcmp(st.comm, comm) == 0)
			return;
		usleep(10000);
	}
	fail_msg("%d never ran %s", (int)pid, comm);
}

static void
test_sweep_escalates_to_kill(void **state)
{
	pid_t pid = fork_sleeper(true);
	uint64_t t0;
	int st;

	(void)state;
	wait_exec(pid, "sleep");	/* ignoring TERM by then */
	t0 = ms_now();
	assert_int_equal(reaper_sweep(300), 1);
	assert_true(ms_now() - t0 >= 300);
	assert_true(ms_now() - t0 < 5000);
	assert_int_equal(waitpid(pid, &st, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void
test_command_escapees_killed(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	char *argv[] = { helper("escape"), dir, "300", NULL };
	const char *names[] = { "escapee", "orphan" };
	struct spawn_result r;

	(void)state;
	snprintf(dir, sizeof(dir), "%.3000s/esc1", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	run_ok(argv, 20000, &r);
	assert_int_equal(r.status, SPAWN_EXITED);
	assert_int_equal(r.code, 0);
	assert_false(r.killed_leftovers);	/* they hold no pipe */
	spawn_result_free(&r);
	/* swept before spawn_run returned: gone, and reaped */
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s.pid", dir, names[i]);
		assert_int_equal(kill((pid_t)read_pid(path), 0), -1);
		assert_int_equal(errno, ESRCH);
	}
}

/* Leaves an escapee behind (setsid, stdio closed), 5 times. */
static void *
escaper(void *arg)
{
	char *argv[] = { "sh", "-c", "setsid sleep 30 </dev/null >/dev/null "
	    "2>&1 & echo started", NULL };
	struct spawn_result r;
	struct zerr err;
	int bad = 0;

	(void)arg;
	for (int i = 0; i < 5; i++) {
		if (spawn_run(argv, 20000, &r, &err) != 0)
			bad++;
		else if (r.status != SPAWN_EXITED || r.code != 0 ||
		    strcmp(r.out.data, "started\n") != 0)
			bad++;
		spawn_result_free(&r);
	}
	return (void *)(intptr_t)bad;
}

/*
 * Commands that leave escapees (so sweeps run all the time) next to
 * commands whose exit codes are checked: a sweep that took a running
 * command, or a just-spawned one, for an escapee would break them.
 */
static void
test_sweeps_during_concurrent_runs(void **state)
{
	pthread_t t[6];

	(void)state;
	for (long i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL,
		    i < 2 ? escaper : worker, (void *)(intptr_t)(i + 1)), 0);
	for (int i = 0; i < 6; i++) {
		void *bad;

		assert_int_equal(pthread_join(t[i], &bad), 0);
		assert_int_equal((intptr_t)bad, 0);
	}
	assert_int_equal(reaper_sweep(100), 0);	/* nothing left over */
}

struct bg_run {
	pthread_t thread;
	char *argv[4];
	char pidfile[PATH_MAX];
	struct spawn_result res;
	int rc;
};

static void *
bg_main(void *arg)
{
	struct bg_run *b = arg;
	struct zerr err;

	b->rc = spawn_run(b->argv, 60000, &b->res, &err);
	return NULL;
}

static void
bg_start(struct bg_run *b, const char *prog, const char *name)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->pidfile, sizeof(b->pidfile), "%.3000s/%s", tmpdir, name);
	b->argv[0] = helper(prog);
	b->argv[1] = b->pidfile;
	b->argv[2] = "30";
	assert_int_equal(pthread_create(&b->thread, NULL, bg_main, b), 0);
}

static void
wait_file(const char *path)
{
	char buf[64];

	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");

		if (f != NULL) {
			bool done = fgets(buf, sizeof(buf), f) != NULL &&
			    strchr(buf, '\n') != NULL;

			fclose(f);
			if (done)
				return;
		}
		usleep(10000);
	}
	fail_msg("no %s", path);
}

/* Last: after reaper_shutdown nothing may start any more. */
static void
test_shutdown(void **state)
{
	struct bg_run a, b;
	char *argv[] = { helper("exit-with"), "0", NULL };
	struct spawn_result r;
	char d[128];
	uint64_t t0, took;

	(void)state;
	bg_start(&a, "pid-sleep", "sd-a.pid");
	bg_start(&b, "ignore-term", "sd-b.pid");
	wait_file(a.pidfile);
	wait_file(b.pidfile);
	t0 = ms_now();
	assert_int_equal(reaper_shutdown(500), 0);
	took = ms_now() - t0;
	assert_int_equal(pthread_join(a.thread, NULL), 0);
	assert_int_equal(pthread_join(b.thread, NULL), 0);
	assert_true(took >= 500 && took < 5000);	/* b needed SIGKILL */
	assert_int_equal(a.rc, 0);
	assert_int_equal(a.res.status, SPAWN_SIGNALED);
	assert_int_equal(a.res.code, SIGTERM);
	assert_int_equal(b.rc, 0);
	assert_int_equal(b.res.status, SPAWN_SIGNALED);
	assert_int_equal(b.res.code, SIGKILL);
	spawn_result_free(&a.res);
	spawn_result_free(&b.res);
	run_ok(argv, 1000, &r);
	assert_int_equal(r.status, SPAWN_EXEC_FAILED);
	assert_int_equal(r.code, ECANCELED);
	assert_string_equal(spawn_describe(&r, 1000, d, sizeof(d)),
	    "not run: the daemon is shutting down");
	spawn_result_free(&r);
	assert_int_equal(reaper_sweep(100), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_stat),
		cmocka_unit_test(test_sweep_needs_enable),
		cmocka_unit_test(test_exit_code_and_output),
		cmocka_unit_test(test_environment_and_isolation),
		cmocka_unit_test(test_path_lookup_uses_fixed_path),
		cmocka_unit_test(test_exec_failures),
		cmocka_unit_test(test_killed_by_signal),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_timeout_after_closing_pipes),
		cmocka_unit_test(test_grandchild_holding_pipes_after_exit),
		cmocka_unit_test(test_timeout_kills_grandchild),
		cmocka_unit_test(test_flood_is_bounded),
		cmocka_unit_test(test_concurrent_runs),
		cmocka_unit_test(test_enable),
		cmocka_unit_test(test_grandchild_holding_pipes_after_exit),
		cmocka_unit_test(test_timeout_kills_grandchild),
		cmocka_unit_test(test_sweep_kills_escapees_spares_registered),
		cmocka_unit_test(test_sweep_escalates_to_kill),
		cmocka_unit_test(test_command_escapees_killed),
		cmocka_unit_test(test_concurrent_runs),
		cmocka_unit_test(test_sweeps_during_concurrent_runs),
		cmocka_unit_test(test_shutdown),	/* last: one-way */
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
