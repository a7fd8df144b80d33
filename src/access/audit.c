/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit.c - the audit log (see audit.h).
 *
 * Process-wide state: one file, one lock. The lock is held for one write
 * and for the reopen's descriptor swap, never across a device call.
 */
#include "access/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/identity.h"
#include "common/log.h"
#include "common/pathwalk.h"

static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static int audit_fd = -1;
static const char *audit_path;
static atomic_ulong audit_failed;
static atomic_ulong audit_refused;
static atomic_bool audit_down;		/* no room for a line (last seen) */
/*
 * A split daemon's network process: its lines go to the device process
 * (node_audit), and audit_fd is a read-only fd of the file, for
 * audit_ready's free-space check only (audit_set_readonly).
 */
static atomic_bool audit_ro;

/*
 * Opens the audit file for appending, or returns -1 with the reason in
 * `why`. The path may lie in a directory others can write (logrotate moves
 * the file away and SIGHUP reopens the name), so the file actually opened
 * is checked, as the overrides and policy files are: a FIFO planted there
 * must not block zeusd in open(2) (O_NONBLOCK makes it fail at once), a
 * file of another user's would let that user rewrite the trail, and a hard
 * link would have root append to whatever it links to.
 */
static int
audit_open_fd(const char *path, char *why, size_t whysize)
{
	struct stat st;
	uid_t euid = geteuid();
	struct zerr walk;
	int fd;

	/* nobody else may swap what the path names (pathwalk.h) */
	if (pathwalk_trusted(path, "--audit-log", &walk) != 0) {
		snprintf(why, whysize, "%s", walk.msg);
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY |
	    O_NOFOLLOW | O_NONBLOCK, 0640);
	if (fd < 0) {
		snprintf(why, whysize, "%s", errno == ENXIO ? "not a regular "
		    "file (a FIFO)" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0)
		snprintf(why, whysize, "cannot stat: %s", strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(why, whysize, "not a regular file");
	else if (st.st_uid != 0 && st.st_uid != euid)
		snprintf(why, whysize, "owned by uid %u, which is neither root "
		    "nor the daemon's user (uid %u)", (unsigned)st.st_uid,
		    (unsigned)euid);
	else if (st.st_mode & S_IWOTH)
		snprintf(why, whysize, "world-writable (mode %04o)",
		    (unsigned)(st.st_mode & 07777));
	else if (st.st_nlink != 1)
		snprintf(why, whysize, "has %ju hard links; an audit file has "
		    "one", (uintmax_t)st.st_nlink);
	else
		return fd;
	close(fd);
	return -1;
}

int
audit_open(const char *path, struct zerr *err)
{
	char why[ZERR_MSG_MAX];
	int fd;

	if (path == NULL)
		return 0;
	if ((fd = audit_open_fd(path, why, sizeof(why))) < 0)
		return zerr_set(err, ZERR_INVALID, "--audit-log %s: cannot "
		    "use it: %s", path, why);
	audit_path = path;
	audit_fd = fd;
	return 0;
}

/* The log's fd becomes `fd`; the old one is closed. */
static void
audit_swap_fd(int fd)
{
	int old;

	pthread_mutex_lock(&audit_lock);
	old = audit_fd;
	audit_fd = fd;
	pthread_mutex_unlock(&audit_lock);
	if (old >= 0)
		close(old);
}

static void
audit_reopen_failed(const char *why)
{
	char q[600], qw[2 * ZERR_MSG_MAX];

	zlog(ZLOG_WARN, "audit_reopen_failed", "file=%s error=%s "
	    "msg=\"kept writing to the previous file\"",
	    zlog_quote(q, sizeof(q), audit_path),
	    zlog_quote(qw, sizeof(qw), why));
}

int
audit_reopen(void)
{
	char q[600], why[ZERR_MSG_MAX];
	int fd;

	if (audit_path == NULL)
		return 0;
	if ((fd = audit_open_fd(audit_path, why, sizeof(why))) < 0) {
		audit_reopen_failed(why);
		return -1;
	}
	audit_swap_fd(fd);
	zlog(ZLOG_INFO, "audit_reopened", "file=%s",
	    zlog_quote(q, sizeof(q), audit_path));
	return 0;
}

int
audit_open_again(void)
{
	char why[ZERR_MSG_MAX];
	int fd;

	if (audit_path == NULL)
		return -1;
	if ((fd = audit_open_fd(audit_path, why, sizeof(why))) < 0)
		audit_reopen_failed(why);
	return fd;
}

int
audit_open_readonly(void)
{
	if (audit_path == NULL)
		return -1;
	return open(audit_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK);
}

void
audit_set_readonly(const char *path, int fd)
{
	audit_path = path;		/* audit_enabled: the log is on */
	atomic_store(&audit_ro, true);
	audit_swap_fd(fd);
}

bool
audit_readonly(void)
{
	return atomic_load(&audit_ro);
}

int
audit_fileno(void)
{
	return audit_fd;
}

void
audit_replace_fd(int fd)
{
	audit_swap_fd(fd);
	zlog(ZLOG_INFO, "audit_reopened", "fd=%d", fd);
}

bool
audit_enabled(void)
{
	return audit_path != NULL;
}

/*
 * A name for the line: null when empty; as is when it is UTF-8; otherwise
 * (a process may name itself anything, prctl PR_SET_NAME) its printable
 * ASCII with '?' for every other byte, which jansson refuses to encode.
 */
static json_t *
audit_name(const char *name)
{
	char safe[64];
	json_t *v;
	size_t i;

	if (name[0] == '\0')
		return json_null();
	if ((v = json_string(name)) != NULL)
		return v;
	for (i = 0; name[i] != '\0' && i < sizeof(safe) - 1; i++)
		safe[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	safe[i] = '\0';
	return json_string(safe);
}

static json_t *
audit_raw(const char *text)
{
	json_t *v;

	if (text == NULL)
		return json_null();
	v = json_loads(text, JSON_DECODE_ANY, NULL);
	return v != NULL ? v : json_null();
}

static void
audit_fail(const char *why)
{
	static _Atomic long last;
	long now = (long)time(NULL);

	atomic_fetch_add(&audit_failed, 1);
	if (atomic_exchange(&last, now) != now)
		zlog(ZLOG_ERROR, "audit_write_failed", "error=\"%s\" msg=\"an "
		    "audit line was lost; see zeusd_audit_write_failures_total"
		    "\"", why);
}

/*
 * Makes sure `len` more bytes can be appended to the file without running
 * out of space, so that a line is either written whole or not at all: a
 * short write on a full disk used to leave half a line that the next line
 * was glued to. fallocate(FALLOC_FL_KEEP_SIZE) at the end of the file
 * reserves the blocks the append will fill (the file's size does not
 * change; the reservation stays until it is written or the file is
 * truncated), so the write(2) that follows finds its room already taken
 * (ext4, xfs, btrfs, tmpfs). A file system without fallocate (EOPNOTSUPP:
 * some network file systems) gets the weaker check of fstatfs's free
 * space, with one block to spare. Called with audit_lock held; 0 or an
 * errno.
 */
static int
audit_reserve(int fd, size_t len)
{
	struct statfs sf;
	struct stat st;

	if (fstat(fd, &st) != 0)
		return errno;
	/* read-only (a split daemon's network process): free space only */
	if (!atomic_load(&audit_ro)) {
		if (fallocate(fd, FALLOC_FL_KEEP_SIZE, st.st_size,
		    (off_t)len) == 0)
			return 0;
		if (errno != EOPNOTSUPP && errno != ENOSYS)
			return errno;
	}
	if (fstatfs(fd, &sf) != 0)
		return errno;
	if (sf.f_bsize <= 0 || (unsigned long long)sf.f_bavail <
	    (len + 2 * (size_t)sf.f_bsize - 1) / (size_t)sf.f_bsize)
		return ENOSPC;
	return 0;
}

/* Encodes `o` (taken) as one line and appends it in one write(2), after
 * reserving its room (audit_reserve): whole or not at all. */
static void
audit_append(json_t *o)
{
	char *line;
	size_t len;
	ssize_t n = -1;
	int e;

	if (atomic_load(&audit_ro)) {
		/* a call site that should have gone to the device process */
		json_decref(o);
		audit_fail("this process does not write the audit log");
		return;
	}
	line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (line == NULL) {
		audit_fail("cannot encode the line");
		return;
	}
	len = strlen(line);
	line[len] = '\n';	/* json_dumps's NUL becomes the newline */
	pthread_mutex_lock(&audit_lock);
	if (audit_fd < 0)
		e = EBADF;
	else if ((e = audit_reserve(audit_fd, len + 1)) == 0) {
		n = write(audit_fd, line, len + 1);
		e = errno;
	}
	/* down until room for a whole next line is there again: the last
	 * bytes of a full disk may hold this line but not the next */
	if (n != (ssize_t)(len + 1))
		atomic_store(&audit_down, true);
	else if (atomic_load(&audit_down))
		atomic_store(&audit_down, audit_reserve(audit_fd,
		    AUDIT_LINE_ROOM) != 0);
	pthread_mutex_unlock(&audit_lock);
	free(line);
	if (n != (ssize_t)(len + 1))
		audit_fail(n < 0 ? strerror(e) : "short write");
}

bool
audit_ready(void)
{
	bool ok;

	if (audit_path == NULL)
		return true;
	pthread_mutex_lock(&audit_lock);
	ok = audit_fd >= 0 && audit_reserve(audit_fd, AUDIT_LINE_ROOM) == 0;
	pthread_mutex_unlock(&audit_lock);
	atomic_store(&audit_down, !ok);
	return ok;
}

bool
audit_down_now(void)
{
	return audit_path != NULL && atomic_load(&audit_down);
}

void
audit_count_refused(void)
{
	atomic_fetch_add(&audit_refused, 1);
}

int
audit_refusal(struct zerr *err)
{
	return zerr_set(err, ZERR_UNAVAILABLE, "The audit log (--audit-log) "
	    "cannot be written (file system full or failing) and "
	    "--audit-required is set: GPU writes are refused until it can be "
	    "written again");
}

unsigned long
audit_refused_writes(void)
{
	return atomic_load(&audit_refused);
}

void
audit_write(const struct audit_who *w, unsigned gpu, const char *op,
    const char *before, const char *requested, const char *error,
    const char *reason)
{
	struct timespec ts;
	json_t *o, *who;

	if (audit_path == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	who = json_object();
	if (w->unix_peer) {
		json_object_set_new(who, "uid", json_integer(w->uid));
		json_object_set_new(who, "user", audit_name(w->user));
		json_object_set_new(who, "pid", json_integer(w->pid));
		json_object_set_new(who, "comm", audit_name(w->comm));
	}
	if (w->sub[0])
		json_object_set_new(who, "sub", json_string(w->sub));
	if (w->addr[0])
		json_object_set_new(who, "addr", json_string(w->addr));
	o = json_pack("{s:I,s:o,s:o,s:s,s:o,s:o,s:s}", "time_ms",
	    (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, "identity",
	    who, "gpu", gpu == AUDIT_NO_GPU ? json_null() :
	    json_integer((json_int_t)gpu), "operation", op, "before",
	    audit_raw(before), "requested", audit_raw(requested), "result",
	    error == NULL ? "ok" : reason != NULL && strcmp(reason,
	    "refused") == 0 ? "refused" : "error");
	if (o == NULL) {
		audit_fail("cannot build the line");
		return;
	}
	if (error != NULL)
		json_object_set_new(o, "error", json_string(error));
	if (reason != NULL && strcmp(reason, "refused") != 0) {
		json_object_set_new(o, "restore", json_true());
		json_object_set_new(o, "reason", json_string(reason));
	}
	audit_append(o);
}

void
audit_write_lease(const struct audit_who *w, unsigned gpu,
    const struct audit_lease *le)
{
	struct timespec ts;
	json_t *o, *who;

	if (audit_path == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	who = json_pack("{s:I,s:o,s:I,s:o}", "uid", (json_int_t)w->uid,
	    "user", audit_name(w->user), "pid", (json_int_t)w->pid, "cgroup",
	    audit_name(le->cgroup));
	o = json_pack("{s:I,s:o,s:I,s:s,s:s,s:f,s:o,s:o,s:s,s:s}", "time_ms",
	    (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, "identity",
	    who, "gpu", (json_int_t)gpu, "operation", "lease_end", "reason",
	    le->reason, "duration_s", le->duration_s, "energy_j",
	    le->energy_ok ? json_real(le->energy_j) : json_null(), "avg_w",
	    le->energy_ok && le->duration_s > 0 ? json_real(le->energy_j /
	    le->duration_s) : json_null(), "energy", le->energy_ok ? "ok" :
	    "unavailable", le->left ? "settings_left" : "settings_restored",
	    le->settings);
	if (o == NULL) {
		audit_fail("cannot build the line");
		return;
	}
	if (le->label != NULL && le->label[0] != '\0')
		json_object_set_new(o, "label", audit_name(le->label));
	audit_append(o);
}

unsigned long
audit_failures(void)
{
	return atomic_load(&audit_failed);
}

void
audit_close(void)
{
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = -1;
	audit_path = NULL;
}
