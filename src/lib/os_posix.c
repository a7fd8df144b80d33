/* SPDX-License-Identifier: Apache-2.0 */
/* os_posix.c - os.h on Linux. */
#include "os.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

curl_socket_t
lib_os_socket(int family, int type, int protocol)
{
	return socket(family, type | SOCK_CLOEXEC, protocol);
}

void
lib_os_hostname(char *buf, size_t size)
{
	if (size == 0)
		return;
	if (gethostname(buf, size) != 0)
		buf[0] = '\0';
	buf[size - 1] = '\0';
}

curl_socket_t
lib_os_pipe_socket(const char *name, long wait_ms, struct sockaddr *to,
    unsigned *tolen)
{
	(void)name;
	(void)wait_ms;
	(void)to;
	(void)tolen;
	errno = ENOTSUP;
	return CURL_SOCKET_BAD;
}

bool
lib_os_has_pipes(void)
{
	return false;
}

const char *
lib_os_default_pipe(void)
{
	return NULL;
}
