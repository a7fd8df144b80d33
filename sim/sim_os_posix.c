/* sim_os_posix.c - sim_os.h on Linux (and other POSIX systems). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_os.h"

int
sim_os_stamp(const char *path, struct sim_stamp *out)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -1;
	*out = (struct sim_stamp){ true, (uint64_t)st.st_dev,
	    (uint64_t)st.st_ino, (uint64_t)st.st_size,
	    st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	    st.st_ctim.tv_sec, st.st_ctim.tv_nsec };
	return 0;
}

int
sim_os_open_log(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

int
sim_os_open_read(const char *path)
{
	return open(path, O_RDONLY | O_CLOEXEC);
}

int
sim_os_state_open(const char *path, char *why, size_t size)
{
	const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
	    O_NONBLOCK;
	struct stat st;
	int fd = -1;

	/* Open it, or create it; another process may create it between. */
	for (int tries = 0; fd < 0 && tries < 4; tries++) {
		fd = open(path, flags);
		if (fd < 0 && errno == ENOENT) {
			fd = open(path, flags | O_CREAT | O_EXCL, 0600);
			if (fd < 0 && errno == EEXIST)
				continue;
		}
		if (fd < 0)
			break;
	}
	if (fd < 0) {
		snprintf(why, size, "%s", errno == ELOOP ?
		    "is a symbolic link" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, size, "%s", strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(why, size, "is not a regular file");
	} else if (st.st_nlink != 1) {
		snprintf(why, size, "has %lu hard links (want 1)",
		    (unsigned long)st.st_nlink);
	} else if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(why, size, "is owned by uid %lu, not by this user "
		    "(%lu) or root", (unsigned long)st.st_uid,
		    (unsigned long)geteuid());
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		snprintf(why, size, "is writable by group or others (mode "
		    "%04o; want 0600)", (unsigned)(st.st_mode & 07777));
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

static int
sim_os_state_fcntl(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET };
	int rc;

	do
		rc = fcntl(fd, F_SETLKW, &fl);
	while (rc != 0 && errno == EINTR);
	return rc;
}

int
sim_os_state_lock(int fd, bool exclusive)
{
	return sim_os_state_fcntl(fd, exclusive ? F_WRLCK : F_RDLCK);
}

void
sim_os_state_unlock(int fd)
{
	(void)sim_os_state_fcntl(fd, F_UNLCK);
}

long
sim_os_state_read(int fd, void *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		ssize_t n = pread(fd, (char *)buf + got, size - got,
		    (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (long)got;
}

int
sim_os_state_write(int fd, const void *buf, size_t size)
{
	size_t put = 0;

	while (put < size) {
		ssize_t n = pwrite(fd, (const char *)buf + put, size - put,
		    (off_t)put);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		put += (size_t)n;
	}
	return 0;
}

void
sim_os_state_close(int fd)
{
	if (fd >= 0)
		close(fd);
}
