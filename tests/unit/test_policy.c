/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policy.c - the node policy loader (src/access/policy.c) and the
 * TOML extensions it parses with: what a grant gives, the union of grants,
 * root, and every refusal with its line number.
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

#include "access/policy.h"
#include "overrides/toml.h"

static struct policy *
parse_ok(const char *text)
{
	struct policy *p = NULL;
	struct zerr err = { 0 };

	if (policy_parse(text, strlen(text), "P", &p, &err) != 0)
		fail_msg("unexpected error: %s\n--- input:\n%s", err.msg, text);
	return p;
}

static void
expect_error(const char *text, const char *want)
{
	struct policy *p = NULL;
	struct zerr err = { 0 };

	if (policy_parse(text, strlen(text), "P", &p, &err) == 0)
		fail_msg("accepted:\n%s", text);
	assert_null(p);
	if (strstr(err.msg, want) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, want);
}

static struct policy_peer
peer(uid_t uid, gid_t gid)
{
	struct policy_peer pp = { .uid = uid, .ngids = 1, .gids = { gid } };

	return pp;
}

static void
test_grants(void **state)
{
	struct policy *p = parse_ok(
	    "# shared node\n"
	    "[[grant]]\n"
	    "users = [4242, 'root']\n"
	    "scopes = ['gpu-read', 'gpu-control']\n"
	    "gpus = [1, 3]\n"
	    "\n"
	    "[[grant]]\n"
	    "groups = [4343]\n"
	    "scopes = ['metrics', 'gpu-read']\n");
	struct policy_peer a = peer(4242, 4242), g = peer(5000, 4343),
	    both = peer(4242, 4343), none = peer(7, 7), root = peer(0, 0);

	(void)state;
	assert_int_equal(policy_grants(p), 2);
	assert_int_equal(policy_scopes(p, &a), GROUP_BIT(GROUP_GPU_READ) |
	    GROUP_BIT(GROUP_GPU_CONTROL));
	assert_true(policy_allows(p, &a, GROUP_GPU_CONTROL, 1));
	assert_true(policy_allows(p, &a, GROUP_GPU_CONTROL, 3));
	assert_false(policy_allows(p, &a, GROUP_GPU_CONTROL, 0));
	assert_false(policy_allows(p, &a, GROUP_GPU_READ, 2));
	assert_false(policy_allows(p, &a, GROUP_CPU_READ, 1));
	/* a grant without gpus covers every GPU */
	assert_true(policy_allows(p, &g, GROUP_GPU_READ, 200));
	assert_false(policy_allows(p, &g, GROUP_GPU_CONTROL, 1));
	/* the union: control on 1 and 3 from the user grant, reads everywhere
	 * from the group grant */
	assert_true(policy_allows(p, &both, GROUP_GPU_READ, 0));
	assert_false(policy_allows(p, &both, GROUP_GPU_CONTROL, 0));
	assert_int_equal(policy_scopes(p, &both), GROUP_DEFAULT_SET &
	    ~GROUP_BIT(GROUP_CPU_READ));
	assert_int_equal(policy_scopes(p, &none), 0);
	assert_false(policy_allows(p, &none, GROUP_GPU_READ, 0));
	/* root: everything, whatever the file says */
	assert_int_equal(policy_scopes(p, &root), GROUP_DEFAULT_SET);
	assert_true(policy_allows(p, &root, GROUP_GPU_CONTROL, 0));
	policy_free(p);
}

static void
test_supplementary_groups(void **state)
{
	struct policy *p = parse_ok("[[grant]]\ngroups = [0]\n"
	    "scopes = ['cpu-read']\n");
	struct policy_peer pp = peer(9, 9);
	struct identity id;

	(void)state;
	pp.gids[1] = 0;
	pp.ngids = 2;
	assert_true(policy_allows(p, &pp, GROUP_CPU_READ, 0));
	/* getgrouplist for root's name includes its primary group */
	identity_lookup(0, 0, getpid(), &id);
	assert_string_equal(id.user, "root");
	assert_true(id.comm[0] != '\0');
	policy_peer_init(&pp, 0, &id);
	assert_true(pp.ngids >= 1 && pp.gids[0] == 0);
	/* a uid without a passwd entry keeps just its primary gid */
	identity_lookup(4242, 77, 0, &id);
	assert_string_equal(id.user, "");
	assert_string_equal(id.comm, "");
	policy_peer_init(&pp, 4242, &id);
	assert_int_equal(pp.ngids, 1);
	assert_int_equal(pp.gids[0], 77);
	policy_free(p);
}

/*
 * What the device process hands the network process: names become ids,
 * and the text parses into a policy that decides every case the same way.
 */
static void
test_numeric_format_round_trips(void **state)
{
	struct policy *p = parse_ok(
	    "[[grant]]\n"
	    "users = ['root', 4242]\n"
	    "groups = ['root']\n"
	    "scopes = ['gpu-control', 'metrics']\n"
	    "gpus = [0, 63, 64, 255]\n"
	    "[[grant]]\n"
	    "groups = [4343]\n"
	    "scopes = ['cpu-read']\n"), *q;
	uid_t uids[] = { 0, 4242, 5000, 7 };
	gid_t gids[] = { 0, 4343, 9 };
	struct zerr err = { 0 };
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(policy_format_numeric(p, &text, &len, &err), 0);
	assert_int_equal(strlen(text), len);
	assert_null(strstr(text, "root"));
	assert_non_null(strstr(text, "users = [0, 4242]"));
	assert_non_null(strstr(text, "gpus = [0, 63, 64, 255]"));
	q = parse_ok(text);
	assert_int_equal(policy_grants(q), 2);
	for (size_t u = 0; u < sizeof(uids) / sizeof(uids[0]); u++)
		for (size_t g = 0; g < sizeof(gids) / sizeof(gids[0]); g++) {
			struct policy_peer pp = peer(uids[u], gids[g]);

			assert_int_equal(policy_scopes(p, &pp),
			    policy_scopes(q, &pp));
			for (int sc = 0; sc < GROUP_COUNT; sc++)
				for (unsigned k = 0; k < POLICY_MAX_GPUS; k++)
					assert_int_equal(policy_allows(p, &pp,
					    (enum api_group)sc, k),
					    policy_allows(q, &pp,
					    (enum api_group)sc, k));
		}
	free(text);
	policy_free(q);
	policy_free(p);
	/* an empty policy: an empty file */
	p = parse_ok("# none\n");
	assert_int_equal(policy_format_numeric(p, &text, &len, &err), 0);
	assert_int_equal(len, 0);
	free(text);
	policy_free(p);
}

static void
test_empty_policy_grants_nothing(void **state)
{
	struct policy *p = parse_ok("# nobody but root\n");
	struct policy_peer pp = peer(1000, 1000);

	(void)state;
	assert_int_equal(policy_grants(p), 0);
	assert_int_equal(policy_scopes(p, &pp), 0);
	policy_free(p);
}

/* slurm_jobs, the one key before the grants, and its numeric form. */
static void
test_slurm_jobs(void **state)
{
	struct policy *p, *q;
	struct zerr err = { 0 };
	char *text = NULL;
	size_t len = 0;

	(void)state;
	p = parse_ok("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n");
	assert_false(policy_slurm_confine(p));
	policy_free(p);
	assert_false(policy_slurm_confine(NULL));
	p = parse_ok("slurm_jobs = 'off'\n");
	assert_false(policy_slurm_confine(p));
	policy_free(p);
	p = parse_ok("# keep jobs to their GPUs\nslurm_jobs = \"confine\"\n"
	    "[[grant]]\nusers = [4242]\nscopes = ['gpu-control']\n");
	assert_true(policy_slurm_confine(p));
	assert_int_equal(policy_grants(p), 1);
	assert_int_equal(policy_format_numeric(p, &text, &len, &err), 0);
	assert_non_null(strstr(text, "slurm_jobs = \"confine\"\n[[grant]]"));
	q = parse_ok(text);
	assert_true(policy_slurm_confine(q));
	assert_int_equal(policy_grants(q), 1);
	free(text);
	policy_free(q);
	policy_free(p);
	expect_error("slurm_jobs = 'on'\n", "line 1: slurm_jobs must be "
	    "\"confine\" or \"off\"");
	expect_error("slurm_jobs = 1\n", "line 1: slurm_jobs must be");
	expect_error("slurm_jobs = ['confine']\n", "slurm_jobs must be");
	expect_error("slurm_jobs = 'confine'\nslurm_jobs = 'off'\n",
	    "line 2");
	expect_error("slurm_job = 'confine'\n", "line 1: key 'slurm_job' must "
	    "be inside a [[grant]] (the only keys outside one are slurm_jobs and max_leased_gpus)");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n"
	    "slurm_jobs = 'confine'\n", "line 4: unknown key 'slurm_jobs' in "
	    "[[grant]]");
}

static void
test_errors(void **state)
{
	(void)state;
	expect_error("users = [1]\n", "P: line 1: key 'users' must be inside");
	expect_error("[grant]\nusers = [1]\nscopes = ['gpu-read']\n",
	    "line 1: unknown table [grant] (expected [[grant]])");
	expect_error("[[rule]]\n", "line 1: unknown table [rule]");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n"
	    "color = 1\n", "line 4: unknown key 'color' in [[grant]]");
	expect_error("[[grant]]\nusers = [1]\n", "line 1: [[grant]] has no "
	    "scopes");
	expect_error("[[grant]]\nscopes = ['gpu-read']\n", "line 1: "
	    "[[grant]] names no users and no groups");
	expect_error("[[grant]]\nusers = 'root'\nscopes = ['gpu-read']\n",
	    "line 2: users must be an array");
	expect_error("[[grant]]\nusers = ['no-such-user-zz9']\n"
	    "scopes = ['gpu-read']\n", "line 2: unknown user "
	    "'no-such-user-zz9'");
	expect_error("[[grant]]\ngroups = [\n  1,\n  'no-such-group-zz9',\n]\n"
	    "scopes = ['gpu-read']\n", "line 4: unknown group");
	expect_error("[[grant]]\nusers = [-1]\nscopes = ['gpu-read']\n",
	    "line 2: users id -1 is out of range");
	expect_error("[[grant]]\nusers = [4294967295]\nscopes = ['gpu-read']\n",
	    "out of range");
	expect_error("[[grant]]\nusers = [1]\nscopes = []\n", "line 3: scopes "
	    "must be a non-empty array");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read', 7]\n",
	    "line 3: unknown scope (an integer)");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['GPU-READ']\n",
	    "line 3: unknown scope 'GPU-READ'");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n"
	    "gpus = [256]\n", "line 4: GPU ids must be integers from 0 to 255");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n"
	    "gpus = []\n", "line 4: gpus must be a non-empty array");
	expect_error("[[grant]]\nusers = [true]\n", "line 2: arrays may only "
	    "hold strings and integers");
	expect_error("[[grant]]\nusers = [1]\nscopes = ['gpu-read']\n"
	    "[grant]\n", "line 4: [grant] is both a table and an array");
	expect_error("[[grant]\n", "line 1: unexpected");
	expect_error("[[grant]]\nusers = [[1]]\n", "nested arrays");
}

/* The overrides file keeps refusing what only the policy file may use. */
static void
test_toml_extensions_are_opt_in(void **state)
{
	struct toml_doc *d = NULL;
	struct zerr err = { 0 };
	const char *t = "[[a]]\nk = [1, 'x']\n[[a]]\n";

	(void)state;
	assert_int_equal(toml_parse(t, strlen(t), &d, &err), -1);
	assert_non_null(strstr(err.msg, "arrays of tables"));
	assert_int_equal(toml_parse_ext(t, strlen(t), TOML_ALLOW_TABLE_ARRAYS,
	    &d, &err), -1);
	assert_non_null(strstr(err.msg, "line 2: arrays may only hold "
	    "strings"));
	assert_int_equal(toml_parse_ext(t, strlen(t), TOML_ALLOW_TABLE_ARRAYS |
	    TOML_ALLOW_INT_ITEMS, &d, &err), 0);
	assert_int_equal(d->n_tables, 3);
	assert_true(d->tables[1].array && d->tables[2].array);
	assert_int_equal(d->tables[1].keys[0].v.items[0].type, TOML_INT);
	assert_int_equal(d->tables[1].keys[0].v.items[0].i, 1);
	assert_int_equal(d->tables[1].keys[0].v.items[1].type, TOML_STRING);
	assert_int_equal(d->tables[2].line, 3);
	toml_free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grants),
		cmocka_unit_test(test_supplementary_groups),
		cmocka_unit_test(test_numeric_format_round_trips),
		cmocka_unit_test(test_empty_policy_grants_nothing),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_slurm_jobs),
		cmocka_unit_test(test_toml_extensions_are_opt_in),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
