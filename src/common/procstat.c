/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.c - this process's resource figures (see procstat.h).
 */
#include "procstat.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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

/* procstat_keep's descriptors; -1 until then (each read opens anew). */
static int kept_stat = -1, kept_fds = -1;
/* the directory's offset is shared: one listing at a time */
static pthread_mutex_t kept_fds_lock = PTHREAD_MUTEX_INITIALIZER;

int
procstat_keep(void)
{
	if (kept_stat < 0)
		kept_stat = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (kept_fds < 0)
		kept_fds = open("/proc/self/fd", O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC);
	return kept_stat >= 0 && kept_fds >= 0 ? 0 : -1;
}

int
procstat_kept_dirfd(void)
{
	return kept_fds;
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
procstat_stat(struct procstat_raw *p)
{
	/* ~52 fields of at most 20 digits plus a 16-byte name fit in 2 KiB */
	char buf[2048];
	const char *s, *tok;
	ssize_t n;
	int fd, field, got = 0;

	fd = kept_stat >= 0 ? kept_stat :
	    open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* a seq file: each read from offset 0 is a fresh snapshot */
	n = fileio_pread_all(fd, buf, sizeof(buf) - 1);
	if (fd != kept_stat)
		close(fd);
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

/* Entries of an open directory, from its start; -1 on failure. */
static long
procstat_count_dir(int fd)
{
	union {
		char raw[4096];
		struct dirent64 align;
	} buf;
	long n = 0;
	ssize_t got;

	if (lseek(fd, 0, SEEK_SET) != 0)
		return -1;
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

/*
 * Open descriptors, not counting the one that reads the directory: the
 * kept one (procstat_keep; its offset is shared, so one listing at a
 * time), else one opened for this count.
 */
static long
procstat_open_fds(void)
{
	long n;
	int fd;

	if (kept_fds >= 0) {
		pthread_mutex_lock(&kept_fds_lock);
		n = procstat_count_dir(kept_fds);
		pthread_mutex_unlock(&kept_fds_lock);
	} else {
		fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		n = procstat_count_dir(fd);
		close(fd);
	}
	return n > 0 ? n - 1 : -1;
}

void
procstat_self(struct procstat *out)
{
	struct procstat_raw p;
	struct timespec real, boot;
	struct rlimit rl;
	long ticks = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	long fds = procstat_open_fds();

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
	if (fds >= 0) {
		out->open_fds = (uint64_t)fds;
		out->ok |= PROCSTAT_FDS;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		out->max_fds = (uint64_t)rl.rlim_cur;
		out->ok |= PROCSTAT_MAX_FDS;
	}
}
