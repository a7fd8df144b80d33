/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slow_nss.c - an LD_PRELOAD for the black-box tests (test_policy.py,
 * test_slow_user_lookup_stalls_no_one_else): getpwuid_r of one uid
 * (ZEUS_SLOW_NSS_UID) first creates the file ZEUS_SLOW_NSS_MARK, then
 * sleeps ZEUS_SLOW_NSS_MS, as a slow LDAP or SSSD answer would; every
 * other call goes straight to the C library's.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len,
    struct passwd **res);

int
getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len,
    struct passwd **res)
{
	int (*real)(uid_t, struct passwd *, char *, size_t, struct passwd **);
	const char *u = getenv("ZEUS_SLOW_NSS_UID");
	const char *ms = getenv("ZEUS_SLOW_NSS_MS");
	const char *mark = getenv("ZEUS_SLOW_NSS_MARK");

	*(void **)&real = dlsym(RTLD_NEXT, "getpwuid_r");
	if (u != NULL && ms != NULL && (uid_t)strtoul(u, NULL, 10) == uid) {
		long n = strtol(ms, NULL, 10);
		struct timespec ts = { .tv_sec = n / 1000,
		    .tv_nsec = (n % 1000) * 1000000L };
		int fd;

		if (mark != NULL && (fd = open(mark, O_WRONLY | O_CREAT |
		    O_CLOEXEC, 0644)) >= 0)
			close(fd);
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	if (real == NULL) {
		*res = NULL;
		return 2;	/* ENOENT */
	}
	return real(uid, pw, buf, len, res);
}
