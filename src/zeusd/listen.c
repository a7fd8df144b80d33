/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.c - creating the listening socket (see listen.h).
 *
 * The daemon hands the fd to libmicrohttpd, which only ever accepts on it; all
 * the policy of docs/configuration.md ("Startup refusals") about socket
 * files lives here, and so does the defence of docs/security.md ("Socket
 * file safety"): zeusd runs as root and creates, chmods, chowns and removes
 * a file in a directory named on its command line, so the directories on
 * the way are checked first (as OpenSSH checks key paths), and then every
 * operation goes through a file descriptor of the checked directory and
 * none ever follows a symbolic link.
 */
#include "zeusd/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pathwalk.h"

#define LISTEN_BACKLOG 1024

static int
listen_socket(int family, struct zerr *err)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		zerr_set(err, ZERR_INTERNAL, "socket: %s", strerror(errno));
	return fd;
}

/*
 * The tail both transports share: listen on the bound socket `fd` and
 * return it, or close it and return -1 with the reason in `err`.
 */
static int
listen_or_close(int fd, struct zerr *err)
{
	if (listen(fd, LISTEN_BACKLOG) == 0)
		return fd;
	zerr_set(err, ZERR_INTERNAL, "listen: %s", strerror(errno));
	close(fd);
	return -1;
}

static int
listen_tcp(const struct zeusd_config *cfg, struct zerr *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if (listen_parse_tcp(cfg->tcp_bind_address, &ss, &len, err) != 0)
		return -1;
	if ((fd = listen_socket(ss.ss_family, err)) < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
		    sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot bind TCP %s: %s",
		    cfg->tcp_bind_address, strerror(errno));
		close(fd);
		return -1;
	}
	return listen_or_close(fd, err);
}

/*
 * The socket file zeusd created, so that shutdown removes that file and
 * nothing else: the verified directory stays open for the daemon's lifetime
 * and the file is known by device and inode, not by path.
 */
static struct {
	int dirfd;		/* -1: no socket file of ours */
	int sockfd;		/* the listening socket, for listen_describe */
	dev_t dev;
	ino_t ino;
	char name[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];	/* as given */
} listen_own = { .dirfd = -1, .sockfd = -1 };

/*
 * The rule of docs/security.md for one directory on the socket's path, held
 * open as `fd`: owned by root or by zeusd's effective user, and writable by
 * nobody else. A sticky directory (/tmp) owned by one of them is accepted
 * above the socket's own directory: other users may add entries there but
 * cannot rename or remove ours, so the next component cannot be swapped. It
 * is refused as the socket's own directory, where anyone could plant the
 * socket's name (a symlink, a socket of their own) before zeusd starts.
 * Returns 0 (safe), 1 (unsafe, `err` says why) or -1 (cannot tell).
 */
static int
listen_check_dir(int fd, const char *shown, bool own_dir, const char *path,
    struct zerr *err)
{
	struct stat st;
	uid_t euid = geteuid();
	const char *why;
	char owners[40];

	if (fstat(fd, &st) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot stat directory %s: "
		    "%s", shown, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return zerr_set(err, ZERR_INVALID, "%s is not a directory",
		    shown);
	if (st.st_uid != 0 && st.st_uid != euid)
		why = "owned by another user";
	else if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0)
		return 0;
	else if ((st.st_mode & S_ISVTX) != 0 && !own_dir)
		return 0;
	else if ((st.st_mode & S_ISVTX) != 0)
		why = "writable by others; a sticky directory is accepted "
		    "above the socket's directory but not as the directory "
		    "that holds the socket";
	else if ((st.st_mode & S_IWOTH) != 0)
		why = "world-writable";
	else
		why = "group-writable";
	if (euid == 0)
		snprintf(owners, sizeof(owners), "root");
	else
		snprintf(owners, sizeof(owners), "root or uid %u",
		    (unsigned)euid);
	/* each name once: fits a zerr whole unless both paths are long */
	zerr_set(err, ZERR_INVALID,
	    "unsafe directory %s on the path of --socket-path %s (owner uid "
	    "%u, mode %04o): %s; every directory up to the socket must be "
	    "owned by %s and not writable by group or others; fix: chown root "
	    "and chmod go-w it, or choose another --socket-path", shown, path,
	    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), why, owners);
	return 1;
}

/*
 * Applies a check's verdict (0 safe, 1 unsafe with `err`, -1 cannot tell).
 * As root a violation stops startup: that is the privilege an attacker
 * would borrow. A daemon running as any other user has nothing to lend (it
 * can only chmod and chown its own files, and it never follows a symlink
 * anyway), so there it is a warning, which keeps unprivileged test and
 * simulator setups in shared directories working.
 */
static int
listen_apply(int rc, struct zerr *err)
{
	char q[2 * ZERR_MSG_MAX];

	if (rc == 0)
		return 0;
	if (rc < 0 || geteuid() == 0)
		return -1;
	zlog(ZLOG_WARN, "socket_dir_unsafe", "msg=%s",
	    zlog_quote(q, sizeof(q), err->msg));
	zerr_clear(err);
	return 0;
}

static int
listen_verdict(int fd, const char *shown, bool own_dir, const char *path,
    struct zerr *err)
{
	return listen_apply(listen_check_dir(fd, shown, own_dir, path, err),
	    err);
}

/*
 * Opens component `comp` of the directory held by `fd`, creating it when it
 * is missing: mode 0700 until it is open through an O_NOFOLLOW fd and known
 * to be ours, then 0755 with fchmod, so the umask plays no part.
 */
static int
listen_enter(int fd, const char *comp, const char *shown, struct zerr *err)
{
	struct stat st;
	char q[PATH_MAX + 8];
	int nfd;

	nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd >= 0)
		return nfd;
	if (errno != ENOENT)
		goto bad_open;
	if (mkdirat(fd, comp, 0700) != 0) {
		if (errno != EEXIST) {
			zerr_set(err, ZERR_INTERNAL, "cannot create directory "
			    "%s: %s", shown, strerror(errno));
			return -1;
		}
		/* Created meanwhile by someone else: the check judges it. */
		nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (nfd < 0)
			goto bad_open;
		return nfd;
	}
	nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0)
		goto bad_open;
	if (fstat(nfd, &st) != 0 || st.st_uid != geteuid()) {
		zerr_set(err, ZERR_INTERNAL, "directory %s changed right after "
		    "zeusd created it; refusing to use it", shown);
		close(nfd);
		return -1;
	}
	if (fchmod(nfd, 0755) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot chmod directory %s: %s",
		    shown, strerror(errno));
		close(nfd);
		return -1;
	}
	zlog(ZLOG_INFO, "socket_dir_created", "path=%s",
	    zlog_quote(q, sizeof(q), shown));
	return nfd;
bad_open:
	zerr_set(err, ZERR_INTERNAL, "cannot open directory %s: %s", shown,
	    errno == ELOOP || errno == ENOTDIR ? "not a directory, or a "
	    "symbolic link that does not lead to one (zeusd does not follow "
	    "it there)" : strerror(errno));
	return -1;
}

/*
 * Walks the absolute, symlink-free path `dir` from "/" one component at a
 * time (openat with O_NOFOLLOW, so a component swapped for a symlink after
 * realpath fails instead of being followed), checking each directory as it
 * is opened and creating the missing ones. Returns an O_PATH fd of the last,
 * the socket's own directory.
 */
static int
listen_open_dir(const char *dir, const char *path, struct zerr *err)
{
	char shown[PATH_MAX], comp[NAME_MAX + 1];
	const char *p = dir, *e;
	size_t len = 1, n;
	int fd, nfd;

	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot open /: %s",
		    strerror(errno));
	strcpy(shown, "/");
	while (*p == '/')
		p++;
	if (listen_verdict(fd, shown, *p == '\0', path, err) != 0)
		goto fail;
	while (*p != '\0') {
		e = strchr(p, '/');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if (n >= sizeof(comp) || len + n + 2 > sizeof(shown)) {
			zerr_set(err, ZERR_INVALID, "socket directory %s is "
			    "too long", dir);
			goto fail;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (len > 1)
			shown[len++] = '/';
		memcpy(shown + len, comp, n + 1);
		len += n;
		nfd = listen_enter(fd, comp, shown, err);
		close(fd);
		if ((fd = nfd) < 0)
			return -1;
		p += n;
		while (*p == '/')
			p++;
		if (listen_verdict(fd, shown, *p == '\0', path, err) != 0)
			goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/*
 * A symbolic link on the way must be owned by root or zeusd's user: its
 * owner can point it elsewhere at any time, even in a sticky directory.
 * The same verdict as a directory's (listen_apply).
 */
static int
listen_check_link(void *arg, const char *shown, const struct stat *st,
    struct zerr *err)
{
	const char *path = arg;
	uid_t euid = geteuid();

	if (st->st_uid == 0 || st->st_uid == euid)
		return 0;
	zerr_set(err, ZERR_INVALID,
	    "unsafe symbolic link %s on the path of --socket-path %s (owner "
	    "uid %u): its owner could point it at another socket at any time, "
	    "and clients would follow; every link up to the socket must be "
	    "owned by root%s; fix: remove it, or choose another --socket-path",
	    shown, path, (unsigned)st->st_uid, euid == 0 ? "" :
	    " or zeusd's user");
	return listen_apply(1, err);
}

/* A directory on the way: the rule for one above the socket's. */
static int
listen_check_walked(void *arg, int fd, const char *shown, struct zerr *err)
{
	return listen_verdict(fd, shown, false, arg, err);
}

/*
 * listen_resolve follows the symbolic links on the way once, with
 * realpath(3), and listen_open_dir checks the directories it leads to; but
 * clients go on using the path as given, through those links. So the path
 * as given is walked too (pathwalk): every directory on it must pass the
 * rule for a directory above the socket's (listen_check_dir), every
 * symbolic link must be owned by root or zeusd's user, and where a link
 * points is walked the same way. Otherwise another user's /tmp/zeusd ->
 * /some/root/dir would be accepted, and later pointed at a socket of
 * theirs, to collect the clients' requests and tokens. Walking stops at
 * the first missing component: listen_open_dir creates the rest in a
 * checked directory.
 */
static int
listen_check_given(const char *given, const char *path, struct zerr *err)
{
	static const struct pathwalk_ops ops = {
		.dir = listen_check_walked,
		.link = listen_check_link,
	};

	return pathwalk(given, "--socket-path", &ops, (void *)path, err);
}

/*
 * Splits `path` into the file name and its directory, resolved with
 * realpath(3) as far as it exists (so /var/run -> /run is followed here,
 * once, and what gets checked is the directory it leads to) plus the missing
 * components, which listen_open_dir creates.
 */
static int
listen_resolve(const char *path, char *dir, char *name, size_t namesz,
    struct zerr *err)
{
	char orig[PATH_MAX], probe[PATH_MAX];
	const char *slash = strrchr(path, '/'), *base, *p, *e;
	bool dot = false;
	size_t n, c;

	base = slash != NULL ? slash + 1 : path;
	if (*base == '\0' || strcmp(base, ".") == 0 ||
	    strcmp(base, "..") == 0 || strlen(base) >= namesz)
		return zerr_set(err, ZERR_INVALID, "invalid --socket-path %s: "
		    "it must end with a file name", path);
	strcpy(name, base);
	if (slash == NULL)
		strcpy(orig, ".");
	else if (slash == path)
		strcpy(orig, "/");
	else {
		memcpy(orig, path, (size_t)(slash - path));
		orig[slash - path] = '\0';
	}
	if (listen_check_given(orig, path, err) != 0)
		return -1;
	strcpy(probe, orig);
	/* Drop trailing components until what is left exists. */
	while (realpath(probe, dir) == NULL) {
		char *cut;

		if (errno != ENOENT || strcmp(probe, "/") == 0 ||
		    strcmp(probe, ".") == 0)
			return zerr_set(err, ZERR_INVALID, "cannot resolve the "
			    "directory of --socket-path %s: %s", path,
			    strerror(errno));
		if ((cut = strrchr(probe, '/')) == NULL) {
			strcpy(probe, ".");
			dot = true;
		} else if (cut == probe)
			probe[1] = '\0';
		else
			*cut = '\0';
	}
	/* Append the missing rest; listen_open_dir creates it. */
	n = strlen(dir);
	for (p = dot ? orig : orig + strlen(probe); *p != '\0'; p = e) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		if ((e = strchr(p, '/')) == NULL)
			e = p + strlen(p);
		c = (size_t)(e - p);
		if (c == 1 && p[0] == '.')
			continue;
		if (c == 2 && p[0] == '.' && p[1] == '.')
			return zerr_set(err, ZERR_INVALID, "invalid "
			    "--socket-path %s: '..' after a missing directory",
			    path);
		if (n + c + 2 > PATH_MAX)
			return zerr_set(err, ZERR_INVALID, "invalid "
			    "--socket-path %s: too long", path);
		if (n > 1)
			dir[n++] = '/';
		memcpy(dir + n, p, c);
		n += c;
		dir[n] = '\0';
	}
	return 0;
}

/*
 * The address that reaches `name` inside the directory held by `dirfd`:
 * "/proc/self/fd/N/name". bind() and connect() take a path, and this one goes
 * through the verified directory itself, not through the path that was
 * checked, so nothing swapped in the meantime can redirect them. fchdir()
 * would do the same but the working directory is process-wide and device
 * threads are already running.
 */
static int
listen_proc_addr(struct sockaddr_un *sun, int dirfd, const char *name,
    const char *path, struct zerr *err)
{
	struct stat a, b;
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path, sizeof(sun->sun_path), "/proc/self/fd/%d",
	    dirfd);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path))
		return zerr_set(err, ZERR_INTERNAL, "internal: fd path");
	if (stat(sun->sun_path, &a) != 0 || fstat(dirfd, &b) != 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return zerr_set(err, ZERR_INTERNAL, "cannot bind %s: %s does "
		    "not lead to the socket's directory (zeusd binds through "
		    "its verified directory fd and needs /proc mounted)", path,
		    sun->sun_path);
	n = snprintf(sun->sun_path, sizeof(sun->sun_path),
	    "/proc/self/fd/%d/%s", dirfd, name);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path))
		return zerr_set(err, ZERR_INVALID, "invalid --socket-path %s: "
		    "the file name is too long; zeusd binds through "
		    "/proc/self/fd/%d/, which leaves %d bytes for it", path,
		    dirfd, (int)sizeof(sun->sun_path) - 1 -
		    (n - (int)strlen(name)));
	return 0;
}

/*
 * Applies docs/configuration.md's rules ("Startup refusals") to whatever is
 * at `name` already; 0 when the name is free. Nothing here follows a
 * symlink: a symlink is "not a socket".
 */
static int
listen_clear_path(int dirfd, const char *name, const struct sockaddr_un *sun,
    const char *path, struct zerr *err)
{
	struct stat st;
	char q[512];
	int fd, rc, saved;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 0;
		return zerr_set(err, ZERR_INTERNAL, "cannot stat %s: %s",
		    path, strerror(errno));
	}
	if (S_ISLNK(st.st_mode))
		return zerr_set(err, ZERR_INVALID,
		    "%s exists and is not a socket (a symbolic link, which "
		    "zeusd never follows); refusing to replace it", path);
	if (!S_ISSOCK(st.st_mode))
		return zerr_set(err, ZERR_INVALID,
		    "%s exists and is not a socket; refusing to replace it",
		    path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return zerr_set(err, ZERR_INTERNAL, "socket: %s",
		    strerror(errno));
	rc = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	saved = errno;
	close(fd);
	if (rc == 0)
		return zerr_set(err, ZERR_INVALID,
		    "another daemon is already listening on %s", path);
	if (saved != ECONNREFUSED)
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot probe existing socket %s: %s", path,
		    strerror(saved));
	if (unlinkat(dirfd, name, 0) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot remove stale socket %s: %s", path, strerror(errno));
	zlog(ZLOG_WARN, "stale_socket_removed", "path=%s",
	    zlog_quote(q, sizeof(q), path));
	return 0;
}

/*
 * Takes ownership of the file bind() just created: opens it without following
 * anything, makes sure it is a socket, remembers its identity for shutdown,
 * then sets mode and owner on that very inode (through the O_PATH fd, not by
 * name), so a rename over the name cannot redirect either.
 */
static int
listen_adopt(int dirfd, const char *name, const struct zeusd_config *cfg,
    struct zerr *err)
{
	const char *path = cfg->socket_path;
	char proc[64];
	struct stat st;
	int pfd;

	pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0 && errno != ENOENT)
		return zerr_set(err, ZERR_INTERNAL, "cannot open the new "
		    "socket %s: %s", path, strerror(errno));
	if (pfd < 0 || fstat(pfd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		if (pfd >= 0)
			close(pfd);
		return zerr_set(err, ZERR_INTERNAL, "%s was replaced or "
		    "removed right after zeusd bound it; refusing to chmod or "
		    "chown whatever is there now", path);
	}
	listen_own.dirfd = dirfd;
	listen_own.dev = st.st_dev;
	listen_own.ino = st.st_ino;
	snprintf(listen_own.name, sizeof(listen_own.name), "%s", name);
	snprintf(listen_own.path, sizeof(listen_own.path), "%s", path);
	/*
	 * Born 0000 (see listen_uds). chmod() through /proc/self/fd of an
	 * O_PATH fd changes the inode the fd holds, as glibc's
	 * fchmodat(AT_SYMLINK_NOFOLLOW) does.
	 */
	if ((st.st_mode & 07777) != cfg->socket_permissions) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
		if (chmod(proc, cfg->socket_permissions) != 0) {
			zerr_set(err, ZERR_INTERNAL, "cannot chmod %s: %s",
			    path, strerror(errno));
			goto fail;
		}
	}
	if ((cfg->has_socket_uid || cfg->has_socket_gid) &&
	    fchownat(pfd, "", cfg->has_socket_uid ? cfg->socket_uid :
	    (uid_t)-1, cfg->has_socket_gid ? cfg->socket_gid : (gid_t)-1,
	    AT_EMPTY_PATH) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot chown %s: %s", path,
		    strerror(errno));
		goto fail;
	}
	close(pfd);
	return 0;
fail:
	close(pfd);
	return -1;
}

static int
listen_uds(const struct zeusd_config *cfg, struct zerr *err)
{
	const char *path = cfg->socket_path;
	char dir[PATH_MAX], name[sizeof(listen_own.name)];
	struct sockaddr_un sun;
	mode_t old;
	int dirfd, fd, rc, saved;

	if (path[0] == '\0' || strlen(path) >= sizeof(sun.sun_path))
		return zerr_set(err, ZERR_INVALID,
		    "socket path must be 1-%zu bytes", sizeof(sun.sun_path) - 1);
	if (listen_resolve(path, dir, name, sizeof(name), err) != 0 ||
	    (dirfd = listen_open_dir(dir, path, err)) < 0)
		return -1;
	if (listen_proc_addr(&sun, dirfd, name, path, err) != 0 ||
	    listen_clear_path(dirfd, name, &sun, path, err) != 0 ||
	    (fd = listen_socket(AF_UNIX, err)) < 0) {
		close(dirfd);
		return -1;
	}
	/*
	 * The socket file is born with mode 0000 (a Unix socket file gets
	 * 0777 & ~umask), and listen_adopt widens it to exactly the requested
	 * mode once it is verified: it is never more open than asked, not even
	 * for an instant. The umask is process-wide and the device threads
	 * already run, but they create no files during startup (the server does
	 * not accept yet, so no override command runs), and a file created by
	 * anyone inside this window would only come out more restrictive.
	 */
	old = umask(0777);
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	saved = errno;
	(void)umask(old);
	if (rc != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot bind %s: %s", path,
		    strerror(saved));
		goto fail;
	}
	if (listen_adopt(dirfd, name, cfg, err) != 0)
		goto fail;
	if ((fd = listen_or_close(fd, err)) < 0)
		goto fail;
	listen_own.sockfd = fd;
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	/* once adopted, the file is ours to remove; before, only the dirfd */
	if (listen_own.dirfd == dirfd)
		listen_remove_socket();	/* also closes dirfd */
	else
		close(dirfd);
	return -1;
}

void
listen_forget_socket(void)
{
	if (listen_own.dirfd >= 0)
		close(listen_own.dirfd);
	listen_own.dirfd = -1;
}

bool
listen_remove_socket(void)
{
	struct stat st;
	bool removed = false;
	char q[512];

	if (listen_own.dirfd < 0)
		return false;
	zlog_quote(q, sizeof(q), listen_own.path);
	if (fstatat(listen_own.dirfd, listen_own.name, &st,
	    AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			zlog(ZLOG_WARN, "socket_not_removed", "path=%s "
			    "error=\"%s\"", q, strerror(errno));
	} else if (!S_ISSOCK(st.st_mode) || st.st_dev != listen_own.dev ||
	    st.st_ino != listen_own.ino) {
		zlog(ZLOG_WARN, "socket_not_removed", "path=%s msg=\"the path "
		    "no longer holds the socket zeusd created; left in place\"",
		    q);
	} else if (unlinkat(listen_own.dirfd, listen_own.name, 0) != 0) {
		zlog(ZLOG_WARN, "socket_not_removed", "path=%s error=\"%s\"", q,
		    strerror(errno));
	} else
		removed = true;
	close(listen_own.dirfd);
	listen_own.dirfd = -1;
	return removed;
}

int
listen_socket_dirfd(void)
{
	return listen_own.dirfd;
}

const char *
listen_socket_path(void)
{
	return listen_own.dirfd >= 0 ? listen_own.path : NULL;
}

/* SD_LISTEN_FDS_START: systemd passes sockets from fd 3 on. */
#define LISTEN_FDS_START 3

static const char *
listen_family_name(int family)
{
	switch (family) {
	case AF_UNIX:
		return "AF_UNIX";
	case AF_INET:
		return "AF_INET";
	case AF_INET6:
		return "AF_INET6";
	default:
		return "another family";
	}
}

int
listen_from_systemd(const struct zeusd_config *cfg, int *out,
    struct zerr *err)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	const int fd = LISTEN_FDS_START;
	int family = -1, type = -1, acc = 0, fl;
	socklen_t len;
	long long p, n;
	char *end;
	bool ok;

	/* LISTEN_PID for another pid: a parent's, inherited through exec. */
	ok = false;
	n = 0;
	if (pid != NULL && fds != NULL) {
		p = strtoll(pid, &end, 10);
		ok = end != pid && *end == '\0' && p == (long long)getpid();
	}
	if (ok) {
		n = strtoll(fds, &end, 10);
		if (end == fds || *end != '\0')
			n = -1;
	}
	(void)unsetenv("LISTEN_PID");
	(void)unsetenv("LISTEN_FDS");
	(void)unsetenv("LISTEN_FDNAMES");
	if (!ok || n == 0)
		return 0;
	if (n != 1)
		return zerr_set(err, ZERR_INVALID, "systemd passed %s sockets "
		    "(LISTEN_FDS=%.20s); zeusd serves exactly one: give its "
		    ".socket unit a single ListenStream=", n < 0 ? "invalid" :
		    "several", fds);
	len = sizeof(family);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) != 0)
		return zerr_set(err, ZERR_INVALID, "fd %d from systemd "
		    "(LISTEN_FDS) is not a socket: %s", fd, strerror(errno));
	len = sizeof(type);
	(void)getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
	len = sizeof(acc);
	(void)getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len);
	if (type != SOCK_STREAM || !acc)
		return zerr_set(err, ZERR_INVALID, "the socket from systemd "
		    "(fd %d) is not a listening stream socket; use "
		    "ListenStream= and Accept=no in the .socket unit", fd);
	if (cfg->mode == MODE_UDS ? family != AF_UNIX :
	    family != AF_INET && family != AF_INET6)
		return zerr_set(err, ZERR_INVALID, "the socket from systemd "
		    "(fd %d) is %s but zeusd runs with --mode %s, which needs "
		    "%s; use zeusd.socket with --mode uds, or zeusd-tcp.socket "
		    "with --mode tcp", fd, listen_family_name(family),
		    cfg->mode == MODE_UDS ? "uds" : "tcp",
		    cfg->mode == MODE_UDS ? "AF_UNIX" : "AF_INET or AF_INET6");
	if ((fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot set up the socket "
		    "from systemd: %s", strerror(errno));
	*out = fd;
	return 1;
}

int
listen_open(const struct zeusd_config *cfg, struct zerr *err)
{
	return cfg->mode == MODE_UDS ? listen_uds(cfg, err) :
	    listen_tcp(cfg, err);
}

void
listen_describe(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	snprintf(buf, size, "?");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_UNIX) {
		/* Bound as /proc/self/fd/N/name: show the path as given. */
		snprintf(buf, size, "unix:%s", fd == listen_own.sockfd ?
		    listen_own.path : ((struct sockaddr_un *)&ss)->sun_path);
	} else
		listen_format_inet(&ss, buf, size);
}
