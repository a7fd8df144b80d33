/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_os_win.c - the command line's Windows part (cli_os.h), as upstream
 * zeusd has it there: `--mode` is named-pipe (the default) or tcp, the
 * Unix-socket flags do not exist (a clear usage error, exit 2), and the
 * default `--enable` leaves out cpu-read (RAPL is Linux-only). The flags of
 * the Linux-only features are cli.c's (CLI_OS_LINUX in its help table):
 * neither printed nor accepted here. The pipe
 * itself is served by http/pipe_win.c.
 */
#include "zeusd/cli_os.h"

#include <string.h>
#include <windows.h>

const unsigned cli_os_this = CLI_OS_WINDOWS;

const char cli_os_enable_default[] = "gpu-control,gpu-read,metrics";

void
cli_os_defaults(struct zeusd_config *cfg)
{
	SYSTEM_INFO si;

	GetSystemInfo(&si);
	cfg->num_workers = si.dwNumberOfProcessors > 0 ?
	    (unsigned)si.dwNumberOfProcessors : 1;
	cfg->mode = MODE_PIPE;
	cfg->socket_path = NULL;
	cfg->enabled = GROUP_BIT(GROUP_GPU_CONTROL) |
	    GROUP_BIT(GROUP_GPU_READ) | GROUP_BIT(GROUP_METRICS);
}

int
cli_os_mode(const char *arg, enum transport_mode *mode, struct zerr *err)
{
	if (strcmp(arg, "named-pipe") == 0)
		*mode = MODE_PIPE;
	else if (strcmp(arg, "tcp") == 0)
		*mode = MODE_TCP;
	else
		return zerr_set(err, ZERR_INVALID, "invalid --mode '%.32s': "
		    "expected named-pipe or tcp (Unix sockets are Linux-only)",
		    arg);
	return 0;
}

/* The DNS name (with its domain, as Linux's gethostname may have it). */
int
cli_os_host_name(char *buf, size_t size)
{
	DWORD n = size > MAXDWORD ? MAXDWORD : (DWORD)size;

	if (size == 0 ||
	    !GetComputerNameExA(ComputerNameDnsFullyQualified, buf, &n))
		return -1;
	buf[size - 1] = '\0';
	return 0;
}

int
cli_os_socket_flag(const char *flag, struct zerr *err)
{
	return zerr_set(err, ZERR_INVALID, "%s is not available on Windows: "
	    "Unix sockets are Linux-only (use --mode tcp with "
	    "--tcp-bind-address)", flag);
}

int
cli_os_owner_by_name(const char *s, bool user, uint64_t *out,
    struct zerr *err)
{
	(void)s;
	(void)out;
	return cli_os_socket_flag(user ? "--socket-uid" : "--socket-gid", err);
}

int
cli_os_pipe_flag(const char *flag, struct zerr *err)
{
	(void)flag;
	(void)err;
	return 0;
}

void
cli_os_print_transport(FILE *out)
{
	fputs("  --mode named-pipe|tcp          transport (default named-pipe)\n"
	    "  --pipe-name NAME               the pipe (default "
	    ZEUSD_DEFAULT_PIPE ")\n"
	    "  --pipe-sddl SDDL               who may open it (default\n"
	    "                                 " ZEUSD_DEFAULT_PIPE_SDDL
	    ": Authenticated\n"
	    "                                 Users read and write)\n", out);
}
