/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_overrides.c - GPU command overrides: every load error, the trust
 * check, every placeholder of every operation substituted, execution rules
 * (stop at first failure, error_pattern after exit 0, timeouts, missing
 * programs, message shape) and the backend wrapper's forwarding. Commands
 * are the helper scripts in tests/integration/helpers.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "overrides/overrides.h"

static char helpers[1024];
static char tmpdir[256];

static int
setup(void **state)
{
	const char *env = getenv("ZEUS_TEST_HELPERS");
	char buf[PATH_MAX], *slash;

	(void)state;
	if (env != NULL) {
		snprintf(buf, sizeof(buf), "%.3000s", env);
	} else {
		snprintf(buf, sizeof(buf), "%s", __FILE__);
		slash = strrchr(buf, '/');
		if (slash != NULL)
			snprintf(slash, sizeof(buf) - (size_t)(slash - buf),
			    "/../integration/helpers");
		else
			snprintf(buf, sizeof(buf), "../integration/helpers");
	}
	if (realpath(buf, helpers) == NULL ||
	    strlen(helpers) > 900) {
		fprintf(stderr, "helpers not found (set ZEUS_TEST_HELPERS)\n");
		return -1;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/zeus-ov-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	return chmod(tmpdir, 0755);	/* reachable after seteuid below */
}

static int
teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Replaces @H@ with the helpers dir and @T@ with the temp dir. */
static char *
expand(const char *tmpl)
{
	size_t cap = strlen(tmpl) * 4 + 4096, o = 0;
	char *out = malloc(cap);

	assert_non_null(out);
	for (const char *p = tmpl; *p != '\0';) {
		const char *rep = NULL;

		if (strncmp(p, "@H@", 3) == 0)
			rep = helpers;
		else if (strncmp(p, "@T@", 3) == 0)
			rep = tmpdir;
		if (rep != NULL) {
			o += (size_t)snprintf(out + o, cap - o, "%s", rep);
			p += 3;
		} else {
			out[o++] = *p++;
		}
		assert_true(o < cap);
	}
	out[o] = '\0';
	return out;
}

static struct overrides *
parse_ok(const char *tmpl)
{
	char *text = expand(tmpl);
	struct overrides *ov = NULL;
	struct zerr err = { 0 };

	if (overrides_parse(text, strlen(text), "ov.toml", &ov, &err) != 0)
		fail_msg("unexpected error: %s", err.msg);
	free(text);
	return ov;
}

static char *
slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f == NULL)
		return strcpy(buf, "");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void
record_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", tmpdir, name);
	unlink(buf);
}

/* ---- load errors ------------------------------------------------------ */

struct bad_case {
	const char *text;
	const char *msg;
};

static const struct bad_case bad[] = {
	{ "x = 1\n", "ov.toml: line 1: key 'x' must be inside an operation's "
	    "table, such as [set_power_limit]" },
	{ "\n[set_power]\ncommands = ['a']\n", "ov.toml: line 2: unknown "
	    "table [set_power] (expected one of: set_power_limit, "
	    "set_persistence_mode, set_gpu_locked_clocks, "
	    "reset_gpu_locked_clocks, set_mem_locked_clocks, "
	    "reset_mem_locked_clocks, reset_locked_clocks)" },
	{ "[set_power_limit]\ncommands = ['a']\nretries = 3\n", "ov.toml: "
	    "line 3: unknown key 'retries' in [set_power_limit] (expected "
	    "commands, error_pattern or timeout_s)" },
	{ "[set_power_limit]\ntimeout_s = 5\n", "ov.toml: line 1: "
	    "[set_power_limit] has no commands" },
	{ "[set_power_limit]\ncommands = 'a'\n", "ov.toml: line 2: "
	    "[set_power_limit] commands must be an array of strings" },
	{ "[set_power_limit]\ncommands = []\n", "ov.toml: line 2: "
	    "[set_power_limit] commands is empty" },
	{ "[set_power_limit]\ncommands = [\n  'a',\n  '  ',\n]\n", "ov.toml: "
	    "line 4: [set_power_limit] command \"  \" is empty" },
	{ "[set_power_limit]\ncommands = ['']\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"\" is empty" },
	{ "[set_power_limit]\ncommands = ['bin/smi -pl 1']\n", "ov.toml: line "
	    "2: [set_power_limit] command \"bin/smi -pl 1\": the program must "
	    "be an absolute path or a name looked up in PATH" },
	{ "[set_power_limit]\ncommands = [\"a 'b\"]\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"a 'b\": unterminated single quote "
	    "(opened at offset 2)" },
	{ "[set_power_limit]\ncommands = ['a\\']\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"a\\\\\": trailing backslash" },
	{ "[set_power_limit]\ncommands = ['smi -i {gpu}']\n", "ov.toml: line "
	    "2: [set_power_limit] command \"smi -i {gpu}\": unknown "
	    "placeholder '{gpu}'" },
	{ "[set_power_limit]\ncommands = ['smi {GPU_ID}']\n", "ov.toml: line "
	    "2: [set_power_limit] command \"smi {GPU_ID}\": unknown "
	    "placeholder '{GPU_ID}'" },
	{ "[set_power_limit]\ncommands = ['smi -i {gpu_id']\n", "ov.toml: line "
	    "2: [set_power_limit] command \"smi -i {gpu_id\": unterminated "
	    "placeholder '{gpu_id' (write '{{' for a literal brace)" },
	{ "[set_power_limit]\ncommands = ['smi {']\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"smi {\": unterminated placeholder "
	    "'{' (write '{{' for a literal brace)" },
	{ "[set_power_limit]\ncommands = ['smi {}']\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"smi {}\": empty placeholder '{}'" },
	{ "[set_power_limit]\ncommands = ['smi x}']\n", "ov.toml: line 2: "
	    "[set_power_limit] command \"smi x}\": unbalanced '}' (write '}}' "
	    "for a literal brace)" },
	{ "[set_power_limit]\ncommands = ['smi {a{gpu_id}}']\n", "ov.toml: "
	    "line 2: [set_power_limit] command \"smi {a{gpu_id}}\": malformed "
	    "placeholder '{a{' (write '{{' and '}}' for literal braces)" },
	{ "[set_power_limit]\ncommands = ['smi \"{gpu_id} {enabled}\"']\n",
	    "ov.toml: line 2: [set_power_limit] command \"smi \\\"{gpu_id} "
	    "{enabled}\\\"\": placeholder '{enabled}' is not allowed for "
	    "set_power_limit (allowed: {gpu_id}, {power_limit_mw}, "
	    "{power_limit_w})" },
	{ "[set_persistence_mode]\ncommands = ['smi -pl {power_limit_w}']\n",
	    "ov.toml: line 2: [set_persistence_mode] command \"smi -pl "
	    "{power_limit_w}\": placeholder '{power_limit_w}' is not allowed "
	    "for set_persistence_mode (allowed: {gpu_id}, {enabled})" },
	{ "[reset_gpu_locked_clocks]\ncommands = ['smi {min_clock_mhz}']\n",
	    "ov.toml: line 2: [reset_gpu_locked_clocks] command \"smi "
	    "{min_clock_mhz}\": placeholder '{min_clock_mhz}' is not allowed "
	    "for reset_gpu_locked_clocks (allowed: {gpu_id})" },
	{ "[set_mem_locked_clocks]\ncommands = ['smi {power_limit_mw}']\n",
	    "ov.toml: line 2: [set_mem_locked_clocks] command \"smi "
	    "{power_limit_mw}\": placeholder '{power_limit_mw}' is not "
	    "allowed for set_mem_locked_clocks (allowed: {gpu_id}, "
	    "{min_clock_mhz}, {max_clock_mhz})" },
	{ "[reset_locked_clocks]\ncommands = ['a', 'b {max_clock_mhz}']\n",
	    "ov.toml: line 2: [reset_locked_clocks] command \"b "
	    "{max_clock_mhz}\": placeholder '{max_clock_mhz}' is not allowed "
	    "for reset_locked_clocks (allowed: {gpu_id})" },
	{ "[set_power_limit]\ncommands = ['a']\nerror_pattern = '(unclosed'\n",
	    "ov.toml: line 3: [set_power_limit] error_pattern: missing closing "
	    "parenthesis at offset 9" },
	{ "[set_power_limit]\ncommands = ['a']\nerror_pattern = ''\n",
	    "ov.toml: line 3: [set_power_limit] error_pattern is empty (it "
	    "would match every output)" },
	{ "[set_power_limit]\ncommands = ['a']\nerror_pattern = ['x']\n",
	    "ov.toml: line 3: [set_power_limit] error_pattern must be a "
	    "string" },
	{ "[set_power_limit]\ncommands = ['a']\ntimeout_s = 0\n", "ov.toml: "
	    "line 3: [set_power_limit] timeout_s must be an integer from 1 to "
	    "86400" },
	{ "[set_power_limit]\ncommands = ['a']\ntimeout_s = -5\n", "ov.toml: "
	    "line 3: [set_power_limit] timeout_s must be an integer from 1 to "
	    "86400" },
	{ "[set_power_limit]\ncommands = ['a']\ntimeout_s = 86401\n",
	    "ov.toml: line 3: [set_power_limit] timeout_s must be an integer "
	    "from 1 to 86400" },
	{ "[set_power_limit]\ncommands = ['a']\ntimeout_s = '60'\n",
	    "ov.toml: line 3: [set_power_limit] timeout_s must be an integer "
	    "from 1 to 86400" },
	{ "[set_power_limit]\ncommands = ['a']\ntimeout_s = 1.5\n",
	    "ov.toml: line 3: floats are not supported" },
	{ "[set_power_limit]\ncommands = ['a']\n[set_power_limit]\n",
	    "ov.toml: line 3: duplicate table [set_power_limit]" },
	{ "[set_power_limit]\ncommands = ['a']\ncommands = ['b']\n",
	    "ov.toml: line 3: duplicate key 'commands'" },
};

static void
test_load_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct overrides *ov = (struct overrides *)1;
		struct zerr err = { 0 };

		if (overrides_parse(bad[i].text, strlen(bad[i].text), "ov.toml",
		    &ov, &err) == 0)
			fail_msg("case %zu accepted", i);
		assert_null(ov);
		assert_int_equal(err.kind, ZERR_INVALID);
		if (strcmp(err.msg, bad[i].msg) != 0)
			fail_msg("case %zu:\n got: %s\nwant: %s", i, err.msg,
			    bad[i].msg);
	}
}

static void
test_too_many_commands(void **state)
{
	char text[4096];
	size_t n = (size_t)snprintf(text, sizeof(text),
	    "[set_power_limit]\ncommands = [");
	struct overrides *ov;
	struct zerr err = { 0 };

	(void)state;
	for (int i = 0; i <= OVERRIDES_MAX_COMMANDS; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "'a',");
	n += (size_t)snprintf(text + n, sizeof(text) - n, "]\n");
	assert_int_equal(overrides_parse(text, n, "f", &ov, &err), -1);
	assert_string_equal(err.msg, "f: line 2: [set_power_limit] more than "
	    "32 commands");
}

static void
test_valid_file(void **state)
{
	struct overrides *ov = parse_ok(
	    "# all seven\n"
	    "[set_power_limit]\ncommands = ['a {gpu_id} {power_limit_mw} "
	    "{power_limit_w}']\nerror_pattern = '(?i)error|fail|cannot'\n"
	    "timeout_s = 86400\n"
	    "[set_persistence_mode]\ncommands = ['a {enabled}']\n"
	    "[set_gpu_locked_clocks]\ncommands = ['a {min_clock_mhz} "
	    "{max_clock_mhz}']\n"
	    "[reset_gpu_locked_clocks]\ncommands = ['a {gpu_id}']\n"
	    "[set_mem_locked_clocks]\ncommands = ['a {min_clock_mhz} "
	    "{max_clock_mhz}']\n"
	    "[reset_mem_locked_clocks]\ncommands = ['a']\n"
	    "[reset_locked_clocks]\ncommands = ['a {{literal}} }}{{']\n");

	(void)state;
	assert_int_equal(overrides_count(ov), GPU_WRITE_OP_COUNT);
	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++)
		assert_true(overrides_has(ov, (enum gpu_write_op)op));
	overrides_free(ov);
	ov = parse_ok("[set_power_limit]\ncommands = ['a']\n");
	assert_int_equal(overrides_count(ov), 1);
	assert_true(overrides_has(ov, GPU_SET_POWER_LIMIT));
	assert_false(overrides_has(ov, GPU_RESET_LOCKED_CLOCKS));
	overrides_free(ov);
	ov = parse_ok("# nothing overridden\n");
	assert_int_equal(overrides_count(ov), 0);
	overrides_free(ov);
	assert_int_equal(overrides_count(NULL), 0);
}

/* ---- substitution ----------------------------------------------------- */

static void
run_ok(struct overrides *ov, unsigned gpu, const struct gpu_write *w)
{
	struct zerr err = { 0 };

	if (overrides_run(ov, gpu, w, &err) != 0)
		fail_msg("overrides_run: %s", err.msg);
}

static void
test_every_placeholder_substituted(void **state)
{
	char rec[512];
	struct overrides *ov;
	struct gpu_write w;

	(void)state;
	record_path(rec, sizeof(rec), "subst.txt");
	ov = parse_ok(
	    "[set_power_limit]\ncommands = [\"@H@/record-argv @T@/subst.txt "
	    "spl -i {gpu_id} --mw={power_limit_mw} '{power_limit_w} W' "
	    "{{gpu_id}}\"]\n"
	    "[set_persistence_mode]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt spm {gpu_id} -pm {enabled}']\n"
	    "[set_gpu_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt sgc {gpu_id} -lgc {min_clock_mhz},{max_clock_mhz}']\n"
	    "[reset_gpu_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt rgc {gpu_id}{gpu_id}']\n"
	    "[set_mem_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt smc {gpu_id} -lmc {min_clock_mhz} {max_clock_mhz}']\n"
	    "[reset_mem_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt rmc \"{gpu_id}\" \"\" }}{{']\n"
	    "[reset_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/subst.txt rlc -i={gpu_id}']\n");

	w = (struct gpu_write){ .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 250999 };
	run_ok(ov, 3, &w);
	w = (struct gpu_write){ .op = GPU_SET_PERSISTENCE_MODE,
	    .enabled = true };
	run_ok(ov, 0, &w);
	w.enabled = false;
	run_ok(ov, 1, &w);
	w = (struct gpu_write){ .op = GPU_SET_GPU_LOCKED_CLOCKS,
	    .min_clock_mhz = 210, .max_clock_mhz = 1980 };
	run_ok(ov, 7, &w);
	w = (struct gpu_write){ .op = GPU_RESET_GPU_LOCKED_CLOCKS };
	run_ok(ov, 12, &w);
	w = (struct gpu_write){ .op = GPU_SET_MEM_LOCKED_CLOCKS,
	    .min_clock_mhz = 405, .max_clock_mhz = 4294967295u };
	run_ok(ov, 2, &w);
	w = (struct gpu_write){ .op = GPU_RESET_MEM_LOCKED_CLOCKS };
	run_ok(ov, 5, &w);
	w = (struct gpu_write){ .op = GPU_RESET_LOCKED_CLOCKS };
	run_ok(ov, 4, &w);
	assert_string_equal(slurp(rec),
	    "6 [spl] [-i] [3] [--mw=250999] [250 W] [{gpu_id}]\n"
	    "4 [spm] [0] [-pm] [1]\n"
	    "4 [spm] [1] [-pm] [0]\n"
	    "4 [sgc] [7] [-lgc] [210,1980]\n"
	    "2 [rgc] [1212]\n"
	    "5 [smc] [2] [-lmc] [405] [4294967295]\n"
	    "4 [rmc] [5] [] [}{]\n"
	    "2 [rlc] [-i=4]\n");
	overrides_free(ov);
}

/* ---- execution rules -------------------------------------------------- */

static void
test_stop_at_first_failure(void **state)
{
	char rec[512];
	struct overrides *ov;
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 100000 };
	struct zerr err = { 0 };

	(void)state;
	record_path(rec, sizeof(rec), "stop.txt");
	ov = parse_ok("[set_power_limit]\ncommands = [\n"
	    "  '@H@/record-argv @T@/stop.txt first',\n"
	    "  \"@H@/exit-with 4 'some output' 'nvidia-smi: no such GPU'\",\n"
	    "  '@H@/record-argv @T@/stop.txt third',\n]\n");
	assert_int_equal(overrides_run(ov, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_string_equal(slurp(rec), "1 [first]\n");
	assert_non_null(strstr(err.msg, "set_power_limit on GPU 1: override "
	    "command 2 of 3 failed (exit code 4): "));
	assert_non_null(strstr(err.msg, "/exit-with 4 'some output' "
	    "'nvidia-smi: no such GPU'; stdout: \"some output\"; stderr: "
	    "\"nvidia-smi: no such GPU\""));
	overrides_free(ov);
}

static void
test_error_pattern_after_exit_zero(void **state)
{
	struct overrides *ov;
	struct gpu_write w = { .op = GPU_SET_PERSISTENCE_MODE };
	struct zerr err = { 0 };
	char rec[512];

	(void)state;
	record_path(rec, sizeof(rec), "pat.txt");
	ov = parse_ok("[set_persistence_mode]\n"
	    "commands = [\"@H@/exit-with 0 'Setting...' 'Cannot set mode'\","
	    "  '@H@/record-argv @T@/pat.txt never']\n"
	    "error_pattern = '(?i)error|fail|cannot'\n"
	    "[set_power_limit]\n"
	    "commands = [\"@H@/exit-with 0 'FAILED to set' ''\"]\n"
	    "error_pattern = '(?i)error|fail|cannot'\n"
	    "[reset_gpu_locked_clocks]\n"
	    "commands = [\"@H@/exit-with 0 'All done.' 'warning: slow'\"]\n"
	    "error_pattern = '(?i)error|fail|cannot'\n");
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_non_null(strstr(err.msg, "(output matched error_pattern)"));
	assert_non_null(strstr(err.msg, "stderr: \"Cannot set mode\""));
	assert_string_equal(slurp(rec), "");
	w.op = GPU_SET_POWER_LIMIT;
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_non_null(strstr(err.msg, "(output matched error_pattern)"));
	assert_non_null(strstr(err.msg, "stdout: \"FAILED to set\"; stderr: "
	    "\"\""));
	w.op = GPU_RESET_GPU_LOCKED_CLOCKS;
	run_ok(ov, 0, &w);
	overrides_free(ov);
}

static void
test_timeout_and_missing_program(void **state)
{
	struct overrides *ov = parse_ok(
	    "[set_power_limit]\ncommands = ['@H@/sleep-for 30']\n"
	    "timeout_s = 1\n"
	    "[set_persistence_mode]\ncommands = ['/nonexistent/zeus-tool "
	    "-pm {enabled}']\n"
	    "[reset_gpu_locked_clocks]\ncommands = ['zeus-no-such-tool']\n");
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT };
	struct zerr err = { 0 };

	(void)state;
	assert_int_equal(overrides_run(ov, 2, &w, &err), -1);
	assert_non_null(strstr(err.msg, "set_power_limit on GPU 2: override "
	    "command 1 of 1 failed (timed out after 1 s): "));
	assert_non_null(strstr(err.msg, "stdout: \"sleeping\""));
	w.op = GPU_SET_PERSISTENCE_MODE;
	w.enabled = true;
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_string_equal(err.msg, "set_persistence_mode on GPU 0: override "
	    "command 1 of 1 failed (could not be executed: No such file or "
	    "directory): /nonexistent/zeus-tool -pm 1; stdout: \"\"; "
	    "stderr: \"\"");
	w.op = GPU_RESET_GPU_LOCKED_CLOCKS;
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_non_null(strstr(err.msg, "could not be executed"));
	w.op = GPU_RESET_MEM_LOCKED_CLOCKS;	/* not overridden */
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_string_equal(err.msg, "reset_mem_locked_clocks on GPU 0: no "
	    "override configured");
	overrides_free(ov);
}

static void
test_failure_message_is_bounded_and_clean(void **state)
{
	struct overrides *ov = parse_ok(
	    "[set_power_limit]\ncommands = ['@H@/flood 1']\n"
	    "error_pattern = '\\x00'\n"
	    "[set_persistence_mode]\ncommands = [\"sh -c 'printf "
	    "\\\"\\\\033[31mred\\\\377\\\\n\\\"; exit 9'\"]\n");
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT };
	struct zerr err = { 0 };

	(void)state;
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_true(strlen(err.msg) < ZERR_MSG_MAX);
	assert_non_null(strstr(err.msg, "(output matched error_pattern)"));
	assert_non_null(strstr(err.msg, "stdout: \"[...]???"));
	assert_non_null(strstr(err.msg, "stderr: \"[...]???"));
	w.op = GPU_SET_PERSISTENCE_MODE;
	assert_int_equal(overrides_run(ov, 0, &w, &err), -1);
	assert_non_null(strstr(err.msg, "(exit code 9)"));
	assert_non_null(strstr(err.msg, "stdout: \"?[31mred?\""));
	overrides_free(ov);
}

/* ---- trust check ------------------------------------------------------ */

static void
write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f;

	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int
load(const char *path, struct zerr *err)
{
	struct overrides *ov = NULL;
	int rc = overrides_load(path, &ov, err);

	if (rc == 0) {
		assert_non_null(ov);
		assert_int_equal(overrides_count(ov), 1);
	} else {
		assert_null(ov);
	}
	overrides_free(ov);
	return rc;
}

/* Owner rules; needs root to chown and to take another uid (skipped
 * otherwise). */
static void
test_trust_owner(const char *path)
{
	char msg[1024];
	struct zerr err = { 0 };

	if (geteuid() != 0)
		return;
	assert_int_equal(chown(path, 12345, 12345), 0);
	assert_int_equal(load(path, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	snprintf(msg, sizeof(msg), "%s: owned by uid 12345, which is neither "
	    "root nor the daemon's user (uid 0); refusing to run commands "
	    "from it", path);
	assert_string_equal(err.msg, msg);

	/* As uid 12345, its own file and root's are fine, others' are not. */
	assert_int_equal(seteuid(12345), 0);
	assert_int_equal(load(path, &err), 0);
	assert_int_equal(seteuid(0), 0);
	assert_int_equal(chown(path, 0, 0), 0);
	assert_int_equal(seteuid(12345), 0);
	assert_int_equal(load(path, &err), 0);
	assert_int_equal(seteuid(0), 0);
	assert_int_equal(chown(path, 23456, 0), 0);
	assert_int_equal(seteuid(12345), 0);
	assert_int_equal(load(path, &err), -1);
	assert_int_equal(seteuid(0), 0);
	assert_non_null(strstr(err.msg, "owned by uid 23456, which is neither "
	    "root nor the daemon's user (uid 12345)"));
	assert_int_equal(chown(path, 0, 0), 0);
}

static void
test_trust_check(void **state)
{
	static const char good[] = "[set_power_limit]\ncommands = ['a']\n";
	char path[512], link[512], msg[1024];
	struct zerr err = { 0 };

	(void)state;
	snprintf(path, sizeof(path), "%s/trust.toml", tmpdir);
	snprintf(link, sizeof(link), "%s/link.toml", tmpdir);
	write_file(path, good, 0600);
	assert_int_equal(load(path, &err), 0);
	chmod(path, 0644);
	assert_int_equal(load(path, &err), 0);
	chmod(path, 0664);		/* group-writable: warning only */
	assert_int_equal(load(path, &err), 0);

	chmod(path, 0666);
	assert_int_equal(load(path, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	snprintf(msg, sizeof(msg), "%s: world-writable (mode 0666); refusing "
	    "to run commands from it", path);
	assert_string_equal(err.msg, msg);
	chmod(path, 0602);
	assert_int_equal(load(path, &err), -1);

	chmod(path, 0644);
	test_trust_owner(path);

	/* A symlink is followed; the target is what gets checked. */
	unlink(link);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(load(link, &err), 0);
	chmod(path, 0666);
	assert_int_equal(load(link, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	chmod(path, 0644);

	/* Not a regular file: a directory, a FIFO (must not hang). */
	assert_int_equal(load(tmpdir, &err), -1);
	assert_non_null(strstr(err.msg, ": not a regular file"));
	unlink(link);
	assert_int_equal(mkfifo(link, 0600), 0);
	assert_int_equal(load(link, &err), -1);
	assert_non_null(strstr(err.msg, ": not a regular file"));
	unlink(link);

	/* Missing file; parse errors carry the path. */
	assert_int_equal(load("/nonexistent/ov.toml", &err), -1);
	assert_string_equal(err.msg, "/nonexistent/ov.toml: cannot open: No "
	    "such file or directory");
	write_file(path, "[set_power_limit]\ncommands = [1]\n", 0644);
	assert_int_equal(load(path, &err), -1);
	snprintf(msg, sizeof(msg), "%s: line 2: arrays may only hold strings",
	    path);
	assert_string_equal(err.msg, msg);
}

static void
test_oversized_file(void **state)
{
	char path[512];
	struct zerr err = { 0 };
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/big.toml", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 1100; i++)
		for (int k = 0; k < 1024; k++)
			fputc(k == 1023 ? '\n' : '#', f);
	fclose(f);
	chmod(path, 0644);
	assert_int_equal(load(path, &err), -1);
	assert_non_null(strstr(err.msg, "larger than 1048576 bytes"));
}

/* ---- the wrapper ------------------------------------------------------ */

struct fake {
	unsigned writes[GPU_WRITE_OP_COUNT];
	int write_fails;	/* ZERR kind to fail writes with, or 0 */
	unsigned reads;
	bool destroyed;
};

static unsigned
fake_count(struct gpu_backend *b)
{
	(void)b;
	return 4;
}

static int
fake_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct fake *f = b->ctx;

	f->reads++;
	memset(out, 0, sizeof(*out));	/* as every backend fills it whole */
	snprintf(out->name, sizeof(out->name), "Fake %u", gpu);
	return 0;
}

static int
fake_u32(struct gpu_backend *b, unsigned gpu, uint32_t *v, struct zerr *err)
{
	struct fake *f = b->ctx;

	f->reads++;
	*v = 1000 + gpu;
	return 0;
}

static int
fake_energy(struct gpu_backend *b, unsigned gpu, uint64_t *v,
    struct zerr *err)
{
	struct fake *f = b->ctx;

	f->reads++;
	*v = 5;
	return 0;
}

static int
fake_constraints(struct gpu_backend *b, unsigned gpu, uint32_t *lo,
    uint32_t *hi, struct zerr *err)
{
	struct fake *f = b->ctx;

	f->reads++;
	*lo = 1;
	*hi = 2;
	return 0;
}

static int
fake_pm(struct gpu_backend *b, unsigned gpu, bool *on, struct zerr *err)
{
	struct fake *f = b->ctx;

	f->reads++;
	*on = true;
	return 0;
}

static int
fake_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct fake *f = b->ctx;

	f->writes[w->op]++;
	if (f->write_fails)
		return zerr_set(err, (enum zerr_kind)f->write_fails, "GPU %u: "
		    "Insufficient Permissions (%s)", gpu,
		    gpu_write_op_name(w->op));
	return 0;
}

/* the driver can do no write by itself: only an override makes it */
static const char *
fake_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	(void)b;
	(void)op;
	return "not supported by the fake driver";
}

static void
fake_destroy(struct gpu_backend *b)
{
	struct fake *f = b->ctx;

	f->destroyed = true;
}

static const struct gpu_backend_ops fake_ops = {
	.name = "fake",
	.count = fake_count,
	.info = fake_info,
	.get_power_mw = fake_u32,
	.get_energy_mj = fake_energy,
	.get_power_limit_mw = fake_u32,
	.get_power_limit_constraints = fake_constraints,
	.get_persistence_mode = fake_pm,
	.write = fake_write,
	.write_lacks = fake_write_lacks,
	.destroy = fake_destroy,
};

static void
test_wrapper_forwards(void **state)
{
	struct fake f = { 0 };
	struct gpu_backend inner = { &fake_ops, &f }, b;
	struct overrides *ov;
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 150000 };
	struct zerr err = { 0 };
	struct gpu_info info;
	uint32_t u, lo, hi;
	uint64_t e;
	bool on;
	char rec[512];

	(void)state;
	record_path(rec, sizeof(rec), "wrap.txt");
	ov = parse_ok("[set_power_limit]\ncommands = ['@H@/record-argv "
	    "@T@/wrap.txt pl {gpu_id} {power_limit_w}']\n");
	assert_int_equal(overrides_wrap(ov, inner, &b), 0);
	assert_string_equal(b.ops->name, "overrides");
	assert_int_equal(b.ops->count(&b), 4);
	assert_int_equal(b.ops->info(&b, 1, &info, &err), 0);
	assert_string_equal(info.name, "Fake 1");
	assert_int_equal(b.ops->get_power_mw(&b, 2, &u, &err), 0);
	assert_int_equal(u, 1002);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 3, &u, &err), 0);
	assert_int_equal(b.ops->get_energy_mj(&b, 0, &e, &err), 0);
	assert_int_equal(b.ops->get_power_limit_constraints(&b, 0, &lo, &hi,
	    &err), 0);
	assert_int_equal(b.ops->get_persistence_mode(&b, 0, &on, &err), 0);
	assert_int_equal(f.reads, 6);

	/* overridden: the command runs, the driver is not touched */
	assert_int_equal(b.ops->write(&b, 3, &w, &err), 0);
	assert_int_equal(f.writes[GPU_SET_POWER_LIMIT], 0);
	assert_string_equal(slurp(rec), "3 [pl] [3] [150]\n");

	/* not overridden: the driver, and its error (403) comes through */
	w = (struct gpu_write){ .op = GPU_SET_PERSISTENCE_MODE,
	    .enabled = true };
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_int_equal(f.writes[GPU_SET_PERSISTENCE_MODE], 1);
	f.write_fails = ZERR_FORBIDDEN;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	w.op = GPU_RESET_LOCKED_CLOCKS;		/* no reset override at all */
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(f.writes[GPU_RESET_LOCKED_CLOCKS], 1);

	b.ops->destroy(&b);
	assert_true(f.destroyed);
}

static void
test_wrapper_reset_locked_clocks(void **state)
{
	struct fake f = { 0 };
	struct gpu_backend inner = { &fake_ops, &f }, b;
	struct overrides *ov;
	struct gpu_write w = { .op = GPU_RESET_LOCKED_CLOCKS };
	struct zerr err = { 0 };
	char rec[512];

	(void)state;
	record_path(rec, sizeof(rec), "reset.txt");

	/* only the GPU domain overridden, and failing: memory still reset
	 * through the driver, the override's error reported */
	ov = parse_ok("[reset_gpu_locked_clocks]\ncommands = [\"@H@/exit-with "
	    "1 '' 'rgc failed'\"]\n");
	assert_int_equal(overrides_wrap(ov, inner, &b), 0);
	f.write_fails = ZERR_FORBIDDEN;
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "reset_gpu_locked_clocks on GPU 1"));
	assert_int_equal(f.writes[GPU_RESET_MEM_LOCKED_CLOCKS], 1);
	assert_int_equal(f.writes[GPU_RESET_LOCKED_CLOCKS], 0);
	b.ops->destroy(&b);

	/* both domains overridden: both run in order, even after a failure */
	memset(&f, 0, sizeof(f));
	ov = parse_ok(
	    "[reset_gpu_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/reset.txt gpu {gpu_id}', '@H@/exit-with 2']\n"
	    "[reset_mem_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/reset.txt mem {gpu_id}']\n");
	assert_int_equal(overrides_wrap(ov, inner, &b), 0);
	assert_int_equal(b.ops->write(&b, 2, &w, &err), -1);
	assert_non_null(strstr(err.msg, "reset_gpu_locked_clocks on GPU 2: "
	    "override command 2 of 2 failed (exit code 2)"));
	assert_string_equal(slurp(rec), "2 [gpu] [2]\n2 [mem] [2]\n");
	assert_int_equal(f.writes[GPU_RESET_LOCKED_CLOCKS] +
	    f.writes[GPU_RESET_GPU_LOCKED_CLOCKS] +
	    f.writes[GPU_RESET_MEM_LOCKED_CLOCKS], 0);
	b.ops->destroy(&b);

	/* its own table wins */
	unlink(rec);
	memset(&f, 0, sizeof(f));
	ov = parse_ok(
	    "[reset_gpu_locked_clocks]\ncommands = ['@H@/exit-with 1']\n"
	    "[reset_locked_clocks]\ncommands = ['@H@/record-argv "
	    "@T@/reset.txt both {gpu_id}']\n");
	assert_int_equal(overrides_wrap(ov, inner, &b), 0);
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_string_equal(slurp(rec), "2 [both] [0]\n");
	b.ops->destroy(&b);
}

static void
test_wrapper_without_driver(void **state)
{
	struct gpu_backend none = { NULL, NULL }, b;
	struct overrides *ov;
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 1000 };
	struct zerr err = { 0 };
	uint32_t u;
	char rec[512];

	(void)state;
	record_path(rec, sizeof(rec), "nodrv.txt");
	ov = parse_ok("[set_power_limit]\ncommands = ['@H@/record-argv "
	    "@T@/nodrv.txt {gpu_id}']\n");
	assert_int_equal(overrides_wrap(ov, none, &b), 0);
	assert_int_equal(b.ops->count(&b), 0);
	assert_int_equal(b.ops->get_power_mw(&b, 0, &u, &err), -1);
	assert_string_equal(err.msg, "GPU 0: no GPU driver available");
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_string_equal(slurp(rec), "1 [0]\n");
	w.op = GPU_SET_PERSISTENCE_MODE;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	b.ops->destroy(&b);
}

struct par {
	struct overrides *ov;
	unsigned gpu;
	int rc;
};

static void *
par_run(void *arg)
{
	struct par *p = arg;
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 1000 * (p->gpu + 1) };
	struct zerr err;

	p->rc = 0;
	for (int i = 0; i < 5 && p->rc == 0; i++)
		p->rc = overrides_run(p->ov, p->gpu, &w, &err);
	return NULL;
}

static void
test_concurrent_gpus(void **state)
{
	struct overrides *ov = parse_ok("[set_power_limit]\n"
	    "commands = ['@H@/exit-with 0 gpu{gpu_id}-{power_limit_w}W']\n"
	    "error_pattern = '(?i)error'\n");
	struct par p[6];
	pthread_t t[6];

	(void)state;
	for (unsigned i = 0; i < 6; i++) {
		p[i] = (struct par){ ov, i, -1 };
		assert_int_equal(pthread_create(&t[i], NULL, par_run, &p[i]),
		    0);
	}
	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(p[i].rc, 0);
	}
	overrides_free(ov);
}

/*
 * A reload swaps the overrides while the HTTP thread asks write_lacks and
 * info (one-process daemon): those must hold a reference of their own, as
 * a write does, or the swap frees what they read (ASan: use after free).
 */
struct swap_race {
	struct gpu_backend *b;
	atomic_bool stop;
	unsigned long asked;
	bool wrong;
};

static void *
swap_race_ask(void *arg)
{
	struct swap_race *r = arg;
	struct gpu_info info;
	struct zerr err;

	while (!atomic_load(&r->stop)) {
		/* overridden in every file swapped in: never the driver's */
		if (r->b->ops->write_lacks(r->b, GPU_SET_POWER_LIMIT) != NULL ||
		    r->b->ops->info(r->b, 0, &info, &err) != 0 ||
		    !info.caps.power_limit)
			r->wrong = true;
		r->asked++;
	}
	return NULL;
}

static void
test_swap_while_asked(void **state)
{
	static const char text[] = "[set_power_limit]\n"
	    "commands = ['@H@/exit-with 0']\n";
	struct fake f = { 0 };
	struct gpu_backend inner = { &fake_ops, &f }, b;
	struct swap_race r = { .b = &b };
	pthread_t t;

	(void)state;
	assert_int_equal(overrides_wrap(parse_ok(text), inner, &b), 0);
	atomic_init(&r.stop, false);
	assert_int_equal(pthread_create(&t, NULL, swap_race_ask, &r), 0);
	for (int i = 0; i < 20000; i++) {
		struct overrides *old;

		assert_int_equal(overrides_swap(&b, parse_ok(text), &old), 0);
		overrides_free(old);
	}
	atomic_store(&r.stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_false(r.wrong);
	assert_true(r.asked > 0);
	b.ops->destroy(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_too_many_commands),
		cmocka_unit_test(test_valid_file),
		cmocka_unit_test(test_every_placeholder_substituted),
		cmocka_unit_test(test_stop_at_first_failure),
		cmocka_unit_test(test_error_pattern_after_exit_zero),
		cmocka_unit_test(test_timeout_and_missing_program),
		cmocka_unit_test(test_failure_message_is_bounded_and_clean),
		cmocka_unit_test(test_trust_check),
		cmocka_unit_test(test_oversized_file),
		cmocka_unit_test(test_wrapper_forwards),
		cmocka_unit_test(test_wrapper_reset_locked_clocks),
		cmocka_unit_test(test_wrapper_without_driver),
		cmocka_unit_test(test_concurrent_gpus),
		cmocka_unit_test(test_swap_while_asked),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
