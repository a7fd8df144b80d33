/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal_files.c - the lease journal's files (journal.h), Linux: the boot
 * id, the state directory, the atomic write (a new file synced, renamed
 * over the old one, the directory synced) and the strict load. The
 * records' format is journal.c's.
 */
#include "access/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"

/* ---- The files ---------------------------------------------------------------- */

int
journal_boot_id(char boot[JOURNAL_BOOT_LEN + 1], struct zerr *err)
{
	char buf[JOURNAL_BOOT_LEN + 2];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot read the boot id: "
		    "%s", strerror(errno));
	n = fileio_read_all(fd, buf, sizeof(buf));
	close(fd);
	if (n != JOURNAL_BOOT_LEN + 1 || buf[JOURNAL_BOOT_LEN] != '\n' ||
	    !journal_boot_valid(buf, JOURNAL_BOOT_LEN))
		return zerr_set(err, ZERR_INTERNAL, "the boot id does not "
		    "read as one");
	memcpy(boot, buf, JOURNAL_BOOT_LEN);
	boot[JOURNAL_BOOT_LEN] = '\0';
	return 0;
}

int
journal_open_dir(const char *path, struct zerr *err)
{
	struct stat st;
	int fd;

	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return zerr_set(err, ZERR_INTERNAL, "--state-dir %s: cannot "
		    "create it: %s", path, strerror(errno));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return zerr_set(err, ZERR_INTERNAL, "--state-dir %s: %s", path,
		    errno == ELOOP || errno == ENOTDIR ? "not a directory "
		    "(or a symbolic link)" : strerror(errno));
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 022) != 0) {
		close(fd);
		return zerr_set(err, ZERR_INTERNAL, "--state-dir %s must be "
		    "owned by uid %u and writable by nobody else (it is uid "
		    "%u, mode %03o): its files decide what zeusd writes to "
		    "GPUs", path, (unsigned)geteuid(), (unsigned)st.st_uid,
		    (unsigned)(st.st_mode & 0777));
	}
	return fd;
}

static void
file_name(char *buf, size_t size, unsigned gpu, const char *suffix)
{
	snprintf(buf, size, "gpu-%u.lease%s", gpu, suffix);
}

int
journal_replace(int dirfd, const char *name, const char *buf, size_t len)
{
	char tmp[256];
	ssize_t n;
	int fd, e = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= sizeof(tmp))
		return ENAMETOOLONG;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd < 0)
		e = errno;
	else if ((n = write(fd, buf, len)) < 0 || (size_t)n != len)
		e = n < 0 ? errno : ENOSPC;
	else if (fsync(fd) != 0)
		e = errno;
	if (fd >= 0 && close(fd) != 0 && e == 0)
		e = errno;
	if (e == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
		e = errno;
	if (e == 0 && fsync(dirfd) != 0)
		e = errno;
	if (e != 0)
		(void)unlinkat(dirfd, tmp, 0);
	return e;
}

int
journal_save(int dirfd, const struct journal_rec *r, const char *boot,
    struct zerr *err)
{
	char buf[JOURNAL_MAX_BYTES], name[48];
	int len = journal_format(r, boot, buf, sizeof(buf));
	int e;

	if (len < 0)
		return zerr_set(err, ZERR_INTERNAL, "lease journal: a record "
		    "too large");
	file_name(name, sizeof(name), r->gpu, "");
	if ((e = journal_replace(dirfd, name, buf, (size_t)len)) != 0)
		return zerr_set(err, ZERR_UNAVAILABLE, "the lease journal "
		    "(--state-dir) cannot be written: %s", strerror(e));
	return 0;
}

int
journal_remove(int dirfd, unsigned gpu, struct zerr *err)
{
	char name[48];

	file_name(name, sizeof(name), gpu, "");
	if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
		return zerr_set(err, ZERR_UNAVAILABLE, "lease journal: cannot "
		    "remove %s: %s", name, strerror(errno));
	if (fsync(dirfd) != 0)
		return zerr_set(err, ZERR_UNAVAILABLE, "lease journal: cannot "
		    "sync the directory: %s", strerror(errno));
	return 0;
}

int
journal_read_private(int dirfd, const char *name, char *buf, size_t size,
    size_t *n, enum journal_bad *bad, char *why, size_t whysz)
{
	char tmp[256];
	struct stat st;
	ssize_t got;
	int fd;

	*n = 0;
	*bad = JOURNAL_OK;
	why[0] = '\0';
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", name) < sizeof(tmp))
		(void)unlinkat(dirfd, tmp, 0);	/* a save cut short */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
	    st.st_nlink != 1) {
		*bad = JOURNAL_UNSAFE;
		snprintf(why, whysz, "%s is not a regular file of uid %u, "
		    "mode 600 and one link (or cannot be opened)", name,
		    (unsigned)geteuid());
		if (fd >= 0)
			close(fd);
		return -1;
	}
	got = fileio_read_all(fd, buf, size);
	close(fd);
	if (got < 0 || (size_t)got >= size) {
		*bad = JOURNAL_GARBLED;
		if (got < 0)
			snprintf(why, whysz, "cannot read %s: %s", name,
			    strerror(errno));
		else
			snprintf(why, whysz, "%s: more than %zu bytes", name,
			    size - 1);
		return -1;
	}
	*n = (size_t)got;
	return 0;
}

int
journal_load(int dirfd, unsigned gpu, const char *boot, struct journal_rec *r,
    enum journal_bad *bad, char *why, size_t whysz)
{
	char buf[JOURNAL_MAX_BYTES + 1], name[48], fboot[JOURNAL_BOOT_LEN + 1];
	size_t n;
	int rc;

	memset(r, 0, sizeof(*r));
	file_name(name, sizeof(name), gpu, "");
	if ((rc = journal_read_private(dirfd, name, buf, sizeof(buf), &n, bad,
	    why, whysz)) != 0)
		return rc;
	if ((*bad = journal_parse(buf, n, r, fboot, why, whysz)) !=
	    JOURNAL_OK)
		return -1;
	if (r->gpu != gpu) {
		*bad = JOURNAL_GARBLED;
		snprintf(why, whysz, "%s names GPU %u", name, r->gpu);
		return -1;
	}
	if (strcmp(fboot, boot) != 0) {
		*bad = JOURNAL_OTHER_BOOT;
		snprintf(why, whysz, "%s was written before the last reboot "
		    "(boot %s)", name, fboot);
		return -1;
	}
	return 0;
}

int
journal_set_aside(int dirfd, unsigned gpu)
{
	char name[48], aside[48];

	file_name(name, sizeof(name), gpu, "");
	file_name(aside, sizeof(aside), gpu, ".refused");
	return journal_rename(dirfd, name, aside);
}

int
journal_rename(int dirfd, const char *from, const char *to)
{
	return renameat(dirfd, from, dirfd, to) == 0 ? 0 : -1;
}
