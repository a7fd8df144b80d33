/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pathwalk.c - walking a path as written (common/pathwalk.h): which
 * directories and links are seen, and pathwalk_trusted's rule for the
 * files zeusd reads as root. The ownership cases need root (they lchown
 * to nobody); as another user they are skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pathwalk.h"

#define NOBODY 65534

static char top[64];

static int
setup(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/zeus-pathwalk.XXXXXX");
	if (mkdtemp(top) == NULL || chmod(top, 0755) != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

/* top/rel, made with mode (a directory) */
static const char *
mkdir_in(const char *rel, mode_t mode)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

/* top/rel; two calls may share one statement (their buffers alternate) */
static const char *
at(const char *rel)
{
	static char path[2][PATH_MAX];
	static unsigned next;
	char *p = path[next++ % 2];

	snprintf(p, PATH_MAX, "%s/%s", top, rel);
	return p;
}

static void
touch(const char *rel)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	close(fd);
}

/* ---- what the walk visits ------------------------------------------------- */

struct seen {
	char log[4096];
};

static int
seen_dir(void *arg, int fd, const char *shown, struct zerr *err)
{
	struct seen *s = arg;
	size_t n = strlen(s->log);

	(void)fd;
	(void)err;
	snprintf(s->log + n, sizeof(s->log) - n, "d:%s\n", shown);
	return 0;
}

static int
seen_link(void *arg, const char *shown, const struct stat *st,
    struct zerr *err)
{
	struct seen *s = arg;
	size_t n = strlen(s->log);

	(void)st;
	(void)err;
	snprintf(s->log + n, sizeof(s->log) - n, "l:%s\n", shown);
	return 0;
}

static const struct pathwalk_ops seen_ops = { seen_dir, seen_link };

static void
test_visits_dirs_and_links(void **state)
{
	struct seen s = { "" };
	struct zerr err = { 0 };
	char want[4 * PATH_MAX], path[PATH_MAX];

	(void)state;
	mkdir_in("a", 0755);
	mkdir_in("a/b", 0755);
	touch("a/b/file");
	/* a relative link in top, to a/b */
	assert_int_equal(symlink("a/b", at("ln")), 0);
	snprintf(path, sizeof(path), "%s/ln//file", top);
	assert_int_equal(pathwalk(path, "--x", &seen_ops, &s, &err), 0);
	/* "/", then top's components, the link, its target walked from "/",
	 * then the link again as a directory (the kernel follows it), and
	 * the walk stops at the file */
	snprintf(want, sizeof(want), "%s", "d:/\n");
	{
		char acc[PATH_MAX] = "";
		const char *p = top + 1;

		while (*p != '\0') {
			size_t n = strcspn(p, "/");

			strncat(acc, "/", sizeof(acc) - strlen(acc) - 1);
			strncat(acc, p, n);
			snprintf(want + strlen(want), sizeof(want) - strlen(want),
			    "d:%s\n", acc);
			p += n;
			while (*p == '/')
				p++;
		}
	}
	snprintf(want + strlen(want), sizeof(want) - strlen(want),
	    "l:%s/ln\n", top);
	/* the target, a relative link: top/a/b, walked in full */
	{
		struct seen t = { "" };
		char tgt[PATH_MAX];

		snprintf(tgt, sizeof(tgt), "%s/a/b", top);
		assert_int_equal(pathwalk(tgt, "--x", &seen_ops, &t, &err), 0);
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
		    "%sd:%s/ln\n", t.log, top);
	}
	assert_string_equal(s.log, want);
}

static void
test_missing_and_loops(void **state)
{
	struct seen s = { "" };
	struct zerr err = { 0 };

	(void)state;
	/* a missing component ends the walk quietly */
	assert_int_equal(pathwalk(at("nope/deeper/file"), "--x", &seen_ops,
	    &s, &err), 0);
	/* a loop of links is cut off with an error, not followed for ever */
	assert_int_equal(symlink("loop2", at("loop1")), 0);
	assert_int_equal(symlink("loop1", at("loop2")), 0);
	assert_int_equal(pathwalk(at("loop1/x"), "--x", &seen_ops, &s, &err),
	    -1);
	assert_non_null(strstr(err.msg, "more than 16 symbolic links"));
	assert_non_null(strstr(err.msg, "--x"));
}

/* ---- pathwalk_trusted ---------------------------------------------------- */

static void
test_trusted_rule(void **state)
{
	struct zerr err = { 0 };

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: the rule only warns\n");
		skip();
	}
	/* root's directories: trusted */
	mkdir_in("etc", 0755);
	touch("etc/key");
	assert_int_equal(pathwalk_trusted(at("etc/key"), "--k", &err), 0);
	/* a sticky world-writable directory (/tmp): trusted */
	mkdir_in("sticky", 01777);
	touch("sticky/key");
	assert_int_equal(pathwalk_trusted(at("sticky/key"), "--k", &err), 0);
	/* world- or group-writable and not sticky: refused, said why */
	mkdir_in("open", 0777);
	touch("open/key");
	assert_int_equal(pathwalk_trusted(at("open/key"), "--k", &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	assert_non_null(strstr(err.msg, "world-writable"));
	assert_non_null(strstr(err.msg, "--k"));
	mkdir_in("grp", 0775);
	touch("grp/key");
	assert_int_equal(pathwalk_trusted(at("grp/key"), "--k", &err), -1);
	assert_non_null(strstr(err.msg, "group-writable"));
	/* a directory of another user's */
	mkdir_in("theirs", 0755);
	touch("theirs/key");
	assert_int_equal(chown(at("theirs"), NOBODY, NOBODY), 0);
	assert_int_equal(pathwalk_trusted(at("theirs/key"), "--k", &err), -1);
	assert_non_null(strstr(err.msg, "owned by another user"));
	/* another user's link, even in a sticky directory, to a safe file */
	assert_int_equal(symlink(at("etc/key"), at("sticky/their-link")), 0);
	assert_int_equal(lchown(at("sticky/their-link"), NOBODY, NOBODY), 0);
	assert_int_equal(pathwalk_trusted(at("sticky/their-link"), "--k",
	    &err), -1);
	assert_non_null(strstr(err.msg, "unsafe symbolic link"));
	/* root's link is followed, and its target walked: to a safe place */
	assert_int_equal(symlink(at("etc/key"), at("etc/link")), 0);
	assert_int_equal(pathwalk_trusted(at("etc/link"), "--k", &err), 0);
	/* ... or through an unsafe one */
	assert_int_equal(symlink("../open/key", at("etc/link2")), 0);
	assert_int_equal(pathwalk_trusted(at("etc/link2"), "--k", &err), -1);
	assert_non_null(strstr(err.msg, "world-writable"));
	/* a link to a directory, in the middle of the path */
	assert_int_equal(symlink("theirs", at("mid")), 0);
	assert_int_equal(pathwalk_trusted(at("mid/key"), "--k", &err), -1);
	assert_non_null(strstr(err.msg, "owned by another user"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_visits_dirs_and_links,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_and_loops, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_trusted_rule, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
