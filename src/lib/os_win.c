/* SPDX-License-Identifier: Apache-2.0 */
/*
 * os_win.c - os.h on Windows. Winsock is started by curl_global_init
 * (libzeus does that first); the host name is the computer's NetBIOS name,
 * which needs no Winsock.
 */
#include "os.h"

#include <winsock2.h>
#include <windows.h>

curl_socket_t
lib_os_socket(int family, int type, int protocol)
{
	return WSASocketW(family, type, protocol, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
}

void
lib_os_hostname(char *buf, size_t size)
{
	DWORD n = (DWORD)size;

	if (size == 0)
		return;
	if (!GetComputerNameA(buf, &n))
		buf[0] = '\0';
	buf[size - 1] = '\0';
}
