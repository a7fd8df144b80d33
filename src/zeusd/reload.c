/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.c - SIGHUP reload (see reload.h).
 *
 * The new file is loaded and checked completely before anything is
 * swapped, so a failure never leaves half a configuration. The swap itself
 * is safe under running requests by construction of each object:
 *   - the key (auth_key_replace): the struct srv->ctx.key points to never
 *     moves; its bytes are swapped under a read-write lock that the HTTP
 *     thread holds only while keying an HMAC, and the old bytes are wiped
 *     and freed once the write lock is released;
 *   - the overrides (overrides_swap): reference-counted; a GPU write takes
 *     a reference for its whole run, so a command already running finishes
 *     under the file it started with, and the last user frees the old one.
 * Neither a key nor overrides can be added or removed by a reload: auth on
 * or off and the override wrapper are decided at startup.
 *
 * A request is decided under the key and policy of its time; a power
 * stream is one request that lasts, so after a changed key or a reloaded
 * policy the open streams are decided again (reload_streams): those the
 * new ones would not open end at their next event or keepalive.
 */
#include "zeusd/reload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "overrides/overrides.h"
#include "access/audit.h"
#include "http/tokens.h"
#include "access/auth.h"
#include "node/config.h"
#include "node/node.h"
#include "access/policy.h"
#include "http/server.h"
#include "api/streams.h"

/* One file that did not reload: its warn line; returns 1 (a failure). */
static int
reload_failed(const char *path, const char *what, const char *kept,
    const char *error)
{
	char qp[600], qe[2 * ZERR_MSG_MAX];

	zlog(ZLOG_WARN, "reload_failed", "file=%s what=%s error=%s "
	    "msg=\"kept the previous %s\"", zlog_quote(qp, sizeof(qp), path),
	    what, zlog_quote(qe, sizeof(qe), error), kept);
	return 1;
}

/* ---- Open streams ------------------------------------------------------ */

struct reload_streams {
	bool key_changed;
	const struct policy *pol;	/* NULL: the policy did not reload */
};

/* Would the new key and policy open this stream? (request.c's checks) */
static bool
reload_stream_keeps(void *arg, const struct streams_grant *g,
    enum streams_kind kind, const unsigned *idx, unsigned n)
{
	const struct reload_streams *rs = arg;

	/* a token that verified under the old key does not under a new one */
	if (rs->key_changed && g->by_token)
		return false;
	if (rs->pol == NULL || !g->by_policy)
		return true;
	if (!(policy_scopes(rs->pol, g->pp) & GROUP_BIT(g->group)))
		return false;
	for (unsigned i = 0; kind == STREAMS_GPU && i < n; i++)
		if (!policy_allows(rs->pol, g->pp, (enum api_group)g->group,
		    idx[i]))
			return false;
	return true;
}

/* Either process: the one holding the streams (the network process). */
static void
reload_streams(struct server *srv, bool key_changed, bool policy)
{
	struct reload_streams rs = { .key_changed = key_changed };
	unsigned n;

	if (srv->ctx.streams == NULL || (!key_changed && !policy))
		return;
	if (policy)
		rs.pol = policy_holder_read(srv->ctx.policy);
	n = streams_revoke(srv->ctx.streams, reload_stream_keeps, &rs);
	if (policy)
		policy_holder_done(srv->ctx.policy);
	if (n > 0)
		zlog(ZLOG_INFO, "streams_revoked", "count=%u cause=%s "
		    "msg=\"open power streams the reloaded %s would refuse "
		    "end at their next event\"", n, policy ? "policy" : "key",
		    policy ? "policy" : "key");
}

/* ---- The key and the policy ----------------------------------------------- */

/* A loaded key takes the place of the old one (either process). */
static void
reload_key_apply(const struct zeusd_config *cfg, struct server *srv,
    struct auth_key *fresh)
{
	char qp[600];
	bool changed = auth_key_replace(srv->ctx.key, fresh);

	zlog(ZLOG_INFO, "signing_key_reloaded", "file=%s changed=%s%s",
	    zlog_quote(qp, sizeof(qp), cfg->signing_key_path),
	    changed ? "true" : "false", changed ? " msg=\"tokens signed with "
	    "the previous key are refused from now on\"" : "");
	reload_streams(srv, changed, false);
}

/* The node policy: swapped whole; a request decides under one or the other. */
static void
reload_policy_apply(const struct zeusd_config *cfg, struct server *srv,
    struct policy *fresh)
{
	char qp[600];

	zlog(ZLOG_INFO, "policy_reloaded", "file=%s grants=%u",
	    zlog_quote(qp, sizeof(qp), cfg->policy_file), policy_grants(fresh));
	policy_free(policy_holder_swap(srv->ctx.policy, fresh));
	reload_streams(srv, false, true);
}

/* "set_power_limit,set_persistence_mode" of the operations `ov` has. */
static void
reload_ops(const struct overrides *ov, const struct overrides *not_in,
    char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++) {
		if (!overrides_has(ov, (enum gpu_write_op)op) ||
		    (not_in != NULL && overrides_has(not_in,
		    (enum gpu_write_op)op)))
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s%s",
		    n > 0 ? "," : "", gpu_write_op_name((enum gpu_write_op)op));
		if (n >= size) {
			buf[size - 1] = '\0';
			return;
		}
	}
}

static int
reload_overrides(const struct zeusd_config *cfg, struct node *node)
{
	struct overrides *fresh, *old;
	struct zerr err;
	char qp[600], now[400], added[400], gone[400];

	if (cfg->gpu_command_overrides == NULL ||
	    !(cfg->enabled & GROUP_BIT(GROUP_GPU_CONTROL)))
		return 0;	/* ignored at startup (overrides_ignored) */
	zlog_quote(qp, sizeof(qp), cfg->gpu_command_overrides);
	if (overrides_load(cfg->gpu_command_overrides, &fresh, &err) != 0)
		goto fail;
	/* the startup rule (main.c): gpu-control without root needs them */
	if (!cfg->simulate && geteuid() != 0 && overrides_count(fresh) == 0) {
		overrides_free(fresh);
		zerr_set(&err, ZERR_FORBIDDEN, "the file overrides no "
		    "operation, and gpu-control without root needs at least "
		    "one");
		goto fail;
	}
	if (overrides_swap(&node->gpu, fresh, &old) != 0) {
		overrides_free(fresh);
		zerr_set(&err, ZERR_INTERNAL, "no override wrapper is in "
		    "place (no GPU backend was opened); restart zeusd");
		goto fail;
	}
	reload_ops(fresh, NULL, now, sizeof(now));
	reload_ops(fresh, old, added, sizeof(added));
	reload_ops(old, fresh, gone, sizeof(gone));
	node->overrides = overrides_count(fresh);
	overrides_free(old);	/* freed once no running write holds it */
	zlog(ZLOG_INFO, "overrides_reloaded", "file=%s operations=\"%s\" "
	    "added=\"%s\" removed=\"%s\" msg=\"commands already running "
	    "finish under the previous file\"", qp, now, added, gone);
	return 0;
fail:
	return reload_failed(cfg->gpu_command_overrides,
	    "gpu_command_overrides", "overrides", err.msg);
}

/* ---- The split daemon (docs/design.md, "Two processes") ----------------- */


int
reload_memfd(const char *name, const char *buf, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The policy for the network process: loaded and trust-checked here, then
 * handed over as numeric text (policy.h).
 */
static int
reload_policy_fd(const struct zeusd_config *cfg, struct policy_holder *own,
    int *failed)
{
	struct policy *p;
	struct zerr err;
	size_t len;
	char *text;
	int fd, rc;

	if (cfg->policy_file == NULL)
		return -1;
	if (policy_load(cfg->policy_file, &p, &err) != 0)
		goto fail;
	rc = policy_format_numeric(p, &text, &len, &err);
	if (rc != 0) {
		policy_free(p);
		goto fail;
	}
	/* the device process decides writes with the same policy */
	if (own != NULL)
		p = policy_holder_swap(own, p);
	policy_free(p);
	fd = reload_memfd("zeusd-policy", text, len);
	free(text);
	if (fd >= 0)
		return fd;
	zerr_set(&err, ZERR_INTERNAL, "cannot pass it on: %s",
	    strerror(errno));
fail:
	*failed += reload_failed(cfg->policy_file, "policy_file", "policy",
	    err.msg);
	return -1;
}

/*
 * The device process's own key, replaced in place (the warden's pointer
 * stays good); *changed when the bytes differ. Its failures.
 */
static int
reload_device_key(const struct zeusd_config *cfg, struct auth_key *key,
    bool *changed)
{
	struct auth_key *fresh;
	struct zerr err;
	char qp[600];

	*changed = false;
	if (cfg->signing_key_path == NULL || key == NULL)
		return 0;
	if (auth_key_load_trusted(cfg->signing_key_path, &fresh, &err) != 0)
		return reload_failed(cfg->signing_key_path, "signing_key",
		    "key", err.msg);
	*changed = auth_key_replace(key, fresh);
	zlog(ZLOG_INFO, "signing_key_reloaded", "file=%s changed=%s%s",
	    zlog_quote(qp, sizeof(qp), cfg->signing_key_path),
	    *changed ? "true" : "false", *changed ? " msg=\"tokens signed with "
	    "the previous key are refused from now on\"" : "");
	return 0;
}

int
reload_device(const struct zeusd_config *cfg, struct node *node,
    struct policy_holder *policy, struct auth_key *key, bool *key_changed,
    int fds[RELOAD_NFDS])
{
	int failed = reload_overrides(cfg, node);

	/* the key stays here: the network process only hears it changed */
	fds[RELOAD_FD_KEY] = -1;
	failed += reload_device_key(cfg, key, key_changed);
	fds[RELOAD_FD_POLICY] = reload_policy_fd(cfg, policy, &failed);
	/*
	 * Ours is reopened (the device process writes every line); the
	 * network process gets a read-only fd, for free-space checks only
	 */
	fds[RELOAD_FD_AUDIT] = -1;
	if (cfg->audit_log != NULL && audit_reopen() == 0 &&
	    (fds[RELOAD_FD_AUDIT] = audit_open_readonly()) < 0)
		zlog(ZLOG_WARN, "audit_not_passed", "msg=\"the network process "
		    "keeps checking the previous file's free space\"");
	failed += cfg->audit_log != NULL && fds[RELOAD_FD_AUDIT] < 0;
	return failed;
}

int
reload_network(const struct zeusd_config *cfg, struct server *srv,
    const int fds[RELOAD_NFDS], bool key_changed)
{
	struct auth_key *key;
	struct policy *pol;
	struct zerr err;
	int failed = 0;

	/* as in reload_run: before the log lines of the reload */
	atomic_fetch_add(&srv->ctx.identity_gen, 1);

	/* the device process's key changed: every verdict kept is void */
	if (key_changed && srv->ctx.tokens != NULL) {
		tokens_flush(srv->ctx.tokens);
		reload_streams(srv, true, false);
	}
	if (fds[RELOAD_FD_KEY] >= 0 && srv->ctx.key != NULL) {
		if (auth_key_load_fd(fds[RELOAD_FD_KEY],
		    cfg->signing_key_path, &key, &err) != 0)
			failed += reload_failed(cfg->signing_key_path,
			    "signing_key", "key", err.msg);
		else
			reload_key_apply(cfg, srv, key);
	}
	/* the device process's numeric text: no names, no NSS */
	if (fds[RELOAD_FD_POLICY] >= 0 && srv->ctx.policy != NULL) {
		if (policy_read_fd(fds[RELOAD_FD_POLICY], cfg->policy_file,
		    &pol, &err) != 0)
			failed += reload_failed(cfg->policy_file,
			    "policy_file", "policy", err.msg);
		else
			reload_policy_apply(cfg, srv, pol);
	}
	if (fds[RELOAD_FD_AUDIT] >= 0)
		audit_replace_fd(fds[RELOAD_FD_AUDIT]);	/* takes it */
	return failed;
}
