/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ledger_store.c - the energy ledger's file (access/ledger_store.h):
 * the sums as lease.c keeps them, a ledger survives format and parse (at
 * its largest too), every truncation and every changed byte of a file is
 * refused, well-summed files with a bad field are refused, and the file's
 * load: none, taken, another boot (totals kept, bases dropped), fewer
 * GPUs, not private, set aside.
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

#include "access/ledger_store.h"

static const char boot[] = "6f0c4a2e-1b7d-4c3e-9a8f-0123456789ab";
static const char other_boot[] = "00000000-0000-4000-8000-000000000000";

static struct ledger_store *
sample(void)
{
	struct ledger_store *s = malloc(sizeof(*s));

	assert_non_null(s);
	ledger_store_init(s, 3);
	ledger_store_unleased(s, 0, 1000);
	ledger_store_unleased(s, 0, 4000);		/* 3000 nobody's */
	ledger_store_add(s, 1000, "alice", 0, 5000);
	ledger_store_add(s, 1001, "b\x01 \xff", 2, UINT64_MAX - 1);
	ledger_store_add(s, 1002, "", 1, 7);
	ledger_store_add(s, 1000, "alice", 0, 1);
	ledger_store_rebase(s, 2, UINT64_MAX);
	s->gpu[2].unleased_mj = 12;
	return s;
}

static void
test_sums(void **state)
{
	struct ledger_store *s = sample();

	(void)state;
	assert_int_equal(s->nusers, 3);
	assert_int_equal(s->users[0].uid, 1000);
	assert_string_equal(s->users[0].name, "alice");
	assert_int_equal(s->users[0].mj[0], 5001);
	assert_true(s->gpu[0].based);
	assert_int_equal(s->gpu[0].last_mj, 4000);
	assert_int_equal(s->gpu[0].unleased_mj, 3000);
	assert_false(s->gpu[1].based);
	/* a counter that went back: a new base, nothing added */
	ledger_store_unleased(s, 0, 10);
	assert_int_equal(s->gpu[0].unleased_mj, 3000);
	assert_int_equal(s->gpu[0].last_mj, 10);
	ledger_store_unleased(s, 0, 110);
	assert_int_equal(s->gpu[0].unleased_mj, 3100);
	/* saturating, never wrapping */
	ledger_store_add(s, 1001, "b", 2, 5);
	assert_int_equal(s->users[1].mj[2], UINT64_MAX);
	/* out of range: ignored */
	ledger_store_add(s, 1003, "c", 3, 5);
	ledger_store_unleased(s, 3, 5);
	assert_int_equal(s->nusers, 3);
	assert_false(s->gpu[3].based);
	free(s);
}

/* Past 255 users, the rest is "(other)"'s, as in lease.c. */
static void
test_other(void **state)
{
	struct ledger_store *s = malloc(sizeof(*s));

	(void)state;
	assert_non_null(s);
	ledger_store_init(s, 1);
	for (uint32_t u = 0; u < 300; u++)
		ledger_store_add(s, 2000 + u, "x", 0, 1);
	assert_int_equal(s->nusers, LEDGER_STORE_USERS);
	assert_int_equal(s->users[254].uid, 2254);
	assert_int_equal(s->users[255].uid, LEDGER_STORE_OTHER);
	assert_string_equal(s->users[255].name, "(other)");
	assert_int_equal(s->users[255].mj[0], 300 - 255);
	ledger_store_add(s, 2000, "x", 0, 1);	/* an old one: its own */
	assert_int_equal(s->users[0].mj[0], 2);
	free(s);
}

static void
test_round_trip(void **state)
{
	struct ledger_store *s = sample(), *back = malloc(sizeof(*back));
	char buf[4096], b[JOURNAL_BOOT_LEN + 1], why[128];
	int n = ledger_store_format(s, boot, buf, sizeof(buf));

	(void)state;
	assert_non_null(back);
	assert_true(n > 0);
	assert_int_equal(ledger_store_parse(buf, (size_t)n, back, b, why,
	    sizeof(why)), JOURNAL_OK);
	assert_memory_equal(s, back, sizeof(*s));
	assert_string_equal(b, boot);
	assert_non_null(strstr(buf, "\ngpu 1 0 -\n"));
	assert_non_null(strstr(buf, "\nuser 1002 - 0 7 0\n"));
	/* too small a buffer: no partial file */
	assert_int_equal(ledger_store_format(s, boot, buf, 60), -1);
	free(s);
	free(back);
}

/* The largest ledger fits its file, and reads back. */
static void
test_largest(void **state)
{
	struct ledger_store *s = malloc(sizeof(*s)), *back = malloc(sizeof(*s));
	char *buf = malloc(LEDGER_STORE_MAX_BYTES);
	char name[LEDGER_STORE_NAME], b[JOURNAL_BOOT_LEN + 1], why[128];
	int n;

	(void)state;
	assert_non_null(s);
	assert_non_null(back);
	assert_non_null(buf);
	memset(name, 'z', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	ledger_store_init(s, LEDGER_STORE_GPUS);
	for (unsigned g = 0; g < LEDGER_STORE_GPUS; g++) {
		ledger_store_rebase(s, g, UINT64_MAX);
		s->gpu[g].unleased_mj = UINT64_MAX;
		for (uint32_t u = 0; u < LEDGER_STORE_USERS; u++)
			ledger_store_add(s, 4000000000u + u, name, g,
			    UINT64_MAX);
	}
	n = ledger_store_format(s, boot, buf, LEDGER_STORE_MAX_BYTES);
	assert_true(n > 0);
	assert_int_equal(ledger_store_parse(buf, (size_t)n, back, b, why,
	    sizeof(why)), JOURNAL_OK);
	assert_memory_equal(s, back, sizeof(*s));
	free(s);
	free(back);
	free(buf);
}

/* Every prefix and every single changed byte is refused. */
static void
test_every_damage_refused(void **state)
{
	struct ledger_store *s = sample(), *back = malloc(sizeof(*back));
	static const struct ledger_store zero;
	char buf[4096], b[JOURNAL_BOOT_LEN + 1], why[128];
	int n = ledger_store_format(s, boot, buf, sizeof(buf));

	(void)state;
	assert_non_null(back);
	for (int k = 0; k < n; k++) {
		assert_int_equal(ledger_store_parse(buf, (size_t)k, back, b,
		    why, sizeof(why)), JOURNAL_GARBLED);
		assert_true(why[0] != '\0');
		assert_true(b[0] == '\0');
		assert_memory_equal(back, &zero, sizeof(zero));
	}
	for (int k = 0; k < n; k++) {
		char save = buf[k];

		for (unsigned bit = 0; bit < 8; bit++) {
			buf[k] = (char)(save ^ (1 << bit));
			assert_int_equal(ledger_store_parse(buf, (size_t)n,
			    back, b, why, sizeof(why)), JOURNAL_GARBLED);
		}
		buf[k] = save;
	}
	buf[n] = 'x';		/* bytes after the sum */
	assert_int_equal(ledger_store_parse(buf, (size_t)n + 1, back, b, why,
	    sizeof(why)), JOURNAL_GARBLED);
	free(s);
	free(back);
}

/* A well-summed file with a bad field is still refused. */
static void
parsed_with_sum(const char *body, enum journal_bad want)
{
	char buf[8192], b[JOURNAL_BOOT_LEN + 1], why[128], cmd[8192], sum[80];
	struct ledger_store *back = malloc(sizeof(*back));
	FILE *p;
	int n;

	assert_non_null(back);
	/* the sum by sha256sum, independently of the code under test */
	snprintf(cmd, sizeof(cmd), "printf '%%s' '%s' | sha256sum", body);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(sum, sizeof(sum), p));
	pclose(p);
	sum[64] = '\0';
	n = snprintf(buf, sizeof(buf), "%ssum %s\n", body, sum);
	assert_int_equal(ledger_store_parse(buf, (size_t)n, back, b, why,
	    sizeof(why)), want);
	free(back);
}

#define HEAD "zeusd-ledger 1\nboot 6f0c4a2e-1b7d-4c3e-9a8f-0123456789ab\n"

static void
test_fields_checked(void **state)
{
	(void)state;
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 61 9\n", JOURNAL_OK);
	parsed_with_sum(HEAD "gpus 0\nuser 7 61\n", JOURNAL_OK);
	parsed_with_sum(HEAD "gpus 0\n", JOURNAL_OK);
	parsed_with_sum(HEAD "gpus 65\n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 01\ngpu 0 5 -\n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 2\ngpu 0 5 -\n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 2\ngpu 1 5 -\ngpu 0 5 -\n",
	    JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5\n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 - \n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 1 2\n", JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 18446744073709551616 -\n",
	    JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 61\n",
	    JOURNAL_GARBLED);				/* a column short */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 61 1 2\n",
	    JOURNAL_GARBLED);
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 6 1\n",
	    JOURNAL_GARBLED);				/* half a byte */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 4A 1\n",
	    JOURNAL_GARBLED);				/* uppercase */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 6100 1\n",
	    JOURNAL_GARBLED);				/* a NUL */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 61 1\nuser 7 62 1\n",
	    JOURNAL_GARBLED);				/* twice */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 4294967295 61 1\n",
	    JOURNAL_GARBLED);			/* "(other)" first */
	parsed_with_sum(HEAD "gpus 1\ngpu 0 5 -\nuser 7 61 1\ngpu 0 5 -\n",
	    JOURNAL_GARBLED);				/* out of order */
	parsed_with_sum(HEAD "gpus 1\ngpus 1\ngpu 0 5 -\n", JOURNAL_GARBLED);
	parsed_with_sum("zeusd-ledger 1\nboot 6F0C4A2E-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpus 0\n", JOURNAL_GARBLED);
	parsed_with_sum("zeusd-ledger 2\nboot 6f0c4a2e-1b7d-4c3e-9a8f-"
	    "0123456789ab\ngpus 0\n", JOURNAL_GARBLED);
	{
		/* a name one byte past the longest */
		char body[512];
		int k = snprintf(body, sizeof(body), HEAD "gpus 0\nuser 7 ");

		for (int i = 0; i < LEDGER_STORE_NAME; i++)
			k += snprintf(body + k, sizeof(body) - (size_t)k, "61");
		snprintf(body + k, sizeof(body) - (size_t)k, "\n");
		parsed_with_sum(body, JOURNAL_GARBLED);
	}
}

static char dir[64];

static int
setup_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/zeus-ledger-XXXXXX");
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
	struct ledger_store *s = sample(), *back = malloc(sizeof(*back));
	struct zerr err;
	enum journal_bad bad;
	char why[160], path[128], aside[128];
	int fd;

	(void)state;
	assert_non_null(back);
	chmod(dir, 0700);
	fd = journal_open_dir(dir, &err);
	assert_true(fd >= 0);
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), 1);
	assert_int_equal(back->ngpu, 3);
	assert_int_equal(back->nusers, 0);
	assert_int_equal(ledger_store_save(fd, s, boot, &err), 0);
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(bad, JOURNAL_OK);
	assert_memory_equal(s, back, sizeof(*s));
	snprintf(path, sizeof(path), "%s/ledger", dir);
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	/* another boot: the totals stay, the bases go */
	assert_int_equal(ledger_store_load(fd, other_boot, 3, back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(bad, JOURNAL_OTHER_BOOT);
	assert_int_equal(back->users[0].mj[0], 5001);
	assert_int_equal(back->gpu[0].unleased_mj, 3000);
	assert_false(back->gpu[0].based);
	assert_false(back->gpu[2].based);
	/* fewer GPUs now: their columns go; more: they start at 0 */
	assert_int_equal(ledger_store_load(fd, boot, 1, back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(back->ngpu, 1);
	assert_int_equal(back->users[1].mj[2], 0);
	assert_int_equal(back->gpu[2].unleased_mj, 0);
	assert_int_equal(back->users[0].mj[0], 5001);
	assert_int_equal(ledger_store_load(fd, boot, 5, back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(back->ngpu, 5);
	assert_int_equal(back->users[1].mj[2], UINT64_MAX - 1);
	/* not private: not read */
	chmod(path, 0644);
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), -1);
	assert_int_equal(bad, JOURNAL_UNSAFE);
	assert_int_equal(back->nusers, 0);
	chmod(path, 0600);
	/* garbled: refused, set aside, then none */
	{
		int w = open(path, O_WRONLY | O_TRUNC);

		assert_true(w >= 0);
		assert_int_equal(write(w, "zeusd-ledger 1\nboot", 19), 19);
		close(w);
	}
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), -1);
	assert_int_equal(bad, JOURNAL_GARBLED);
	assert_true(why[0] != '\0');
	assert_int_equal(ledger_store_set_aside(fd), 0);
	snprintf(aside, sizeof(aside), "%s/ledger.refused", dir);
	assert_int_equal(access(aside, F_OK), 0);
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), 1);
	/* a link is not followed */
	assert_int_equal(symlink(aside, path), 0);
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), -1);
	assert_int_equal(bad, JOURNAL_UNSAFE);
	unlink(path);
	/* a save cut short leaves a .tmp: cleared, the file stands */
	assert_int_equal(ledger_store_save(fd, s, boot, &err), 0);
	snprintf(path, sizeof(path), "%s/ledger.tmp", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(ledger_store_load(fd, boot, 3, back, &bad, why,
	    sizeof(why)), 0);
	assert_int_equal(access(path, F_OK), -1);
	close(fd);
	free(s);
	free(back);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sums),
		cmocka_unit_test(test_other),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_largest),
		cmocka_unit_test(test_every_damage_refused),
		cmocka_unit_test(test_fields_checked),
		cmocka_unit_test_setup_teardown(test_files, setup_dir,
		    teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
