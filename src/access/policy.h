/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - node policy for shared GPU nodes (--policy-file): which API
 * scopes, and on which GPUs, each local user holds on the Unix socket, the
 * way a token's scopes decide it on TCP. See docs/security.md "Shared
 * nodes".
 *
 * The file is the overrides file's strict TOML subset (toml.h) plus arrays
 * of tables and integer array items:
 *
 *   [[grant]]
 *   users = ["alice", 1001]      # names or numeric uids
 *   groups = ["mlusers"]         # names or numeric gids
 *   scopes = ["gpu-read", "gpu-control"]
 *   gpus = [0, 1]                # optional; every GPU when absent
 *
 * Two keys may come before the grants:
 *
 *   slurm_jobs = "confine"       # or "off", the default
 *   max_leased_gpus = 2          # 1..256; absent: no limit
 *
 * "confine": the GPUs a Slurm job step holds on this node, as zeus_spank.so
 * registers them (POST /slurm/step_start, access/slurmjobs.h), may be
 * changed only by that step's processes, and those processes may change
 * no other GPU (docs/slurm.md, "Confining jobs to their GPUs").
 *
 * max_leased_gpus: under --gpu-leases, the most GPUs one non-root user may
 * hold leases on at once; a write that would lease one more is refused
 * (409), so one user cannot hold every GPU of a shared node for as long as
 * one of its processes lives (docs/security.md, "Shared nodes").
 *
 * Names are resolved once, at load (and reload): an unknown user or group
 * is an error with its line, like an unknown key or a bad type. A peer
 * holds the union of the grants naming its uid, its primary gid or one of
 * its supplementary groups. Root (uid 0) holds everything; the policy never
 * applies to it.
 */
#ifndef ZEUS_POLICY_H
#define ZEUS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"
#include "common/identity.h"
#include "node/groups.h"

#define POLICY_MAX_GPUS 256		/* GPU ids 0..255 */
#define POLICY_MAX_PEER_GROUPS IDENTITY_MAX_GROUPS

struct policy;

/* A peer's identity as the policy sees it: uid and every gid it has. */
struct policy_peer {
	uid_t uid;
	unsigned ngids;
	gid_t gids[POLICY_MAX_PEER_GROUPS];
};

/*
 * Parses a policy file's text; `name` prefixes messages ("PATH: line N:
 * ..."). Returns 0 with *out set, or -1 with ZERR_INVALID.
 */
int policy_parse(const char *text, size_t len, const char *name,
    struct policy **out, struct zerr *err);

/*
 * Opens, trust-checks (a regular file, owned by root or the daemon's user,
 * not group- or world-writable) and parses `path`.
 */
int policy_load(const char *path, struct policy **out, struct zerr *err);

/*
 * The same from a file already open (not closed), whose owner may be root
 * or `owner` (the daemon's user before any privilege drop).
 */
int policy_load_fd(int fd, const char *path, uid_t owner, struct policy **out,
    struct zerr *err);

/*
 * Reads and parses an open file (at most 1 MiB) without the trust check:
 * for text that a trusted process produced (policy_format_numeric).
 */
int policy_read_fd(int fd, const char *name, struct policy **out,
    struct zerr *err);

void policy_free(struct policy *p);

/* Number of grants. */
unsigned policy_grants(const struct policy *p);

/* Whether slurm_jobs = "confine" (false for NULL: no policy). */
bool policy_slurm_confine(const struct policy *p);

/* max_leased_gpus, or 0 when unlimited (and for NULL: no policy). */
unsigned policy_max_leased_gpus(const struct policy *p);

/*
 * Fills `pp` for a uid and the groups identity_lookup found for it (the
 * primary gid first; only it when the uid has no passwd entry).
 */
void policy_peer_init(struct policy_peer *pp, uid_t uid,
    const struct identity *id);

/*
 * The policy as a file of the same grammar with every user and group as a
 * numeric id, in a malloc()ed string (*out, *len; NUL-terminated) that
 * policy_parse turns into the same policy without any name lookup: the
 * device process of a split daemon loads the real file (names resolved
 * through NSS, trust-checked) and hands this to the network process,
 * which has no filesystem. Returns 0, or -1 with `err` (out of memory).
 */
int policy_format_numeric(const struct policy *p, char **out, size_t *len,
    struct zerr *err);

/* The scopes the peer holds (every one for root). */
group_set policy_scopes(const struct policy *p, const struct policy_peer *pp);

/* Whether the peer holds scope `g` on GPU `gpu`. */
bool policy_allows(const struct policy *p, const struct policy_peer *pp,
    enum api_group g, unsigned gpu);

/*
 * The policy in force, swapped whole by SIGHUP (reload.c) while the HTTP
 * thread reads it: readers hold a read lock for one decision, the swap
 * takes the write lock only to exchange the pointer.
 */
struct policy_holder;

int policy_holder_new(struct policy *p, struct policy_holder **out);
struct policy *policy_holder_read(struct policy_holder *h);	/* locks */
void policy_holder_done(struct policy_holder *h);		/* unlocks */
/* Installs `fresh` and returns the previous policy (free it). */
struct policy *policy_holder_swap(struct policy_holder *h,
    struct policy *fresh);
void policy_holder_free(struct policy_holder *h);

#endif
