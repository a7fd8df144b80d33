/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.c - loading and applying the node policy file (see policy.h).
 *
 * The file is validated whole before it is used: every table must be a
 * [[grant]], every key known and of the right type, every name resolvable,
 * every scope known and every GPU id in range; the first fault fails the
 * load with its line. Lookups of names happen here, at load, so a request
 * never waits on NSS for anything but its own peer's groups (once per
 * connection, identity.h). A split daemon's network process, which cannot
 * look up names, gets the loaded policy from the device process as
 * numeric ids (policy_format_numeric).
 */
#include "access/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/pathwalk.h"
#include "overrides/toml.h"

#define POLICY_MAX_IDS 256	/* users or groups in one grant */
#define POLICY_NSS_BUF 16384

struct policy_grant {
	uid_t *uids;
	size_t nuids;
	gid_t *gids;
	size_t ngids;
	group_set scopes;
	bool all_gpus;
	uint64_t gpus[POLICY_MAX_GPUS / 64];
};

struct policy {
	struct policy_grant *grants;
	size_t ngrants;
	bool slurm_confine;		/* slurm_jobs = "confine" */
	unsigned max_leased;		/* max_leased_gpus; 0: unlimited */
};

static int policy_fail(struct zerr *err, const char *name, unsigned line,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
policy_fail(struct zerr *err, const char *name, unsigned line,
    const char *fmt, ...)
{
	/*
	 * As large as the zerr: whatever vsnprintf cuts here (possibly in the
	 * middle of a UTF-8 character) lies beyond where zerr_set cuts the
	 * whole message, at a character boundary.
	 */
	char msg[ZERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return zerr_set(err, ZERR_INVALID, "%s: line %u: %s", name, line, msg);
}

static int
policy_name_to_uid(const char *s, uid_t *out)
{
	struct passwd pw, *res = NULL;
	char buf[POLICY_NSS_BUF];

	if (getpwnam_r(s, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
		return -1;
	*out = pw.pw_uid;
	return 0;
}

static int
policy_name_to_gid(const char *s, gid_t *out)
{
	struct group gr, *res = NULL;
	char buf[POLICY_NSS_BUF];

	if (getgrnam_r(s, &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
		return -1;
	*out = gr.gr_gid;
	return 0;
}

/* users = [...] or groups = [...]: names or numeric ids, into ids[]. */
static int
policy_load_ids(const struct toml_key *k, bool users, unsigned **out,
    size_t *n, const char *name, struct zerr *err)
{
	const char *what = users ? "users" : "groups";
	unsigned *ids;

	if (k->v.type != TOML_ARRAY)
		return policy_fail(err, name, k->line, "%s must be an array of "
		    "names or numeric ids", what);
	if (k->v.n_items > POLICY_MAX_IDS)
		return policy_fail(err, name, k->line, "more than %d %s in "
		    "one grant", POLICY_MAX_IDS, what);
	if ((ids = calloc(k->v.n_items + 1, sizeof(*ids))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	*out = ids;
	for (size_t i = 0; i < k->v.n_items; i++) {
		const struct toml_value *v = &k->v.items[i];

		if (v->type == TOML_INT) {
			/* (uid_t)-1 means "no change" to the kernel: never one */
			if (v->i < 0 || v->i >= UINT32_MAX)
				return policy_fail(err, name, v->line, "%s id "
				    "%lld is out of range", what,
				    (long long)v->i);
			ids[i] = (unsigned)v->i;
		} else if (users ? policy_name_to_uid(v->str,
		    (uid_t *)&ids[i]) != 0 : policy_name_to_gid(v->str,
		    (gid_t *)&ids[i]) != 0) {
			return policy_fail(err, name, v->line, "unknown %s "
			    "'%.64s'", users ? "user" : "group", v->str);
		}
	}
	*n = k->v.n_items;
	return 0;
}

static int
policy_load_scopes(struct policy_grant *g, const struct toml_key *k,
    const char *name, struct zerr *err)
{
	if (k->v.type != TOML_ARRAY || k->v.n_items == 0)
		return policy_fail(err, name, k->line, "scopes must be a "
		    "non-empty array of scope names");
	for (size_t i = 0; i < k->v.n_items; i++) {
		const struct toml_value *v = &k->v.items[i];
		enum api_group sc;

		if (v->type != TOML_STRING || group_from_name(v->str,
		    strlen(v->str), &sc) != 0)
			return policy_fail(err, name, v->line, "unknown scope "
			    "%s%.64s%s (expected gpu-control, gpu-read, "
			    "cpu-read or metrics)", v->type == TOML_STRING ?
			    "'" : "", v->type == TOML_STRING ? v->str :
			    "(an integer)", v->type == TOML_STRING ? "'" : "");
		g->scopes |= GROUP_BIT(sc);
	}
	return 0;
}

static int
policy_load_gpus(struct policy_grant *g, const struct toml_key *k,
    const char *name, struct zerr *err)
{
	if (k->v.type != TOML_ARRAY || k->v.n_items == 0)
		return policy_fail(err, name, k->line, "gpus must be a "
		    "non-empty array of GPU ids (leave it out for every GPU)");
	for (size_t i = 0; i < k->v.n_items; i++) {
		const struct toml_value *v = &k->v.items[i];

		if (v->type != TOML_INT || v->i < 0 ||
		    v->i >= POLICY_MAX_GPUS)
			return policy_fail(err, name, v->line, "GPU ids must "
			    "be integers from 0 to %d", POLICY_MAX_GPUS - 1);
		g->gpus[v->i / 64] |= UINT64_C(1) << (v->i % 64);
	}
	return 0;
}

static int
policy_load_grant(struct policy_grant *g, const struct toml_table *t,
    const char *name, struct zerr *err)
{
	bool have_scopes = false;

	if (strcmp(t->name, "grant") != 0 || !t->array)
		return policy_fail(err, name, t->line, "unknown table [%s] "
		    "(expected [[grant]])", t->name);
	g->all_gpus = true;
	for (size_t i = 0; i < t->n_keys; i++) {
		const struct toml_key *k = &t->keys[i];
		int rc;

		if (strcmp(k->name, "users") == 0) {
			rc = policy_load_ids(k, true, (unsigned **)&g->uids,
			    &g->nuids, name, err);
		} else if (strcmp(k->name, "groups") == 0) {
			rc = policy_load_ids(k, false, (unsigned **)&g->gids,
			    &g->ngids, name, err);
		} else if (strcmp(k->name, "scopes") == 0) {
			rc = policy_load_scopes(g, k, name, err);
			have_scopes = true;
		} else if (strcmp(k->name, "gpus") == 0) {
			g->all_gpus = false;
			rc = policy_load_gpus(g, k, name, err);
		} else {
			rc = policy_fail(err, name, k->line, "unknown key '%s' "
			    "in [[grant]] (expected users, groups, scopes or "
			    "gpus)", k->name);
		}
		if (rc < 0)
			return -1;
	}
	if (!have_scopes)
		return policy_fail(err, name, t->line, "[[grant]] has no "
		    "scopes");
	if (g->nuids == 0 && g->ngids == 0)
		return policy_fail(err, name, t->line, "[[grant]] names no "
		    "users and no groups");
	return 0;
}

/* The keys before any [[grant]]: slurm_jobs and max_leased_gpus. */
static int
policy_load_top(struct policy *p, const struct toml_table *t,
    const char *name, struct zerr *err)
{
	for (size_t i = 0; i < t->n_keys; i++) {
		const struct toml_key *k = &t->keys[i];

		if (strcmp(k->name, "max_leased_gpus") == 0) {
			if (k->v.type != TOML_INT || k->v.i < 1 ||
			    k->v.i > POLICY_MAX_GPUS)
				return policy_fail(err, name, k->line,
				    "max_leased_gpus must be an integer from "
				    "1 to %d", POLICY_MAX_GPUS);
			p->max_leased = (unsigned)k->v.i;
			continue;
		}
		if (strcmp(k->name, "slurm_jobs") != 0)
			return policy_fail(err, name, k->line, "key '%s' must "
			    "be inside a [[grant]] (the only keys outside one "
			    "are slurm_jobs and max_leased_gpus)", k->name);
		if (k->v.type != TOML_STRING || (strcmp(k->v.str, "off") != 0 &&
		    strcmp(k->v.str, "confine") != 0))
			return policy_fail(err, name, k->line, "slurm_jobs must "
			    "be \"confine\" or \"off\"");
		p->slurm_confine = strcmp(k->v.str, "confine") == 0;
	}
	return 0;
}

int
policy_parse(const char *text, size_t len, const char *name,
    struct policy **out, struct zerr *err)
{
	struct toml_doc *doc;
	struct policy *p;
	struct zerr terr;

	*out = NULL;
	if (toml_parse_ext(text, len, TOML_ALLOW_TABLE_ARRAYS |
	    TOML_ALLOW_INT_ITEMS, &doc, &terr) < 0)
		return zerr_set(err, ZERR_INVALID, "%s: %s", name, terr.msg);
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (doc->n_tables > 1 && (p->grants = calloc(doc->n_tables - 1,
	    sizeof(*p->grants))) == NULL)) {
		free(p);
		toml_free(doc);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (policy_load_top(p, &doc->tables[0], name, err) != 0)
		goto fail;
	for (size_t i = 1; i < doc->n_tables; i++) {
		p->ngrants++;
		if (policy_load_grant(&p->grants[i - 1], &doc->tables[i], name,
		    err) < 0)
			goto fail;
	}
	toml_free(doc);
	*out = p;
	return 0;
fail:
	toml_free(doc);
	policy_free(p);
	return -1;
}

int
policy_load(const char *path, struct policy **out, struct zerr *err)
{
	int fd, rc;

	*out = NULL;
	/* nobody else may swap what the path names (pathwalk.h) */
	if (pathwalk_trusted(path, "--policy-file", err) != 0)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, ZERR_INVALID, "%s: cannot open: %s", path,
		    strerror(errno));
	rc = policy_load_fd(fd, path, geteuid(), out, err);
	close(fd);
	return rc;
}

int
policy_load_fd(int fd, const char *path, uid_t owner, struct policy **out,
    struct zerr *err)
{
	struct stat st;

	*out = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return zerr_set(err, ZERR_INVALID, "%s: not a regular file",
		    path);
	/* it decides who may change GPU settings: only root may edit it */
	if (!fileio_owner_only(&st, owner))
		return zerr_set(err, ZERR_FORBIDDEN, "%s: owned by uid %u with "
		    "mode %04o; the policy file must be owned by root (or the "
		    "daemon's user) and writable by no one else", path,
		    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return policy_read_fd(fd, path, out, err);
}

int
policy_read_fd(int fd, const char *path, struct policy **out,
    struct zerr *err)
{
	char *buf;
	ssize_t n;
	int rc;

	*out = NULL;
	if ((buf = malloc(TOML_MAX_INPUT + 1)) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	n = fileio_read_all(fd, buf, TOML_MAX_INPUT + 1);
	if (n < 0 || n > TOML_MAX_INPUT) {
		free(buf);
		return zerr_set(err, ZERR_INVALID, n < 0 ? "%s: cannot read" :
		    "%s: larger than 1 MiB", path);
	}
	rc = policy_parse(buf, (size_t)n, path, out, err);
	free(buf);
	return rc;
}

void
policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->ngrants; i++) {
		free(p->grants[i].uids);
		free(p->grants[i].gids);
	}
	free(p->grants);
	free(p);
}

unsigned
policy_grants(const struct policy *p)
{
	return (unsigned)p->ngrants;
}

bool
policy_slurm_confine(const struct policy *p)
{
	return p != NULL && p->slurm_confine;
}

unsigned
policy_max_leased_gpus(const struct policy *p)
{
	return p != NULL ? p->max_leased : 0;
}

void
policy_peer_init(struct policy_peer *pp, uid_t uid, const struct identity *id)
{
	unsigned n = id->ngids;

	if (n == 0 || n > POLICY_MAX_PEER_GROUPS)
		n = n == 0 ? 1 : POLICY_MAX_PEER_GROUPS;
	pp->uid = uid;
	memcpy(pp->gids, id->gids, n * sizeof(pp->gids[0]));
	pp->ngids = n;
}

/* `key = [1, 2]` of a grant's ids; nothing when there are none. */
static void
policy_print_ids(FILE *f, const char *key, const unsigned *ids, size_t n)
{
	if (n == 0)
		return;
	fprintf(f, "%s = [", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%u", i ? ", " : "", ids[i]);
	fputs("]\n", f);
}

int
policy_format_numeric(const struct policy *p, char **out, size_t *len,
    struct zerr *err)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	bool failed;

	if (f == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	if (p->slurm_confine)
		fputs("slurm_jobs = \"confine\"\n", f);
	if (p->max_leased > 0)
		fprintf(f, "max_leased_gpus = %u\n", p->max_leased);
	for (size_t i = 0; i < p->ngrants; i++) {
		const struct policy_grant *g = &p->grants[i];
		const char *sep = "";

		fputs("[[grant]]\n", f);
		policy_print_ids(f, "users", (const unsigned *)g->uids,
		    g->nuids);
		policy_print_ids(f, "groups", (const unsigned *)g->gids,
		    g->ngids);
		fputs("scopes = [", f);
		for (int sc = 0; sc < GROUP_COUNT; sc++)
			if (g->scopes & GROUP_BIT(sc)) {
				fprintf(f, "%s\"%s\"", sep,
				    group_name((enum api_group)sc));
				sep = ", ";
			}
		fputs("]\n", f);
		if (g->all_gpus)
			continue;
		sep = "";
		fputs("gpus = [", f);
		for (unsigned k = 0; k < POLICY_MAX_GPUS; k++)
			if (g->gpus[k / 64] >> (k % 64) & 1) {
				fprintf(f, "%s%u", sep, k);
				sep = ", ";
			}
		fputs("]\n", f);
	}
	failed = ferror(f) != 0;
	if (fclose(f) != 0 || failed) {
		free(buf);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	*out = buf;
	*len = n;
	return 0;
}

static bool
policy_grant_names(const struct policy_grant *g, const struct policy_peer *pp)
{
	for (size_t i = 0; i < g->nuids; i++)
		if (g->uids[i] == pp->uid)
			return true;
	for (size_t i = 0; i < g->ngids; i++)
		for (unsigned j = 0; j < pp->ngids; j++)
			if (g->gids[i] == pp->gids[j])
				return true;
	return false;
}

group_set
policy_scopes(const struct policy *p, const struct policy_peer *pp)
{
	group_set s = 0;

	if (pp->uid == 0)
		return GROUP_DEFAULT_SET;
	for (size_t i = 0; i < p->ngrants; i++)
		if (policy_grant_names(&p->grants[i], pp))
			s |= p->grants[i].scopes;
	return s;
}

bool
policy_allows(const struct policy *p, const struct policy_peer *pp,
    enum api_group g, unsigned gpu)
{
	if (pp->uid == 0)
		return true;
	for (size_t i = 0; i < p->ngrants; i++) {
		const struct policy_grant *gr = &p->grants[i];

		if (!(gr->scopes & GROUP_BIT(g)) ||
		    !policy_grant_names(gr, pp))
			continue;
		if (gr->all_gpus || (gpu < POLICY_MAX_GPUS &&
		    (gr->gpus[gpu / 64] >> (gpu % 64) & 1)))
			return true;
	}
	return false;
}

struct policy_holder {
	pthread_rwlock_t lock;
	struct policy *cur;
};

int
policy_holder_new(struct policy *p, struct policy_holder **out)
{
	struct policy_holder *h = calloc(1, sizeof(*h));

	if (h == NULL || pthread_rwlock_init(&h->lock, NULL) != 0) {
		free(h);
		return -1;
	}
	h->cur = p;
	*out = h;
	return 0;
}

struct policy *
policy_holder_read(struct policy_holder *h)
{
	(void)pthread_rwlock_rdlock(&h->lock);
	return h->cur;
}

void
policy_holder_done(struct policy_holder *h)
{
	(void)pthread_rwlock_unlock(&h->lock);
}

struct policy *
policy_holder_swap(struct policy_holder *h, struct policy *fresh)
{
	struct policy *old;

	(void)pthread_rwlock_wrlock(&h->lock);
	old = h->cur;
	h->cur = fresh;
	(void)pthread_rwlock_unlock(&h->lock);
	return old;
}

void
policy_holder_free(struct policy_holder *h)
{
	if (h == NULL)
		return;
	policy_free(h->cur);
	(void)pthread_rwlock_destroy(&h->lock);
	free(h);
}
