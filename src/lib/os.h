/* SPDX-License-Identifier: Apache-2.0 */
/*
 * os.h - what libzeus does differently per platform: os_posix.c (Linux),
 * os_win.c (Windows), picked by meson.
 */
#ifndef ZEUS_LIB_OS_H
#define ZEUS_LIB_OS_H

#include <stddef.h>

#include <curl/curl.h>

/*
 * A socket for curl that no child process inherits (SOCK_CLOEXEC; on
 * Windows WSA_FLAG_NO_HANDLE_INHERIT): zeus measure's command must not get
 * our kept-alive connection to zeusd (http.c says why).
 */
curl_socket_t lib_os_socket(int family, int type, int protocol);

/* This host's name into buf; "" when it cannot be had. */
void lib_os_hostname(char *buf, size_t size);

#endif
