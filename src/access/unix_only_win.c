/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unix_only_win.c - the access features that Windows zeusd does not have,
 * as the device half's warden (warden.h) and the shared handlers see them
 * when they are off: the node policy (policy.h; grants to Unix users and
 * groups on the Unix socket), the audit log (audit.h; not ported yet),
 * and what GPU leases stand on: the holders' pidfds (pidwatch.h), the
 * lease journal's files (journal.h) and the Slurm job steps
 * (slurmjobs.h). cli.c refuses --policy-file, --gpu-leases, --audit-log
 * and --state-dir on Windows at startup with a clear message, so no
 * policy, lease, ledger or log exists and every call here is the "feature
 * off" answer the Linux modules give for the same state: nothing is
 * refused, nothing is recorded. docs/windows.md lists them.
 */
#include <errno.h>
#include <string.h>

#include "access/audit.h"
#include "access/journal.h"
#include "access/pidwatch.h"
#include "access/policy.h"
#include "access/slurmjobs.h"

/* ---- policy.h: no policy (the Unix socket's; there is none here) ------- */

struct policy *
policy_holder_read(struct policy_holder *h)
{
	(void)h;
	return NULL;
}

void
policy_holder_done(struct policy_holder *h)
{
	(void)h;
}

void
policy_peer_init(struct policy_peer *pp, uid_t uid, const struct identity *id)
{
	(void)id;
	memset(pp, 0, sizeof(*pp));
	pp->uid = uid;
}

group_set
policy_scopes(const struct policy *p, const struct policy_peer *pp)
{
	(void)p;
	(void)pp;
	return 0;		/* no grants: no policy applies to anyone */
}

bool
policy_allows(const struct policy *p, const struct policy_peer *pp,
    enum api_group g, unsigned gpu)
{
	(void)p;
	(void)pp;
	(void)g;
	(void)gpu;
	return false;
}

bool
policy_slurm_confine(const struct policy *p)
{
	(void)p;
	return false;
}

unsigned
policy_max_leased_gpus(const struct policy *p)
{
	(void)p;
	return 0;		/* no leases to bound */
}

/* ---- audit.h: no audit log ---------------------------------------------- */

bool
audit_enabled(void)
{
	return false;
}

bool
audit_ready(void)
{
	return true;		/* --audit-required cannot be given here */
}

bool
audit_down_now(void)
{
	return false;
}

void
audit_count_refused(void)
{
}

int
audit_refusal(struct zerr *err)
{
	/* never asked: audit_ready() holds here */
	return zerr_set(err, ZERR_UNAVAILABLE, "no audit log on Windows");
}

unsigned long
audit_refused_writes(void)
{
	return 0;
}

unsigned long
audit_failures(void)
{
	return 0;
}

void
audit_write(const struct audit_who *w, unsigned gpu, const char *op,
    const char *before, const char *requested, const char *error,
    const char *reason)
{
	(void)w;
	(void)gpu;
	(void)op;
	(void)before;
	(void)requested;
	(void)error;
	(void)reason;
}

void
audit_write_lease(const struct audit_who *w, unsigned gpu,
    const struct audit_lease *le)
{
	(void)w;
	(void)gpu;
	(void)le;
}

/* ---- pidwatch.h: no pidfds (leases are refused at startup) ------------- */

int
pidwatch_open(pid_t pid)
{
	(void)pid;
	errno = ENOSYS;
	return -1;
}

bool
pidwatch_exited(int pidfd)
{
	(void)pidfd;
	return true;
}

int
pidwatch_create(void (*exited)(void *ctx, uint32_t tag),
    void (*tick)(void *ctx), void *ctx, struct pidwatch **out,
    struct zerr *err)
{
	(void)exited;
	(void)tick;
	(void)ctx;
	*out = NULL;
	return zerr_set(err, ZERR_INVALID, "GPU leases watch their holders' "
	    "processes through pidfds, which only Linux has");
}

void
pidwatch_tick_in(struct pidwatch *pw, unsigned ms)
{
	(void)pw;
	(void)ms;
}

int
pidwatch_add(struct pidwatch *pw, int pidfd, uint32_t tag, struct zerr *err)
{
	(void)pw;
	(void)pidfd;
	(void)tag;
	return zerr_set(err, ZERR_INVALID, "no pidfds on Windows");
}

void
pidwatch_remove(struct pidwatch *pw, int pidfd)
{
	(void)pw;
	(void)pidfd;
}

void
pidwatch_kick(struct pidwatch *pw)
{
	(void)pw;
}

int
pidwatch_start(struct pidwatch *pw, struct zerr *err)
{
	(void)pw;
	return zerr_set(err, ZERR_INVALID, "no pidfds on Windows");
}

void
pidwatch_destroy(struct pidwatch *pw)
{
	(void)pw;
}

/* ---- journal.h's files: no state directory (leases are refused) -------- */

int
journal_boot_id(char boot[JOURNAL_BOOT_LEN + 1], struct zerr *err)
{
	boot[0] = '\0';
	return zerr_set(err, ZERR_INVALID, "the lease journal (--state-dir) "
	    "is only supported on Linux");
}

int
journal_open_dir(const char *path, struct zerr *err)
{
	(void)path;
	return zerr_set(err, ZERR_INVALID, "the lease journal (--state-dir) "
	    "is only supported on Linux");
}

int
journal_save(int dirfd, const struct journal_rec *r, const char *boot,
    struct zerr *err)
{
	(void)dirfd;
	(void)r;
	(void)boot;
	return zerr_set(err, ZERR_UNAVAILABLE, "no lease journal on Windows");
}

int
journal_remove(int dirfd, unsigned gpu, struct zerr *err)
{
	(void)dirfd;
	(void)gpu;
	return zerr_set(err, ZERR_UNAVAILABLE, "no lease journal on Windows");
}

int
journal_load(int dirfd, unsigned gpu, const char *boot, struct journal_rec *r,
    enum journal_bad *bad, char *why, size_t whysz)
{
	(void)dirfd;
	(void)gpu;
	(void)boot;
	memset(r, 0, sizeof(*r));
	*bad = JOURNAL_OK;
	if (whysz > 0)
		why[0] = '\0';
	return 1;		/* no file */
}

int
journal_set_aside(int dirfd, unsigned gpu)
{
	(void)dirfd;
	(void)gpu;
	return -1;
}

int
journal_rename(int dirfd, const char *from, const char *to)
{
	(void)dirfd;
	(void)from;
	(void)to;
	return -1;
}

int
journal_replace(int dirfd, const char *name, const char *buf, size_t len)
{
	(void)dirfd;
	(void)name;
	(void)buf;
	(void)len;
	return ENOSYS;
}

int
journal_read_private(int dirfd, const char *name, char *buf, size_t size,
    size_t *n, enum journal_bad *bad, char *why, size_t whysz)
{
	(void)dirfd;
	(void)name;
	(void)buf;
	(void)size;
	*n = 0;
	*bad = JOURNAL_OK;
	if (whysz > 0)
		why[0] = '\0';
	return 1;		/* no file */
}

/* ---- slurmjobs.h: no job steps (they come from the Slurm plugin) ------- */

int
slurmjobs_create(const char *root, unsigned grace_s, struct slurmjobs **out,
    struct zerr *err)
{
	(void)root;
	(void)grace_s;
	(void)err;
	*out = NULL;		/* an empty table: no step holds a GPU */
	return 0;
}

void
slurmjobs_destroy(struct slurmjobs *t)
{
	(void)t;
}

int
slurmjobs_start(struct slurmjobs *t, uint32_t job, uint32_t step,
    uid_t uid, uint64_t gpus, pid_t pid, struct zerr *err)
{
	(void)t;
	(void)job;
	(void)step;
	(void)uid;
	(void)gpus;
	(void)pid;
	return zerr_set(err, ZERR_INVALID, "Slurm job steps are tracked by "
	    "their cgroups, which only Linux has");
}

bool
slurmjobs_end(struct slurmjobs *t, uint32_t job, uint32_t step)
{
	(void)t;
	(void)job;
	(void)step;
	return false;
}

int
slurmjobs_judge(struct slurmjobs *t, unsigned gpu,
    const struct slurmjobs_writer *w, struct zerr *err)
{
	(void)t;
	(void)gpu;
	(void)w;
	(void)err;
	return 0;		/* no step holds any GPU */
}
