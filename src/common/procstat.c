/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.c - this process's resource figures (see procstat.h).
 */
#include "procstat.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"

struct procstat_raw {
	unsigned long long utime, stime;	/* clock ticks */
	unsigned long long starttime;		/* clock ticks after boot */
	unsigned long long vsize;		/* bytes */
	unsigned long long rss;			/* pages */
};

/* procstat_keep's descriptor; -1 until then (each read opens anew). */
static int kept_stat = -1;

int
procstat_keep(void)
{
	if (kept_stat < 0)
		kept_stat = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	return kept_stat >= 0 ? 0 : -1;
}

/* A whole token of decimal digits that fits, or -1: no sign, no blanks. */
static int
procstat_parse_ull(const char *s, size_t len, unsigned long long *out)
{
	unsigned long long v = 0;

	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)s[i] - '0';

		if (d > 9 || v > (ULLONG_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/*
 * Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize) and 24 (rss)
 * of /proc/self/stat (proc(5)). Field 2, the command name, is in
 * parentheses and may itself hold blanks and ')', so counting starts
 * after the last ')'.
 */
static int
procstat_stat_of(int fd, struct procstat_raw *p)
{
	/* ~52 fields of at most 20 digits plus a 16-byte name fit in 2 KiB */
	char buf[2048];
	const char *s, *tok;
	ssize_t n;
	int field, got = 0;

	/* a seq file: each read from offset 0 is a fresh snapshot */
	n = fileio_pread_all(fd, buf, sizeof(buf) - 1);
	if (n <= 0 || (size_t)n == sizeof(buf) - 1)
		return -1;
	buf[n] = '\0';
	if ((s = strrchr(buf, ')')) == NULL)
		return -1;
	s++;
	for (field = 3; field <= 24; field++) {
		size_t len;
		unsigned long long *dst = NULL;

		if (*s != ' ')
			return -1;
		tok = ++s;
		len = strcspn(tok, " \n");
		s = tok + len;
		switch (field) {
		case 14:
			dst = &p->utime;
			break;
		case 15:
			dst = &p->stime;
			break;
		case 22:
			dst = &p->starttime;
			break;
		case 23:
			dst = &p->vsize;
			break;
		case 24:
			dst = &p->rss;
			break;
		}
		if (dst == NULL)
			continue;
		if (procstat_parse_ull(tok, len, dst) != 0)
			return -1;
		got++;
	}
	return got == 5 ? 0 : -1;
}

static int
procstat_stat(struct procstat_raw *p)
{
	int fd = kept_stat >= 0 ? kept_stat :
	    open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = procstat_stat_of(fd, p);
	if (fd != kept_stat)
		close(fd);
	return rc;
}

int
procstat_start_ticks(pid_t pid, uint64_t *out)
{
	struct procstat_raw p;
	char path[32];
	int fd, rc;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = procstat_stat_of(fd, &p);
	close(fd);
	if (rc == 0)
		*out = p.starttime;
	return rc;
}

/* Entries of a directory opened for this count; -1 on failure. */
static long
procstat_count_dir(int fd)
{
	union {
		char raw[4096];
		struct dirent64 align;
	} buf;
	long n = 0;
	ssize_t got;

	while ((got = getdents64(fd, buf.raw, sizeof(buf.raw))) > 0) {
		for (ssize_t off = 0; off < got;) {
			const struct dirent64 *e =
			    (const struct dirent64 *)(buf.raw + off);

			if (e->d_reclen == 0 || e->d_reclen > got - off)
				break;
			n += e->d_name[0] != '.';
			off += e->d_reclen;
		}
	}
	return got < 0 ? -1 : n;
}

int
procstat_count_fds(pid_t pid, uint64_t *out)
{
	char path[32];
	long n;
	int fd;

	if (pid < 0)
		return -1;
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/fd");
	else
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = procstat_count_dir(fd);
	close(fd);
	/* our own listing's descriptor is not one of the figures */
	if (pid == 0)
		n--;
	if (n < 0)
		return -1;
	*out = (uint64_t)n;
	return 0;
}

void
procstat_self(struct procstat *out)
{
	struct procstat_raw p;
	struct timespec real, boot;
	struct rlimit rl;
	long ticks = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t fds;
	bool have_fds = procstat_count_fds(0, &fds) == 0;

	memset(out, 0, sizeof(*out));
	/*
	 * starttime counts ticks from boot on the CLOCK_BOOTTIME clock, so the
	 * wall-clock boot instant is realtime minus boottime, read together.
	 * This spares reading /proc/stat for btime, a file whose interrupt
	 * line runs to tens of KB on large nodes.
	 */
	if (procstat_stat(&p) == 0 && ticks > 0 && page > 0 &&
	    p.rss <= ULLONG_MAX / (unsigned long long)page &&
	    clock_gettime(CLOCK_REALTIME, &real) == 0 &&
	    clock_gettime(CLOCK_BOOTTIME, &boot) == 0) {
		int64_t boot_ms = ((int64_t)real.tv_sec - boot.tv_sec) * 1000 +
		    (real.tv_nsec - boot.tv_nsec) / 1000000;

		out->start_ms = (uint64_t)boot_ms +
		    p.starttime * 1000 / (unsigned long long)ticks;
		out->cpu_ms = (p.utime + p.stime) * 1000 /
		    (unsigned long long)ticks;
		out->rss_bytes = p.rss * (unsigned long long)page;
		out->vsize_bytes = p.vsize;
		out->ok |= PROCSTAT_STAT;
	}
	if (have_fds) {
		out->open_fds = fds;
		out->ok |= PROCSTAT_FDS;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		out->max_fds = (uint64_t)rl.rlim_cur;
		out->ok |= PROCSTAT_MAX_FDS;
	}
}
