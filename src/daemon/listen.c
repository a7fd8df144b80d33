/*
 * listen.c - creating the listening socket (see listen.h).
 *
 * The daemon hands the fd to libmicrohttpd, which only ever accepts on it; all
 * the policy of API.md about socket files lives here.
 */
#include "listen.h"

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

#include "../common/log.h"

#define LISTEN_BACKLOG 1024

int
listen_parse_tcp(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    struct zerr *err)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port, *h;
	size_t hlen;
	struct addrinfo hints, *res = NULL;
	int rc;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':')
			goto bad;
		h = s + 1;
		hlen = (size_t)(close - h);
		port = close + 2;
	} else {
		const char *colon = strrchr(s, ':');

		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
			goto bad;
		h = s;
		hlen = (size_t)(colon - s);
		port = colon + 1;
	}
	if (hlen == 0 || hlen >= sizeof(host) || *port == '\0' ||
	    strlen(port) > 5 || strspn(port, "0123456789") != strlen(port) ||
	    strtoul(port, NULL, 10) > 65535)
		goto bad;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_family = s[0] == '[' ? AF_INET6 : AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0 || res == NULL || res->ai_addrlen > sizeof(*ss)) {
		if (res != NULL)
			freeaddrinfo(res);
		goto bad;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
bad:
	return zerr_set(err, ZERR_INVALID,
	    "invalid --tcp-bind-address '%.100s': expected IPV4:PORT or "
	    "[IPV6]:PORT with a numeric address and a port 0-65535", s);
}

static int
listen_socket(int family, struct zerr *err)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		zerr_set(err, ZERR_INTERNAL, "socket: %s", strerror(errno));
	return fd;
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
		goto fail;
	}
	if (listen(fd, LISTEN_BACKLOG) != 0) {
		zerr_set(err, ZERR_INTERNAL, "listen: %s", strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* mkdir -p of the directory part of `path` (mode 0755). */
static int
listen_make_parents(const char *path, struct zerr *err)
{
	char dir[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(dir))
		return zerr_set(err, ZERR_INVALID, "socket path too long");
	memcpy(dir, path, n + 1);
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return zerr_set(err, ZERR_INTERNAL,
			    "cannot create directory %s: %s", dir,
			    strerror(errno));
		*p = '/';
	}
	return 0;
}

/* Applies API.md's rules to an existing path; 0 when the path is free. */
static int
listen_check_existing(const char *path, const struct sockaddr_un *sun,
    struct zerr *err)
{
	struct stat st;
	int fd, rc, saved;

	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		return zerr_set(err, ZERR_INTERNAL, "cannot stat %s: %s",
		    path, strerror(errno));
	}
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
	if (unlink(path) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "cannot remove stale socket %s: %s", path, strerror(errno));
	char q[512];
	zlog(ZLOG_WARN, "stale_socket_removed", "path=%s",
	    zlog_quote(q, sizeof(q), path));
	return 0;
}

static int
listen_uds(const struct zeusd_config *cfg, struct zerr *err)
{
	struct sockaddr_un sun;
	const char *path = cfg->socket_path;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path) || path[0] == '\0')
		return zerr_set(err, ZERR_INVALID,
		    "socket path must be 1-%zu bytes", sizeof(sun.sun_path) - 1);
	memcpy(sun.sun_path, path, strlen(path));
	if (listen_check_existing(path, &sun, err) != 0 ||
	    listen_make_parents(path, err) != 0)
		return -1;
	if ((fd = listen_socket(AF_UNIX, err)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot bind %s: %s", path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if (chmod(path, cfg->socket_permissions) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot chmod %s: %s", path,
		    strerror(errno));
		goto fail;
	}
	if ((cfg->has_socket_uid || cfg->has_socket_gid) &&
	    chown(path, cfg->has_socket_uid ? cfg->socket_uid : (uid_t)-1,
	    cfg->has_socket_gid ? cfg->socket_gid : (gid_t)-1) != 0) {
		zerr_set(err, ZERR_INTERNAL, "cannot chown %s: %s", path,
		    strerror(errno));
		goto fail;
	}
	if (listen(fd, LISTEN_BACKLOG) != 0) {
		zerr_set(err, ZERR_INTERNAL, "listen: %s", strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	unlink(path);
	return -1;
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
	char host[INET6_ADDRSTRLEN];

	snprintf(buf, size, "?");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_UNIX) {
		snprintf(buf, size, "unix:%s",
		    ((struct sockaddr_un *)&ss)->sun_path);
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "tcp:%s:%u", host, ntohs(in->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "tcp:[%s]:%u", host, ntohs(in6->sin6_port));
	}
}
