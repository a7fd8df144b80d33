/*
 * test_spawn.c - running external commands: real processes from the helper
 * scripts in tests/integration/helpers (exit codes, signals, timeouts that
 * kill the whole process group, grandchildren holding the pipes, floods,
 * the fixed environment, concurrency).
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
#include <unistd.h>

#include "devices/spawn.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
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
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
