/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.c - `zeusd serve` flags (docs/configuration.md's table, with
 * --nvml-library, --rapl-dir and --simulate), validated here so that a bad
 * value is one clear line and exit code 2 before anything is opened. Each
 * platform prints and accepts only its own flags (cli_serve_help, and
 * cli_os for the transport's): a Linux-only feature's flag on Windows is
 * such a usage error too.
 */
#include "zeusd/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "http/host.h"
#include "zeusd/cli_os.h"
#include "zeusd/listen.h"
#include "zeusd/token.h"

void
config_defaults(struct zeusd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = MODE_UDS;
	cfg->socket_path = ZEUSD_DEFAULT_SOCKET;
	cfg->socket_permissions = 0666;
	cfg->tcp_bind_address = ZEUSD_DEFAULT_TCP;
	cfg->pipe_name = ZEUSD_DEFAULT_PIPE;
	cfg->pipe_sddl = ZEUSD_DEFAULT_PIPE_SDDL;
	cfg->gpu_power_poll_hz = 20;
	cfg->cpu_power_poll_hz = 10;
	cfg->gpu_backend = GPU_BACKEND_AUTO;
	cfg->enabled = GROUP_DEFAULT_SET;
	cli_os_defaults(cfg);
}

int
cli_main(int argc, char **argv, int (*serve)(int argc, char **argv))
{
	if (zlog_init_from_env() != 0) {
		fprintf(stderr, "zeusd: invalid ZEUSD_LOG (expected debug, "
		    "info, warn or error, in any case)\n");
		return 1;
	}
	if (argc < 2) {
		cli_print_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("zeusd %s\n", ZEUS_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		cli_print_usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "serve") == 0)
		return serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "token") == 0)
		return token_main(argc - 1, argv + 1);
	fprintf(stderr, "zeusd: unknown command '%.64s' (see zeusd --help)\n",
	    argv[1]);
	return 2;
}

void
cli_print_usage(FILE *out)
{
	fprintf(out, "Usage: zeusd <command> [options]\n"
	    "\n"
	    "zeusd is a small privileged daemon that lets unprivileged jobs\n"
	    "read and control %s energy settings over HTTP.\n"
	    "\n", cli_os_this & CLI_OS_LINUX ? "GPU and CPU" : "GPU");
	fputs("Commands:\n"
	    "  serve          run the daemon (zeusd serve --help)\n"
	    "  token issue    print a signed JWT (zeusd token issue --help)\n"
	    "  token verify   check a JWT read from stdin and print its claims\n"
	    "                 (zeusd token verify --help)\n"
	    "\n"
	    "Options:\n"
	    "  -h, --help     show this help\n"
	    "  -V, --version  show the version\n", out);
}

int
cli_parse_owner(const char *s, bool user, uint64_t *out, struct zerr *err)
{
	const char *what = user ? "--socket-uid" : "--socket-gid";

	if (s[0] >= '0' && s[0] <= '9')
		return env_parse_uint(s, 0, UINT32_MAX - 1, out, what, err);
	if (s[0] == '\0' || strlen(s) > 256)
		return zerr_set(err, ZERR_INVALID, "invalid %s: expected a %s "
		    "name or a number", what, user ? "user" : "group");
	return cli_os_owner_by_name(s, user, out, err);
}

int
cli_parse_permissions(const char *s, unsigned *out, struct zerr *err)
{
	size_t n = strlen(s);
	unsigned v = 0;

	if (n == 0 || n > 5 || strspn(s, "01234567") != n)
		goto bad;
	for (size_t i = 0; i < n; i++)
		v = v * 8 + (unsigned)(s[i] - '0');
	/*
	 * The socket's mode is set through the umask at bind() and a chmod of
	 * the bound inode (listen.c); setuid, setgid and sticky mean nothing on
	 * a socket, and a value with them is more likely a typo than a wish.
	 */
	if (v > 0777)
		return zerr_set(err, ZERR_INVALID,
		    "invalid --socket-permissions '%.32s': setuid, setgid and "
		    "sticky bits (04000, 02000, 01000) are not allowed on the "
		    "socket file; expected an octal mode from 0 to 777 "
		    "(e.g. 666)", s);
	*out = v;
	return 0;
bad:
	return zerr_set(err, ZERR_INVALID,
	    "invalid --socket-permissions '%.32s': expected an octal mode "
	    "from 0 to 777 (e.g. 666)", s);
}

enum {
	OPT_MODE = 256, OPT_SOCKET_PATH, OPT_SOCKET_PERMS, OPT_SOCKET_UID,
	OPT_SOCKET_GID, OPT_TCP_BIND, OPT_NUM_WORKERS, OPT_GPU_HZ, OPT_CPU_HZ,
	OPT_GPU_BACKEND, OPT_ENABLE, OPT_OVERRIDES, OPT_SIGNING_KEY,
	OPT_NVML_LIBRARY, OPT_RAPL_DIR, OPT_SIMULATE, OPT_POLICY,
	OPT_AUDIT_LOG, OPT_GPU_LEASES, OPT_RESTORE_ON_SHUTDOWN, OPT_USER,
	OPT_NO_PRIVSEP, OPT_AUDIT_REQUIRED, OPT_TCP_ALLOWED_HOSTS,
	OPT_PIPE_NAME, OPT_PIPE_SDDL, OPT_STATE_DIR,
};

static const struct option cli_serve_options[] = {
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "socket-path", required_argument, NULL, OPT_SOCKET_PATH },
	{ "socket-permissions", required_argument, NULL, OPT_SOCKET_PERMS },
	{ "socket-uid", required_argument, NULL, OPT_SOCKET_UID },
	{ "socket-gid", required_argument, NULL, OPT_SOCKET_GID },
	{ "tcp-bind-address", required_argument, NULL, OPT_TCP_BIND },
	{ "tcp-allowed-hosts", required_argument, NULL,
	    OPT_TCP_ALLOWED_HOSTS },
	{ "pipe-name", required_argument, NULL, OPT_PIPE_NAME },
	{ "pipe-sddl", required_argument, NULL, OPT_PIPE_SDDL },
	{ "num-workers", required_argument, NULL, OPT_NUM_WORKERS },
	{ "gpu-power-poll-hz", required_argument, NULL, OPT_GPU_HZ },
	{ "cpu-power-poll-hz", required_argument, NULL, OPT_CPU_HZ },
	{ "gpu-backend", required_argument, NULL, OPT_GPU_BACKEND },
	{ "enable", required_argument, NULL, OPT_ENABLE },
	{ "gpu-command-overrides", required_argument, NULL, OPT_OVERRIDES },
	{ "signing-key-path", required_argument, NULL, OPT_SIGNING_KEY },
	{ "policy-file", required_argument, NULL, OPT_POLICY },
	{ "audit-log", required_argument, NULL, OPT_AUDIT_LOG },
	{ "audit-required", no_argument, NULL, OPT_AUDIT_REQUIRED },
	{ "gpu-leases", no_argument, NULL, OPT_GPU_LEASES },
	{ "restore-on-shutdown", no_argument, NULL, OPT_RESTORE_ON_SHUTDOWN },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "user", required_argument, NULL, OPT_USER },
	{ "no-privsep", no_argument, NULL, OPT_NO_PRIVSEP },
	{ "nvml-library", required_argument, NULL, OPT_NVML_LIBRARY },
	{ "rapl-dir", required_argument, NULL, OPT_RAPL_DIR },
	{ "simulate", no_argument, NULL, OPT_SIMULATE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * `zeusd serve --help` after its "Transport:" lines (cli_os_print_transport),
 * in the order printed: an entry per flag, or per platform where a flag's
 * text differs, each with the platforms it is printed on (CLI_OS_*). A flag
 * whose entries all leave this platform out does not exist here: it is not
 * printed, and given it is a usage error (cli_platform_flag). The transport
 * flags, which have no entry, are cli_os's.
 */
static const struct cli_help {
	int opt;		/* its OPT_*, 'h', or 0 for a heading or prose */
	unsigned os;		/* CLI_OS_* */
	const char *text;
} cli_serve_help[] = {
	{ OPT_TCP_BIND, CLI_OS_ALL,
	    "  --tcp-bind-address HOST:PORT   TCP address (default "
	    ZEUSD_DEFAULT_TCP ";\n"
	    "                                 IPv6 as [::1]:4938)\n" },
	{ OPT_TCP_ALLOWED_HOSTS, CLI_OS_ALL,
	    "  --tcp-allowed-hosts NAME,...   names clients may send in Host\n"
	    "                                 over loopback besides its address,\n"
	    "                                 localhost and the node's name\n"
	    "                                 (checked only without a signing\n"
	    "                                 key; other addresses take any)\n" },
	{ OPT_NUM_WORKERS, CLI_OS_ALL,
	    "  --num-workers N                accepted for compatibility; zeusd\n"
	    "                                 serves HTTP from one event loop\n" },
	{ 0, CLI_OS_ALL, "\nDevices:\n" },
	{ OPT_GPU_BACKEND, CLI_OS_LINUX,
	    "  --gpu-backend auto|nvml|amdsmi GPU backend (default auto)\n" },
	{ OPT_GPU_BACKEND, CLI_OS_WINDOWS,	/* AMD SMI is Linux-only */
	    "  --gpu-backend auto|nvml        GPU backend (default auto)\n" },
	{ OPT_NVML_LIBRARY, CLI_OS_ALL,
	    "  --nvml-library PATH            load this NVML-compatible library\n"
	    "                                 instead of the driver's\n" },
	{ OPT_RAPL_DIR, CLI_OS_LINUX,
	    "  --rapl-dir PATH                RAPL powercap root (default: detect)\n" },
	{ OPT_SIMULATE, CLI_OS_LINUX,
	    "  --simulate                     use simulated GPUs and CPUs (no\n"
	    "                                 hardware, no root needed)\n" },
	{ OPT_SIMULATE, CLI_OS_WINDOWS,
	    "  --simulate                     use simulated GPUs (nvml-sim.dll\n"
	    "                                 beside zeusd.exe; no hardware, no\n"
	    "                                 administrator needed)\n" },
	{ OPT_GPU_HZ, CLI_OS_ALL,
	    "  --gpu-power-poll-hz N          GPU stream sampling rate (default 20)\n" },
	{ OPT_CPU_HZ, CLI_OS_ALL,
	    "  --cpu-power-poll-hz N          CPU sampling rate (default 10)\n" },
	{ OPT_OVERRIDES, CLI_OS_ALL,
	    "  --gpu-command-overrides FILE   TOML file of commands replacing\n"
	    "                                 GPU writes\n" },
	{ 0, CLI_OS_ALL, "\nAPI and security:\n" },
	/* cli_print_serve_usage follows it with the platform's default */
	{ OPT_ENABLE, CLI_OS_ALL,
	    "  --enable LIST                  API groups (default\n"
	    "                                 " },
	{ OPT_SIGNING_KEY, CLI_OS_ALL,
	    "  --signing-key-path FILE        require HS256 JWTs signed with\n"
	    "                                 this key\n" },
	{ OPT_POLICY, CLI_OS_LINUX,
	    "  --policy-file FILE             per-user scopes and GPUs on the\n"
	    "                                 Unix socket (shared nodes)\n" },
	{ OPT_AUDIT_LOG, CLI_OS_LINUX,
	    "  --audit-log FILE               append one JSON line per GPU\n"
	    "                                 setting change\n" },
	{ OPT_AUDIT_REQUIRED, CLI_OS_LINUX,
	    "  --audit-required               refuse GPU writes (503) while\n"
	    "                                 the audit log cannot be written\n" },
	{ OPT_GPU_LEASES, CLI_OS_LINUX,
	    "  --gpu-leases                   a user's GPU changes hold off\n"
	    "                                 other users and are restored\n"
	    "                                 when its processes exit\n" },
	{ OPT_RESTORE_ON_SHUTDOWN, CLI_OS_LINUX,
	    "  --restore-on-shutdown          restore leased GPUs on SIGTERM\n" },
	{ OPT_STATE_DIR, CLI_OS_LINUX,
	    "  --state-dir DIR                keep a journal of the leases\n"
	    "                                 there, so a restarted zeusd\n"
	    "                                 takes them back (root's)\n" },
	{ OPT_USER, CLI_OS_LINUX,
	    "  --user NAME                    user of the network process\n"
	    "                                 (default: zeusd if it exists,\n"
	    "                                 else nobody)\n" },
	{ 'h', CLI_OS_ALL,
	    "  -h, --help                     show this help\n" },
	{ 0, CLI_OS_ALL,
	    "\n"
	    "Environment: ZEUSD_LOG=debug|info|warn|error sets the log level;\n"
	    "ZEUSD_IDLE_TIMEOUT_S, ZEUSD_REQUEST_TIMEOUT_S, ZEUSD_MAX_CONNS_PER_PEER,\n"
	    "ZEUSD_DEVICE_QUEUE_MAX and ZEUSD_SSE_KEEPALIVE_MS tune limits\n"
	    "(docs/configuration.md).\n" },
};

void
cli_print_serve_usage(FILE *out)
{
	fputs("Usage: zeusd serve [options]\n"
	    "\n"
	    "Transport:\n", out);
	cli_os_print_transport(out);
	for (size_t i = 0; i < sizeof(cli_serve_help) /
	    sizeof(cli_serve_help[0]); i++) {
		const struct cli_help *h = &cli_serve_help[i];

		if (!(h->os & cli_os_this))
			continue;
		fputs(h->text, out);
		if (h->opt == OPT_ENABLE)
			fprintf(out, "%s)\n", cli_os_enable_default);
	}
}

/* "--NAME" of an option of cli_serve_options, into flag. */
static void
cli_flag_name(int opt, char *flag, size_t size)
{
	snprintf(flag, size, "?");
	for (const struct option *o = cli_serve_options; o->name; o++)
		if (o->val == opt)
			snprintf(flag, size, "--%s", o->name);
}

/*
 * A flag whose help entries all leave this platform out (a Linux-only
 * feature's, on Windows): -1 with a usage error. 0 for the others, and for
 * the transport's, which cli_transport_flag asks cli_os about.
 */
static int
cli_platform_flag(int opt, struct zerr *err)
{
	unsigned os = 0;
	char flag[32];

	for (size_t i = 0; i < sizeof(cli_serve_help) /
	    sizeof(cli_serve_help[0]); i++)
		if (cli_serve_help[i].opt == opt)
			os |= cli_serve_help[i].os;
	if (os == 0 || (os & cli_os_this))
		return 0;
	cli_flag_name(opt, flag, sizeof(flag));
	return zerr_set(err, ZERR_INVALID, "%s is only supported on %s "
	    "(docs/windows.md)", flag, os & CLI_OS_LINUX ? "Linux" :
	    "Windows");
}

/* Poll rates above this are refused: sampling faster than the driver
 * updates only burns CPU. */
#define CLI_MAX_POLL_HZ 1000

/* A flag of one platform's transport: asks cli_os whether it exists. */
static int
cli_transport_flag(int opt, struct zerr *err)
{
	char flag[32];
	bool pipe = opt == OPT_PIPE_NAME || opt == OPT_PIPE_SDDL;

	if (!pipe && opt != OPT_SOCKET_PATH && opt != OPT_SOCKET_PERMS &&
	    opt != OPT_SOCKET_UID && opt != OPT_SOCKET_GID)
		return 0;
	cli_flag_name(opt, flag, sizeof(flag));
	return pipe ? cli_os_pipe_flag(flag, err) :
	    cli_os_socket_flag(flag, err);
}

/*
 * `--pipe-name`: \\.\pipe\NAME, NAME of letters, digits and . _ - + @ :
 * (so that it is safe in a log line as it is), at most 256 bytes in all.
 */
static int
cli_parse_pipe_name(const char *arg, struct zerr *err)
{
	size_t plen = strlen(ZEUSD_PIPE_PREFIX), n = strlen(arg);
	const char *p = arg + plen;

	if (n > plen && n <= ZEUSD_PIPE_NAME_MAX &&
	    strncmp(arg, ZEUSD_PIPE_PREFIX, plen) == 0)
		while (*p != '\0' && (isalnum((unsigned char)*p) ||
		    strchr("._-+@:", *p) != NULL))
			p++;
	if (n <= plen || n > ZEUSD_PIPE_NAME_MAX || *p != '\0')
		return zerr_set(err, ZERR_INVALID, "invalid --pipe-name "
		    "'%.64s': expected \\\\.\\pipe\\NAME, at most %d "
		    "bytes, NAME of letters, digits and . _ - + @ :", arg,
		    ZEUSD_PIPE_NAME_MAX);
	return 0;
}

static int
cli_apply(struct zeusd_config *cfg, int opt, const char *arg, struct zerr *err)
{
	uint64_t v;
	char bad[80];

	if (cli_transport_flag(opt, err) != 0 ||
	    cli_platform_flag(opt, err) != 0)
		return -1;
	switch (opt) {
	case OPT_MODE:
		return cli_os_mode(arg, &cfg->mode, err);
	case OPT_SOCKET_PATH:
		if (arg[0] == '\0' || strlen(arg) > 107)
			return zerr_set(err, ZERR_INVALID,
			    "invalid --socket-path: must be 1-107 bytes");
		cfg->socket_path = arg;
		return 0;
	case OPT_SOCKET_PERMS:
		return cli_parse_permissions(arg, &cfg->socket_permissions, err);
	case OPT_SOCKET_UID:
	case OPT_SOCKET_GID:
		if (cli_parse_owner(arg, opt == OPT_SOCKET_UID, &v, err) != 0)
			return -1;
		if (opt == OPT_SOCKET_UID) {
			cfg->socket_uid = (uid_t)v;
			cfg->has_socket_uid = true;
		} else {
			cfg->socket_gid = (gid_t)v;
			cfg->has_socket_gid = true;
		}
		return 0;
	case OPT_TCP_BIND: {
		struct sockaddr_storage ss;
		socklen_t len;

		if (listen_parse_tcp(arg, &ss, &len, err) != 0)
			return -1;
		cfg->tcp_bind_address = arg;
		return 0;
	}
	case OPT_TCP_ALLOWED_HOSTS:
		if (host_list_check(arg, bad, sizeof(bad)) != 0)
			return zerr_set(err, ZERR_INVALID, "invalid "
			    "--tcp-allowed-hosts entry '%s': expected up to %d "
			    "comma-separated host names (letters, digits, '-', "
			    "'.') or IP addresses ([v6] in brackets)", bad,
			    HOST_LIST_MAX);
		cfg->tcp_allowed_hosts = arg;
		return 0;
	case OPT_PIPE_NAME:
		if (cli_parse_pipe_name(arg, err) != 0)
			return -1;
		cfg->pipe_name = arg;
		return 0;
	case OPT_PIPE_SDDL:
		/* its syntax is the system's: checked when the pipe is made */
		if (arg[0] == '\0' || strlen(arg) > 1024)
			return zerr_set(err, ZERR_INVALID, "invalid --pipe-sddl: "
			    "must be 1-1024 bytes");
		cfg->pipe_sddl = arg;
		return 0;
	case OPT_NUM_WORKERS:
		if (env_parse_uint(arg, 1, 1024, &v, "--num-workers", err) != 0)
			return -1;
		cfg->num_workers = (unsigned)v;
		return 0;
	case OPT_GPU_HZ:
	case OPT_CPU_HZ:
		if (env_parse_uint(arg, 1, CLI_MAX_POLL_HZ, &v, opt == OPT_GPU_HZ ?
		    "--gpu-power-poll-hz" : "--cpu-power-poll-hz", err) != 0)
			return -1;
		*(opt == OPT_GPU_HZ ? &cfg->gpu_power_poll_hz :
		    &cfg->cpu_power_poll_hz) = (unsigned)v;
		return 0;
	case OPT_GPU_BACKEND:
		if (strcmp(arg, "auto") == 0)
			cfg->gpu_backend = GPU_BACKEND_AUTO;
		else if (strcmp(arg, "nvml") == 0)
			cfg->gpu_backend = GPU_BACKEND_NVML;
		else if (strcmp(arg, "amdsmi") == 0)
			cfg->gpu_backend = GPU_BACKEND_AMDSMI;
		else
			return zerr_set(err, ZERR_INVALID,
			    "invalid --gpu-backend '%.32s': expected auto, nvml "
			    "or amdsmi", arg);
		return 0;
	case OPT_ENABLE:
		if (group_parse_list(arg, &cfg->enabled, bad, sizeof(bad)) != 0)
			return zerr_set(err, ZERR_INVALID,
			    "invalid --enable: unknown API group '%s' (known: "
			    "gpu-control, gpu-read, cpu-read, metrics)", bad);
		return 0;
	case OPT_OVERRIDES:
		cfg->gpu_command_overrides = arg;
		return 0;
	case OPT_SIGNING_KEY:
		cfg->signing_key_path = arg;
		return 0;
	case OPT_POLICY:
		cfg->policy_file = arg;
		return 0;
	case OPT_AUDIT_LOG:
		cfg->audit_log = arg;
		return 0;
	case OPT_AUDIT_REQUIRED:
		cfg->audit_required = true;
		return 0;
	case OPT_GPU_LEASES:
		cfg->gpu_leases = true;
		return 0;
	case OPT_RESTORE_ON_SHUTDOWN:
		cfg->restore_on_shutdown = true;
		return 0;
	case OPT_STATE_DIR:
		if (arg[0] != '/')
			return zerr_set(err, ZERR_INVALID, "--state-dir wants "
			    "an absolute path");
		cfg->state_dir = arg;
		return 0;
	case OPT_NVML_LIBRARY:
		cfg->nvml_library = arg;
		return 0;
	case OPT_RAPL_DIR:
		cfg->rapl_dir = arg;
		return 0;
	case OPT_USER:
		if (arg[0] == '\0' || strlen(arg) > 32)
			return zerr_set(err, ZERR_INVALID,
			    "invalid --user: must be a user name of 1-32 bytes");
		cfg->user = arg;
		return 0;
	case OPT_NO_PRIVSEP:
		/* gone, named so that the refusal says why (as OpenSSH did
		 * with UsePrivilegeSeparation=no) */
		return zerr_set(err, ZERR_INVALID, "--no-privsep is no longer "
		    "supported: privilege separation is always on (an "
		    "unprivileged, confined network process serves HTTP and "
		    "asks the device process, which keeps root; "
		    "docs/security.md, \"Privilege separation\"); remove the "
		    "flag");
	case OPT_SIMULATE:
		cfg->simulate = true;
		return 0;
	}
	return zerr_set(err, ZERR_INVALID, "internal: unhandled option");
}

int
cli_parse_serve(int argc, char **argv, struct zeusd_config *cfg, FILE *out,
    struct zerr *err)
{
	int opt;

	config_defaults(cfg);
	optind = 0;		/* glibc: full re-initialisation */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", cli_serve_options,
	    NULL)) != -1) {
		if (opt == 'h') {
			cli_print_serve_usage(out);
			return 1;
		}
		if (opt == '?')
			return zerr_set(err, ZERR_INVALID,
			    "unknown option '%.64s' (see zeusd serve --help)",
			    argv[optind - 1]);
		if (opt == ':')
			return zerr_set(err, ZERR_INVALID,
			    "option '%.64s' needs a value", argv[optind - 1]);
		if (cli_apply(cfg, opt, optarg, err) != 0)
			return -1;
	}
	if (optind < argc)
		return zerr_set(err, ZERR_INVALID,
		    "unexpected argument '%.64s' (see zeusd serve --help)",
		    argv[optind]);
	if (cfg->audit_required && cfg->audit_log == NULL)
		return zerr_set(err, ZERR_INVALID, "--audit-required needs "
		    "--audit-log (the log whose writing it requires)");
	if (cfg->restore_on_shutdown && !cfg->gpu_leases)
		return zerr_set(err, ZERR_INVALID, "--restore-on-shutdown "
		    "needs --gpu-leases (it restores leased GPUs)");
	return 0;
}

void
cli_own_host_names(struct zeusd_config *cfg)
{
	static char *list;	/* lives as long as cfg */
	char name[HOST_NAME_MAX_LEN + 1], bad[8];
	const char *user = cfg->tcp_allowed_hosts;
	size_t dot, n;

	if (cfg->mode != MODE_TCP || cli_os_host_name(name, sizeof(name)) != 0)
		return;
	if (name[0] == '\0' || strchr(name, ',') != NULL ||
	    host_list_check(name, bad, sizeof(bad)) != 0)
		return;
	dot = strcspn(name, ".");
	n = (user != NULL ? strlen(user) + 1 : 0) + 2 * strlen(name) + 2;
	if ((list = malloc(n)) == NULL)
		return;
	snprintf(list, n, "%s%s%s%s%.*s", user != NULL ? user : "",
	    user != NULL ? "," : "", name, name[dot] != '\0' ? "," : "",
	    name[dot] != '\0' ? (int)dot : 0, name);
	cfg->tcp_allowed_hosts = list;
}

void
cli_log_host_names(const struct zeusd_config *cfg)
{
	char q[1024];

	if (cfg->mode != MODE_TCP)
		return;
	if (cfg->signing_key_path != NULL) {
		zlog(ZLOG_INFO, "tcp_host_check", "check=off names=%s "
		    "msg=\"--signing-key-path is set: any Host is served (a DNS "
		    "rebinding page has no token to present)\"",
		    zlog_quote(q, sizeof(q), cfg->tcp_allowed_hosts != NULL ?
		    cfg->tcp_allowed_hosts : ""));
		return;
	}
	zlog(ZLOG_INFO, "tcp_host_check", "check=loopback names=%s msg=\"on "
	    "a loopback address clients must send as Host the address they "
	    "connect to, localhost or one of these names (this node's, and "
	    "--tcp-allowed-hosts); other names are refused (421, DNS "
	    "rebinding); on other addresses any Host is served\"",
	    zlog_quote(q, sizeof(q),
	    cfg->tcp_allowed_hosts != NULL ? cfg->tcp_allowed_hosts : ""));
}
