/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cli.c - `zeusd serve` flag parsing: defaults, every flag, every
 * refusal; octal permissions (no setuid/setgid/sticky bits); TCP address
 * parsing; API group lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "zeusd/cli.h"
#include "node/groups.h"
#include "zeusd/listen.h"

static int
parse(struct zeusd_config *cfg, struct zerr *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	char *a;

	argv[argc++] = (char *)"serve";
	va_start(ap, err);
	while ((a = va_arg(ap, char *)) != NULL && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	zerr_clear(err);
	return cli_parse_serve(argc, argv, cfg, stdout, err);
}

static void
test_defaults(void **state)
{
	struct zeusd_config cfg;
	struct zerr err;

	assert_int_equal(parse(&cfg, &err, NULL), 0);
	assert_int_equal(cfg.mode, MODE_UDS);
	assert_string_equal(cfg.socket_path, "/run/zeusd/zeusd.sock");
	assert_int_equal(cfg.socket_permissions, 0666);
	assert_false(cfg.has_socket_uid);
	assert_string_equal(cfg.tcp_bind_address, "127.0.0.1:4938");
	assert_true(cfg.num_workers >= 1);
	assert_int_equal(cfg.gpu_power_poll_hz, 20);
	assert_int_equal(cfg.cpu_power_poll_hz, 10);
	assert_int_equal(cfg.gpu_backend, GPU_BACKEND_AUTO);
	assert_int_equal(cfg.enabled, GROUP_DEFAULT_SET);
	assert_null(cfg.gpu_command_overrides);
	assert_null(cfg.signing_key_path);
	assert_false(cfg.simulate);
}

static void
test_every_flag(void **state)
{
	struct zeusd_config cfg;
	struct zerr err;

	assert_int_equal(parse(&cfg, &err, "--mode", "tcp", "--socket-path",
	    "/tmp/x.sock", "--socket-permissions", "0640", "--socket-uid", "7",
	    "--socket-gid", "8", "--tcp-bind-address", "[::1]:80",
	    "--num-workers", "3", "--gpu-power-poll-hz", "50",
	    "--cpu-power-poll-hz=5", "--gpu-backend", "nvml", "--enable",
	    " gpu-read , cpu-read", "--gpu-command-overrides", "/o.toml",
	    "--signing-key-path", "/k", "--nvml-library", "/l.so",
	    "--rapl-dir", "/r", "--simulate", NULL), 0);
	assert_int_equal(cfg.mode, MODE_TCP);
	assert_string_equal(cfg.socket_path, "/tmp/x.sock");
	assert_int_equal(cfg.socket_permissions, 0640);
	assert_true(cfg.has_socket_uid && cfg.has_socket_gid);
	assert_int_equal(cfg.socket_uid, 7);
	assert_int_equal(cfg.socket_gid, 8);
	assert_string_equal(cfg.tcp_bind_address, "[::1]:80");
	assert_int_equal(cfg.num_workers, 3);
	assert_int_equal(cfg.gpu_power_poll_hz, 50);
	assert_int_equal(cfg.cpu_power_poll_hz, 5);
	assert_int_equal(cfg.gpu_backend, GPU_BACKEND_NVML);
	assert_int_equal(cfg.enabled, GROUP_BIT(GROUP_GPU_READ) |
	    GROUP_BIT(GROUP_CPU_READ));
	assert_string_equal(cfg.gpu_command_overrides, "/o.toml");
	assert_string_equal(cfg.signing_key_path, "/k");
	assert_string_equal(cfg.nvml_library, "/l.so");
	assert_string_equal(cfg.rapl_dir, "/r");
	assert_true(cfg.simulate);
}

static void
refused(const char *flag, const char *value, const char *needle)
{
	struct zeusd_config cfg;
	struct zerr err;

	assert_int_equal(parse(&cfg, &err, flag, value, NULL), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("%s %s: '%s' lacks '%s'", flag, value ? value : "",
		    err.msg, needle);
}

static void
test_refusals(void **state)
{
	refused("--socket-permissions", "888", "--socket-permissions");
	refused("--socket-permissions", "10000", "--socket-permissions");
	refused("--socket-permissions", "-1", "--socket-permissions");
	refused("--socket-permissions", "", "--socket-permissions");
	refused("--socket-permissions", "0o666", "--socket-permissions");
	refused("--tcp-bind-address", "localhost:1", "--tcp-bind-address");
	refused("--tcp-bind-address", "1.2.3.4", "--tcp-bind-address");
	refused("--tcp-bind-address", "1.2.3.4:", "--tcp-bind-address");
	refused("--tcp-bind-address", "1.2.3.4:65536", "--tcp-bind-address");
	refused("--tcp-bind-address", "1.2.3.4:-1", "--tcp-bind-address");
	refused("--tcp-bind-address", "::1:80", "--tcp-bind-address");
	refused("--tcp-bind-address", "[::1]80", "--tcp-bind-address");
	refused("--tcp-bind-address", "[1.2.3.4]:80", "--tcp-bind-address");
	refused("--tcp-bind-address", "999.1.1.1:80", "--tcp-bind-address");
	refused("--enable", "gpu-read,bogus", "'bogus'");
	refused("--enable", "", "--enable");
	refused("--enable", "gpu-read,", "--enable");
	refused("--gpu-power-poll-hz", "0", "--gpu-power-poll-hz");
	refused("--cpu-power-poll-hz", "0", "--cpu-power-poll-hz");
	refused("--gpu-power-poll-hz", "1001", "--gpu-power-poll-hz");
	refused("--gpu-power-poll-hz", "-5", "--gpu-power-poll-hz");
	refused("--gpu-power-poll-hz", "20Hz", "--gpu-power-poll-hz");
	refused("--num-workers", "0", "--num-workers");
	refused("--socket-uid", "x", "--socket-uid");
	refused("--socket-uid", "4294967295", "--socket-uid");
	refused("--mode", "pipe", "--mode");
	refused("--gpu-backend", "rocm", "--gpu-backend");
	refused("--socket-path", "", "--socket-path");
	refused("--bogus", NULL, "unknown option '--bogus'");
	refused("--mode", NULL, "needs a value");
	refused("extra", NULL, "unexpected argument 'extra'");
}

static void
test_help(void **state)
{
	struct zeusd_config cfg;
	struct zerr err;
	FILE *saved = stdout;

	stdout = fopen("/dev/null", "w");
	assert_int_equal(parse(&cfg, &err, "--help", NULL), 1);
	fclose(stdout);
	stdout = saved;
}

static void
test_permissions(void **state)
{
	unsigned v;
	struct zerr err;

	assert_int_equal(cli_parse_permissions("0", &v, &err), 0);
	assert_int_equal(v, 0);
	assert_int_equal(cli_parse_permissions("777", &v, &err), 0);
	assert_int_equal(v, 0777);
	assert_int_equal(cli_parse_permissions("0777", &v, &err), 0);
	assert_int_equal(v, 0777);
	assert_int_equal(cli_parse_permissions("00666", &v, &err), 0);
	assert_int_equal(v, 0666);
	assert_int_equal(cli_parse_permissions("000666", &v, &err), -1);
	assert_int_equal(cli_parse_permissions("9", &v, &err), -1);
}

/* Setuid, setgid and sticky bits mean nothing on a socket: refused. */
static void
test_permissions_special_bits(void **state)
{
	static const char *const bad[] = { "4777", "04777", "2770", "1666",
	    "01666", "7777", "07777", "1000", "01000", "6660" };
	struct zeusd_config cfg;
	struct zerr err;
	unsigned v = 0123;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		zerr_clear(&err);
		assert_int_equal(cli_parse_permissions(bad[i], &v, &err), -1);
		assert_int_equal(err.kind, ZERR_INVALID);
		assert_non_null(strstr(err.msg, "--socket-permissions"));
		assert_non_null(strstr(err.msg, "setuid"));
		assert_int_equal(v, 0123);	/* untouched */
	}
	refused("--socket-permissions", "04777", "setuid, setgid and sticky");
	refused("--socket-permissions", "01666", "setuid, setgid and sticky");
	assert_int_equal(parse(&cfg, &err, "--socket-permissions", "0660",
	    NULL), 0);
	assert_int_equal(cfg.socket_permissions, 0660);
}

static void
test_groups(void **state)
{
	group_set s;
	char bad[32], buf[64];

	assert_int_equal(group_parse_list("cpu-read", &s, bad, sizeof(bad)), 0);
	assert_int_equal(s, GROUP_BIT(GROUP_CPU_READ));
	assert_int_equal(group_parse_list("gpu-read,gpu-read", &s, bad,
	    sizeof(bad)), 0);
	assert_int_equal(s, GROUP_BIT(GROUP_GPU_READ));
	assert_int_equal(group_parse_list("GPU-READ", &s, bad, sizeof(bad)),
	    -1);
	assert_string_equal(bad, "GPU-READ");
	group_set_format(GROUP_DEFAULT_SET, buf, sizeof(buf));
	assert_string_equal(buf, "gpu-control, gpu-read, cpu-read, metrics");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_flag),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_permissions),
		cmocka_unit_test(test_permissions_special_bits),
		cmocka_unit_test(test_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
