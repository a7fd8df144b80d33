/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox.c - the network process's privilege drop and seccomp filter (see
 * sandbox.h).
 *
 * How the allow-list was derived (issue 13): the daemon as it was before
 * the split ran the black-box suite (foundation, gpu, cpu, streams,
 * metrics, auth, policy, queues, http_hardening, systemd, socket_safety,
 * overrides, override_lifecycle: 703 tests) under `strace -f -ff`, one
 * trace per daemon; the calls every thread of a daemon made after its
 * listen() were collected with their arguments, and the ones only the
 * device side makes (the reaper and the override runner: kill, wait4,
 * waitid, pipe2, faccessat2, close_range, the /proc/PID/stat sweep,
 * unlinkat of the socket at shutdown, the simulator's files) were left
 * out. Added by reading rather than tracing: what glibc makes only on
 * paths the suite does not reach (sysinfo from qsort; sched_getaffinity,
 * which some glibc versions use to count CPUs for malloc arenas), what the
 * device channels will need (recvmsg for SCM_RIGHTS), and other spellings
 * of traced calls that another architecture or libc path uses (epoll_pwait,
 * ppoll, statx, dup3, readv...), all harmless on descriptors already held.
 * test_sandbox.c runs the glibc paths, NSS included, under the filter.
 *
 * Since then the network process lost its filesystem (sandbox_lose_fs and
 * no openat): the NSS lookups the trace showed (getgrouplist dlopen()ing
 * libnss_systemd and libcap, nscd's and userdb's AF_UNIX sockets and
 * varlink, readlinkat and O_PATH opens under /run/systemd/userdb) moved to
 * the device process, so socket, connect, readlink(at), PR_CAPBSET_READ
 * and executable mappings left the list.
 *
 * Things the trace showed that are easy to miss:
 *  - jansson seeds its hash function from /dev/urandom on the first JSON
 *    object, opened without O_CLOEXEC: the network process draws the seed
 *    before it loses the filesystem (split.c).
 *  - glibc 2.34+ pthread_create tries clone3 first and falls back to clone
 *    on ENOSYS; clone's flags can be checked by the filter, clone3's (in
 *    memory) cannot, so clone3 fails with ENOSYS and clone must carry
 *    CLONE_THREAD.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "common/log.h"

/* ------------------------------------------------------------------------ */
/* the user */

static int
sandbox_lookup(const char *name, struct sandbox_user *out, bool *found,
    struct zerr *err)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int rc;

	*found = false;
	rc = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (rc != 0 && rc != ENOENT && rc != ESRCH)
		return zerr_set(err, ZERR_INTERNAL, "looking up user '%s': %s",
		    name, strerror(rc));
	if (res == NULL)
		return 0;
	if (strlen(pw.pw_name) >= sizeof(out->name))
		return zerr_set(err, ZERR_INVALID, "user name '%.64s...' is "
		    "longer than %d bytes", pw.pw_name,
		    SANDBOX_USER_NAME_MAX - 1);
	if (pw.pw_uid == 0 || pw.pw_gid == 0)
		return zerr_set(err, ZERR_INVALID, "user '%s' has uid %u gid "
		    "%u: the network process must not run as root or in "
		    "group 0", pw.pw_name, (unsigned)pw.pw_uid,
		    (unsigned)pw.pw_gid);
	out->uid = pw.pw_uid;
	out->gid = pw.pw_gid;
	strcpy(out->name, pw.pw_name);
	*found = true;
	return 0;
}

int
sandbox_resolve_user(const char *name, struct sandbox_user *out,
    struct zerr *err)
{
	static const char *const fallback[] = { "zeusd", "nobody" };
	bool found;

	memset(out, 0, sizeof(*out));
	if (name != NULL) {
		if (name[0] == '\0')
			return zerr_set(err, ZERR_INVALID,
			    "--user: empty user name");
		if (sandbox_lookup(name, out, &found, err) != 0)
			return -1;
		if (!found)
			return zerr_set(err, ZERR_INVALID, "--user: no user "
			    "named '%.64s'", name);
		return 0;
	}
	for (size_t i = 0; i < sizeof(fallback) / sizeof(fallback[0]); i++) {
		if (sandbox_lookup(fallback[i], out, &found, err) != 0)
			return -1;
		if (found)
			return 0;
	}
	return zerr_set(err, ZERR_INVALID, "neither a 'zeusd' nor a 'nobody' "
	    "user exists to run the network process as (create one, or "
	    "name one with --user)");
}

/* ------------------------------------------------------------------------ */
/* the drop */

static int
sandbox_capget(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };

	/* valgrind marks only the first as written */
	memset(data, 0, 2 * sizeof(data[0]));
	return (int)syscall(SYS_capget, &hdr, data);
}

/* Clears effective, permitted and inheritable: always allowed. */
static int
sandbox_capclear(struct zerr *err)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) != 0)
		return zerr_set(err, ZERR_INTERNAL, "capset (clearing every "
		    "capability): %s", strerror(errno));
	return 0;
}

/* Highest capability number this kernel knows, by probing the bounding set. */
static int
sandbox_last_cap(void)
{
	int cap = 0;

	while (cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0)
		cap++;
	return cap - 1;
}

/* Empties the bounding set; needs CAP_SETPCAP. */
static int
sandbox_drop_bounding(int last, struct zerr *err)
{
	for (int cap = 0; cap <= last; cap++) {
		int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (in < 0)
			return zerr_set(err, ZERR_INTERNAL, "PR_CAPBSET_READ "
			    "%d: %s", cap, strerror(errno));
		if (in == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
			return zerr_set(err, ZERR_INTERNAL, "PR_CAPBSET_DROP "
			    "%d: %s%s", cap, strerror(errno), errno == EPERM ?
			    " (emptying the capability bounding set needs "
			    "CAP_SETPCAP: is it missing from the unit's "
			    "CapabilityBoundingSet?)" : "");
	}
	return 0;
}

/* Ambient capabilities are gone: PR_CAP_AMBIENT needs Linux 4.3. */
static int
sandbox_clear_ambient(struct zerr *err)
{
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
	    errno != EINVAL)
		return zerr_set(err, ZERR_INTERNAL, "clearing the ambient "
		    "capabilities: %s", strerror(errno));
	return 0;
}

/* Every capability set is empty; the bounding set too when `bounding`. */
static int
sandbox_check_caps(int last, bool bounding, struct zerr *err)
{
	struct __user_cap_data_struct data[2];

	if (sandbox_capget(data) != 0)
		return zerr_set(err, ZERR_INTERNAL, "capget: %s",
		    strerror(errno));
	for (int i = 0; i < 2; i++)
		if (data[i].effective != 0 || data[i].permitted != 0 ||
		    data[i].inheritable != 0)
			return zerr_set(err, ZERR_INTERNAL, "capabilities "
			    "left after the drop (effective %#x permitted %#x "
			    "inheritable %#x, word %d)", data[i].effective,
			    data[i].permitted, data[i].inheritable, i);
	for (int cap = 0; cap <= last; cap++) {
		if (bounding && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0)
			return zerr_set(err, ZERR_INTERNAL, "capability %d "
			    "still in the bounding set", cap);
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0,
		    0) == 1)
			return zerr_set(err, ZERR_INTERNAL, "capability %d "
			    "still ambient", cap);
	}
	return 0;
}

/* The ids are `u`'s, no supplementary group, and root cannot come back. */
static int
sandbox_check_ids(const struct sandbox_user *u, struct zerr *err)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;
	gid_t groups[1];
	int n;

	if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0)
		return zerr_set(err, ZERR_INTERNAL, "getresuid/getresgid: %s",
		    strerror(errno));
	if (r != u->uid || e != u->uid || s != u->uid)
		return zerr_set(err, ZERR_INTERNAL, "uids are %u/%u/%u after "
		    "setresuid(%u): the drop did not stick", (unsigned)r,
		    (unsigned)e, (unsigned)s, (unsigned)u->uid);
	if (rg != u->gid || eg != u->gid || sg != u->gid)
		return zerr_set(err, ZERR_INTERNAL, "gids are %u/%u/%u after "
		    "setresgid(%u): the drop did not stick", (unsigned)rg,
		    (unsigned)eg, (unsigned)sg, (unsigned)u->gid);
	n = getgroups(1, groups);
	if (n != 0)
		return zerr_set(err, ZERR_INTERNAL, "supplementary groups left "
		    "after setgroups(0): %d", n);
	/* the process is single-threaded: no setxid broadcast here */
	if (setuid(0) == 0 || errno != EPERM)
		return zerr_set(err, ZERR_INTERNAL, "setuid(0) did not fail "
		    "with EPERM after the drop");
	if (setgid(0) == 0 || errno != EPERM)
		return zerr_set(err, ZERR_INTERNAL, "setgid(0) did not fail "
		    "with EPERM after the drop");
	return 0;
}

int
sandbox_drop(const struct sandbox_user *u, bool *dropped, struct zerr *err)
{
	int last = sandbox_last_cap();
	bool root = geteuid() == 0;

	*dropped = false;
	if (root) {
		if (u == NULL || u->uid == 0 || u->gid == 0)
			return zerr_set(err, ZERR_INTERNAL, "sandbox_drop: no "
			    "unprivileged user to drop to");
		/* the uid change must clear the capabilities, not keep them */
		if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0)
			return zerr_set(err, ZERR_INTERNAL, "PR_SET_KEEPCAPS: "
			    "%s", strerror(errno));
		/* while CAP_SETPCAP is still there */
		if (sandbox_drop_bounding(last, err) != 0 ||
		    sandbox_clear_ambient(err) != 0)
			return -1;
		if (setgroups(0, NULL) != 0)
			return zerr_set(err, ZERR_INTERNAL, "setgroups (none): "
			    "%s", strerror(errno));
		if (setresgid(u->gid, u->gid, u->gid) != 0)
			return zerr_set(err, ZERR_INTERNAL, "setresgid(%u): %s",
			    (unsigned)u->gid, strerror(errno));
		if (setresuid(u->uid, u->uid, u->uid) != 0)
			return zerr_set(err, ZERR_INTERNAL, "setresuid(%u): %s",
			    (unsigned)u->uid, strerror(errno));
		if (sandbox_capclear(err) != 0 ||
		    sandbox_check_ids(u, err) != 0 ||
		    sandbox_check_caps(last, true, err) != 0)
			return -1;
		*dropped = true;
	} else {
		/*
		 * Not root: the ids stay. Whatever capabilities it was given
		 * (file or ambient ones) still go; the bounding set stays
		 * unless CAP_SETPCAP happens to be there, which no_new_privs
		 * and the missing execve make moot.
		 */
		if (sandbox_clear_ambient(err) != 0 ||
		    sandbox_capclear(err) != 0 ||
		    sandbox_check_caps(last, false, err) != 0)
			return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return zerr_set(err, ZERR_INTERNAL, "PR_SET_NO_NEW_PRIVS: %s",
		    strerror(errno));
	/*
	 * Non-dumpable: no core file (it would hold the signing key and
	 * tokens), and no ptrace or /proc/PID/mem from other processes of
	 * the same user ("nobody" is shared). The uid change already did
	 * this with the default fs.suid_dumpable; say it outright. ASan
	 * builds stay dumpable: LeakSanitizer's exit-time check ptraces this
	 * process's threads from a helper task sharing its memory, which the
	 * kernel allows only on a dumpable process once the caps are gone.
	 */
	if (prctl(PR_SET_DUMPABLE, SANDBOX_ASAN ? 1 : 0, 0, 0, 0) != 0)
		return zerr_set(err, ZERR_INTERNAL, "PR_SET_DUMPABLE: %s",
		    strerror(errno));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* the filesystem */

int
sandbox_lose_fs(bool *lost, struct zerr *err)
{
	char dir[] = "/tmp/zeusd-root.XXXXXX";
	int fd, e;

	*lost = false;
	if (SANDBOX_ASAN || geteuid() != 0)
		return 0;
	if (mkdtemp(dir) == NULL) {
		zlog(ZLOG_WARN, "network_process_not_chrooted", "error=\"%s\" "
		    "msg=\"cannot make an empty directory in /tmp; the seccomp "
		    "filter still refuses every open\"", strerror(errno));
		return 0;
	}
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	e = errno;
	/* gone from every directory before it becomes our root */
	if (rmdir(dir) != 0 && fd >= 0) {
		e = errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "%s: %s", dir, strerror(e));
	if (fchdir(fd) != 0 || chroot(".") != 0 || chdir("/") != 0) {
		e = errno;
		close(fd);
		return zerr_set(err, ZERR_INTERNAL, "chroot into an empty "
		    "directory: %s", strerror(e));
	}
	close(fd);
	*lost = true;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* the filter */

/*
 * Allowed with any arguments. One line per group: why the network process
 * needs it. Names that do not exist on the build's architecture (dup2,
 * poll, readlink, epoll_wait... on aarch64) are skipped.
 */
static const char *const sandbox_allow[] = {
	/* malloc, thread stacks (mmap and mprotect: see below) */
	"brk", "munmap", "mremap", "madvise",
	/* threads: locks, robust futex list and rseq registration at start */
	"futex", "set_robust_list", "rseq", "sched_yield",
	/* glibc counts the CPUs once past 8 malloc arenas (threads): 2.36
	 * reads /sys/devices/system/cpu/online, other versions and a
	 * missing /sys ask sched_getaffinity */
	"sched_getaffinity",
	/* glibc qsort of >= 1 KiB (query.c: 256 ids) reads the RAM size */
	"sysinfo",
	"exit", "exit_group",
	/* time: clock_gettime makes the syscall without a usable vDSO */
	"clock_gettime", "clock_getres", "gettimeofday", "time",
	"clock_nanosleep", "nanosleep", "restart_syscall",
	/* MHD nonces, jansson's hash seed (glibc: getrandom, then a file) */
	"getrandom",
	/* signals: masks, the main thread's sigwait, glibc's abort() */
	"rt_sigprocmask", "rt_sigaction", "rt_sigreturn", "rt_sigtimedwait",
	"sigaltstack",
	/* identity of this process, for logs and tgkill */
	"getpid", "gettid", "getuid", "geteuid", "getgid",
	"getegid", "getresuid", "getresgid", "getgroups",
	/* I/O on descriptors already held: sockets, the device channels
	 * (SOCK_SEQPACKET, SCM_RIGHTS), the reloaded key and policy,
	 * /proc/self/stat kept for /metrics (procstat_keep: pread); glibc's
	 * fstat is newfstatat(fd, ""). No directory is held (a directory
	 * fd from before the chroot would lead out of it), so nothing is
	 * listed and no path is walked from a descriptor. */
	"read", "readv", "pread64", "write", "writev", "lseek", "close",
	"dup", "dup2", "dup3", "fstat", "newfstatat", "statx",
	/* the audit log's free-space check where fallocate is unsupported
	 * (audit.c: audit_reserve); it reads, changes nothing */
	"fstatfs",
	/* HTTP: libmicrohttpd's accept/receive/send and the peer's identity */
	"accept4", "recvfrom", "recvmsg", "sendto", "sendmsg", "shutdown",
	"getsockopt", "setsockopt", "getsockname", "getpeername",
	/* MHD's epoll loop and inter-thread eventfd (a lease's holders are
	 * the device process's to watch: no pidfd_open here) */
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"eventfd2", "poll", "ppoll",
};

/* keeps the first error of a run of rule additions */
#define SB_ADD(expr) \
	do { \
		if (rc == 0) \
			rc = (expr); \
	} while (0)

/* (SCMP_CMP_EQ's unused second datum is spelled out, 0, for clang's
 * -Wmissing-field-initializers) */
#define SCMP_ALLOW(ctx, name, n, ...) \
	seccomp_rule_add((ctx), SCMP_ACT_ALLOW, SCMP_SYS(name), (n), \
	    ##__VA_ARGS__)

/* Rules that look at arguments. */
static int
sandbox_rules_args(scmp_filter_ctx ctx)
{
	/* a thread shares everything; no new process, namespace or tracer */
	const uint64_t clone_need = CLONE_VM | CLONE_FS | CLONE_FILES |
	    CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
	const uint64_t clone_mask = clone_need | CLONE_VFORK | CLONE_PARENT |
	    CLONE_PTRACE | CLONE_UNTRACED | CLONE_PIDFD | CLONE_NEWNS |
	    CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
	    CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME;
	const uint64_t wx = PROT_WRITE | PROT_EXEC;
	/* the type without SOCK_NONBLOCK and SOCK_CLOEXEC */
	const uint32_t sock_type = ~(uint32_t)(SOCK_NONBLOCK | SOCK_CLOEXEC);
	static const int fcntl_owner[] = { F_SETOWN, F_SETSIG, F_SETOWN_EX };
	int rc = 0;

	/* pthread_create: clone with thread flags; clone3 (flags in memory,
	 * out of the filter's reach) says ENOSYS so glibc falls back */
	SB_ADD(SCMP_ALLOW(ctx, clone, 1,
	    SCMP_A0_64(SCMP_CMP_MASKED_EQ, clone_mask, clone_need)));
	SB_ADD(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
	    0));
	/*
	 * No file is opened after startup: peers' names, groups and commands
	 * come from the device process (PSMSG_PEER), reloaded files as fds,
	 * /proc/self/stat as an fd kept from before (procstat_keep),
	 * jansson's seed was drawn before. openat fails (EACCES) rather than killing, so a
	 * library's optional read (glibc counting CPUs in
	 * /sys/devices/system/cpu/online past 8 malloc arenas, then falling
	 * back to sched_getaffinity) degrades instead of taking zeusd down.
	 */
	SB_ADD(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat),
	    0));
	/*
	 * fcntl: flags, close-on-exec, dup; never a signal owner. A socket
	 * whose owner is set (F_SETOWN, F_SETOWN_EX) signals that pid, with
	 * any signal F_SETSIG names, when data comes with O_ASYNC: a kill()
	 * in disguise, which the kernel lets reach every process of the same
	 * user ("nobody" is shared). Those three fail with EPERM; every
	 * other command is let through as before: below F_SETOWN (8: dup,
	 * fd and file flags, locks), the two getters between, and above
	 * F_SETOWN_EX (15: F_DUPFD_CLOEXEC, seals, pipe sizes...). A rule
	 * compares an argument once, hence the ranges; 12 to 14 (32-bit
	 * F_*LK64, not valid on 64-bit architectures) are not allowed.
	 */
	for (size_t i = 0; i < sizeof(fcntl_owner) / sizeof(fcntl_owner[0]);
	    i++)
		SB_ADD(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
		    SCMP_SYS(fcntl), 1,
		    SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)fcntl_owner[i], 0)));
	SB_ADD(SCMP_ALLOW(ctx, fcntl, 1,
	    SCMP_A1_32(SCMP_CMP_LT, (uint32_t)F_SETOWN, 0)));
	SB_ADD(SCMP_ALLOW(ctx, fcntl, 1,
	    SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)F_GETOWN, 0)));
	SB_ADD(SCMP_ALLOW(ctx, fcntl, 1,
	    SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)F_GETSIG, 0)));
	SB_ADD(SCMP_ALLOW(ctx, fcntl, 1,
	    SCMP_A1_32(SCMP_CMP_GT, (uint32_t)F_SETOWN_EX, 0)));
	/*
	 * The audit log reserves each line's room before writing it
	 * (audit.c: audit_reserve), so a full disk loses whole lines, never
	 * half of one: fallocate with FALLOC_FL_KEEP_SIZE and nothing else,
	 * which adds blocks past the end and changes no byte or size (no
	 * hole punched, no range zeroed or collapsed).
	 */
	SB_ADD(SCMP_ALLOW(ctx, fallocate, 1,
	    SCMP_A1_32(SCMP_CMP_EQ, (uint32_t)FALLOC_FL_KEEP_SIZE, 0)));
	/* memory neither executable nor writable and executable: nothing
	 * is loaded after startup (no NSS module, no dlopen) */
	SB_ADD(SCMP_ALLOW(ctx, mmap, 1, SCMP_A2_32(SCMP_CMP_MASKED_EQ, wx, 0)));
	SB_ADD(SCMP_ALLOW(ctx, mmap, 1,
	    SCMP_A2_32(SCMP_CMP_MASKED_EQ, wx, PROT_WRITE)));
	SB_ADD(SCMP_ALLOW(ctx, mprotect, 1,
	    SCMP_A2_32(SCMP_CMP_MASKED_EQ, wx, 0)));
	SB_ADD(SCMP_ALLOW(ctx, mprotect, 1,
	    SCMP_A2_32(SCMP_CMP_MASKED_EQ, wx, PROT_WRITE)));
	/*
	 * No socket() at all: the watchdog's probe socketpair (a stream) and
	 * nothing else (sd_notify goes through the device process). Never a
	 * datagram pair: a datagram socket sends to any address sendto()
	 * names, connected or not, and abstract addresses are no files the
	 * chroot could hide.
	 */
	SB_ADD(SCMP_ALLOW(ctx, socketpair, 2,
	    SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX, 0),
	    SCMP_A1_32(SCMP_CMP_MASKED_EQ, sock_type, SOCK_STREAM)));
	SB_ADD(SCMP_ALLOW(ctx, socketpair, 2,
	    SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX, 0),
	    SCMP_A1_32(SCMP_CMP_MASKED_EQ, sock_type, SOCK_SEQPACKET)));
	/* signals to its own threads only (pthread_kill, raise, abort) */
	SB_ADD(SCMP_ALLOW(ctx, tgkill, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)getpid(), 0)));
	/* streams.c: SIOCOUTQ (== TIOCOUTQ) for unsent bytes; FIONREAD;
	 * TCGETS is isatty(), from stdio */
	SB_ADD(SCMP_ALLOW(ctx, ioctl, 1, SCMP_A1_32(SCMP_CMP_EQ, TIOCOUTQ, 0)));
	SB_ADD(SCMP_ALLOW(ctx, ioctl, 1, SCMP_A1_32(SCMP_CMP_EQ, FIONREAD, 0)));
	SB_ADD(SCMP_ALLOW(ctx, ioctl, 1, SCMP_A1_32(SCMP_CMP_EQ, TCGETS, 0)));
	/* MHD names its thread */
	SB_ADD(SCMP_ALLOW(ctx, prctl, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, PR_SET_NAME, 0)));
	SB_ADD(SCMP_ALLOW(ctx, prctl, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, PR_GET_NAME, 0)));
	/* getrlimit (metrics: process_max_fds), never setrlimit */
	SB_ADD(SCMP_ALLOW(ctx, prlimit64, 1, SCMP_A2_64(SCMP_CMP_EQ, 0, 0)));
	return rc;
}

/*
 * Sanitizer builds only (the production filter has none of this).
 * LeakSanitizer's check at exit (StopTheWorld) clones a tracer task that
 * shares the memory but is not a thread (CLONE_VM|CLONE_FS|CLONE_FILES|
 * CLONE_UNTRACED), allows it to trace (prctl PR_SET_PTRACER, for Yama),
 * and waits for it (wait4, sched_yield); the tracer sets PR_SET_PDEATHSIG,
 * checks getppid, lists /proc/self/task with the runtime's own raw calls
 * (open and getdents on x86_64, not openat/getdents64), and ptrace()s
 * every thread (attach, registers, detach, wait4 between) before exiting.
 * ASan asks PR_GET_DUMPABLE when a thread starts, and a report reads
 * /proc/self/exe's link (readlink) to symbolize. Each entry was checked
 * by taking it out: LeakSanitizer then either dies of SIGSYS or, when the
 * filter kills only the tracer, waits for it forever (an ASan daemon that
 * hangs at exit means a call is missing here).
 */
static int
sandbox_rules_sanitizer(scmp_filter_ctx ctx)
{
	const uint64_t open_deny = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND;
	int rc = 0;

	if (!SANDBOX_ASAN)
		return 0;
	SB_ADD(SCMP_ALLOW(ctx, clone, 1, SCMP_A0_64(SCMP_CMP_EQ,
	    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED, 0)));
	SB_ADD(SCMP_ALLOW(ctx, ptrace, 0));
	SB_ADD(SCMP_ALLOW(ctx, wait4, 0));
	SB_ADD(SCMP_ALLOW(ctx, getppid, 0));
	/* /proc/self/task, /proc/self/maps: reading only, as openat */
	if (seccomp_syscall_resolve_name("open") >= 0)
		SB_ADD(SCMP_ALLOW(ctx, open, 1,
		    SCMP_A1_32(SCMP_CMP_MASKED_EQ, open_deny, 0)));
	if (seccomp_syscall_resolve_name("getdents") >= 0)
		SB_ADD(SCMP_ALLOW(ctx, getdents, 0));
	SB_ADD(SCMP_ALLOW(ctx, getdents64, 0));	/* where there is no getdents */
	/*
	 * A sanitizer's report symbolizes its stack, which reads
	 * /proc/self/exe's link first: without this the filter kills the
	 * process in the middle of the report, and the finding is lost.
	 */
	if (seccomp_syscall_resolve_name("readlink") >= 0)
		SB_ADD(SCMP_ALLOW(ctx, readlink, 0));
	SB_ADD(SCMP_ALLOW(ctx, readlinkat, 0));
	SB_ADD(SCMP_ALLOW(ctx, prctl, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, PR_SET_PTRACER, 0)));
	SB_ADD(SCMP_ALLOW(ctx, prctl, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, PR_SET_PDEATHSIG, 0)));
	SB_ADD(SCMP_ALLOW(ctx, prctl, 1,
	    SCMP_A0_32(SCMP_CMP_EQ, PR_GET_DUMPABLE, 0)));
	return rc;
}

/* ZEUSD_SECCOMP=trap: names resolved before the filter goes in. */
#define SANDBOX_TRAP_NAMES 512
static char sandbox_trap_names[SANDBOX_TRAP_NAMES][24];

static size_t
sandbox_fmt_uint(char *p, unsigned long v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

/* async-signal-safe: no stdio, no malloc; write(2) and _exit(2) only */
static void
sandbox_sigsys(int sig, siginfo_t *si, void *uctx)
{
	char line[128];
	size_t n = 0;
	int nr = si->si_syscall;
	const char *name = nr >= 0 && nr < SANDBOX_TRAP_NAMES &&
	    sandbox_trap_names[nr][0] != '\0' ? sandbox_trap_names[nr] : "?";
	static const char head[] = "zeusd: seccomp: blocked syscall ";

	(void)sig;
	(void)uctx;
	memcpy(line, head, sizeof(head) - 1);
	n = sizeof(head) - 1;
	if (nr < 0) {
		line[n++] = '-';
		n += sandbox_fmt_uint(line + n, (unsigned long)-(long)nr);
	} else {
		n += sandbox_fmt_uint(line + n, (unsigned long)nr);
	}
	line[n++] = ' ';
	line[n++] = '(';
	for (size_t i = 0; name[i] != '\0' && n < sizeof(line) - 3; i++)
		line[n++] = name[i];
	line[n++] = ')';
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
	_exit(SANDBOX_TRAP_EXIT);
}

static int
sandbox_trap_prepare(struct zerr *err)
{
	struct sigaction sa;
	sigset_t set;

	for (int nr = 0; nr < SANDBOX_TRAP_NAMES; nr++) {
		char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE,
		    nr);

		if (s != NULL) {
			strncpy(sandbox_trap_names[nr], s,
			    sizeof(sandbox_trap_names[nr]) - 1);
			free(s);
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sandbox_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0)
		return zerr_set(err, ZERR_INTERNAL, "sigaction(SIGSYS): %s",
		    strerror(errno));
	/* a blocked SIGSYS from seccomp would kill with the default action */
	sigemptyset(&set);
	sigaddset(&set, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	return 0;
}

int
sandbox_allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);

		if (nr == __NR_SCMP_ERROR || nr < 0)
			continue;	/* not a system call on this arch */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	return rc;
}

int
sandbox_seccomp(struct zerr *err)
{
	const char *mode = getenv("ZEUSD_SECCOMP");
	uint32_t def = SCMP_ACT_KILL_PROCESS;
	scmp_filter_ctx ctx;
	int rc;

	if (mode != NULL && strcmp(mode, "trap") == 0) {
		if (sandbox_trap_prepare(err) != 0)
			return -1;
		def = SCMP_ACT_TRAP;
	} else if (mode != NULL && mode[0] != '\0' &&
	    strcmp(mode, "kill") != 0) {
		char q[80];

		return zerr_set(err, ZERR_INVALID, "invalid ZEUSD_SECCOMP %s "
		    "(expected kill or trap)", zlog_quote(q, sizeof(q), mode));
	}
	if ((ctx = seccomp_init(def)) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "seccomp_init failed");
	/* another architecture's calling convention (int 0x80, x32) */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, def);
	/* every thread of the process, should there be any yet */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0)
		rc = sandbox_allow_names(ctx, sandbox_allow,
		    sizeof(sandbox_allow) / sizeof(sandbox_allow[0]));
	if (rc == 0)
		rc = sandbox_rules_args(ctx);
	if (rc == 0)
		rc = sandbox_rules_sanitizer(ctx);
	if (rc != 0) {
		seccomp_release(ctx);
		return zerr_set(err, ZERR_INTERNAL, "building the seccomp "
		    "filter: %s", strerror(-rc));
	}
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc != 0)
		return zerr_set(err, ZERR_INTERNAL, "loading the seccomp "
		    "filter: %s", strerror(-rc));
	return 0;
}
