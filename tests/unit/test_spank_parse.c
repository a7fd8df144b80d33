/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_spank_parse.c - the Slurm plugin's parsers (src/slurm/
 * spank_parse.c): plugstack.conf arguments, GPU lists from a step's
 * environment, step labels; and the energy line (spank_report.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/lease_label.h"
#include "slurm/spank_parse.h"
#include "slurm/spank_report.h"
#include "slurm/spank_step.h"

static void
conf_ok(int ac, char *const *av, const char *sock, bool required)
{
	struct spank_conf c;
	char why[SPANK_WHY_MAX] = "";

	if (spank_parse_conf(ac, av, &c, why) != 0)
		fail_msg("refused: %s", why);
	assert_string_equal(c.socket, sock);
	assert_int_equal(c.required, required);
}

static void
conf_bad(int ac, char *const *av, const char *says)
{
	struct spank_conf c;
	char why[SPANK_WHY_MAX] = "";

	assert_int_equal(spank_parse_conf(ac, av, &c, why), -1);
	if (strstr(why, says) == NULL)
		fail_msg("'%s' does not say '%s'", why, says);
}

static void
test_conf(void **state)
{
	char long_path[200];
	char *none[] = { NULL };
	char *both[] = { "required", "socket=/run/z.sock" };
	char *twice[] = { "required", "required" };
	char *socks[] = { "socket=/a", "socket=/b" };
	char *rel[] = { "socket=run/z.sock" };
	char *empty[] = { "socket=" };
	char *unknown[] = { "sockets=/x" };
	char *toolong[] = { long_path };

	(void)state;
	conf_ok(0, none, SPANK_SOCKET_DEFAULT, false);
	conf_ok(2, both, "/run/z.sock", true);
	conf_bad(2, twice, "twice");
	conf_bad(2, socks, "twice");
	conf_bad(1, rel, "absolute");
	conf_bad(1, empty, "absolute");
	conf_bad(1, unknown, "unknown argument");
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	memcpy(long_path, "socket=/", 8);
	long_path[7 + SPANK_SOCKET_MAX] = '\0';	/* 108 bytes of path */
	conf_bad(1, toolong, "at most 107");
	long_path[7 + SPANK_SOCKET_MAX - 1] = '\0';	/* 107: fits */
	conf_ok(1, toolong, long_path + 7, false);
}

static size_t
gpus_ok(const char *s, unsigned *ids)
{
	char why[SPANK_WHY_MAX] = "";
	size_t n = 99;

	if (spank_parse_gpus(s, ids, &n, why) != 0)
		fail_msg("'%s' refused: %s", s, why);
	return n;
}

static void
gpus_bad(const char *s)
{
	unsigned ids[SPANK_GPUS_MAX];
	char why[SPANK_WHY_MAX] = "";
	size_t n;

	if (spank_parse_gpus(s, ids, &n, why) == 0)
		fail_msg("'%s' accepted (%zu GPUs)", s, n);
	assert_true(why[0] != '\0');
}

static void
test_gpus(void **state)
{
	unsigned ids[SPANK_GPUS_MAX];
	char many[SPANK_GPUS_MAX * 4 + 8];
	size_t len = 0;

	(void)state;
	assert_int_equal(gpus_ok("", ids), 0);
	assert_int_equal(gpus_ok("  ", ids), 0);
	assert_int_equal(gpus_ok("0", ids), 1);
	assert_int_equal(ids[0], 0);
	assert_int_equal(gpus_ok("3, 1 ,3,0", ids), 3);
	assert_int_equal(ids[0], 3);
	assert_int_equal(ids[1], 1);
	assert_int_equal(ids[2], 0);
	assert_int_equal(gpus_ok("65535", ids), 1);
	gpus_bad("65536");
	gpus_bad("1,,2");
	gpus_bad(",1");
	gpus_bad("1,");
	gpus_bad("01");
	gpus_bad("-1");
	gpus_bad("+1");
	gpus_bad("1-3");
	gpus_bad("NoDevFiles");
	gpus_bad("GPU-5b2e6f0a-1c2d-3e4f-5a6b-7c8d9e0f1a2b");
	gpus_bad("MIG-GPU-1/0/0");
	gpus_bad("0x1");
	gpus_bad("1 2");
	/* 64 distinct pass, 65 do not; duplicates do not count */
	for (unsigned i = 0; i < SPANK_GPUS_MAX; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s%u",
		    i ? "," : "", i);
	assert_int_equal(gpus_ok(many, ids), SPANK_GPUS_MAX);
	snprintf(many + len, sizeof(many) - len, ",0,1");
	assert_int_equal(gpus_ok(many, ids), SPANK_GPUS_MAX);
	snprintf(many + len, sizeof(many) - len, ",99");
	gpus_bad(many);
}

static void
test_label(void **state)
{
	char b[48];

	(void)state;
	spank_step_label(b, sizeof(b), 42, 0);
	assert_string_equal(b, "slurm:42.0");
	spank_step_label(b, sizeof(b), 7, 0xfffffffbu);
	assert_string_equal(b, "slurm:7.batch");
	spank_step_label(b, sizeof(b), 7, 0xfffffffcu);
	assert_string_equal(b, "slurm:7.extern");
	spank_step_label(b, sizeof(b), 7, 0xfffffffau);
	assert_string_equal(b, "slurm:7.interactive");
	spank_step_label(b, sizeof(b), 7, 0xfffffffdu);
	assert_string_equal(b, "slurm:7.special-2");
	spank_step_label(b, sizeof(b), 4294967295u, 4294967279u);
	assert_string_equal(b, "slurm:4294967295.4294967279");
	/* every label zeusd accepts */
	assert_null(lease_label_invalid(b));
	spank_step_label(b, sizeof(b), 4294967295u, 0xfffffff0u);
	assert_null(lease_label_invalid(b));
}

static void
test_report(void **state)
{
	static struct zeus_leases v;
	const struct zeus_lease *found[3];
	const unsigned ids[3] = { 2, 0, 5 };
	char line[512];

	(void)state;
	memset(&v, 0, sizeof(v));
	v.ended_count = 3;
	/* newest first: the newer lease of GPU 2 is the one taken */
	v.ended[0] = (struct zeus_lease){ .gpu = 2, .energy_j = 100.04,
	    .duration_s = 2.0, .energy = ZEUS_LEASE_ENERGY_OK };
	v.ended[1] = (struct zeus_lease){ .gpu = 2, .energy_j = 999,
	    .duration_s = 9, .energy = ZEUS_LEASE_ENERGY_OK };
	v.ended[2] = (struct zeus_lease){ .gpu = 0, .duration_s = 1.5,
	    .energy = ZEUS_LEASE_ENERGY_UNAVAILABLE };
	strcpy(v.ended[0].label, "slurm:1.0");
	strcpy(v.ended[1].label, "slurm:1.0");
	strcpy(v.ended[2].label, "slurm:1.0");
	assert_int_equal(spank_report_find(&v, "slurm:1.0", ids, 3, found), 2);
	assert_ptr_equal(found[0], &v.ended[0]);
	assert_ptr_equal(found[1], &v.ended[2]);
	assert_null(found[2]);
	spank_report_line(line, sizeof(line), "slurm:1.0", ids, 3, found);
	assert_string_equal(line, "zeus: slurm:1.0: GPU energy 100.0 J over "
	    "2.0 s (avg 50.0 W in all) on GPU 2: 100.0 J, GPU 0: unavailable, "
	    "GPU 5: no lease in zeusd's ledger");
	assert_int_equal(spank_report_find(&v, "slurm:1.1", ids, 3, found), 0);
	spank_report_line(line, sizeof(line), "slurm:1.1", ids, 1, found);
	assert_string_equal(line, "zeus: slurm:1.1: GPU energy unavailable on "
	    "GPU 2: no lease in zeusd's ledger");
	/* a short buffer is cut, terminated */
	spank_report_find(&v, "slurm:1.0", ids, 3, found);
	spank_report_line(line, 20, "slurm:1.0", ids, 3, found);
	assert_int_equal(strlen(line), 19);
}

/* What slurmstepd sends zeusd about its step, and reads of the answer. */
static void
test_step(void **state)
{
	const unsigned ids[] = { 0, 3, 65535 };
	char t[SPANK_STEP_TARGET_MAX], why[40];
	unsigned status;
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
	const char *no = "HTTP/1.1 403 Forbidden\r\n\r\n{\"error\":\"a\tb\"}";

	(void)state;
	assert_int_equal(spank_step_target(t, sizeof(t), true, 42, 0xfffffffbu,
	    1001, ids, 3), 0);
	assert_string_equal(t, "/slurm/step_start?job=42&step=4294967291&"
	    "uid=1001&gpu_ids=0,3,65535");
	assert_int_equal(spank_step_target(t, sizeof(t), false, 42, 7, 0, NULL,
	    0), 0);
	assert_string_equal(t, "/slurm/step_end?job=42&step=7");
	assert_int_equal(spank_step_target(t, sizeof(t), true, 42, 0, 1, ids,
	    0), -1);
	assert_int_equal(spank_step_target(t, 40, true, 42, 0, 1, ids, 3), -1);
	assert_int_equal(spank_step_answer(ok, strlen(ok), &status, why,
	    sizeof(why)), 0);
	assert_int_equal(status, 200);
	assert_string_equal(why, "{}");
	assert_int_equal(spank_step_answer(no, strlen(no), &status, why,
	    sizeof(why)), 0);
	assert_int_equal(status, 403);
	assert_string_equal(why, "{\"error\":\"a b\"}");
	assert_int_equal(spank_step_answer(no, 11, &status, why, sizeof(why)),
	    -1);
	assert_int_equal(spank_step_answer("HTTP/1.1 20x", 12, &status, why,
	    sizeof(why)), -1);
	assert_int_equal(spank_step_answer("HTTP/1.1 999", 12, &status, why,
	    sizeof(why)), -1);
	assert_int_equal(spank_step_answer("HTTP/1.1 503", 12, &status, why,
	    sizeof(why)), 0);
	assert_int_equal(status, 503);
	assert_string_equal(why, "");
	/* nothing listens: not an error to report */
	assert_int_equal(spank_step_tell("/nonexistent/zeusd.sock", t, 100,
	    why, sizeof(why)), SPANK_STEP_NO_ZEUSD);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conf),
		cmocka_unit_test(test_gpus),
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_report),
		cmocka_unit_test(test_step),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
