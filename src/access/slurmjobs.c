/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurmjobs.c - the Slurm job steps holding GPUs, and the decision on a
 * write under slurm_jobs = "confine" (slurmjobs.h).
 *
 * Everything read here is the kernel's (/proc/PID/cgroup, mountinfo, the
 * cgroup file system) and bounded: a line or file that does not fit is
 * taken as unreadable, never cut into something else.
 */
#include "access/slurmjobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/identity.h"
#include "common/log.h"
#include "common/procstat.h"

#define SJ_CGROUP_FILE_MAX 8192		/* /proc/PID/cgroup */
#define SJ_ROOT_MAX 256
#define SJ_HIER_MAX 64			/* a v1 controller list */
#define SJ_DIR_MAX (SJ_ROOT_MAX + 2 * SLURMJOBS_PATH_MAX)
#define SJ_USER_MAX 64
#define SJ_V1_DEPTH 3			/* levels looked in below the step */
#define SJ_V1_DIRS 256			/* directories looked in, at most */
#define SJ_STEP_NAME_MAX 24

struct sj_entry {
	bool used;
	uint32_t job, step;
	uid_t uid;
	char user[SJ_USER_MAX];		/* "" when the uid has no name */
	uint64_t gpus;
	/* the controller list of /proc/PID/cgroup ("" for cgroup v2) */
	char hier[SJ_HIER_MAX];
	char path[SLURMJOBS_PATH_MAX];	/* the step's cgroup */
	char dir[SJ_DIR_MAX];		/* its directory; "" unknown */
	time_t since;			/* CLOCK_MONOTONIC seconds */
};

struct slurmjobs {
	pthread_mutex_t lock;
	char root[SJ_ROOT_MAX];
	time_t grace;			/* a new entry is alive meanwhile */
	struct sj_entry **e;		/* [SLURMJOBS_MAX], made on first use */
};

static time_t
sj_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

int
slurmjobs_create(const char *root, unsigned grace_s, struct slurmjobs **out,
    struct zerr *err)
{
	struct slurmjobs *t;

	*out = NULL;
	if (strlen(root) >= SJ_ROOT_MAX)
		return zerr_set(err, ZERR_INVALID, "root too long");
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->e = calloc(SLURMJOBS_MAX, sizeof(*t->e))) == NULL) {
		free(t);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	snprintf(t->root, sizeof(t->root), "%s", root);
	t->grace = (time_t)grace_s;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void
slurmjobs_destroy(struct slurmjobs *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->lock);
	for (unsigned i = 0; i < SLURMJOBS_MAX; i++)
		free(t->e[i]);
	free(t->e);
	free(t);
}

bool
slurmjobs_step_ok(uint32_t step)
{
	return step < 0xfffffff0u || step == SLURMJOBS_STEP_BATCH ||
	    step == SLURMJOBS_STEP_EXTERN || step == SLURMJOBS_STEP_INTERACTIVE;
}

/* "0", "batch", ...: the step as Slurm writes it after "step_". */
static const char *
sj_step_name(uint32_t step, char *buf, size_t size)
{
	switch (step) {
	case SLURMJOBS_STEP_BATCH:
		return "batch";
	case SLURMJOBS_STEP_EXTERN:
		return "extern";
	case SLURMJOBS_STEP_INTERACTIVE:
		return "interactive";
	default:
		snprintf(buf, size, "%u", step);
		return buf;
	}
}

/* "0,1,3" */
static void
sj_gpus_text(uint64_t gpus, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < SLURMJOBS_MAX_GPUS && len < size; i++) {
		int k;

		if (!(gpus >> i & 1))
			continue;
		k = snprintf(buf + len, size - len, "%s%u", len ? "," : "", i);
		if (k < 0)
			break;
		len += (size_t)k;
	}
}

/*
 * The whole of a small file into buf (NUL-terminated); its length, or -1
 * (errno: ENOENT and the like; EFBIG when it does not fit).
 */
static ssize_t
sj_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;
	int e;

	if (fd < 0)
		return -1;
	n = fileio_read_all(fd, buf, size);
	e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	if ((size_t)n >= size) {
		errno = EFBIG;
		return -1;
	}
	buf[n] = '\0';
	return n;
}

/*
 * The next line of a /proc/PID/cgroup text at *p: "ID:CONTROLLERS:PATH".
 * Points *hier (cut at its ':') and *path (cut at its newline) into the
 * text, which is modified; advances *p. false at the end.
 */
static bool
sj_cg_line(char **p, const char **hier, const char **path)
{
	while (**p != '\0') {
		char *line = *p, *nl = strchr(line, '\n'), *c1, *c2;

		if (nl != NULL) {
			*nl = '\0';
			*p = nl + 1;
		} else {
			*p = line + strlen(line);
		}
		if ((c1 = strchr(line, ':')) == NULL ||
		    (c2 = strchr(c1 + 1, ':')) == NULL || c2[1] != '/')
			continue;
		*c2 = '\0';
		*hier = c1 + 1;
		*path = c2 + 1;
		return true;
	}
	return false;
}

/*
 * Where the component "job_JOB" of `path` ends (an index), or 0 when the
 * path has no such component.
 */
static size_t
sj_job_end(const char *path, uint32_t job)
{
	char name[24];
	size_t nlen = (size_t)snprintf(name, sizeof(name), "job_%u", job);
	const char *p = path;

	while ((p = strchr(p, '/')) != NULL) {
		p++;
		if (strncmp(p, name, nlen) == 0 &&
		    (p[nlen] == '/' || p[nlen] == '\0'))
			return (size_t)(p - path) + nlen;
	}
	return 0;
}

/* Whether the comma-separated `list` has `item`. */
static bool
sj_list_has(const char *list, const char *item, size_t ilen)
{
	const char *p = list;

	for (;;) {
		const char *e = strchr(p, ',');
		size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

		if (n == ilen && strncmp(p, item, n) == 0)
			return true;
		if (e == NULL)
			return false;
		p = e + 1;
	}
}

/* Whether every controller of `hier` is in the mount options `opts`. */
static bool
sj_opts_have_all(const char *opts, const char *hier)
{
	const char *p = hier;

	for (;;) {
		const char *e = strchr(p, ',');
		size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

		if (n == 0 || !sj_list_has(opts, p, n))
			return false;
		if (e == NULL)
			return true;
		p = e + 1;
	}
}

/* mountinfo's octal escapes (\040 and the like) undone in place. */
static void
sj_unescape(char *s)
{
	char *o = s;

	for (char *i = s; *i != '\0'; i++) {
		if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' &&
		    i[2] >= '0' && i[2] <= '7' && i[3] >= '0' && i[3] <= '7') {
			*o++ = (char)((i[1] - '0') << 6 | (i[2] - '0') << 3 |
			    (i[3] - '0'));
			i += 3;
		} else {
			*o++ = *i;
		}
	}
	*o = '\0';
}

/*
 * The directory of cgroup `path` of hierarchy `hier` ("" v2) in this
 * process's mounts, into dir (SJ_DIR_MAX); "" when no mount shows it.
 */
static void
sj_find_dir(const struct slurmjobs *t, const char *hier, const char *path,
    char *dir)
{
	char mi[SJ_ROOT_MAX + 32];
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	dir[0] = '\0';
	snprintf(mi, sizeof(mi), "%s/proc/self/mountinfo", t->root);
	if ((f = fopen(mi, "re")) == NULL)
		return;
	while (dir[0] == '\0' && getline(&line, &cap, f) > 0) {
		char *field[6], *dash, *save = NULL, *fstype, *opts;
		const char *rel;
		size_t rlen;
		unsigned n = 0;

		line[strcspn(line, "\n")] = '\0';
		if ((dash = strstr(line, " - ")) == NULL)
			continue;
		*dash = '\0';
		for (char *s = strtok_r(line, " ", &save); s != NULL && n < 6;
		    s = strtok_r(NULL, " ", &save))
			field[n++] = s;
		save = NULL;
		fstype = strtok_r(dash + 3, " ", &save);
		(void)strtok_r(NULL, " ", &save);	/* the source */
		opts = strtok_r(NULL, " ", &save);
		if (n < 5 || fstype == NULL || opts == NULL)
			continue;
		if (hier[0] == '\0' ? strcmp(fstype, "cgroup2") != 0 :
		    strcmp(fstype, "cgroup") != 0 ||
		    !sj_opts_have_all(opts, hier))
			continue;
		sj_unescape(field[3]);
		sj_unescape(field[4]);
		/* the mount's root: the path seen under its mount point */
		rlen = strcmp(field[3], "/") == 0 ? 0 : strlen(field[3]);
		if (strncmp(path, field[3], rlen) != 0 ||
		    (path[rlen] != '/' && path[rlen] != '\0'))
			continue;
		rel = path + rlen;
		if ((size_t)snprintf(dir, SJ_DIR_MAX, "%s%s%s", t->root,
		    field[4], rel) >= SJ_DIR_MAX)
			dir[0] = '\0';
	}
	free(line);
	fclose(f);
}

/* Whether a v1 cgroup directory or one below it holds a process. */
static bool
sj_v1_populated(const char *dir, unsigned depth, unsigned *budget)
{
	char path[SJ_DIR_MAX + 16], buf[64];
	struct dirent *d;
	bool found = false;
	ssize_t n;
	DIR *dd;

	if (*budget == 0)
		return true;		/* too many to look at: alive */
	(*budget)--;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	n = sj_read(path, buf, sizeof(buf));
	if (n > 0 || (n < 0 && errno != ENOENT))
		return true;		/* a process (or cannot tell) */
	if (depth >= SJ_V1_DEPTH || (dd = opendir(dir)) == NULL)
		return false;
	while (!found && (d = readdir(dd)) != NULL) {
		char sub[SJ_DIR_MAX];

		if (d->d_type != DT_DIR || d->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", dir,
		    d->d_name) >= sizeof(sub))
			continue;
		found = sj_v1_populated(sub, depth + 1, budget);
	}
	closedir(dd);
	return found;
}

/*
 * Whether an entry still stands for a running step: young, or its cgroup
 * directory exists and holds a process (where it cannot be told: alive).
 */
static bool
sj_alive(const struct sj_entry *e, time_t grace, time_t now)
{
	char path[SJ_DIR_MAX + 16], buf[256];
	unsigned budget = SJ_V1_DIRS;
	struct stat st;

	if (now - e->since < grace || e->dir[0] == '\0')
		return true;
	if (stat(e->dir, &st) != 0)
		return errno != ENOENT && errno != ENOTDIR;
	if (!S_ISDIR(st.st_mode))
		return false;
	if (e->hier[0] != '\0')
		return sj_v1_populated(e->dir, 0, &budget);
	snprintf(path, sizeof(path), "%s/cgroup.events", e->dir);
	if (sj_read(path, buf, sizeof(buf)) < 0)
		return true;
	return strstr(buf, "populated 0") == NULL;
}

static void
sj_log_end(const char *event, const struct sj_entry *e, const char *why)
{
	char sn[SJ_STEP_NAME_MAX];

	zlog(ZLOG_INFO, event, "job=%u step=%s uid=%u msg=\"%s\"", e->job,
	    sj_step_name(e->step, sn, sizeof(sn)), (unsigned)e->uid, why);
}

/* An entry found dead is dropped (lock held); true when it was. */
static bool
sj_drop_dead(const struct slurmjobs *t, struct sj_entry *e, time_t now)
{
	if (e == NULL || !e->used || sj_alive(e, t->grace, now))
		return false;
	sj_log_end("slurm_step_gone", e, "its cgroup is gone or holds no "
	    "process, without its end from the plugin");
	e->used = false;
	return true;
}

int
slurmjobs_start(struct slurmjobs *t, uint32_t job, uint32_t step, uid_t uid,
    uint64_t gpus, pid_t pid, struct zerr *err)
{
	char file[SJ_ROOT_MAX + 32], sn[SJ_STEP_NAME_MAX], list[256];
	char q[2 * SLURMJOBS_PATH_MAX], cand[SLURMJOBS_PATH_MAX];
	char *text, *p;
	const char *hier, *path;
	struct sj_entry e;
	int best = -1;
	time_t now = sj_now();
	unsigned slot = SLURMJOBS_MAX;

	if (job == 0 || !slurmjobs_step_ok(step) || gpus == 0 || pid <= 0)
		return zerr_set(err, ZERR_INVALID, "not a job step with GPUs");
	memset(&e, 0, sizeof(e));
	if ((text = malloc(SJ_CGROUP_FILE_MAX)) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	snprintf(file, sizeof(file), "%s/proc/%ld/cgroup", t->root, (long)pid);
	if (sj_read(file, text, SJ_CGROUP_FILE_MAX) < 0) {
		free(text);
		return zerr_set(err, ZERR_INVALID, "the cgroups of the process "
		    "that asked cannot be read");
	}
	/* v2 first, then v1's freezer (proctrack/cgroup's), then any */
	for (p = text; sj_cg_line(&p, &hier, &path);) {
		size_t end = sj_job_end(path, job);
		int rank = hier[0] == '\0' ? 2 : sj_list_has(hier, "freezer",
		    7) ? 1 : 0;

		if (end == 0 || rank <= best || strlen(hier) >= SJ_HIER_MAX ||
		    (size_t)snprintf(cand, sizeof(cand), "%.*s/step_%s",
		    (int)end, path, sj_step_name(step, sn, sizeof(sn))) >=
		    sizeof(cand))
			continue;
		best = rank;
		snprintf(e.hier, sizeof(e.hier), "%s", hier);
		memcpy(e.path, cand, sizeof(e.path));
	}
	free(text);
	if (best < 0)
		return zerr_set(err, ZERR_INVALID, "the process that asked is "
		    "in no cgroup of job %u: Slurm does not track this job by "
		    "cgroup (ProctrackType=proctrack/cgroup), so its steps "
		    "cannot be told apart", job);
	e.used = true;
	e.job = job;
	e.step = step;
	e.uid = uid;
	e.gpus = gpus;
	e.since = now;
	identity_user(uid, e.user, sizeof(e.user));
	sj_find_dir(t, e.hier, e.path, e.dir);

	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < SLURMJOBS_MAX; i++) {
		const struct sj_entry *o = t->e[i];

		if (o != NULL && o->used && o->job == job && o->step == step) {
			slot = i;	/* the same step again: replaced */
			break;
		}
		if ((o == NULL || !o->used) && slot == SLURMJOBS_MAX)
			slot = i;
	}
	for (unsigned i = 0; slot == SLURMJOBS_MAX && i < SLURMJOBS_MAX; i++)
		if (sj_drop_dead(t, t->e[i], now))
			slot = i;
	if (slot == SLURMJOBS_MAX) {
		pthread_mutex_unlock(&t->lock);
		return zerr_set(err, ZERR_BUSY, "zeusd knows %d running Slurm "
		    "job steps already", SLURMJOBS_MAX);
	}
	if (t->e[slot] == NULL && (t->e[slot] = malloc(sizeof(e))) == NULL) {
		pthread_mutex_unlock(&t->lock);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	*t->e[slot] = e;
	pthread_mutex_unlock(&t->lock);
	sj_gpus_text(gpus, list, sizeof(list));
	zlog(ZLOG_INFO, "slurm_step_start", "job=%u step=%s uid=%u gpus=%s "
	    "cgroup=%s directory=%s", job, sj_step_name(step, sn, sizeof(sn)),
	    (unsigned)uid, list, zlog_quote(q, sizeof(q), e.path),
	    e.dir[0] ? "found" : "unknown");
	return 0;
}

bool
slurmjobs_end(struct slurmjobs *t, uint32_t job, uint32_t step)
{
	bool found = false;

	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < SLURMJOBS_MAX; i++) {
		struct sj_entry *e = t->e[i];

		if (e != NULL && e->used && e->job == job && e->step == step) {
			sj_log_end("slurm_step_end", e, "the plugin says it "
			    "ended");
			e->used = false;
			found = true;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return found;
}

unsigned
slurmjobs_count(struct slurmjobs *t)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < SLURMJOBS_MAX; i++)
		n += t->e[i] != NULL && t->e[i]->used;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/*
 * The writer's /proc/PID/cgroup, read while its start time shows it is the
 * process that connected; NULL when it cannot be (malloc'ed otherwise).
 */
static char *
sj_writer_cgroups(const struct slurmjobs *t, const struct slurmjobs_writer *w)
{
	char file[SJ_ROOT_MAX + 32], *text;
	uint64_t s1, s2;

	if (!w->process || !w->known || w->pid <= 0 ||
	    procstat_start_ticks(w->pid, &s1) != 0 || s1 != w->start)
		return NULL;
	if ((text = malloc(SJ_CGROUP_FILE_MAX)) == NULL)
		return NULL;
	snprintf(file, sizeof(file), "%s/proc/%ld/cgroup", t->root,
	    (long)w->pid);
	if (sj_read(file, text, SJ_CGROUP_FILE_MAX) < 0 ||
	    procstat_start_ticks(w->pid, &s2) != 0 || s2 != w->start) {
		free(text);
		return NULL;
	}
	return text;
}

/* Whether the writer's cgroups (a /proc/PID/cgroup text) are in e's. */
static bool
sj_inside(const char *cgroups, const struct sj_entry *e)
{
	size_t plen = strlen(e->path);
	const char *p = cgroups;

	while (*p != '\0') {
		const char *nl = strchr(p, '\n'), *c1, *c2, *end;

		end = nl != NULL ? nl : p + strlen(p);
		c1 = memchr(p, ':', (size_t)(end - p));
		c2 = c1 != NULL ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) :
		    NULL;
		if (c2 != NULL && (size_t)(c2 - c1 - 1) == strlen(e->hier) &&
		    strncmp(c1 + 1, e->hier, (size_t)(c2 - c1 - 1)) == 0 &&
		    (size_t)(end - c2 - 1) >= plen &&
		    strncmp(c2 + 1, e->path, plen) == 0 &&
		    (c2[1 + plen] == '/' || c2 + 1 + plen == end))
			return true;
		p = nl != NULL ? nl + 1 : end;
	}
	return false;
}

#define SJ_CONFINE "under the node policy's slurm_jobs = \"confine\""

int
slurmjobs_judge(struct slurmjobs *t, unsigned gpu,
    const struct slurmjobs_writer *w, struct zerr *err)
{
	const struct sj_entry *held = NULL, *own = NULL;
	bool any = false;
	time_t now = sj_now();
	char sn[SJ_STEP_NAME_MAX], list[256], *cg;
	int rc = 0;

	if (slurmjobs_count(t) == 0)
		return 0;		/* no step: nothing to read */
	cg = sj_writer_cgroups(t, w);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < SLURMJOBS_MAX; i++) {
		struct sj_entry *e = t->e[i];
		bool in, holds;

		if (e == NULL || !e->used)
			continue;
		in = cg != NULL && sj_inside(cg, e);
		holds = gpu < SLURMJOBS_MAX_GPUS && (e->gpus >> gpu & 1);
		if (in && holds)
			goto out;	/* its own step's GPU */
		if (in) {
			own = e;
			continue;
		}
		/* only an entry that would refuse is looked at closely */
		if (sj_drop_dead(t, e, now))
			continue;
		any = true;
		if (holds && held == NULL)
			held = e;
	}
	if (held != NULL) {
		rc = zerr_set(err, ZERR_FORBIDDEN, "Forbidden: GPU %u is held "
		    "by Slurm job %u step %s of uid %u%s%s%s; " SJ_CONFINE
		    " only that step's processes may change it", gpu,
		    held->job, sj_step_name(held->step, sn, sizeof(sn)),
		    (unsigned)held->uid, held->user[0] ? " (" : "", held->user,
		    held->user[0] ? ")" : "");
	} else if (own != NULL) {
		sj_gpus_text(own->gpus, list, sizeof(list));
		rc = zerr_set(err, ZERR_FORBIDDEN, "Forbidden: the process "
		    "that asked runs in Slurm job %u step %s, which holds GPU "
		    "%s, not GPU %u; " SJ_CONFINE " it may change no other GPU",
		    own->job, sj_step_name(own->step, sn, sizeof(sn)), list,
		    gpu);
	} else if (any && cg == NULL && w->process) {
		rc = zerr_set(err, ZERR_FORBIDDEN, "Forbidden: zeusd cannot "
		    "tell whether the process that asked runs in a Slurm job "
		    "step (it was not watched since it connected, or is "
		    "gone); " SJ_CONFINE " that must be known while job steps "
		    "hold GPUs: reconnect");
	}
out:
	pthread_mutex_unlock(&t->lock);
	free(cg);
	return rc;
}
