/* SPDX-License-Identifier: Apache-2.0 */
/* os_posix.c - os.h on Linux. */
#include "os.h"

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
