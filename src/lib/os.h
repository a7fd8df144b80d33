/* SPDX-License-Identifier: Apache-2.0 */
/*
 * os.h - what libzeus does differently per platform: os_posix.c (Linux),
 * os_win.c (Windows), picked by meson.
 */
#ifndef ZEUS_LIB_OS_H
#define ZEUS_LIB_OS_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/*
 * A socket for curl that no child process inherits (SOCK_CLOEXEC; on
 * Windows WSA_FLAG_NO_HANDLE_INHERIT): zeus measure's command must not get
 * our kept-alive connection to zeusd (http.c says why).
 */
curl_socket_t lib_os_socket(int family, int type, int protocol);

/*
 * A socket for curl whose bytes reach the named pipe `name`
 * (\\.\pipe\NAME): the pipe is opened (a busy one waited for up to
 * `wait_ms`), *to (*tolen bytes of room) becomes the loopback address
 * curl is to connect the socket to, and a thread accepts that connection
 * and relays it to the pipe (common/pipe_relay_win.h) until curl closes
 * the socket. CURL_SOCKET_BAD when it cannot be opened, and always where
 * there are no named pipes (Linux).
 */
curl_socket_t lib_os_pipe_socket(const char *name, long wait_ms,
    struct sockaddr *to, unsigned *tolen);

/* Whether this platform has named pipes (Windows). */
bool lib_os_has_pipes(void);

/* zeusd's default pipe when it exists here (Windows), else NULL. */
const char *lib_os_default_pipe(void);

/* This host's name into buf; "" when it cannot be had. */
void lib_os_hostname(char *buf, size_t size);

#endif
