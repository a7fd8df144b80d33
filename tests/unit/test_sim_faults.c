/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sim_faults.c - the simulators' shared fault rules (sim/faults.c):
 * the rule grammar in a strict dialect (the NVML simulator's) and a lenient
 * one (the AMD SMI simulator's), the parser's bounds (rule length, rule
 * count, every field's range), which rule decides a call, and the control
 * file, the call log and configure's errors through the environment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"

static const char *const fns[] = { "f0", "f1", "f2" };

static const struct sim_code codes[] = {
	{ 0, "SUCCESS", "Success" },
	{ 3, "BAD", "Bad" },
	{ 0xFFFFFFFFu, "UNKNOWN", NULL },
};

static const struct sim_dialect strict = {
	.tag = "test-sim", .fns = fns, .nfns = 3, .codes = codes,
	.ncodes = 3, .prefix = "X_ERROR_", .success = "X_SUCCESS",
	.code_max = 999, .gpu_max = 63, .other = NULL, .strict = true,
};

static const struct sim_dialect lenient = {
	.tag = "test-sim", .fns = fns, .nfns = 3, .codes = codes,
	.ncodes = 3, .prefix = "X_STATUS_", .success = NULL,
	.code_max = 0xFFFFFFFFu, .gpu_max = 15, .other = "OTHER",
	.strict = false, .extra_words = true, .control_live = true,
};

/* One line through the parser: 0 or -1, and the rule it added. */
static int
parse1(const struct sim_dialect *d, const char *text, struct sim_rule *out)
{
	static struct sim_rules rules;
	char line[SIM_RULE_MAX];
	int rc;

	rules.n = 0;
	snprintf(line, sizeof(line), "%s", text);
	rc = sim_rule_parse(d, line, &rules);
	if (rc == 0 && rules.n == 1)
		*out = rules.r[0];
	else if (rc == 0)
		out->kind = (enum sim_rule_kind)-1;	/* nothing added */
	return rc;
}

static void
test_grammar(void **state)
{
	struct sim_rule r;

	assert_int_equal(parse1(&strict, "fail f1 2 BAD", &r), 0);
	assert_int_equal(r.kind, SIM_FAIL);
	assert_int_equal(r.fn, 1);
	assert_int_equal(r.gpu, 2);
	assert_int_equal(r.code, 3);
	assert_int_equal(parse1(&strict, " delay\t*  *\t600000\r", &r), 0);
	assert_int_equal(r.kind, SIM_DELAY);
	assert_int_equal(r.fn, -1);
	assert_int_equal(r.gpu, -1);
	assert_int_equal(r.delay_ms, 600000);
	/* code spellings: prefixed, the success alias, a number */
	assert_int_equal(parse1(&strict, "fail * * X_ERROR_BAD", &r), 0);
	assert_int_equal(r.code, 3);
	assert_int_equal(parse1(&strict, "fail * * X_SUCCESS", &r), 0);
	assert_int_equal(r.code, 0);
	assert_int_equal(parse1(&strict, "fail * * 999", &r), 0);
	assert_int_equal(r.code, 999);
	assert_int_equal(parse1(&strict, "fail * 63 UNKNOWN", &r), 0);
	assert_int_equal(r.code, 0xFFFFFFFFu);
	/* blank lines and comments add nothing, however long */
	assert_int_equal(parse1(&strict, "", &r), 0);
	assert_int_equal((int)r.kind, -1);
	assert_int_equal(parse1(&strict, " \t\r", &r), 0);
	assert_int_equal((int)r.kind, -1);
	assert_int_equal(parse1(&strict, "# a comment of many words here",
	    &r), 0);
	assert_int_equal((int)r.kind, -1);
	assert_int_equal(parse1(&strict, "  #fail f1 2 BAD", &r), 0);
	assert_int_equal((int)r.kind, -1);

	/* malformed, each field in turn */
	assert_int_equal(parse1(&strict, "fial f1 2 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f3 2 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f 2 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 64 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 -1 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 +1 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 1x BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2 WORSE", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2 X_STATUS_BAD", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2 1000", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2 -3", &r), -1);
	assert_int_equal(parse1(&strict, "delay f1 2 600001", &r), -1);
	assert_int_equal(parse1(&strict, "delay f1 2 BAD", &r), -1);
	assert_int_equal(parse1(&strict, "delay f1 2 99999999999999999999",
	    &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2", &r), -1);
	assert_int_equal(parse1(&strict, "fail f1 2 BAD # why", &r), -1);

	/* the lenient dialect: its own prefix, ranges, and extra words */
	assert_int_equal(parse1(&lenient, "fail f1 2 BAD # why", &r), 0);
	assert_int_equal(r.code, 3);
	assert_int_equal(parse1(&lenient, "fail f1 2 X_STATUS_BAD x y z w",
	    &r), 0);
	assert_int_equal(r.code, 3);
	assert_int_equal(parse1(&lenient, "fail f1 2 4294967295", &r), 0);
	assert_int_equal(r.code, 0xFFFFFFFFu);
	assert_int_equal(parse1(&lenient, "fail f1 2 4294967296", &r), -1);
	assert_int_equal(parse1(&lenient, "fail f1 16 BAD", &r), -1);
	assert_int_equal(parse1(&lenient, "fail * * X_SUCCESS", &r), -1);
	assert_int_equal(parse1(&lenient, "fail f1 2", &r), -1);
}

static void
test_bounds(void **state)
{
	static char text[64 * SIM_RULE_MAX];
	struct sim_rules *rules = malloc(sizeof(*rules));
	size_t n;

	assert_non_null(rules);
	/* A rule of SIM_RULE_MAX - 1 bytes is read; one byte more is not,
	 * and the rules after it still are. */
	n = (size_t)snprintf(text, sizeof(text), "fail f1 2 BAD");
	memset(text + n, ' ', SIM_RULE_MAX - 1 - n);
	strcpy(text + SIM_RULE_MAX - 1, ";fail f2 * BAD");
	assert_int_equal(sim_rules_parse(&lenient, text, ";\n", false, rules),
	    0);
	assert_int_equal(rules->n, 2);
	n = (size_t)snprintf(text, sizeof(text), "fail f1 2 BAD");
	memset(text + n, ' ', SIM_RULE_MAX - n);
	strcpy(text + SIM_RULE_MAX, ";fail f2 * BAD");
	assert_int_equal(sim_rules_parse(&lenient, text, ";\n", false, rules),
	    0);
	assert_int_equal(rules->n, 1);
	assert_int_equal(rules->r[0].fn, 2);
	assert_int_equal(sim_rules_parse(&strict, text, ";\n", true, rules),
	    -1);

	/* A word as long as a rule: no overflow anywhere. */
	memset(text, 'f', SIM_RULE_MAX - 1);
	text[SIM_RULE_MAX - 1] = '\0';
	assert_int_equal(sim_rules_parse(&strict, text, "\n", false, rules), 0);
	assert_int_equal(rules->n, 0);
	memcpy(text, "fail ", 5);
	assert_int_equal(sim_rules_parse(&strict, text, "\n", true, rules), -1);

	/* SIM_MAX_RULES rules, and not one more. */
	text[0] = '\0';
	for (unsigned i = 0; i <= SIM_MAX_RULES; i++)
		strcat(text, i % 2 ? "delay * * 1\n" : "fail * * BAD\n");
	assert_int_equal(sim_rules_parse(&lenient, text, "\n", false, rules),
	    0);
	assert_int_equal(rules->n, SIM_MAX_RULES);
	assert_int_equal(sim_rules_parse(&strict, text, "\n", true, rules),
	    -1);
	free(rules);
}

static void
test_match(void **state)
{
	struct sim_rules *rules = malloc(sizeof(*rules));
	const struct sim_rule *r;

	assert_non_null(rules);
	assert_int_equal(sim_rules_parse(&strict, "delay f1 * 5;fail f1 1 BAD;"
	    "fail * * 7;fail f1 1 SUCCESS;delay * 1 9", ";", true, rules), 0);
	assert_int_equal(rules->n, 5);
	/* the first matching rule of each kind */
	r = sim_rule_find(rules, SIM_FAIL, 1, 1);
	assert_non_null(r);
	assert_int_equal(r->code, 3);
	r = sim_rule_find(rules, SIM_DELAY, 1, 1);
	assert_non_null(r);
	assert_int_equal(r->delay_ms, 5);
	r = sim_rule_find(rules, SIM_DELAY, 2, 1);
	assert_non_null(r);
	assert_int_equal(r->delay_ms, 9);
	/* a call without a GPU matches only `*` */
	r = sim_rule_find(rules, SIM_FAIL, 1, -1);
	assert_non_null(r);
	assert_int_equal(r->code, 7);
	assert_null(sim_rule_find(rules, SIM_DELAY, 2, -1));
	assert_int_equal(sim_code_find(&strict, 3)->name[0], 'B');
	assert_null(sim_code_find(&strict, 4));
	free(rules);
}

static char dir[64], ctl[128], log_path[128];

static void
write_file(const char *path, const char *text)
{
	char tmp[160];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0);
}

static unsigned
call(struct sim_faults *f, unsigned fn, int gpu, unsigned rc)
{
	struct sim_call c;
	unsigned code;

	sim_call_start(&c, fn, gpu);
	code = sim_faults_begin(f, &c);
	sim_call_args(&c, "%s", "a b");
	sim_faults_end(f, &c, code != 0 ? code : rc);
	return code;
}

static void
test_control_and_log(void **state)
{
	static struct sim_faults s = SIM_FAULTS_INIT(&strict);
	static struct sim_faults l = SIM_FAULTS_INIT(&lenient);
	char text[1024];
	FILE *f;
	size_t n;

	snprintf(dir, sizeof(dir), "/tmp/test_sim_faults.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(ctl, sizeof(ctl), "%s/ctl", dir);
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	setenv("ZEUS_SIM_FAULTS", "fail f1 * BAD;delay f2 0 1", 1);
	setenv("ZEUS_SIM_CONTROL", ctl, 1);
	setenv("ZEUS_SIM_LOG", log_path, 1);
	assert_int_equal(sim_faults_configure(&s), 0);

	/* the environment's rules, then the control file's over them */
	assert_int_equal(call(&s, 1, 0, 0), 3);
	write_file(ctl, "# lifted\nfail f1 0 SUCCESS\nnot a rule\n");
	assert_int_equal(call(&s, 1, 0, 0), 0);
	assert_int_equal(call(&s, 1, 1, 0), 3);
	unlink(ctl);
	assert_int_equal(call(&s, 1, 0, 0), 3);
	call(&s, 2, -1, 42);

	/* what the log says of those calls */
	f = fopen(log_path, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	assert_non_null(strstr(text, " f1 0 a b rc=BAD end_ns="));
	assert_non_null(strstr(text, " f1 0 a b rc=SUCCESS end_ns="));
	assert_non_null(strstr(text, " f2 - a b rc=42 end_ns="));
	assert_int_equal(text[n - 1], '\n');
	sim_faults_close_log(&s);

	/* strict: a bad rule or log fails configure; lenient skips them */
	setenv("ZEUS_SIM_FAULTS", "fail f1 * BAD;fail f9 * BAD", 1);
	assert_int_equal(sim_faults_configure(&s), -1);
	assert_int_equal(sim_faults_configure(&l), 0);
	assert_int_equal(call(&l, 1, 3, 0), 3);
	setenv("ZEUS_SIM_FAULTS", "", 1);
	setenv("ZEUS_SIM_LOG", "/nonexistent/dir/log", 1);
	assert_int_equal(sim_faults_configure(&s), -1);
	sim_faults_close_log(&l);
	assert_int_equal(sim_faults_configure(&l), 0);

	/* lenient: ZEUS_SIM_CONTROL is read at every call */
	unsetenv("ZEUS_SIM_CONTROL");
	write_file(ctl, "fail f0 * 77\n");
	assert_int_equal(call(&l, 0, 0, 0), 0);
	setenv("ZEUS_SIM_CONTROL", ctl, 1);
	assert_int_equal(call(&l, 0, 0, 0), 77);
	unsetenv("ZEUS_SIM_CONTROL");
	assert_int_equal(call(&l, 0, 0, 0), 0);

	unsetenv("ZEUS_SIM_FAULTS");
	unsetenv("ZEUS_SIM_LOG");
	unlink(ctl);
	unlink(log_path);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grammar),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_control_and_log),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
