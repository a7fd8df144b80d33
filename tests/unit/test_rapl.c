/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rapl.c - unit tests of the RAPL backend (src/devices/rapl.c) and the
 * simulated packages (src/devices/rapl_sim.c).
 *
 * The sysfs reader is tested on real files: each test writes a fake
 * powercap tree into a mkdtemp directory. Counter files are rewritten in
 * place (O_TRUNC, same inode), as the kernel's attributes are, because the
 * backend keeps them open. Tests run as root in CI, so "unreadable" cannot
 * be chmod 000; they use a directory, a FIFO, and a symlink to
 * /proc/self/mem (a regular file whose pread at offset 0 fails with EIO).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "devices/rapl.h"
#include "devices/rapl_sim.h"

/* ---- Fake trees --------------------------------------------------------- */

struct tree {
	char root[64];
};

static void
tree_write(struct tree *t, const char *rel, const char *content)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", t->root, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)),
	    (ssize_t)strlen(content));
	close(fd);
}

static void
tree_mkdir(struct tree *t, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", t->root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void
tree_fmt(struct tree *t, const char *rel, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)v);
	tree_write(t, rel, buf);
}

/* A zone directory `rel` with the three files. */
static void
tree_zone(struct tree *t, const char *rel, const char *name, uint64_t energy,
    uint64_t max)
{
	char p[256], n[80];

	tree_mkdir(t, rel);
	snprintf(p, sizeof(p), "%s/name", rel);
	snprintf(n, sizeof(n), "%s\n", name);
	tree_write(t, p, n);
	snprintf(p, sizeof(p), "%s/energy_uj", rel);
	tree_fmt(t, p, energy);
	snprintf(p, sizeof(p), "%s/max_energy_range_uj", rel);
	tree_fmt(t, p, max);
}

/* Package N with a "core" subzone and, if dram, a "dram" subzone :N:1. */
static void
tree_pkg(struct tree *t, unsigned n, bool dram, uint64_t energy,
    uint64_t max)
{
	char rel[128], name[32];

	snprintf(rel, sizeof(rel), "intel-rapl:%u", n);
	snprintf(name, sizeof(name), "package-%u", n);
	tree_zone(t, rel, name, energy, max);
	snprintf(rel, sizeof(rel), "intel-rapl:%u/intel-rapl:%u:0", n, n);
	tree_zone(t, rel, "core", 5, max);
	if (dram) {
		snprintf(rel, sizeof(rel), "intel-rapl:%u/intel-rapl:%u:1", n,
		    n);
		tree_zone(t, rel, "dram", energy / 2, max);
	}
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
setup_tree(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -1;
	snprintf(t->root, sizeof(t->root), "/tmp/rapl-test-XXXXXX");
	if (mkdtemp(t->root) == NULL)
		return -1;
	*state = t;
	return 0;
}

static int
teardown_tree(void **state)
{
	struct tree *t = *state;

	nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

static struct rapl *
open_ok(struct tree *t)
{
	struct zerr err = { 0 };
	struct rapl *r = NULL;

	if (rapl_open(t->root, &r, &err) != 0)
		fail_msg("rapl_open: %s", err.msg);
	return r;
}

/* Opens, expects failure whose message contains `needle`. */
static void
open_fails(struct tree *t, const char *needle)
{
	struct zerr err = { 0 };
	struct rapl *r = NULL;

	assert_int_equal(rapl_open(t->root, &r, &err), -1);
	assert_null(r);
	assert_int_not_equal(err.kind, ZERR_NONE);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
}

static uint64_t
read_cpu(struct rapl *r, unsigned i)
{
	struct zerr err = { 0 };
	uint64_t v = 0;

	if (rapl_read(r, i, &v, NULL, &err) != 0)
		fail_msg("rapl_read: %s", err.msg);
	return v;
}

static void
read_both(struct rapl *r, unsigned i, uint64_t *cpu, uint64_t *dram)
{
	struct zerr err = { 0 };

	if (rapl_read(r, i, cpu, dram, &err) != 0)
		fail_msg("rapl_read: %s", err.msg);
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- Pure helpers ------------------------------------------------------- */

static void
test_parse_u64(void **state)
{
	static const char *bad[] = { "", "\n", "12a", " 1", "1 ", "-1", "+1",
		"1\n\n", "0x10", "18446744073709551616", "99999999999999999999",
		"1\r\n", "1.5" };
	uint64_t v;
	size_t i;

	(void)state;
	assert_int_equal(rapl_parse_u64("0", 1, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(rapl_parse_u64("123\n", 4, &v), 0);
	assert_int_equal(v, 123);
	assert_int_equal(rapl_parse_u64("18446744073709551615", 20, &v), 0);
	assert_true(v == UINT64_MAX);
	/* Only `len` bytes count. */
	assert_int_equal(rapl_parse_u64("42garbage", 2, &v), 0);
	assert_int_equal(v, 42);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (rapl_parse_u64(bad[i], strlen(bad[i]), &v) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

static uint64_t
feed(struct rapl_counter_state *s, uint64_t raw)
{
	uint64_t total = 0;

	assert_int_equal(rapl_counter_update(s, raw, &total), 0);
	return total;
}

static void
test_counter_no_wrap(void **state)
{
	struct rapl_counter_state s = { .max = 1000 };

	(void)state;
	/* The first reading is reported as is: raw + 0 wraps. */
	assert_int_equal(feed(&s, 700), 700);
	assert_int_equal(feed(&s, 700), 700);	/* equal is not a wrap */
	assert_int_equal(feed(&s, 900), 900);
	assert_int_equal(feed(&s, 1000), 1000);	/* max itself is valid */
}

static void
test_counter_one_wrap(void **state)
{
	struct rapl_counter_state s = { .max = 999 };

	(void)state;
	assert_int_equal(feed(&s, 900), 900);
	/* 900 -> 999 is 99, 999 -> 0 is 1, 0 -> 50 is 50: 150 more. */
	assert_int_equal(feed(&s, 50), 1050);
	assert_int_equal(feed(&s, 60), 1060);
}

static void
test_counter_wrap_to_zero(void **state)
{
	struct rapl_counter_state s = { .max = 999 };

	(void)state;
	assert_int_equal(feed(&s, 999), 999);
	assert_int_equal(feed(&s, 0), 1000);	/* one step past max */
	assert_int_equal(feed(&s, 0), 1000);
	assert_int_equal(feed(&s, 1), 1001);
}

static void
test_counter_many_wraps(void **state)
{
	struct rapl_counter_state s = { .max = 99 };
	uint64_t prev = 0, raw = 10, truth = 10, t;
	unsigned i;

	(void)state;
	assert_int_equal(feed(&s, raw), 10);
	/* Advance by 37..97 each step (always < one range): exact tracking. */
	for (i = 0; i < 1000; i++) {
		uint64_t step = 37 + (i * 7) % 61;

		truth += step;
		raw = (raw + step) % 100;
		t = feed(&s, raw);
		assert_true(t == truth);
		assert_true(t >= prev);
		prev = t;
	}
	assert_true(s.offset == (truth - raw));
}

static void
test_counter_rejects(void **state)
{
	struct rapl_counter_state s = { .max = 999 }, before;
	struct rapl_counter_state huge = { .max = UINT64_MAX - 1 };
	uint64_t total = 12345;

	(void)state;
	feed(&s, 500);
	before = s;
	assert_int_equal(rapl_counter_update(&s, 1000, &total), -1);
	assert_memory_equal(&s, &before, sizeof(s));
	assert_int_equal(total, 12345);
	/* A range of UINT64_MAX has no "max + 1". */
	s.max = UINT64_MAX;
	assert_int_equal(rapl_counter_update(&s, 1, &total), -1);
	/* Overflow of the running total fails rather than wrapping. */
	feed(&huge, 10);
	assert_int_equal(rapl_counter_update(&huge, 5, &total), -1);
	assert_int_equal(huge.offset, 0);
}

static void
test_power_mw(void **state)
{
	struct rapl_sample a = { .mono_ns = 1000000000, .cpu_uj = 1000,
		.dram_uj = 50, .has_dram = true };
	struct rapl_sample b = a;
	uint64_t cpu, dram;

	(void)state;
	/* 85 J over 1 s is 85 W; 12 J DRAM is 12 W. */
	b.mono_ns += 1000000000;
	b.cpu_uj += 85000000;
	b.dram_uj += 12000000;
	assert_int_equal(rapl_power_mw(&a, &b, &cpu, &dram), 0);
	assert_int_equal(cpu, 85000);
	assert_int_equal(dram, 12000);
	/* 100 ms: 8.5 J is 85 W. */
	b = a;
	b.mono_ns += 100000000;
	b.cpu_uj += 8500000;
	assert_int_equal(rapl_power_mw(&a, &b, &cpu, &dram), 0);
	assert_int_equal(cpu, 85000);
	assert_int_equal(dram, 0);
	a.has_dram = b.has_dram = false;
	b.dram_uj = 999999;
	assert_int_equal(rapl_power_mw(&a, &b, &cpu, &dram), 0);
	assert_int_equal(dram, 0);
	assert_int_equal(rapl_power_mw(&a, &a, &cpu, &dram), -1);
	assert_int_equal(rapl_power_mw(&b, &a, &cpu, &dram), -1);
	b.cpu_uj = a.cpu_uj - 1;	/* energy going back: misuse */
	assert_int_equal(rapl_power_mw(&a, &b, &cpu, &dram), -1);
}

/* ---- Root choice -------------------------------------------------------- */

static void
test_pick_root(void **state)
{
	struct tree *t = *state;
	char container[128], host[128];

	snprintf(container, sizeof(container), "%s/zeus_sys", t->root);
	snprintf(host, sizeof(host), "%s/sys", t->root);
	assert_string_equal(rapl_pick_root(container, host), host);
	tree_write(t, "zeus_sys", "not a directory");
	assert_string_equal(rapl_pick_root(container, host), host);
	remove(container);
	tree_mkdir(t, "zeus_sys");
	assert_string_equal(rapl_pick_root(container, host), container);
	/* The real default is one of the two constants. */
	assert_true(strcmp(rapl_default_root(), RAPL_ROOT_HOST) == 0 ||
	    strcmp(rapl_default_root(), RAPL_ROOT_CONTAINER) == 0);
}

/* ---- Discovery ---------------------------------------------------------- */

static void
test_missing_root_is_zero_packages(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	struct rapl *r = NULL;
	char root[128];

	snprintf(root, sizeof(root), "%s/nope", t->root);
	assert_int_equal(rapl_open(root, &r, &err), 0);
	assert_non_null(r);
	assert_int_equal(rapl_count(r), 0);
	assert_int_equal(rapl_index_of(r, 0), -1);
	assert_int_equal(rapl_read(r, 0, NULL, NULL, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	rapl_close(r);
	rapl_close(NULL);
}

static void
test_empty_root(void **state)
{
	struct tree *t = *state;
	struct rapl *r;

	tree_write(t, "enabled", "1\n");
	r = open_ok(t);
	assert_int_equal(rapl_count(r), 0);
	rapl_close(r);
}

static void
test_root_not_a_directory(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	struct rapl *r = NULL;
	char root[128];

	tree_write(t, "file", "x");
	snprintf(root, sizeof(root), "%s/file", t->root);
	assert_int_equal(rapl_open(root, &r, &err), -1);
	assert_non_null(strstr(err.msg, "file"));
}

static void
test_one_package_no_dram(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	uint64_t d;
	struct rapl *r;

	tree_pkg(t, 0, false, 12345, 262143328850ull);
	r = open_ok(t);
	assert_int_equal(rapl_count(r), 1);
	assert_int_equal(rapl_package_id(r, 0), 0);
	assert_string_equal(rapl_package_name(r, 0), "package-0");
	assert_false(rapl_has_dram(r, 0));
	assert_int_equal(read_cpu(r, 0), 12345);
	/* Asking for DRAM of a package without it is a caller error. */
	assert_int_equal(rapl_read(r, 0, NULL, &d, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(rapl_read(r, 1, NULL, NULL, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	tree_write(t, "intel-rapl:0/energy_uj", "22345\n");
	assert_int_equal(read_cpu(r, 0), 22345);
	rapl_close(r);
}

static void
test_two_packages_sorted_with_dram(void **state)
{
	struct tree *t = *state;
	uint64_t cpu, dram;
	struct rapl *r;

	/* Created out of order; 10 sorts after 2 numerically. */
	tree_pkg(t, 10, false, 300, 1000000);
	tree_pkg(t, 2, true, 200, 1000000);
	r = open_ok(t);
	assert_int_equal(rapl_count(r), 2);
	assert_int_equal(rapl_package_id(r, 0), 2);
	assert_int_equal(rapl_package_id(r, 1), 10);
	assert_true(rapl_has_dram(r, 0));
	assert_false(rapl_has_dram(r, 1));
	assert_int_equal(rapl_index_of(r, 10), 1);
	assert_int_equal(rapl_index_of(r, 3), -1);
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 200);
	assert_int_equal(dram, 100);
	assert_int_equal(read_cpu(r, 1), 300);
	rapl_close(r);
}

static void
test_dram_found_by_name_not_number(void **state)
{
	struct tree *t = *state;
	uint64_t cpu, dram;
	struct rapl *r;

	tree_zone(t, "intel-rapl:0", "package-0", 10, 1000);
	tree_zone(t, "intel-rapl:0/intel-rapl:0:0", "dram", 77, 500);
	tree_zone(t, "intel-rapl:0/intel-rapl:0:1", "uncore", 88, 1000);
	/* Another dram subzone with a higher number loses. */
	tree_zone(t, "intel-rapl:0/intel-rapl:0:2", "dram", 99, 1000);
	r = open_ok(t);
	assert_true(rapl_has_dram(r, 0));
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(dram, 77);
	rapl_close(r);
}

static void
test_odd_names_skipped(void **state)
{
	struct tree *t = *state;
	struct rapl *r;

	tree_pkg(t, 1, false, 1, 1000);
	/* None of these is a package; none needs valid files. */
	tree_mkdir(t, "intel-rapl:x");
	tree_mkdir(t, "intel-rapl:01");
	tree_mkdir(t, "intel-rapl:");
	tree_mkdir(t, "intel-rapl:1x");
	tree_mkdir(t, "intel-rapl:-1");
	tree_mkdir(t, "intel-rapl:+2");
	tree_mkdir(t, "intel-rapl:4294967296");
	tree_mkdir(t, "intel-rapl:1:0");	/* subzone beside packages */
	tree_mkdir(t, "intel-rapl-mmio:0");
	tree_mkdir(t, "Intel-rapl:3");
	tree_write(t, "intel-rapl:7", "a file, not a zone");
	r = open_ok(t);
	assert_int_equal(rapl_count(r), 1);
	assert_int_equal(rapl_package_id(r, 0), 1);
	rapl_close(r);
}

static void
tree_link(struct tree *t, const char *target_rel, const char *link_rel)
{
	char target[512], link[512];

	snprintf(target, sizeof(target), "%s/%s", t->root, target_rel);
	snprintf(link, sizeof(link), "%s/%s", t->root, link_rel);
	assert_int_equal(symlink(target, link), 0);
}

/*
 * /sys/class/powercap itself holds symlinks to every zone, packages and
 * subzones side by side. Packages are followed, subzones skipped.
 */
static void
test_powercap_class_layout(void **state)
{
	struct tree *t = *state;
	uint64_t cpu, dram;
	struct rapl *r;

	tree_mkdir(t, "devices");
	tree_zone(t, "devices/intel-rapl:0", "package-0", 40, 1000);
	tree_zone(t, "devices/intel-rapl:0/intel-rapl:0:0", "core", 1, 1000);
	tree_zone(t, "devices/intel-rapl:0/intel-rapl:0:1", "dram", 20, 500);
	tree_link(t, "devices/intel-rapl:0", "intel-rapl:0");
	tree_link(t, "devices/intel-rapl:0/intel-rapl:0:0", "intel-rapl:0:0");
	tree_link(t, "devices/intel-rapl:0/intel-rapl:0:1", "intel-rapl:0:1");
	r = open_ok(t);
	assert_int_equal(rapl_count(r), 1);
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 40);
	assert_int_equal(dram, 20);
	rapl_close(r);
}

/* ---- Startup errors name the file --------------------------------------- */

static void
test_missing_max_energy_range(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	assert_int_equal(remove(strcat(strcpy((char[256]){ 0 }, t->root),
	    "/intel-rapl:0/max_energy_range_uj")), 0);
	open_fails(t, "intel-rapl:0/max_energy_range_uj");
}

static void
remove_rel(struct tree *t, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", t->root, rel);
	assert_int_equal(remove(path), 0);
}

static void
test_missing_energy(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	remove_rel(t, "intel-rapl:0/energy_uj");
	open_fails(t, "intel-rapl:0/energy_uj");
}

static void
test_missing_name(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	remove_rel(t, "intel-rapl:0/name");
	open_fails(t, "intel-rapl:0/name");
}

static void
test_empty_name(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	tree_write(t, "intel-rapl:0/name", "\n");
	open_fails(t, "intel-rapl:0/name");
}

static void
test_garbage_energy(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	tree_write(t, "intel-rapl:0/energy_uj", "12abc\n");
	open_fails(t, "intel-rapl:0/energy_uj");
}

static void
test_garbage_max(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	tree_write(t, "intel-rapl:0/max_energy_range_uj", "-5\n");
	open_fails(t, "max_energy_range_uj");
}

static void
test_overlong_counter(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	tree_write(t, "intel-rapl:0/energy_uj",
	    "000000000000000000000000000000000000000001\n");
	open_fails(t, "intel-rapl:0/energy_uj");
}

static void
test_zero_max(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 0, 0);
	open_fails(t, "max_energy_range_uj");
}

static void
test_energy_above_max(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 2000, 1000);
	open_fails(t, "intel-rapl:0/energy_uj\" holds 2000, above");
}

static void
test_energy_is_directory(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	remove_rel(t, "intel-rapl:0/energy_uj");
	tree_mkdir(t, "intel-rapl:0/energy_uj");
	open_fails(t, "intel-rapl:0/energy_uj");
}

static void
test_energy_is_fifo(void **state)
{
	struct tree *t = *state;
	char path[512];

	tree_pkg(t, 0, false, 1, 1000);
	remove_rel(t, "intel-rapl:0/energy_uj");
	snprintf(path, sizeof(path), "%s/intel-rapl:0/energy_uj", t->root);
	assert_int_equal(mkfifo(path, 0644), 0);
	/* Must fail, not hang waiting for a writer. */
	open_fails(t, "not a regular file");
}

/* A regular file that root cannot read: pread of /proc/self/mem at 0. */
static void
test_energy_unreadable(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, false, 1, 1000);
	remove_rel(t, "intel-rapl:0/energy_uj");
	assert_int_equal(symlink("/proc/self/mem", strcat(strcpy(
	    (char[256]){ 0 }, t->root), "/intel-rapl:0/energy_uj")), 0);
	open_fails(t, "cannot read");
	open_fails(t, "intel-rapl:0/energy_uj");
}

static void
test_dram_missing_energy(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, true, 1, 1000);
	remove_rel(t, "intel-rapl:0/intel-rapl:0:1/energy_uj");
	open_fails(t, "intel-rapl:0/intel-rapl:0:1/energy_uj");
}

static void
test_subzone_missing_name(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, true, 1, 1000);
	remove_rel(t, "intel-rapl:0/intel-rapl:0:0/name");
	open_fails(t, "intel-rapl:0/intel-rapl:0:0/name");
}

/* A broken second package fails the whole open (and leaks nothing). */
static void
test_second_package_broken(void **state)
{
	struct tree *t = *state;

	tree_pkg(t, 0, true, 1, 1000);
	tree_pkg(t, 1, false, 1, 1000);
	tree_write(t, "intel-rapl:1/max_energy_range_uj", "lots\n");
	open_fails(t, "intel-rapl:1/max_energy_range_uj");
}

/* ---- Reads over real files ---------------------------------------------- */

static void
test_wrap_sequences_on_files(void **state)
{
	struct tree *t = *state;
	uint64_t cpu, dram, prev_cpu = 0, prev_dram = 0;
	struct rapl *r;
	unsigned i;
	/* cpu and dram raw sequences; both ranges are 0..999. */
	static const uint64_t seq[][2] = {
		{ 900, 400 },	/* start */
		{ 950, 410 },
		{ 10, 420 },	/* CPU wraps alone */
		{ 20, 5 },	/* DRAM wraps alone */
		{ 999, 999 },
		{ 0, 0 },	/* both wrap to exactly zero */
		{ 0, 0 },
		{ 500, 100 },
		{ 499, 100 },	/* CPU wraps (one step short of a range) */
	};
	static const uint64_t want[][2] = {
		{ 900, 400 }, { 950, 410 }, { 1010, 420 }, { 1020, 1005 },
		{ 1999, 1999 }, { 2000, 2000 }, { 2000, 2000 },
		{ 2500, 2100 }, { 3499, 2100 },
	};

	tree_pkg(t, 0, true, seq[0][0], 999);
	tree_fmt(t, "intel-rapl:0/intel-rapl:0:1/energy_uj", seq[0][1]);
	tree_fmt(t, "intel-rapl:0/intel-rapl:0:1/max_energy_range_uj", 999);
	r = open_ok(t);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		tree_fmt(t, "intel-rapl:0/energy_uj", seq[i][0]);
		tree_fmt(t, "intel-rapl:0/intel-rapl:0:1/energy_uj", seq[i][1]);
		read_both(r, 0, &cpu, &dram);
		if (cpu != want[i][0] || dram != want[i][1])
			fail_msg("step %u: got %llu/%llu want %llu/%llu", i,
			    (unsigned long long)cpu, (unsigned long long)dram,
			    (unsigned long long)want[i][0],
			    (unsigned long long)want[i][1]);
		assert_true(cpu >= prev_cpu && dram >= prev_dram);
		prev_cpu = cpu;
		prev_dram = dram;
	}
	rapl_close(r);
}

static void
test_many_wraps_on_files(void **state)
{
	struct tree *t = *state;
	uint64_t raw = 0, truth = 0, got;
	struct rapl *r;
	unsigned i;

	tree_pkg(t, 0, false, 0, 65535);
	r = open_ok(t);
	for (i = 0; i < 300; i++) {
		uint64_t step = 1000 + (i * 7919) % 60000;

		truth += step;
		raw = (raw + step) % 65536;
		tree_fmt(t, "intel-rapl:0/energy_uj", raw);
		got = read_cpu(r, 0);
		assert_true(got == truth);
	}
	rapl_close(r);
}

static void
test_runtime_read_error_names_file(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	uint64_t cpu = 0, dram = 0;
	struct rapl *r;

	tree_pkg(t, 0, true, 500, 999);
	tree_fmt(t, "intel-rapl:0/intel-rapl:0:1/max_energy_range_uj", 999);
	r = open_ok(t);
	tree_write(t, "intel-rapl:0/energy_uj", "oops\n");
	assert_int_equal(rapl_read(r, 0, &cpu, NULL, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_int_equal(zerr_http_status(err.kind), 500);
	assert_non_null(strstr(err.msg, t->root));
	assert_non_null(strstr(err.msg, "intel-rapl:0/energy_uj"));

	/* A broken DRAM counter fails the read and moves neither state. */
	tree_write(t, "intel-rapl:0/energy_uj", "100\n");
	tree_write(t, "intel-rapl:0/intel-rapl:0:1/energy_uj", "");
	assert_int_equal(rapl_read(r, 0, &cpu, &dram, &err), -1);
	assert_non_null(strstr(err.msg, "intel-rapl:0:1/energy_uj"));
	/* Fixed: the CPU 500 -> 100 is one wrap, seen exactly once. */
	tree_write(t, "intel-rapl:0/intel-rapl:0:1/energy_uj", "300\n");
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 1100);
	assert_int_equal(dram, 300);
	/* A counter past max at runtime is an error, not a silent wrap. */
	tree_write(t, "intel-rapl:0/energy_uj", "1000\n");
	assert_int_equal(rapl_read(r, 0, &cpu, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "intel-rapl:0/energy_uj\" holds 1000"));
	rapl_close(r);
}

static void
test_sample_timestamps(void **state)
{
	struct tree *t = *state;
	struct rapl_sample a, b;
	struct zerr err = { 0 };
	uint64_t cpu_mw, dram_mw;
	struct rapl *r;

	tree_pkg(t, 0, true, 1000, 1000000000);
	r = open_ok(t);
	assert_int_equal(rapl_sample(r, 0, &a, &err), 0);
	assert_true(a.has_dram);
	sleep_ms(20);
	tree_fmt(t, "intel-rapl:0/energy_uj", 1000 + 2000000);
	assert_int_equal(rapl_sample(r, 0, &b, &err), 0);
	assert_true(b.mono_ns > a.mono_ns + 19000000);
	assert_int_equal(b.cpu_uj - a.cpu_uj, 2000000);
	assert_int_equal(rapl_power_mw(&a, &b, &cpu_mw, &dram_mw), 0);
	/* 2 J over the measured gap (a bit over 20 ms: under 100 W). */
	assert_true(cpu_mw < 100000);
	assert_true(cpu_mw == (uint64_t)(2e12 / (double)(b.mono_ns -
	    a.mono_ns) + 0.5));
	assert_int_equal(dram_mw, 0);
	assert_int_equal(rapl_sample(r, 3, &b, &err), -1);
	rapl_close(r);
}

/* ---- Keepalive ---------------------------------------------------------- */

static void
wait_passes(struct rapl *r, uint64_t n)
{
	uint64_t start = rapl_keepalive_passes(r);
	unsigned waited = 0;

	while (rapl_keepalive_passes(r) < start + n) {
		sleep_ms(2);
		if ((waited += 2) > 5000)
			fail_msg("keepalive made no progress");
	}
}

/*
 * 900 -> 100 -> 950 -> 50 is two wraps. A reader that only sees 900 and 50
 * counts one; the keepalive sees the steps in between.
 */
static void
run_double_wrap(struct tree *t, bool keepalive, uint64_t want)
{
	struct zerr err = { 0 };
	struct rapl *r;

	tree_pkg(t, 0, false, 900, 999);
	r = open_ok(t);
	if (keepalive)
		assert_int_equal(rapl_start_keepalive(r, 5, &err), 0);
	tree_fmt(t, "intel-rapl:0/energy_uj", 100);
	if (keepalive)
		wait_passes(r, 2);
	tree_fmt(t, "intel-rapl:0/energy_uj", 950);
	if (keepalive)
		wait_passes(r, 2);
	tree_fmt(t, "intel-rapl:0/energy_uj", 50);
	assert_int_equal(read_cpu(r, 0), want);
	rapl_close(r);
}

static void
test_keepalive_catches_wrap(void **state)
{
	struct tree *t = *state;

	run_double_wrap(t, true, 2050);
}

static void
test_without_keepalive_wrap_is_missed(void **state)
{
	struct tree *t = *state;

	run_double_wrap(t, false, 1050);
}

static void
test_keepalive_survives_errors_and_stops_promptly(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	struct timespec a, b;
	struct rapl *r;
	double ms;

	tree_pkg(t, 0, false, 900, 999);
	r = open_ok(t);
	assert_int_equal(rapl_start_keepalive(r, 5, &err), 0);
	assert_int_equal(rapl_start_keepalive(r, 5, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	tree_write(t, "intel-rapl:0/energy_uj", "broken");
	wait_passes(r, 3);
	tree_write(t, "intel-rapl:0/energy_uj", "950\n");
	wait_passes(r, 2);
	assert_int_equal(read_cpu(r, 0), 950);
	rapl_close(r);

	/* A long interval does not delay close. */
	r = open_ok(t);
	assert_int_equal(rapl_start_keepalive(r, 60000, &err), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	rapl_close(r);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (double)(b.tv_sec - a.tv_sec) * 1e3 +
	    (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	assert_true(ms < 1000);
}

static void
test_keepalive_auto_interval(void **state)
{
	struct tree *t = *state;
	struct zerr err = { 0 };
	struct rapl *r;

	/* 61 µJ units, 32 bits: 262 kJ lasts minutes at 2 kW -> 30 s cap. */
	tree_pkg(t, 0, false, 0, 262143328850ull);
	r = open_ok(t);
	assert_int_equal(rapl_keepalive_auto_ms(r), RAPL_KEEPALIVE_MAX_MS);
	rapl_close(r);
	/* 15.3 µJ units: 65.5 kJ, 32.8 s at 2 kW -> half of it. */
	tree_write(t, "intel-rapl:0/max_energy_range_uj", "65535999984\n");
	r = open_ok(t);
	assert_int_equal(rapl_keepalive_auto_ms(r), 16383);
	rapl_close(r);
	/* A tiny range hits the floor. */
	tree_write(t, "intel-rapl:0/max_energy_range_uj", "999\n");
	r = open_ok(t);
	assert_int_equal(rapl_keepalive_auto_ms(r), RAPL_KEEPALIVE_MIN_MS);
	assert_int_equal(rapl_start_keepalive(r, 0, &err), 0);
	wait_passes(r, 2);
	rapl_close(r);
	/* Zero packages: the cap. */
	remove_rel(t, "intel-rapl:0/intel-rapl:0:0/name");
	remove_rel(t, "intel-rapl:0/intel-rapl:0:0/energy_uj");
	remove_rel(t, "intel-rapl:0/intel-rapl:0:0/max_energy_range_uj");
	remove_rel(t, "intel-rapl:0/intel-rapl:0:0");
	remove_rel(t, "intel-rapl:0/name");
	remove_rel(t, "intel-rapl:0/energy_uj");
	remove_rel(t, "intel-rapl:0/max_energy_range_uj");
	remove_rel(t, "intel-rapl:0");
	r = open_ok(t);
	assert_int_equal(rapl_keepalive_auto_ms(r), RAPL_KEEPALIVE_MAX_MS);
	rapl_close(r);
}

/* ---- A scripted source through rapl_open_source ------------------------- */

struct script {
	uint64_t raw[2];
	bool fail;
};

static int
script_read(void *ctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct script *s = ctx;

	(void)pkg;
	if (s->fail)
		return zerr_set(err, ZERR_INTERNAL, "scripted failure");
	*raw = s->raw[zone];
	return 0;
}

static const struct rapl_source_ops script_ops = { .name = "script",
	.read = script_read };

static void
test_source_errors_and_validation(void **state)
{
	struct script s = { { 10, 20 }, false };
	struct rapl_package_desc d[2] = {
		{ .id = 4, .name = "p", .has_dram = true, .cpu_max_uj = 99,
		  .dram_max_uj = 49 },
		{ .id = 4, .name = "q", .cpu_max_uj = 99 },
	};
	struct zerr err = { 0 };
	uint64_t cpu, dram;
	struct rapl *r = NULL;

	(void)state;
	assert_int_equal(rapl_open_source(&script_ops, &s, d, 2, &r, &err),
	    -1);
	assert_non_null(strstr(err.msg, "twice"));
	d[1].id = 5;
	d[1].cpu_max_uj = UINT64_MAX;
	assert_int_equal(rapl_open_source(&script_ops, &s, d, 2, &r, &err),
	    -1);
	d[1].cpu_max_uj = 99;
	d[0].dram_max_uj = 0;
	assert_int_equal(rapl_open_source(&script_ops, &s, d, 2, &r, &err),
	    -1);
	d[0].dram_max_uj = 49;
	s.fail = true;
	assert_int_equal(rapl_open_source(&script_ops, &s, d, 2, &r, &err),
	    -1);
	assert_string_equal(err.msg, "scripted failure");
	s.fail = false;
	assert_int_equal(rapl_open_source(&script_ops, &s, d, 2, &r, &err), 0);
	s.raw[0] = 5;
	s.raw[1] = 3;
	s.fail = true;
	assert_int_equal(rapl_read(r, 0, &cpu, &dram, &err), -1);
	s.fail = false;
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 105);
	assert_int_equal(dram, 53);
	/* Out of range with no label: the source's name stands in. */
	s.raw[1] = 50;
	assert_int_equal(rapl_read(r, 0, &cpu, &dram, &err), -1);
	assert_non_null(strstr(err.msg, "DRAM \"script\" holds 50"));
	rapl_close(r);
}

/*
 * A source that tracks wraps itself (the network process of a split daemon
 * reads totals the device process already compensated): values above the
 * range and far beyond one wrap pass through unchanged, a value that goes
 * backwards is refused without moving the state, and the keepalive starts
 * no thread.
 */
static const struct rapl_source_ops totals_ops = { .name = "totals",
	.read = script_read, .tracks_wraps = true };

static void
test_source_that_tracks_wraps(void **state)
{
	struct script s = { { 90, 40 }, false };
	struct rapl_package_desc d[1] = {
		{ .id = 2, .name = "p", .has_dram = true, .cpu_max_uj = 99,
		  .dram_max_uj = 49 },
	};
	struct zerr err = { 0 };
	uint64_t cpu, dram;
	struct rapl *r = NULL;

	(void)state;
	assert_int_equal(rapl_open_source(&totals_ops, &s, d, 1, &r, &err), 0);
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 90);
	assert_int_equal(dram, 40);
	/* several wraps' worth later: what the source says, no offset */
	s.raw[0] = 1000099;
	s.raw[1] = 5000;
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 1000099);
	assert_int_equal(dram, 5000);
	/* lower is not a wrap here: refused, and the state stays */
	s.raw[0] = 10;
	assert_int_equal(rapl_read(r, 0, &cpu, &dram, &err), -1);
	assert_non_null(strstr(err.msg, "package energy from the totals "
	    "source went backwards (10 after 1000099)"));
	s.raw[0] = 1000099;
	s.raw[1] = 4999;
	assert_int_equal(rapl_read(r, 0, &cpu, &dram, &err), -1);
	assert_non_null(strstr(err.msg, "DRAM energy"));
	s.raw[1] = 5000;		/* equal is fine: no energy drawn */
	read_both(r, 0, &cpu, &dram);
	assert_int_equal(cpu, 1000099);
	assert_int_equal(dram, 5000);
	/* nothing to keep alive: no thread, so no pass ever */
	assert_int_equal(rapl_start_keepalive(r, RAPL_KEEPALIVE_MIN_MS, &err),
	    0);
	sleep_ms(10 * RAPL_KEEPALIVE_MIN_MS);
	assert_int_equal(rapl_keepalive_passes(r), 0);
	rapl_close(r);
}

/* ---- Simulated packages ------------------------------------------------- */

static void
test_sim_default(void **state)
{
	struct zerr err = { 0 };
	uint64_t cpu, dram, cpu2, dram2;
	struct rapl *r;
	double t;

	(void)state;
	assert_int_equal(rapl_sim_open(NULL, &r, &err), 0);
	assert_int_equal(rapl_count(r), 2);
	assert_int_equal(rapl_package_id(r, 0), 0);
	assert_int_equal(rapl_package_id(r, 1), 1);
	assert_true(rapl_has_dram(r, 0));
	assert_false(rapl_has_dram(r, 1));
	read_both(r, 0, &cpu, &dram);
	sleep_ms(30);
	read_both(r, 0, &cpu2, &dram2);
	assert_true(cpu2 > cpu);
	assert_true(dram2 > dram);
	/* The curves stay in their advertised bands. */
	for (t = 0; t < 600; t += 0.25) {
		double c = rapl_sim_curve_cpu_w(1, t);
		double d = rapl_sim_curve_dram_w(0, t);

		assert_true(c >= 39.99 && c <= 120.01);
		assert_true(d >= 4.99 && d <= 20.01);
	}
	assert_true(rapl_keepalive_auto_ms(r) >= RAPL_KEEPALIVE_MIN_MS);
	assert_true(rapl_keepalive_auto_ms(r) < RAPL_KEEPALIVE_MAX_MS);
	rapl_close(r);
}

/* Power from two samples is within 5% of a known constant rate. */
static void
test_sim_constant_power(void **state)
{
	struct rapl_sim_options o = { .npkgs = 3, .cpu_w = 100, .dram_w = 10 };
	struct rapl_sample a, b;
	struct zerr err = { 0 };
	uint64_t cpu_mw, dram_mw;
	struct rapl *r;

	(void)state;
	assert_int_equal(rapl_sim_open(&o, &r, &err), 0);
	assert_int_equal(rapl_count(r), 3);
	assert_true(rapl_has_dram(r, 2));
	assert_int_equal(rapl_sample(r, 2, &a, &err), 0);
	sleep_ms(100);
	assert_int_equal(rapl_sample(r, 2, &b, &err), 0);
	assert_int_equal(rapl_power_mw(&a, &b, &cpu_mw, &dram_mw), 0);
	assert_true(cpu_mw > 95000 && cpu_mw < 105000);
	assert_true(dram_mw > 9500 && dram_mw < 10500);
	rapl_close(r);
}

/* A 5 J range at 10 W wraps every 500 ms; compensation keeps up. */
static void
test_sim_wraps(void **state)
{
	struct rapl_sim_options o = { .npkgs = 1, .cpu_w = 10, .dram_w = 4,
		.cpu_max_uj = 4999999, .dram_max_uj = 1999999 };
	struct rapl_sample a, b;
	struct zerr err = { 0 };
	uint64_t cpu_mw, dram_mw, prev = 0, v;
	struct rapl *r;
	unsigned i;

	(void)state;
	assert_int_equal(rapl_sim_open(&o, &r, &err), 0);
	assert_int_equal(rapl_sample(r, 0, &a, &err), 0);
	for (i = 0; i < 30; i++) {
		sleep_ms(40);
		v = read_cpu(r, 0);
		assert_true(v >= prev);
		prev = v;
	}
	assert_int_equal(rapl_sample(r, 0, &b, &err), 0);
	assert_true(b.cpu_uj - a.cpu_uj > 5000000);	/* wrapped */
	assert_int_equal(rapl_power_mw(&a, &b, &cpu_mw, &dram_mw), 0);
	assert_true(cpu_mw > 9500 && cpu_mw < 10500);
	assert_true(dram_mw > 3800 && dram_mw < 4200);
	rapl_close(r);
}

static void
test_sim_bad_options(void **state)
{
	struct rapl_sim_options o = { .npkgs = 1000 };
	struct zerr err = { 0 };
	struct rapl *r = NULL;

	(void)state;
	assert_int_equal(rapl_sim_open(&o, &r, &err), -1);
	o.npkgs = 0;
	assert_int_equal(rapl_sim_open(&o, &r, &err), 0);
	assert_int_equal(rapl_count(r), 0);
	rapl_close(r);
}

/* ---- Concurrency -------------------------------------------------------- */

struct reader_arg {
	struct rapl *r;
	bool ok;
};

static void *
reader_main(void *p)
{
	struct reader_arg *a = p;
	uint64_t prev = 0, v;
	unsigned i;

	a->ok = true;
	for (i = 0; i < 2000; i++) {
		struct zerr err = { 0 };

		if (rapl_read(a->r, i % 2, &v, NULL, &err) != 0 ||
		    (i % 2 == 0 && v < prev))
			a->ok = false;
		if (i % 2 == 0)
			prev = v;
	}
	return NULL;
}

static void
test_concurrent_readers(void **state)
{
	struct rapl_sim_options o = { .npkgs = 2, .cpu_max_uj = 9999999 };
	struct reader_arg args[4];
	pthread_t th[4];
	struct zerr err = { 0 };
	struct rapl *r;
	unsigned i;

	(void)state;
	assert_int_equal(rapl_sim_open(&o, &r, &err), 0);
	assert_int_equal(rapl_start_keepalive(r, 1, &err), 0);
	for (i = 0; i < 4; i++) {
		args[i].r = r;
		assert_int_equal(pthread_create(&th[i], NULL, reader_main,
		    &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_true(args[i].ok);
	}
	rapl_close(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_counter_no_wrap),
		cmocka_unit_test(test_counter_one_wrap),
		cmocka_unit_test(test_counter_wrap_to_zero),
		cmocka_unit_test(test_counter_many_wraps),
		cmocka_unit_test(test_counter_rejects),
		cmocka_unit_test(test_power_mw),
		cmocka_unit_test_setup_teardown(test_pick_root, setup_tree,
		    teardown_tree),
#define T(f) cmocka_unit_test_setup_teardown(f, setup_tree, teardown_tree)
		T(test_missing_root_is_zero_packages),
		T(test_empty_root),
		T(test_root_not_a_directory),
		T(test_one_package_no_dram),
		T(test_two_packages_sorted_with_dram),
		T(test_dram_found_by_name_not_number),
		T(test_odd_names_skipped),
		T(test_powercap_class_layout),
		T(test_missing_max_energy_range),
		T(test_missing_energy),
		T(test_missing_name),
		T(test_empty_name),
		T(test_garbage_energy),
		T(test_garbage_max),
		T(test_overlong_counter),
		T(test_zero_max),
		T(test_energy_above_max),
		T(test_energy_is_directory),
		T(test_energy_is_fifo),
		T(test_energy_unreadable),
		T(test_dram_missing_energy),
		T(test_subzone_missing_name),
		T(test_second_package_broken),
		T(test_wrap_sequences_on_files),
		T(test_many_wraps_on_files),
		T(test_runtime_read_error_names_file),
		T(test_sample_timestamps),
		T(test_keepalive_catches_wrap),
		T(test_without_keepalive_wrap_is_missed),
		T(test_keepalive_survives_errors_and_stops_promptly),
		T(test_keepalive_auto_interval),
#undef T
		cmocka_unit_test(test_source_errors_and_validation),
		cmocka_unit_test(test_source_that_tracks_wraps),
		cmocka_unit_test(test_sim_default),
		cmocka_unit_test(test_sim_constant_power),
		cmocka_unit_test(test_sim_wraps),
		cmocka_unit_test(test_sim_bad_options),
		cmocka_unit_test(test_concurrent_readers),
	};

	zlog_set_level(ZLOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
