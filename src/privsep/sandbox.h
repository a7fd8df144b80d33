/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox.h - what the network process gives up after the fork (issue 13):
 * its user, groups and capabilities (sandbox_drop), then most of the
 * kernel's system calls (sandbox_seccomp).
 *
 * Order in the network process, right after fork() and before it starts
 * any thread: sandbox_lose_fs, sandbox_drop, then sandbox_seccomp. The user is resolved
 * before the fork (sandbox_resolve_user), because name lookups go through
 * NSS, which may load modules and talk to nscd or systemd-userdbd.
 *
 * The seccomp filter kills the whole process on any system call it does
 * not allow (SCMP_ACT_KILL_PROCESS): the device process then notices and
 * exits non-zero, as for any other death of the network process. For
 * debugging, ZEUSD_SECCOMP=trap makes a refused call print
 * "zeusd: seccomp: blocked syscall N (name)" on stderr and exit 70 instead
 * (docs/security.md). The allow-list and why each entry is there are in
 * sandbox.c.
 */
#ifndef ZEUS_SANDBOX_H
#define ZEUS_SANDBOX_H

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

/*
 * 1 in an ASan build: ASan (and the LeakSanitizer it includes) needs more
 * than production does, in the network process's filter (see
 * sandbox_rules_sanitizer() in sandbox.c for exactly what and why), and in
 * the janitor's. Also in a TSan build (-Db_sanitize=thread, never shipped):
 * its runtime opens files to print a report, so without these allowances
 * a race in the network process shows as a death by SIGSYS, not a report.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANDBOX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANDBOX_ASAN 1
#endif
#endif
#ifndef SANDBOX_ASAN
#define SANDBOX_ASAN 0
#endif

#define SANDBOX_USER_NAME_MAX 64

/* The user the network process runs as. */
struct sandbox_user {
	uid_t uid;
	gid_t gid;		/* primary group; no supplementary ones */
	char name[SANDBOX_USER_NAME_MAX];
};

/* Exit status of the process after a refused call in ZEUSD_SECCOMP=trap. */
#define SANDBOX_TRAP_EXIT 70

/*
 * Resolves the user to drop to: `name` when not NULL (--user; it must
 * exist), else "zeusd" when that user exists, else "nobody". A user with
 * uid 0 or gid 0 is refused (dropping to it would drop nothing). Call it
 * before the fork: it goes through NSS. Returns 0, or -1 with `err` set
 * (ZERR_INVALID: no such user, or root).
 */
int sandbox_resolve_user(const char *name, struct sandbox_user *out,
    struct zerr *err);

/*
 * Takes the filesystem away from the calling process (root only, before
 * sandbox_drop: chroot needs CAP_SYS_CHROOT): makes an empty directory in
 * /tmp (mode 0700, owned by root), removes it, and makes that deleted
 * directory the process's root and working directory. Nothing can be
 * created in a deleted directory, and after the drop the process may not
 * even search it, so no path resolves to anything; fds opened before stay
 * usable. *lost = true when done. Not root, or an ASan build
 * (LeakSanitizer reads /proc/self/task at exit): nothing, *lost = false.
 * /tmp unusable: logged (network_process_not_chrooted), *lost = false,
 * returns 0; the seccomp filter refuses every open anyway. Returns -1 with
 * `err` only when the chroot itself failed half-way: the caller exits.
 */
int sandbox_lose_fs(bool *lost, struct zerr *err);

/*
 * Gives up privileges for good, in the calling process (call it while it
 * has a single thread). As root (geteuid() == 0): empties the capability
 * bounding set, clears ambient capabilities, sets the supplementary groups
 * to none, the real/effective/saved gid and uid to `u`'s, clears every
 * capability, and checks that each of these stuck (getresuid/getresgid,
 * getgroups, capget, and that setuid(0) and setgid(0) now fail); then
 * *dropped = true. Not root: the ids stay (the caller logs that), whatever
 * capabilities the process has are still cleared, *dropped = false.
 * Either way it then sets no_new_privs and makes the process non-dumpable
 * (no core file with the signing key in it, no ptrace by other processes
 * of the same user: "nobody" is shared). ASan builds keep it dumpable,
 * because LeakSanitizer's exit-time check ptraces the process's own threads
 * from a helper task. Returns 0, or -1 with `err` set (ZERR_INTERNAL): the
 * caller must then exit, since the process may be half-dropped.
 */
int sandbox_drop(const struct sandbox_user *u, bool *dropped,
    struct zerr *err);

/*
 * Installs the seccomp filter on the calling process (every thread it
 * has, and every thread it creates later). Reads ZEUSD_SECCOMP first:
 * unset, empty or "kill" (the default action kills the process), "trap"
 * (a SIGSYS handler names the call on stderr and exits 70; SIGSYS must
 * not be blocked). Returns 0, or -1 with `err` set (ZERR_INVALID: a bad
 * ZEUSD_SECCOMP; ZERR_INTERNAL: libseccomp or the kernel refused).
 */
int sandbox_seccomp(struct zerr *err);

/*
 * Adds to `ctx` an allow rule, with no argument check, for each system
 * call named in names[0..n-1]; a name this architecture lacks is skipped.
 * Returns 0, or libseccomp's negative errno. For filters built here and
 * for the janitor's (janitor.c).
 */
int sandbox_allow_names(scmp_filter_ctx ctx, const char *const *names,
    size_t n);

#endif
