/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - the lease journal's files (journal.h): the format, its
 * strict reader, and the atomic write (a new file synced, renamed over the
 * old one, the directory synced).
 */
#include "access/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "common/fileio.h"
#include "common/hex.h"

#define MAGIC "zeusd-lease 1\n"

/* ---- The format ------------------------------------------------------------- */

bool
journal_rec_pending(const struct journal_rec *r)
{
	return r->has_limit || r->has_persist || r->gpu_clocks ||
	    r->mem_clocks;
}

void
journal_sum(const char *buf, size_t len, char out[JOURNAL_SUM_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, len, (const uint8_t *)buf);
	sha256_digest(&ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * SHA256_DIGEST_SIZE] = '\0';
}

bool
journal_put(char *buf, size_t size, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*at >= size)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(buf + *at, size - *at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *at)
		return false;
	*at += (size_t)n;
	return true;
}

bool
journal_put_hex(char *buf, size_t size, size_t *at, const char *s, size_t n)
{
	bool ok = true;

	for (size_t i = 0; ok && i < n; i++)
		ok = journal_put(buf, size, at, "%02x",
		    (unsigned)(unsigned char)s[i]);
	return ok;
}

int
journal_hex_text(const char *v, const char *end, char *out, size_t max)
{
	size_t n = (size_t)(end - v);

	if (n == 0 || n % 2 != 0 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (v[i] >= 'A' && v[i] <= 'F')
			return -1;	/* one spelling: lowercase */
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_digit_value((unsigned char)v[2 * i]);
		int lo = hex_digit_value((unsigned char)v[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0)
			return -1;
		out[i] = (char)(hi << 4 | lo);
	}
	return (int)(n / 2);
}

int
journal_format(const struct journal_rec *r, const char *boot, char *buf,
    size_t size)
{
	char sum[2 * SHA256_DIGEST_SIZE + 1];
	size_t at = 0;
	bool ok;

	ok = journal_put(buf, size, &at, MAGIC "boot %.*s\ngpu %u\nuid %"
	    PRIu32 "\n", JOURNAL_BOOT_LEN, boot, r->gpu, r->uid);
	if (ok && r->cgroup[0] != '\0') {
		/* hex: a path may hold any byte but NUL and '/' separates */
		ok = journal_put(buf, size, &at, "cgroup ") &&
		    journal_put_hex(buf, size, &at, r->cgroup,
		    strnlen(r->cgroup, sizeof(r->cgroup)));
		if (ok)
			ok = journal_put(buf, size, &at, "\n");
	}
	if (ok && r->label[0] != '\0')
		ok = journal_put(buf, size, &at, "label %.*s\n",
		    LEASE_LABEL_MAX, r->label);
	if (ok && r->has_start)
		ok = journal_put(buf, size, &at, "started_ms %" PRIu64 "\n",
		    r->started_ms);
	if (ok && r->has_energy)
		ok = journal_put(buf, size, &at, "energy_mj %" PRIu64 "\n",
		    r->energy_mj);
	if (ok && r->has_limit)
		ok = journal_put(buf, size, &at, "limit_mw %" PRIu32 "\n",
		    r->limit_mw);
	if (ok && r->has_persist)
		ok = journal_put(buf, size, &at, "persistence %d\n",
		    r->persist ? 1 : 0);
	if (ok && r->gpu_clocks)
		ok = journal_put(buf, size, &at, "gpu_clocks 1\n");
	if (ok && r->mem_clocks)
		ok = journal_put(buf, size, &at, "mem_clocks 1\n");
	for (unsigned i = 0; ok && i < r->npid && i < JOURNAL_MAX_PIDS; i++)
		ok = journal_put(buf, size, &at, "pid %" PRId32 " %" PRIu64
		    "\n", r->pid[i], r->start[i]);
	if (!ok)
		return -1;
	journal_sum(buf, at, sum);
	if (!journal_put(buf, size, &at, "sum %s\n", sum) ||
	    at > JOURNAL_MAX_BYTES)
		return -1;
	return (int)at;
}

const char *
journal_bad_name(enum journal_bad bad)
{
	static const char *const names[] = {
		[JOURNAL_OK] = "ok",
		[JOURNAL_GARBLED] = "garbled",
		[JOURNAL_OTHER_BOOT] = "other_boot",
		[JOURNAL_UNSAFE] = "unsafe",
	};

	return (unsigned)bad < sizeof(names) / sizeof(names[0]) ?
	    names[bad] : "unknown";
}

enum journal_bad
journal_garbled(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return JOURNAL_GARBLED;
}

/*
 * A decimal number of at most `max`, no sign, no leading zero (but "0"),
 * ending at `end`; false otherwise.
 */
bool
journal_number(const char *s, const char *end, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s >= end || (*s == '0' && end - s > 1))
		return false;
	for (; s < end; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

bool
journal_boot_valid(const char *s, size_t n)
{
	if (n != JOURNAL_BOOT_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-' : hex_digit_value((unsigned char)s[i]) <
		    0 || (s[i] >= 'A' && s[i] <= 'F'))
			return false;
	}
	return true;
}

/* The lines, in their order; a key may be absent unless `must`. */
enum { K_BOOT, K_GPU, K_UID, K_CGROUP, K_LABEL, K_START, K_ENERGY, K_LIMIT, K_PERSIST, K_GCLK,
    K_MCLK, K_PID, K_SUM, K_END };
static const struct {
	const char *name;
	bool must, many;
} keys[K_END] = {
	[K_BOOT] = { "boot", true, false },
	[K_GPU] = { "gpu", true, false },
	[K_UID] = { "uid", true, false },
	[K_CGROUP] = { "cgroup", false, false },
	[K_LABEL] = { "label", false, false },
	[K_START] = { "started_ms", false, false },
	[K_ENERGY] = { "energy_mj", false, false },
	[K_LIMIT] = { "limit_mw", false, false },
	[K_PERSIST] = { "persistence", false, false },
	[K_GCLK] = { "gpu_clocks", false, false },
	[K_MCLK] = { "mem_clocks", false, false },
	[K_PID] = { "pid", false, true },
	[K_SUM] = { "sum", true, false },
};

static enum journal_bad
parse(const char *buf, size_t len, struct journal_rec *r, char *boot,
    char *why, size_t whysz)
{
	const char *p, *end = buf + len;
	int last = -1;

	memset(r, 0, sizeof(*r));
	boot[0] = '\0';
	why[0] = '\0';
	if (len > JOURNAL_MAX_BYTES)
		return journal_garbled(why, whysz,
		    "%zu bytes, more than %d", len,
		    JOURNAL_MAX_BYTES);
	if (len < sizeof(MAGIC) - 1 || memcmp(buf, MAGIC, sizeof(MAGIC) - 1))
		return journal_garbled(why, whysz, "no 'zeusd-lease 1' header");
	p = buf + sizeof(MAGIC) - 1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *sp, *v;
		uint64_t a, b;
		int k;

		if (nl == NULL)
			return journal_garbled(why, whysz,
			    "truncated (a line without "
			    "its end)");
		if (last == K_SUM)
			return journal_garbled(why, whysz,
			    "bytes after the sum");
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (sp == NULL)
			return journal_garbled(why, whysz,
			    "a line without a value");
		for (k = 0; k < K_END; k++)
			if ((size_t)(sp - p) == strlen(keys[k].name) &&
			    memcmp(p, keys[k].name, (size_t)(sp - p)) == 0)
				break;
		if (k == K_END)
			return journal_garbled(why, whysz, "an unknown line");
		if (k < last || (k == last && !keys[k].many))
			return journal_garbled(why, whysz,
			    "'%s' out of its place",
			    keys[k].name);
		for (int m = last + 1; m < k; m++)
			if (keys[m].must)
				return journal_garbled(why, whysz,
				    "no '%s' line",
				    keys[m].name);
		v = sp + 1;
		switch (k) {
		case K_BOOT:
			if (!journal_boot_valid(v, (size_t)(nl - v)))
				return journal_garbled(why, whysz,
				    "a bad boot id");
			memcpy(boot, v, JOURNAL_BOOT_LEN);
			boot[JOURNAL_BOOT_LEN] = '\0';
			break;
		case K_GPU:
			if (!journal_number(v, nl, JOURNAL_MAX_GPU, &a))
				return journal_garbled(why, whysz, "a bad gpu");
			r->gpu = (unsigned)a;
			break;
		case K_UID:
			if (!journal_number(v, nl, UINT32_MAX - 1, &a))
				return journal_garbled(why, whysz, "a bad uid");
			r->uid = (uint32_t)a;
			break;
		case K_CGROUP:
			if (journal_hex_text(v, nl, r->cgroup,
			    sizeof(r->cgroup) - 1) < 0)
				return journal_garbled(why, whysz,
				    "a bad cgroup");
			break;
		case K_LABEL: {
			size_t n = (size_t)(nl - v);

			if (n == 0 || n > LEASE_LABEL_MAX)
				return journal_garbled(why, whysz,
				    "a bad label");
			memcpy(r->label, v, n);
			r->label[n] = '\0';
			if (lease_label_invalid(r->label) != NULL)
				return journal_garbled(why, whysz,
				    "a bad label");
			break;
		}
		case K_START:
		case K_ENERGY:
			if (!journal_number(v, nl, UINT64_MAX, &a))
				return journal_garbled(why, whysz, "a bad %s",
				    keys[k].name);
			if (k == K_START) {
				r->has_start = true;
				r->started_ms = a;
			} else {
				r->has_energy = true;
				r->energy_mj = a;
			}
			break;
		case K_LIMIT:
			if (!journal_number(v, nl, UINT32_MAX, &a))
				return journal_garbled(why, whysz,
				    "a bad limit_mw");
			r->has_limit = true;
			r->limit_mw = (uint32_t)a;
			break;
		case K_PERSIST:
			if (!journal_number(v, nl, 1, &a))
				return journal_garbled(why, whysz,
				    "a bad persistence");
			r->has_persist = true;
			r->persist = a == 1;
			break;
		case K_GCLK:
		case K_MCLK:
			if (nl - v != 1 || *v != '1')
				return journal_garbled(why, whysz, "a bad %s",
				    keys[k].name);
			if (k == K_GCLK)
				r->gpu_clocks = true;
			else
				r->mem_clocks = true;
			break;
		case K_PID: {
			const char *sp2 = memchr(v, ' ', (size_t)(nl - v));

			if (r->npid == JOURNAL_MAX_PIDS)
				return journal_garbled(why, whysz,
				    "more than %d pids",
				    JOURNAL_MAX_PIDS);
			if (sp2 == NULL ||
			    !journal_number(v, sp2, INT32_MAX, &a) || a == 0 ||
			    !journal_number(sp2 + 1, nl, UINT64_MAX, &b))
				return journal_garbled(why, whysz,
				    "a bad pid line");
			r->pid[r->npid] = (int32_t)a;
			r->start[r->npid++] = b;
			break;
		}
		case K_SUM: {
			char sum[2 * SHA256_DIGEST_SIZE + 1];

			journal_sum(buf, (size_t)(p - buf), sum);
			if ((size_t)(nl - v) != 2 * SHA256_DIGEST_SIZE ||
			    memcmp(v, sum, 2 * SHA256_DIGEST_SIZE) != 0)
				return journal_garbled(why, whysz,
				    "the sum does not "
				    "match");
			break;
		}
		}
		last = k;
		p = nl + 1;
	}
	if (last != K_SUM)
		return journal_garbled(why, whysz, "truncated (no sum)");
	if (!journal_rec_pending(r))
		return journal_garbled(why, whysz,
		    "a lease that changed nothing");
	return JOURNAL_OK;
}

enum journal_bad
journal_parse(const char *buf, size_t len, struct journal_rec *r, char *boot,
    char *why, size_t whysz)
{
	enum journal_bad bad = parse(buf, len, r, boot, why, whysz);

	if (bad != JOURNAL_OK) {	/* nothing of a refused file is used */
		memset(r, 0, sizeof(*r));
		boot[0] = '\0';
	}
	return bad;
}

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
	return renameat(dirfd, name, dirfd, aside) == 0 ? 0 : -1;
}
