/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unix_only_win.c - the access features that Windows zeusd does not have,
 * as the shared handlers see them when they are off: the node policy
 * (policy.h; grants to Unix users and groups on the Unix socket) and
 * the audit log (audit.h; not ported yet). GPU leases, which are the
 * device process's (access/warden.h), are answered "not enabled" by the
 * one-process node (node.c). main_win.c refuses
 * --policy-file, --gpu-leases and --audit-log at startup with a clear
 * message, so no policy, ledger or log exists and every call here is the
 * "feature off" answer the Linux modules give for the same state: nothing
 * is refused, nothing is recorded. docs/windows.md lists them.
 */
#include <errno.h>
#include <string.h>

#include "access/audit.h"
#include "access/policy.h"

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
