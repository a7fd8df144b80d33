/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sandbox.c - the network process's sandbox (src/privsep/sandbox.c):
 * the user it resolves, the privilege drop (as root only), and the seccomp
 * filter: calls the network process needs still work, the ones it must
 * never make kill it with SIGSYS, and ZEUSD_SECCOMP=trap names the call.
 *
 * Every sandbox goes into a forked child (a filter cannot be removed); the
 * child reports a failed check through its exit status and a line on
 * stderr. Under valgrind the filter tests are skipped: valgrind's own
 * system calls (its scheduler's pipes, its tool's memory maps) are not the
 * daemon's and the filter would kill valgrind itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procstat.h"
#include "privsep/sandbox.h"

extern char **environ;

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

/* exit statuses of a child whose check failed */
#define CHILD_SETUP_FAILED 90
#define CHILD_CHECK_FAILED 91

static bool
under_valgrind(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, "vgpreload") != NULL;
	fclose(f);
	return found;
}

#define SKIP_UNDER_VALGRIND() \
	do { \
		if (under_valgrind()) { \
			print_message("under valgrind: skipped\n"); \
			skip(); \
		} \
	} while (0)

static void
child_fail(const char *what)
{
	/* stdio is fine here: write(2) is allowed, and it is the last act */
	fprintf(stderr, "sandboxed child: %s (errno %d: %s)\n", what, errno,
	    strerror(errno));
	fflush(stderr);
	_exit(CHILD_CHECK_FAILED);
}

#define CHECK(cond) \
	do { \
		if (!(cond)) \
			child_fail(#cond); \
	} while (0)

/* In the child: drop (when root) and install the filter. */
static void
child_enter_sandbox(void)
{
	struct sandbox_user u;
	struct zerr err = { 0 };
	bool dropped;

	if (geteuid() == 0 &&
	    sandbox_resolve_user("nobody", &u, &err) != 0) {
		fprintf(stderr, "resolve: %s\n", err.msg);
		_exit(CHILD_SETUP_FAILED);
	}
	if (sandbox_drop(geteuid() == 0 ? &u : NULL, &dropped, &err) != 0) {
		fprintf(stderr, "drop: %s\n", err.msg);
		_exit(CHILD_SETUP_FAILED);
	}
	if (sandbox_seccomp(&err) != 0) {
		fprintf(stderr, "seccomp: %s\n", err.msg);
		_exit(CHILD_SETUP_FAILED);
	}
}

/* Forks, runs fn in the child, returns the raw wait status. */
static int
run_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void
expect_exit0(int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child: %s %d", WIFEXITED(status) ? "exited" :
		    "killed by signal", WIFEXITED(status) ?
		    WEXITSTATUS(status) : WTERMSIG(status));
}

/* ------------------------------------------------------------------------ */

static void
test_resolve_user(void **state)
{
	struct sandbox_user u;
	struct zerr err = { 0 };
	struct passwd *pw;

	(void)state;
	assert_int_equal(sandbox_resolve_user(NULL, &u, &err), 0);
	pw = getpwnam("zeusd");
	assert_string_equal(u.name, pw != NULL ? "zeusd" : "nobody");
	assert_true(u.uid != 0 && u.gid != 0);

	if (getpwnam("nobody") != NULL) {
		assert_int_equal(sandbox_resolve_user("nobody", &u, &err), 0);
		assert_string_equal(u.name, "nobody");
		assert_int_equal(u.uid, getpwnam("nobody")->pw_uid);
	}
	assert_int_equal(sandbox_resolve_user("root", &u, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "root"));
	assert_int_equal(sandbox_resolve_user("no-such-user-zeusd-test", &u,
	    &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(sandbox_resolve_user("", &u, &err), -1);
}

/*
 * /proc/self/status, opened before the sandbox: the filter refuses every
 * open, so the checks read it through this fd (pread from 0 is a fresh
 * snapshot), as the daemon reads /proc/self/stat (procstat_keep).
 */
static int status_fd = -1;

static void
keep_status(void)
{
	if ((status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) < 0)
		_exit(CHILD_SETUP_FAILED);
}

/* /proc/self/status field `key` equals `want` */
static bool
status_is(const char *key, const char *want)
{
	char buf[8192], *line, *save = NULL;
	size_t klen = strlen(key);
	ssize_t n;

	if (status_fd < 0)
		keep_status();
	if ((n = pread(status_fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return false;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			char *v = line + klen + 1;

			v += strspn(v, " \t");
			if (strcmp(v, want) == 0)
				return true;
			fprintf(stderr, "%s: %s, expected %s\n", key, v, want);
			return false;
		}
	}
	return false;
}

static void
child_dropped(void *arg)
{
	struct passwd *pw = getpwnam("nobody");
	struct sandbox_user u;
	struct zerr err = { 0 };
	bool dropped = false;
	uid_t r, e, s;
	gid_t rg, eg, sg;

	bool lost = false;

	(void)arg;
	keep_status();
	CHECK(pw != NULL);
	CHECK(sandbox_resolve_user("nobody", &u, &err) == 0);
	CHECK(sandbox_lose_fs(&lost, &err) == 0);
	/* kept in ASan builds: LeakSanitizer reads /proc/self/task */
	CHECK(lost == !TEST_ASAN);
	CHECK(sandbox_drop(&u, &dropped, &err) == 0);
	CHECK(dropped);
	/* the root is an empty, deleted directory that nobody may search */
	errno = 0;
	CHECK(lost ? access("/etc/passwd", F_OK) == -1 && errno == EACCES :
	    access("/etc/passwd", F_OK) == 0);
	/* kept dumpable for LeakSanitizer in ASan builds only */
	CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == (TEST_ASAN ? 1 : 0));
	CHECK(sandbox_seccomp(&err) == 0);
	CHECK(getresuid(&r, &e, &s) == 0);
	CHECK(getresgid(&rg, &eg, &sg) == 0);
	CHECK(r == pw->pw_uid && e == pw->pw_uid && s == pw->pw_uid);
	CHECK(rg == pw->pw_gid && eg == pw->pw_gid && sg == pw->pw_gid);
	CHECK(r != 0 && rg != 0);
	CHECK(getgroups(0, NULL) == 0);
	/* read after the filter went in, through the fd kept from before */
	CHECK(status_is("CapInh", "0000000000000000"));
	CHECK(status_is("CapPrm", "0000000000000000"));
	CHECK(status_is("CapEff", "0000000000000000"));
	CHECK(status_is("CapBnd", "0000000000000000"));
	CHECK(status_is("CapAmb", "0000000000000000"));
	CHECK(status_is("NoNewPrivs", "1"));
	CHECK(status_is("Seccomp", "2"));
}

static void
test_drop_as_root(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("not root: the drop is not tested\n");
		skip();
	}
	SKIP_UNDER_VALGRIND();
	expect_exit0(run_child(child_dropped, NULL));
}

/*
 * The network process's order (split.c): /proc/self/stat kept, the
 * filesystem lost, the drop, the filter. A directory fd kept from before
 * the chroot would lie outside it, and a path walked from it with ".."
 * never meets the new root, so it would reach the real one (through a
 * copy of the fd just as well: dup, F_DUPFD, SCM_RIGHTS). So none is
 * kept: no descriptor held, nor a copy of one, walks anywhere, and a
 * taken-over network process learns nothing of the filesystem.
 */
static void
child_no_walk_from_kept_fd(void *arg)
{
	static const char *const paths[] = { "../../../etc/passwd",
	    "../../..", "..", "../../1/stat" };
	struct sandbox_user u;
	struct zerr err = { 0 };
	struct procstat ps;
	struct stat st;
	bool lost = false, dropped = false;
	int held[64], nheld = 0;

	(void)arg;
	CHECK(procstat_keep() == 0);
	CHECK(sandbox_resolve_user("nobody", &u, &err) == 0);
	CHECK(sandbox_lose_fs(&lost, &err) == 0);
	CHECK(lost);
	CHECK(sandbox_drop(&u, &dropped, &err) == 0);
	CHECK(sandbox_seccomp(&err) == 0);
	for (int fd = 0; fd < 1024 && nheld < 32; fd++)
		if (fstat(fd, &st) == 0) {
			if (S_ISDIR(st.st_mode)) {
				fprintf(stderr, "fd %d is a directory\n", fd);
				child_fail("a directory fd is held");
			}
			held[nheld++] = fd;
		}
	CHECK(nheld >= 4);	/* stdio and /proc/self/stat at least */
	for (int k = 0, n = nheld; k < n; k++) {
		int copy = dup(held[k]);

		CHECK(copy >= 0);
		held[nheld++] = copy;
	}
	for (int k = 0; k < nheld; k++) {
		int fd = held[k];

		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]);
		    i++) {
			struct statx sx;

			if (fstatat(fd, paths[i], &st, 0) == 0) {
				fprintf(stderr, "fd %d: stat of %s works\n",
				    fd, paths[i]);
				child_fail("fstatat walked from a held fd");
			}
			if (statx(fd, paths[i], 0, STATX_BASIC_STATS,
			    &sx) == 0) {
				fprintf(stderr, "fd %d: statx of %s works\n",
				    fd, paths[i]);
				child_fail("statx walked from a held fd");
			}
		}
	}
	/* what is kept still works, and fstat of what the process holds */
	procstat_self(&ps);
	CHECK(ps.ok == (PROCSTAT_STAT | PROCSTAT_MAX_FDS) && ps.rss_bytes > 0);
	CHECK(fstat(STDERR_FILENO, &st) == 0);
}

static void
test_no_walk_from_kept_fd(void **state)
{
	(void)state;
	if (geteuid() != 0 || TEST_ASAN) {
		print_message("not root, or ASan: no chroot to walk out of\n");
		skip();
	}
	SKIP_UNDER_VALGRIND();
	expect_exit0(run_child(child_no_walk_from_kept_fd, NULL));
}

/*
 * kill() is not on the list, but a socket's owner gets a signal when data
 * arrives: fcntl F_SETOWN (pid chosen), F_SETSIG (any signal, SIGKILL
 * too) and O_ASYNC. The kernel lets it through to any process of the same
 * user, and "nobody" is shared with whatever else runs as nobody. The
 * victim here is such a process; it must outlive the sandboxed child.
 */
static void
child_no_sigio_owner(void *arg)
{
	pid_t victim = *(const pid_t *)arg;
	int sv[2], rs, ro, es, eo;

	child_enter_sandbox();
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	/* the attack, each step tried even when one before failed */
	rs = fcntl(sv[0], F_SETSIG, SIGKILL);
	es = errno;
	ro = fcntl(sv[0], F_SETOWN, victim);
	eo = errno;
	(void)fcntl(sv[0], F_SETFL, O_ASYNC | O_NONBLOCK);
	CHECK(write(sv[1], "x", 1) == 1);
	errno = es;
	CHECK(rs == -1 && es == EPERM);
	errno = eo;
	CHECK(ro == -1 && eo == EPERM);
	errno = 0;
	CHECK(fcntl(sv[0], F_SETOWN_EX, &(struct f_owner_ex){ F_OWNER_PID,
	    victim }) == -1 && errno == EPERM);
	CHECK(fcntl(sv[0], F_GETOWN) == 0);
	/* what MHD and listen.c need still works */
	CHECK(fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK) == 0);
	CHECK(fcntl(sv[1], F_SETFD, FD_CLOEXEC) == 0);
	CHECK((fcntl(sv[1], F_GETFD) & FD_CLOEXEC) != 0);
	close(sv[0]);
	close(sv[1]);
}

static void
test_no_signal_through_sigio(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	int status, vstatus;
	pid_t victim;

	(void)state;
	if (geteuid() != 0 || pw == NULL) {
		print_message("not root: no shared user to signal\n");
		skip();
	}
	SKIP_UNDER_VALGRIND();
	fflush(NULL);
	victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		if (setgroups(0, NULL) != 0 ||
		    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
		    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
			_exit(CHILD_SETUP_FAILED);
		for (;;)
			pause();
	}
	status = run_child(child_no_sigio_owner, &victim);
	usleep(100 * 1000);
	if (waitpid(victim, &vstatus, WNOHANG) == victim)
		fail_msg("the sandboxed child killed pid %d (signal %d)",
		    (int)victim, WIFSIGNALED(vstatus) ? WTERMSIG(vstatus) : 0);
	expect_exit0(status);
	kill(victim, SIGKILL);
	assert_int_equal(waitpid(victim, &status, 0), victim);
}

/*
 * The filter allows no socket() and no connect(), and the chroot hides
 * every socket file; but a datagram socket sends to whatever address
 * sendto() names, connected or not, and abstract addresses are no files.
 * A datagram socketpair would thus reach every abstract datagram socket
 * of the host's network namespace. The receiver here is one.
 */
static const char abstract_name[] = "\0zeusd-sandbox-test";

static void
child_no_datagram_out(void *arg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    sizeof(abstract_name) - 1);
	int sv[2];

	(void)arg;
	memcpy(sa.sun_path, abstract_name, sizeof(abstract_name) - 1);
	child_enter_sandbox();
	/* the filter kills here; should it not, try the attack */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0)
		(void)sendto(sv[0], "x", 1, 0, (struct sockaddr *)&sa, len);
}

static void
test_no_datagram_out(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    sizeof(abstract_name) - 1);
	char b;
	int rx, status;

	(void)state;
	SKIP_UNDER_VALGRIND();
	memcpy(sa.sun_path, abstract_name, sizeof(abstract_name) - 1);
	rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(rx >= 0);
	assert_int_equal(bind(rx, (struct sockaddr *)&sa, len), 0);
	status = run_child(child_no_datagram_out, NULL);
	if (recv(rx, &b, 1, MSG_DONTWAIT) == 1)
		fail_msg("the sandboxed child reached an abstract socket");
	close(rx);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
		fail_msg("a datagram socketpair did not kill the child");
}

/* Not root: nothing to drop, the rest still applies. */
static void
child_not_root(void *arg)
{
	struct zerr err = { 0 };
	bool dropped = true;

	bool lost = true;

	(void)arg;
	keep_status();
	CHECK(sandbox_lose_fs(&lost, &err) == 0);
	CHECK(!lost);		/* no chroot without root */
	CHECK(sandbox_drop(NULL, &dropped, &err) == 0);
	CHECK(!dropped);
	CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	CHECK(status_is("CapEff", "0000000000000000"));
	CHECK(status_is("CapPrm", "0000000000000000"));
}

/* child_not_root after becoming `arg` (a struct passwd), a plain user */
static void
child_not_root_as(void *arg)
{
	const struct passwd *pw = arg;

	if (setgroups(0, NULL) != 0 ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid))
		_exit(CHILD_SETUP_FAILED);
	child_not_root(NULL);
}

static void
test_drop_not_root(void **state)
{
	struct passwd *pw = geteuid() == 0 ? getpwnam("nobody") : NULL;

	(void)state;
	/* as root, become an ordinary user first, the way a test run would */
	if (pw != NULL)
		expect_exit0(run_child(child_not_root_as, pw));
	else
		expect_exit0(run_child(child_not_root, NULL));
}

/* ------------------------------------------------------------------------ */
/* forbidden calls: each one kills its child with SIGSYS */

enum forbidden {
	F_EXECVE, F_FORK, F_POSIX_SPAWN, F_PTRACE, F_SETUID, F_SOCKET_UNIX,
	F_SOCKET_INET, F_SOCKET_INET6, F_SOCKET_NETLINK, F_CONNECT,
	F_READLINK, F_KILL, F_TGKILL_OTHER, F_MMAP_WX, F_MPROTECT_WX,
	F_MMAP_X, F_MPROTECT_X, F_PRCTL_DUMPABLE, F_PRCTL_CAPBSET,
	F_IOCTL_TIOCSTI, F_UNSHARE, F_BIND, F_SETRLIMIT, F_CLONE_PROCESS,
	F_X32, F_PIDFD_OPEN, F_COUNT
};

static const char *const forbidden_name[F_COUNT] = {
	"execve", "fork", "posix_spawn", "ptrace", "setuid(0)",
	"socket AF_UNIX", "socket AF_INET", "socket AF_INET6",
	"socket AF_NETLINK", "connect", "readlink",
	"kill", "tgkill of another process", "mmap W+X", "mprotect W+X",
	"mmap PROT_EXEC", "mprotect PROT_EXEC",
	"prctl PR_SET_DUMPABLE", "prctl PR_CAPBSET_READ", "ioctl TIOCSTI",
	"unshare", "bind", "setrlimit", "clone without CLONE_THREAD",
	"an x32 system call (another ABI)",
	"pidfd_open (a lease's holders are the device process's to watch)",
};

static void
child_forbidden(void *arg)
{
	enum forbidden f = (enum forbidden)(intptr_t)arg;
	char *const argv[] = { "/bin/true", NULL };
	struct rlimit rl = { 64, 64 };
	pid_t pid;
	void *p;
	char c = 'x';

	child_enter_sandbox();
	switch (f) {
	case F_EXECVE:
		execve("/bin/true", argv, environ);
		break;
	case F_FORK:
		if (fork() == 0)
			_exit(0);
		break;
	case F_POSIX_SPAWN:
		(void)posix_spawn(&pid, "/bin/true", NULL, NULL, argv,
		    environ);
		break;
	case F_PTRACE:
		(void)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		break;
	case F_SETUID:
		(void)!setuid(0);
		break;
	case F_SOCKET_UNIX:
		(void)socket(AF_UNIX, SOCK_STREAM, 0);
		break;
	case F_CONNECT: {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		(void)connect(STDERR_FILENO, (struct sockaddr *)&sun,
		    sizeof(sun));
		break;
	}
	case F_PIDFD_OPEN:
		(void)syscall(SYS_pidfd_open, getpid(), 0);
		break;
	case F_READLINK: {
		char buf[64];

		(void)!readlink("/proc/self/exe", buf, sizeof(buf));
		break;
	}
	case F_SOCKET_INET:
		(void)socket(AF_INET, SOCK_STREAM, 0);
		break;
	case F_SOCKET_INET6:
		(void)socket(AF_INET6, SOCK_DGRAM, 0);
		break;
	case F_SOCKET_NETLINK:
		(void)socket(AF_NETLINK, SOCK_RAW, 0);
		break;
	case F_KILL:
		(void)kill(getppid(), 0);
		break;
	case F_TGKILL_OTHER:
		(void)syscall(SYS_tgkill, getppid(), getppid(), 0);
		break;
	case F_MMAP_WX:
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		(void)p;
		break;
	case F_MPROTECT_WX:
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			child_fail("mmap PROT_READ|PROT_WRITE");
		(void)mprotect(p, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
		break;
	case F_MMAP_X:
		p = mmap(NULL, 4096, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		(void)p;
		break;
	case F_MPROTECT_X:
		p = mmap(NULL, 4096, PROT_READ,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			child_fail("mmap PROT_READ");
		(void)mprotect(p, 4096, PROT_READ | PROT_EXEC);
		break;
	case F_PRCTL_DUMPABLE:
		(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		break;
	case F_PRCTL_CAPBSET:
		(void)prctl(PR_CAPBSET_READ, 0, 0, 0, 0);
		break;
	case F_IOCTL_TIOCSTI:
		(void)ioctl(STDERR_FILENO, TIOCSTI, &c);
		break;
	case F_UNSHARE:
		(void)unshare(0);
		break;
	case F_BIND: {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			child_fail("socketpair");
		(void)bind(sv[0], NULL, 0);
		break;
	}
	case F_SETRLIMIT:
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		break;
	case F_CLONE_PROCESS:
		/* fork's flags by hand: the filter looks at them */
		(void)syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL,
		    NULL, NULL);
		break;
	case F_X32:
#ifdef __x86_64__
		(void)syscall(0x40000000 | SYS_socket, AF_UNIX, SOCK_STREAM, 0);
#else
		signal(SIGSYS, SIG_DFL);	/* nothing to test elsewhere */
		raise(SIGSYS);
#endif
		break;
	case F_COUNT:
		break;
	}
	/* reached only if the call was let through */
	fprintf(stderr, "%s was allowed\n", forbidden_name[f]);
	_exit(CHILD_CHECK_FAILED);
}

static void
test_forbidden_calls_kill(void **state)
{
	(void)state;
	SKIP_UNDER_VALGRIND();
	for (int f = 0; f < F_COUNT; f++) {
		int status;

		/* the ASan filter lets LeakSanitizer ptrace, and a report
		 * read /proc/self/exe's link (sandbox.c) */
		if ((f == F_PTRACE || f == F_READLINK) && TEST_ASAN)
			continue;
		status = run_child(child_forbidden, (void *)(intptr_t)f);

		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
			fail_msg("%s: child %s %d, expected SIGSYS",
			    forbidden_name[f], WIFSIGNALED(status) ?
			    "killed by signal" : "exited", WIFSIGNALED(status) ?
			    WTERMSIG(status) : WEXITSTATUS(status));
	}
}

/* ------------------------------------------------------------------------ */
/* allowed: what the network process does */

#define NTHREADS 16
static pthread_barrier_t threads_barrier;

static void *
thread_main(void *arg)
{
	/*
	 * Each thread mallocs while all the others are alive, so each needs
	 * an arena of its own: past 8 of them glibc counts the CPUs
	 * (sched_getaffinity) to set the arena limit.
	 */
	void *p = malloc(1000 + (size_t)(intptr_t)arg);

	if (p == NULL)
		return (void *)1;
	memset(p, 1, 1000);
	(void)pthread_barrier_wait(&threads_barrier);
	free(p);
	return NULL;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void
child_allowed(void *arg)
{
	pthread_t th[NTHREADS];
	uint32_t ids[256];
	struct passwd pw, *pwres = NULL;
	char buf[4096], b;
	int sv[2], n, ep, efd;
	struct epoll_event ev = { .events = EPOLLIN };
	struct procstat ps;
	struct rlimit rl;
	struct timespec ts;
	char *p;

	bool had_uid1;

	(void)arg;
	had_uid1 = getpwuid_r(1, &pw, buf, sizeof(buf), &pwres) == 0 &&
	    pwres != NULL;
	CHECK(procstat_keep() == 0);
	child_enter_sandbox();
	/* threads: pthread_create goes clone3 (ENOSYS), then clone */
	CHECK(pthread_barrier_init(&threads_barrier, NULL, NTHREADS) == 0);
	for (intptr_t i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&th[i], NULL, thread_main,
		    (void *)i) == 0);
	for (int i = 0; i < NTHREADS; i++) {
		void *ret;

		CHECK(pthread_join(th[i], &ret) == 0 && ret == NULL);
	}
	errno = 0;
	CHECK(syscall(SYS_clone3, NULL, 0) == -1 && errno == ENOSYS);
	/* Unix sockets, the device channels' kind and the watchdog's */
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(write(sv[0], "x", 1) == 1);
	CHECK(ioctl(sv[1], FIONREAD, &n) == 0 && n == 1);
	CHECK(read(sv[1], &b, 1) == 1 && b == 'x');
	CHECK(ioctl(sv[0], SIOCOUTQ, &n) == 0);
	close(sv[0]);
	close(sv[1]);
	/* every open is refused with EACCES, not killed: for reading,
	 * writing, creating, a directory, through O_PATH */
	errno = 0;
	CHECK(open("/etc/passwd", O_RDONLY | O_CLOEXEC) == -1 &&
	    errno == EACCES);
	errno = 0;
	CHECK(open("/tmp/zeusd-sandbox-test", O_WRONLY | O_CREAT, 0600) ==
	    -1 && errno == EACCES);
	errno = 0;
	CHECK(openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY) == -1 &&
	    errno == EACCES);
	errno = 0;
	CHECK(opendir("/proc/self/fd") == NULL && errno == EACCES);
	/* so no NSS either: /etc/passwd's uid 1 is not found any more (nss
	 * systemd, when loaded, still makes up root and nobody by itself) */
	(void)getpwuid_r(1, &pw, buf, sizeof(buf), &pwres);
	CHECK(!had_uid1 || pwres == NULL);
	/* metrics: /proc/self/stat through the fd kept before, getrlimit;
	 * the descriptors, a directory listing, are counted from outside */
	procstat_self(&ps);
	CHECK(ps.ok == (PROCSTAT_STAT | PROCSTAT_MAX_FDS));
	CHECK(ps.rss_bytes > 0 && ps.cpu_ms < 1000000);
	procstat_self(&ps);
	CHECK(ps.ok == (PROCSTAT_STAT | PROCSTAT_MAX_FDS));
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	/* glibc's qsort of 1 KiB asks sysinfo for the RAM size */
	for (int i = 0; i < 256; i++)
		ids[i] = (uint32_t)(255 - i);
	qsort(ids, 256, sizeof(ids[0]), cmp_u32);
	CHECK(ids[0] == 0 && ids[255] == 255);
	/* MHD's loop */
	CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
	CHECK((efd = eventfd(0, EFD_CLOEXEC)) >= 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0);
	close(efd);
	close(ep);
	CHECK(getrandom(buf, 16, 0) == 16);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
	ts.tv_sec = 0;
	ts.tv_nsec = 1000;
	CHECK(nanosleep(&ts, NULL) == 0);
	/* big allocations (mmap), growing them (mremap) */
	CHECK((p = malloc(1 << 20)) != NULL);
	CHECK((p = realloc(p, 8 << 20)) != NULL);
	free(p);
	CHECK(prctl(PR_SET_NAME, "sandbox-test", 0, 0, 0) == 0);
	/* a signal to itself */
	CHECK(pthread_kill(pthread_self(), 0) == 0);
	/* exit(), not _exit(): atexit handlers, and LeakSanitizer in ASan */
	fflush(NULL);
	exit(0);
}

static void
test_allowed_calls_work(void **state)
{
	(void)state;
	SKIP_UNDER_VALGRIND();
	expect_exit0(run_child(child_allowed, NULL));
}

/* ------------------------------------------------------------------------ */
/* ZEUSD_SECCOMP */

static void
child_trap(void *arg)
{
	int *pipefd = arg;

	close(pipefd[0]);
	if (dup2(pipefd[1], STDERR_FILENO) < 0)
		_exit(CHILD_SETUP_FAILED);
	setenv("ZEUSD_SECCOMP", "trap", 1);
	child_enter_sandbox();
	(void)socket(AF_INET, SOCK_STREAM, 0);
	_exit(CHILD_CHECK_FAILED);
}

static void
test_trap_mode_names_the_call(void **state)
{
	char out[512], want[128];
	int pipefd[2], status;
	ssize_t n, len = 0;

	(void)state;
	SKIP_UNDER_VALGRIND();
	assert_int_equal(pipe(pipefd), 0);
	status = run_child(child_trap, pipefd);
	close(pipefd[1]);
	while (len < (ssize_t)sizeof(out) - 1 &&
	    (n = read(pipefd[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
		len += n;
	close(pipefd[0]);
	out[len] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != SANDBOX_TRAP_EXIT)
		fail_msg("child status %#x, expected exit %d; stderr: %s",
		    status, SANDBOX_TRAP_EXIT, out);
	snprintf(want, sizeof(want), "zeusd: seccomp: blocked syscall %d "
	    "(socket)\n", (int)SYS_socket);
	assert_string_equal(out, want);
}

static void
child_bad_mode(void *arg)
{
	struct zerr err = { 0 };

	(void)arg;
	setenv("ZEUSD_SECCOMP", "off", 1);
	CHECK(sandbox_seccomp(&err) == -1);
	CHECK(err.kind == ZERR_INVALID);
	CHECK(strstr(err.msg, "ZEUSD_SECCOMP") != NULL);
	CHECK(status_is("Seccomp", "0"));
}

static void
test_bad_mode_refused(void **state)
{
	(void)state;
	expect_exit0(run_child(child_bad_mode, NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve_user),
		cmocka_unit_test(test_drop_as_root),
		cmocka_unit_test(test_no_walk_from_kept_fd),
		cmocka_unit_test(test_no_signal_through_sigio),
		cmocka_unit_test(test_no_datagram_out),
		cmocka_unit_test(test_drop_not_root),
		cmocka_unit_test(test_forbidden_calls_kill),
		cmocka_unit_test(test_allowed_calls_work),
		cmocka_unit_test(test_trap_mode_names_the_call),
		cmocka_unit_test(test_bad_mode_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
