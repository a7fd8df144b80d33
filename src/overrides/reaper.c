/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reaper.c - the registry of running override commands, the subreaper and
 * the sweep of escaped descendants (see reaper.h for the rules).
 *
 * Two mutexes, always taken in this order: sweep_lock makes sweeps run one
 * at a time (two sweeps reaping the same pid could let the second signal a
 * reused one), reg_lock guards the registry. A sweep reads /proc under
 * reg_lock, so every child it finds is either registered or genuinely
 * unknown: a command being spawned holds reg_lock from before its fork
 * until it is registered. A child found unregistered stays ours until the
 * sweep (the only code that reaps unregistered children) reaps it, so
 * signalling it after reg_lock is released is safe.
 *
 * Waiting is done by polling (a few ms per tick) rather than with SIGCHLD
 * or a condition variable: nothing here may disturb the signal handling of
 * the rest of the daemon, and the waits are short and rare.
 */
#include "reaper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define REAPER_TICK_MS 20
#define REAPER_MAX_VICTIMS 256	/* per round; more are found next round */

static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reaper_entry *reg_head;	/* guarded by reg_lock */
static bool reg_stopping;		/* guarded by reg_lock */
static atomic_bool enabled;

/* One escapee of the current sweep. */
struct reaper_victim {
	struct reaper_stat st;
	int sent;		/* last signal sent; 0: none, -1: not allowed */
};

/*
 * The children of a split daemon that are not commands, never escapees:
 * the network process and the janitor. 0 is a free slot.
 */
static atomic_int reaper_spared[REAPER_MAX_SPARED];

int
reaper_spare(pid_t pid)
{
	if (pid <= 0)
		return -1;	/* 0 marks a free slot */
	for (int i = 0; i < REAPER_MAX_SPARED; i++) {
		int free_slot = 0;

		if (atomic_compare_exchange_strong(&reaper_spared[i],
		    &free_slot, (int)pid))
			return 0;
	}
	return -1;
}

void
reaper_unspare(pid_t pid)
{
	for (int i = 0; i < REAPER_MAX_SPARED; i++) {
		int was = (int)pid;

		(void)atomic_compare_exchange_strong(&reaper_spared[i], &was,
		    0);
	}
}

static bool
reaper_is_spared(pid_t pid)
{
	for (int i = 0; i < REAPER_MAX_SPARED; i++)
		if (atomic_load(&reaper_spared[i]) == (int)pid)
			return true;
	return false;
}

int
reaper_enable(struct zerr *err)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return zerr_set(err, ZERR_INTERNAL, "cannot become a child "
		    "subreaper (prctl): %s", strerror(errno));
	atomic_store(&enabled, true);
	return 0;
}

bool
reaper_enabled(void)
{
	return atomic_load(&enabled);
}

void
reaper_disable(void)
{
	atomic_store(&enabled, false);
}

int
reaper_spawn_begin(void)
{
	pthread_mutex_lock(&reg_lock);
	if (reg_stopping) {
		pthread_mutex_unlock(&reg_lock);
		return -1;
	}
	return 0;
}

void
reaper_spawn_end(struct reaper_entry *e, pid_t pid)
{
	if (pid > 0) {
		e->pid = pid;
		e->reaping = false;
		e->prev = NULL;
		e->next = reg_head;
		if (reg_head != NULL)
			reg_head->prev = e;
		reg_head = e;
	}
	pthread_mutex_unlock(&reg_lock);
}

void
reaper_reaping(struct reaper_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	e->reaping = true;
	pthread_mutex_unlock(&reg_lock);
}

void
reaper_remove(struct reaper_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		reg_head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	e->prev = e->next = NULL;
	pthread_mutex_unlock(&reg_lock);
}

/* Parses a decimal pid at *p (advancing it); -1 when there is none. */
static long
reaper_number(const char **p, const char *end)
{
	const char *q = *p;
	long v = 0;

	if (q >= end || *q < '0' || *q > '9')
		return -1;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (v > 100000000)	/* far above any pid_max */
			return -1;
		v = v * 10 + (*q - '0');
	}
	*p = q;
	return v;
}

/*
 * "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
 * (a process names itself), so it ends at the last ')'.
 */
int
reaper_parse_stat(const char *buf, size_t len, struct reaper_stat *st)
{
	const char *end = buf + len, *p = buf, *open, *close = NULL;
	long pid, ppid, pgrp;
	size_t clen;

	memset(st, 0, sizeof(*st));
	if ((pid = reaper_number(&p, end)) <= 0 || p + 2 > end ||
	    p[0] != ' ' || p[1] != '(')
		return -1;
	open = p + 1;
	for (const char *q = end; q > open; q--)
		if (q[-1] == ')') {
			close = q - 1;
			break;
		}
	if (close == NULL || end - close < 4 ||
	    close[1] != ' ' || close[3] != ' ')
		return -1;
	st->state = close[2];
	p = close + 4;
	if ((ppid = reaper_number(&p, end)) < 0 || p >= end || *p != ' ')
		return -1;
	p++;
	if ((pgrp = reaper_number(&p, end)) < 0 || (p < end && *p != ' '))
		return -1;
	clen = (size_t)(close - open - 1);
	if (clen >= sizeof(st->comm))
		clen = sizeof(st->comm) - 1;
	memcpy(st->comm, open + 1, clen);
	st->comm[clen] = '\0';
	st->pid = (pid_t)pid;
	st->ppid = (pid_t)ppid;
	st->pgrp = (pid_t)pgrp;
	return 0;
}

static int
reaper_read_stat(int procfd, const char *name, struct reaper_stat *st)
{
	char path[64], buf[512];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/stat", name) >= (int)sizeof(path))
		return -1;
	if ((fd = openat(procfd, path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;	/* gone meanwhile */
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	return reaper_parse_stat(buf, (size_t)n, st);
}

static bool
reaper_registered_locked(pid_t pid)
{
	for (const struct reaper_entry *e = reg_head; e != NULL; e = e->next)
		if (e->pid == pid)
			return true;
	return false;
}

static bool
reaper_listed(const struct reaper_victim *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].st.pid == pid)
			return true;
	return false;
}

/*
 * Appends to v (holding n, room for max) our unregistered children not yet
 * in it; returns the new count.
 */
static size_t
reaper_scan(struct reaper_victim *v, size_t n, size_t max)
{
	static atomic_bool warned;
	pid_t self = getpid();
	struct dirent *de;
	DIR *d;

	if ((d = opendir("/proc")) == NULL) {
		if (!atomic_exchange(&warned, true))
			zlog(ZLOG_ERROR, "reaper_no_proc", "errno=%d "
			    "msg=\"cannot read /proc: escaped override "
			    "processes are not found\"", errno);
		return n;
	}
	pthread_mutex_lock(&reg_lock);
	while (n < max && (de = readdir(d)) != NULL) {
		struct reaper_stat st;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (reaper_read_stat(dirfd(d), de->d_name, &st) != 0 ||
		    st.ppid != self || st.pid == self ||
		    reaper_is_spared(st.pid))
			continue;
		if (reaper_registered_locked(st.pid) ||
		    reaper_listed(v, n, st.pid))
			continue;
		v[n].st = st;
		v[n].sent = 0;
		n++;
	}
	pthread_mutex_unlock(&reg_lock);
	closedir(d);
	return n;
}

/*
 * Signals one escapee and, when it leads its own process group (it called
 * setsid or setpgid), that group too: its members are its descendants,
 * and the group id cannot be reused while the leader is our unreaped
 * child. SIGCONT after SIGTERM so a stopped process can act on it.
 * Returns 0, or -1 when the escapee may not be signalled: a daemon
 * without root cannot kill what became root through sudo.
 */
static int
reaper_signal(const struct reaper_stat *st, int sig)
{
	char q[48];
	int e = 0;

	if (st->pgrp == st->pid)
		(void)kill(-st->pid, sig);
	if (kill(st->pid, sig) < 0)
		e = errno;
	zlog_quote(q, sizeof(q), st->comm);
	if (e == EPERM) {
		zlog(ZLOG_ERROR, "override_escapee_kill_failed", "pid=%d "
		    "comm=%s errno=%d msg=\"not permitted; left running\"",
		    (int)st->pid, q, e);
		return -1;
	}
	zlog(ZLOG_WARN, "override_escapee_killed", "pid=%d comm=%s signal=%s",
	    (int)st->pid, q, sig == SIGKILL ? "KILL" : "TERM");
	if (sig == SIGTERM) {
		if (st->pgrp == st->pid)
			(void)kill(-st->pid, SIGCONT);
		(void)kill(st->pid, SIGCONT);
	}
	return 0;
}

/*
 * Reaps the victims that have died (dropping them from v); sets *pending
 * to how many of those left are still to be waited for, that is all but
 * the ones that may not be signalled (kept, so no scan adds them again).
 * Returns how many are left.
 */
static size_t
reaper_collect(struct reaper_victim *v, size_t n, size_t *pending)
{
	size_t k = 0;

	*pending = 0;
	for (size_t i = 0; i < n; i++) {
		pid_t r = 0;
		int status;

		if (v[i].sent >= 0) {
			do
				r = waitpid(v[i].st.pid, &status,
				    WNOHANG | __WALL);
			while (r < 0 && errno == EINTR);
		}
		if (r == v[i].st.pid || (r < 0 && errno == ECHILD)) {
			if (v[i].sent == 0)
				zlog(ZLOG_DEBUG, "override_escapee_reaped",
				    "pid=%d", (int)v[i].st.pid);
			continue;
		}
		if (v[i].sent >= 0)
			(*pending)++;
		v[k++] = v[i];
	}
	return k;
}

unsigned
reaper_sweep(unsigned grace_ms)
{
	struct reaper_victim *v;
	uint64_t start, now;
	unsigned signalled = 0;
	size_t n = 0, pending;

	if (!atomic_load(&enabled))
		return 0;
	/* On the heap: worker threads have modest stacks. */
	if ((v = malloc(REAPER_MAX_VICTIMS * sizeof(*v))) == NULL) {
		zlog(ZLOG_ERROR, "reaper_sweep_failed",
		    "msg=\"out of memory\"");
		return 0;
	}
	pthread_mutex_lock(&sweep_lock);
	start = zclock_now_ms();
	for (;;) {
		size_t old = n;
		bool found, escalate;

		n = reaper_scan(v, n, REAPER_MAX_VICTIMS);
		found = n > old;
		now = zclock_now_ms();
		escalate = now - start >= grace_ms;
		/* A zombie is only reaped; a live one gets SIGTERM when
		 * found, SIGKILL once the grace is over. */
		for (size_t i = 0; i < n; i++) {
			int sig;

			if (v[i].st.state == 'Z' || v[i].sent < 0)
				continue;
			if (i >= old)
				sig = escalate ? SIGKILL : SIGTERM;
			else if (escalate && v[i].sent == SIGTERM)
				sig = SIGKILL;
			else
				continue;
			if (v[i].sent == 0)
				signalled++;
			v[i].sent = reaper_signal(&v[i].st, sig) == 0 ? sig :
			    -1;
		}
		/* Descendants of the dead are ours now: scan again at
		 * once when something was found, else wait a tick. */
		n = reaper_collect(v, n, &pending);
		if (pending == 0 && !found)
			break;
		if (now - start >= (uint64_t)grace_ms + REAPER_REAP_MS) {
			for (size_t i = 0; i < n; i++)
				if (v[i].sent >= 0)
					zlog(ZLOG_ERROR,
					    "override_escapee_unreaped", "pid=%d "
					    "msg=\"still alive after SIGKILL; "
					    "tried again at the next sweep\"",
					    (int)v[i].st.pid);
			break;
		}
		if (pending > 0)
			zclock_sleep_ms(REAPER_TICK_MS);
	}
	pthread_mutex_unlock(&sweep_lock);
	free(v);
	return signalled;
}

/* Signals every running command's process group; returns how many. */
static unsigned
reaper_signal_running_locked(int sig)
{
	unsigned k = 0;

	for (const struct reaper_entry *e = reg_head; e != NULL; e = e->next) {
		if (e->reaping)
			continue;
		zlog(ZLOG_WARN, "override_killed", "pid=%d signal=%s "
		    "reason=shutdown", (int)e->pid,
		    sig == SIGKILL ? "KILL" : "TERM");
		/* The group, and the command itself should it have left the
		 * group; it is unreaped, so neither id can be reused. */
		(void)kill(-e->pid, sig);
		(void)kill(e->pid, sig);
		if (sig == SIGTERM) {
			(void)kill(-e->pid, SIGCONT);
			(void)kill(e->pid, SIGCONT);
		}
		k++;
	}
	return k;
}

/* Waits until no command is registered or `until`; returns how many are. */
static unsigned
reaper_wait_drained(uint64_t until)
{
	for (;;) {
		unsigned k = 0;

		pthread_mutex_lock(&reg_lock);
		for (const struct reaper_entry *e = reg_head; e != NULL;
		    e = e->next)
			k++;
		pthread_mutex_unlock(&reg_lock);
		if (k == 0 || zclock_now_ms() >= until)
			return k;
		zclock_sleep_ms(REAPER_TICK_MS);
	}
}

int
reaper_shutdown(unsigned grace_ms)
{
	uint64_t start = zclock_now_ms();
	unsigned running, left;

	pthread_mutex_lock(&reg_lock);
	reg_stopping = true;
	running = reaper_signal_running_locked(SIGTERM);
	pthread_mutex_unlock(&reg_lock);
	left = running > 0 ? reaper_wait_drained(start + grace_ms) : 0;
	if (left > 0) {
		pthread_mutex_lock(&reg_lock);
		(void)reaper_signal_running_locked(SIGKILL);
		pthread_mutex_unlock(&reg_lock);
		left = reaper_wait_drained(start + grace_ms + REAPER_REAP_MS);
	}
	if (running > 0)
		zlog(ZLOG_INFO, "overrides_stopped", "running=%u left=%u "
		    "ms=%llu", running, left,
		    (unsigned long long)(zclock_now_ms() - start));
	(void)reaper_sweep(grace_ms);
	if (left > 0) {
		zlog(ZLOG_ERROR, "override_not_reaped", "running=%u", left);
		return -1;
	}
	return 0;
}
