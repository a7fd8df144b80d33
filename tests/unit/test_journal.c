/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_journal.c - the lease journal's format and files (access/journal.h):
 * a record survives format and parse; every truncation and every changed
 * byte of a file is refused; files of another boot, of another mode or
 * owner, links and leftovers of a cut-short save are handled as the
 * header says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "access/journal.h"

static const char boot[] = "6f0c4a2e-1b7d-4c3e-9a8f-0123456789ab";

static struct journal_rec
sample(void)
{
	struct journal_rec r;

	memset(&r, 0, sizeof(r));
	r.gpu = 7;
	r.uid = 1000;
	snprintf(r.cgroup, sizeof(r.cgroup), "%s",
	    "/system.slice/slurmstepd.scope/job_17/step_0 x\x7f");
	r.has_start = true;
	r.started_ms = 1796383683395ull;
	r.has_energy = true;
	r.energy_mj = UINT64_MAX - 1;
	r.has_limit = true;
	r.limit_mw = 300000;
	r.has_persist = true;
	r.persist = false;
	r.mem_clocks = true;
	r.npid = 2;
	r.pid[0] = 4242;
	r.start[0] = 123456;
	r.pid[1] = 4243;
	r.start[1] = UINT64_MAX;
	return r;
}

static void
test_round_trip(void **state)
{
	struct journal_rec r = sample(), back;
	char buf[JOURNAL_MAX_BYTES], b[JOURNAL_BOOT_LEN + 1], why[128];
	int n = journal_format(&r, boot, buf, sizeof(buf));

	(void)state;
	assert_true(n > 0);
	assert_int_equal(journal_parse(buf, (size_t)n, &back, b, why,
	    sizeof(why)), JOURNAL_OK);
	assert_memory_equal(&r, &back, sizeof(r));
	assert_string_equal(b, boot);
	/* too small a buffer: no partial file */
	assert_int_equal(journal_format(&r, boot, buf, 40), -1);
}

/* Every prefix and every single changed byte is refused. */
static void
test_every_damage_refused(void **state)
{
	struct journal_rec r = sample(), back;
	char buf[JOURNAL_MAX_BYTES], b[JOURNAL_BOOT_LEN + 1], why[128];
	int n = journal_format(&r, boot, buf, sizeof(buf));

	(void)state;
	for (int k = 0; k < n; k++) {
		assert_int_equal(journal_parse(buf, (size_t)k, &back, b, why,
		    sizeof(why)), JOURNAL_GARBLED);
		assert_true(why[0] != '\0');
	}
	for (int k = 0; k < n; k++) {
		char save = buf[k];

		buf[k] = (char)(buf[k] ^ 0x01);
		assert_int_equal(journal_parse(buf, (size_t)n, &back, b, why,
		    sizeof(why)), JOURNAL_GARBLED);
		buf[k] = save;
	}
	/* bytes after the sum */
	buf[n] = 'x';
	assert_int_equal(journal_parse(buf, (size_t)n + 1, &back, b, why,
	    sizeof(why)), JOURNAL_GARBLED);
}

/* A well-summed file with a bad field is still refused. */
static void
refused_with_sum(const char *body)
{
	char buf[JOURNAL_MAX_BYTES], b[JOURNAL_BOOT_LEN + 1], why[128];
	struct journal_rec back;
	FILE *p;
	char cmd[1024], sum[80];
	int n;

	/* the sum by sha256sum, independently of the code under test */
	snprintf(cmd, sizeof(cmd), "printf '%%s' '%s' | sha256sum", body);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(sum, sizeof(sum), p));
	pclose(p);
	sum[64] = '\0';
	n = snprintf(buf, sizeof(buf), "%ssum %s\n", body, sum);
	assert_int_equal(journal_parse(buf, (size_t)n, &back, b, why,
	    sizeof(why)), JOURNAL_GARBLED);
}

static void
test_fields_checked(void **state)
{
	char good[512];
	struct journal_rec back;
	char buf[JOURNAL_MAX_BYTES], b[JOURNAL_BOOT_LEN + 1], why[128];
	FILE *p;
	char sum[80];
	int n;

	(void)state;
	/* the independent sum agrees on a good body */
	snprintf(good, sizeof(good), "zeusd-lease 1\nboot %s\ngpu 1\nuid 5\n"
	    "limit_mw 100\n", boot);
	snprintf(buf, sizeof(buf), "printf '%%s' '%s' | sha256sum", good);
	p = popen(buf, "r");
	assert_non_null(p);
	assert_non_null(fgets(sum, sizeof(sum), p));
	pclose(p);
	sum[64] = '\0';
	n = snprintf(buf, sizeof(buf), "%ssum %s\n", good, sum);
	assert_int_equal(journal_parse(buf, (size_t)n, &back, b, why,
	    sizeof(why)), JOURNAL_OK);
	assert_int_equal(back.limit_mw, 100);

	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 64\nuid 5\nlimit_mw 1\n");	/* gpu range */
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 01\nuid 5\nlimit_mw 1\n");	/* leading 0 */
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\nlimit_mw 4294967296\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\n");		/* changed nothing */
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\nuid 5\ngpu 1\nlimit_mw 1\n");	/* order */
	refused_with_sum("zeusd-lease 1\nboot 6F0C4A2E-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\nlimit_mw 1\n");	/* boot */
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\nlimit_mw 1\npid 0 5\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\npersistence 2\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\nlimit_mw 1\nlimit_mw 2\n");
	/* the cgroup: hex, lowercase, whole bytes, no NUL, in its place */
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\ncgroup 2f6\nlimit_mw 1\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\ncgroup 2F61\nlimit_mw 1\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\ncgroup 2f00\nlimit_mw 1\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\ncgroup 2fzz\nlimit_mw 1\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\nuid 5\ncgroup \nlimit_mw 1\n");
	refused_with_sum("zeusd-lease 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpu 1\ncgroup 2f\nuid 5\nlimit_mw 1\n");
	{
		/* one byte past the longest path */
		char body[1200];
		int k = snprintf(body, sizeof(body), "zeusd-lease 1\nboot "
		    "6f0c4a2e-1b7d-4c3e-9a8f-0123456789ab\ngpu 1\nuid 5\n"
		    "cgroup ");

		for (int i = 0; i < JOURNAL_CGROUP_MAX; i++)
			k += snprintf(body + k, sizeof(body) - (size_t)k, "61");
		snprintf(body + k, sizeof(body) - (size_t)k, "\nlimit_mw 1\n");
		refused_with_sum(body);
	}
}

static char dir[64];

static int
setup_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/zeus-journal-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_files(void **state)
{
	struct journal_rec r = sample(), back;
	struct zerr err;
	enum journal_bad bad;
	char why[160], path[128], other[] = "00000000-0000-4000-8000-"
	    "000000000000";
	int fd;

	(void)state;
	chmod(dir, 0700);
	fd = journal_open_dir(dir, &err);
	assert_true(fd >= 0);
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), 1);
	assert_int_equal(journal_save(fd, &r, boot, &err), 0);
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), 0);
	assert_memory_equal(&r, &back, sizeof(r));
	/* the file is private; a leftover .tmp is cleared on load */
	snprintf(path, sizeof(path), "%s/gpu-7.lease.tmp", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(access(path, F_OK), -1);
	/* another boot */
	assert_int_equal(journal_load(fd, 7, other, &back, &bad, why,
	    sizeof(why)), -1);
	assert_int_equal(bad, JOURNAL_OTHER_BOOT);
	/* named under another GPU's name */
	snprintf(path, sizeof(path), "%s/gpu-7.lease", dir);
	{
		char to[128];

		snprintf(to, sizeof(to), "%s/gpu-3.lease", dir);
		assert_int_equal(link(path, to), 0);
		/* two links: not trusted */
		assert_int_equal(journal_load(fd, 3, boot, &back, &bad, why,
		    sizeof(why)), -1);
		assert_int_equal(bad, JOURNAL_UNSAFE);
		unlink(to);
		assert_int_equal(rename(path, to), 0);
		assert_int_equal(journal_load(fd, 3, boot, &back, &bad, why,
		    sizeof(why)), -1);
		assert_int_equal(bad, JOURNAL_GARBLED);
		assert_int_equal(rename(to, path), 0);
	}
	/* readable by others */
	chmod(path, 0644);
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), -1);
	assert_int_equal(bad, JOURNAL_UNSAFE);
	chmod(path, 0600);
	/* a link is not followed */
	{
		char ln[128];

		snprintf(ln, sizeof(ln), "%s/gpu-5.lease", dir);
		assert_int_equal(symlink(path, ln), 0);
		assert_int_equal(journal_load(fd, 5, boot, &back, &bad, why,
		    sizeof(why)), -1);
		assert_int_equal(bad, JOURNAL_UNSAFE);
	}
	/* set aside, then gone for the reader */
	assert_int_equal(journal_set_aside(fd, 7), 0);
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), 1);
	assert_int_equal(journal_save(fd, &r, boot, &err), 0);
	assert_int_equal(journal_remove(fd, 7, &err), 0);
	assert_int_equal(journal_remove(fd, 7, &err), 0);	/* none: fine */
	assert_int_equal(journal_load(fd, 7, boot, &back, &bad, why,
	    sizeof(why)), 1);
	close(fd);
	/* a directory writable by others is refused */
	chmod(dir, 0777);
	assert_int_equal(journal_open_dir(dir, &err), -1);
	assert_non_null(strstr(err.msg, "writable by nobody else"));
	chmod(dir, 0700);
}

static void
test_boot_id(void **state)
{
	char b[JOURNAL_BOOT_LEN + 1];
	struct zerr err;

	(void)state;
	assert_int_equal(journal_boot_id(b, &err), 0);
	assert_int_equal(strlen(b), JOURNAL_BOOT_LEN);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_damage_refused),
		cmocka_unit_test(test_fields_checked),
		cmocka_unit_test_setup_teardown(test_files, setup_dir,
		    teardown_dir),
		cmocka_unit_test(test_boot_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
