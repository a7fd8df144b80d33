/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_os_posix.c - the command line's Linux part (cli_os.h): the Unix
 * socket is the default transport, its flags exist, and owner names are
 * looked up through NSS.
 */
#include "zeusd/cli_os.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const unsigned cli_os_this = CLI_OS_LINUX;

const char cli_os_enable_default[] = "gpu-control,gpu-read,cpu-read,\n"
    "                                 metrics";

void
cli_os_defaults(struct zeusd_config *cfg)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* the rest of config_defaults' are Linux's */
	cfg->num_workers = ncpu > 0 ? (unsigned)ncpu : 1;
}

int
cli_os_mode(const char *arg, enum transport_mode *mode, struct zerr *err)
{
	if (strcmp(arg, "uds") == 0)
		*mode = MODE_UDS;
	else if (strcmp(arg, "tcp") == 0)
		*mode = MODE_TCP;
	else
		return zerr_set(err, ZERR_INVALID,
		    "invalid --mode '%.32s': expected uds or tcp", arg);
	return 0;
}

int
cli_os_host_name(char *buf, size_t size)
{
	if (size == 0 || gethostname(buf, size) != 0)
		return -1;
	buf[size - 1] = '\0';
	return 0;
}

int
cli_os_socket_flag(const char *flag, struct zerr *err)
{
	(void)flag;
	(void)err;
	return 0;
}

int
cli_os_pipe_flag(const char *flag, struct zerr *err)
{
	return zerr_set(err, ZERR_INVALID, "%s is only available on Windows "
	    "(named pipes); use --mode uds or --mode tcp", flag);
}

void
cli_os_print_transport(FILE *out)
{
	fputs("  --mode uds|tcp                 transport (default uds)\n"
	    "  --socket-path PATH             UDS path (default " ZEUSD_DEFAULT_SOCKET ")\n"
	    "  --socket-permissions OCTAL     socket file mode (default 666)\n"
	    "  --socket-uid USER, --socket-gid GROUP\n"
	    "                                 owner of the socket file (a name\n"
	    "                                 or a number)\n", out);
}

int
cli_os_owner_by_name(const char *s, bool user, uint64_t *out,
    struct zerr *err)
{
	const char *what = user ? "--socket-uid" : "--socket-gid";
	size_t size = 16384;
	char *buf = NULL;
	int rc;

	/* the NSS buffer grows on ERANGE, up to 1 MiB (huge group lists) */
	for (;;) {
		char *nbuf = realloc(buf, size);

		if (nbuf == NULL) {
			free(buf);
			return zerr_set(err, ZERR_INTERNAL, "out of memory");
		}
		buf = nbuf;
		if (user) {
			struct passwd pw, *res = NULL;

			rc = getpwnam_r(s, &pw, buf, size, &res);
			if (rc == 0 && res != NULL)
				*out = res->pw_uid;
			else if (rc == 0)
				rc = ENOENT;
		} else {
			struct group gr, *res = NULL;

			rc = getgrnam_r(s, &gr, buf, size, &res);
			if (rc == 0 && res != NULL)
				*out = res->gr_gid;
			else if (rc == 0)
				rc = ENOENT;
		}
		if (rc != ERANGE || size >= 1024 * 1024)
			break;
		size *= 2;
	}
	free(buf);
	if (rc == ENOENT)
		return zerr_set(err, ZERR_INVALID, "invalid %s '%.64s': no such "
		    "%s", what, s, user ? "user" : "group");
	if (rc != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot look up %s '%.64s' "
		    "for %s: %s", user ? "user" : "group", s, what,
		    strerror(rc));
	return 0;
}
