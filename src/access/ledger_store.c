/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_store.c - the energy ledger's file (ledger_store.h): the sums it
 * keeps, its format and strict reader, and its load and save through the
 * lease journal's helpers (journal.h: the sum, the numbers, the private
 * read and the atomic replace).
 */
#include "access/ledger_store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define MAGIC "zeusd-ledger 1\n"
#define FILE_NAME "ledger"
#define FILE_ASIDE "ledger.refused"

/* ---- The sums -------------------------------------------------------- */

void
ledger_store_init(struct ledger_store *s, unsigned ngpu)
{
	memset(s, 0, sizeof(*s));
	s->ngpu = ngpu < LEDGER_STORE_GPUS ? ngpu : LEDGER_STORE_GPUS;
}

uint64_t
ledger_store_sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void
ledger_store_add(struct ledger_store *s, uint32_t uid, const char *name,
    unsigned gpu, uint64_t mj)
{
	struct ledger_store_user *u = NULL;

	if (gpu >= s->ngpu)
		return;
	for (unsigned i = 0; i < s->nusers && u == NULL; i++)
		if (s->users[i].uid == uid)
			u = &s->users[i];
	if (u == NULL && s->nusers == LEDGER_STORE_USERS)
		u = &s->users[LEDGER_STORE_USERS - 1];
	if (u == NULL) {
		u = &s->users[s->nusers++];
		memset(u, 0, sizeof(*u));
		if (s->nusers == LEDGER_STORE_USERS) {
			u->uid = LEDGER_STORE_OTHER;
			snprintf(u->name, sizeof(u->name), "(other)");
		} else {
			u->uid = uid;
			snprintf(u->name, sizeof(u->name), "%s",
			    name != NULL ? name : "");
		}
	}
	u->mj[gpu] = ledger_store_sat_add(u->mj[gpu], mj);
}

void
ledger_store_unleased(struct ledger_store *s, unsigned gpu, uint64_t mj)
{
	struct ledger_store_gpu *g;

	if (gpu >= s->ngpu)
		return;
	g = &s->gpu[gpu];
	/* a counter that went back (a driver reload) starts a new base */
	if (g->based && mj >= g->last_mj)
		g->unleased_mj = ledger_store_sat_add(g->unleased_mj,
		    mj - g->last_mj);
	g->based = true;
	g->last_mj = mj;
}

void
ledger_store_rebase(struct ledger_store *s, unsigned gpu, uint64_t mj)
{
	if (gpu >= s->ngpu)
		return;
	s->gpu[gpu].based = true;
	s->gpu[gpu].last_mj = mj;
}

void
ledger_store_unbase(struct ledger_store *s)
{
	for (unsigned i = 0; i < LEDGER_STORE_GPUS; i++) {
		s->gpu[i].based = false;
		s->gpu[i].last_mj = 0;
	}
}

/* ---- The format ------------------------------------------------------ */

int
ledger_store_format(const struct ledger_store *s, const char *boot, char *buf,
    size_t size)
{
	char sum[JOURNAL_SUM_HEX + 1];
	unsigned ngpu = s->ngpu < LEDGER_STORE_GPUS ? s->ngpu :
	    LEDGER_STORE_GPUS;
	size_t at = 0;
	bool ok;

	ok = journal_put(buf, size, &at, MAGIC "boot %.*s\ngpus %u\n",
	    JOURNAL_BOOT_LEN, boot, ngpu);
	for (unsigned i = 0; ok && i < ngpu; i++) {
		const struct ledger_store_gpu *g = &s->gpu[i];

		ok = g->based ? journal_put(buf, size, &at, "gpu %u %" PRIu64
		    " %" PRIu64 "\n", i, g->unleased_mj, g->last_mj) :
		    journal_put(buf, size, &at, "gpu %u %" PRIu64 " -\n", i,
		    g->unleased_mj);
	}
	for (unsigned u = 0; ok && u < s->nusers && u < LEDGER_STORE_USERS;
	    u++) {
		const struct ledger_store_user *lu = &s->users[u];
		size_t n = strnlen(lu->name, sizeof(lu->name) - 1);

		/* hex: a name is whatever the passwd entry says */
		ok = journal_put(buf, size, &at, "user %" PRIu32 " %s", lu->uid,
		    n == 0 ? "-" : "") &&
		    journal_put_hex(buf, size, &at, lu->name, n);
		for (unsigned i = 0; ok && i < ngpu; i++)
			ok = journal_put(buf, size, &at, " %" PRIu64,
			    lu->mj[i]);
		if (ok)
			ok = journal_put(buf, size, &at, "\n");
	}
	if (!ok)
		return -1;
	journal_sum(buf, at, sum);
	if (!journal_put(buf, size, &at, "sum %s\n", sum) ||
	    at > LEDGER_STORE_MAX_BYTES)
		return -1;
	return (int)at;
}

/* The next space-separated field of [*p, end): false when none. */
static bool
field(const char **p, const char *end, const char **f, const char **fend)
{
	const char *sp;

	if (*p >= end)
		return false;
	sp = memchr(*p, ' ', (size_t)(end - *p));
	*f = *p;
	*fend = sp != NULL ? sp : end;
	*p = sp != NULL ? sp + 1 : end;
	return sp == NULL || *p < end;	/* no trailing space */
}

/* A user's name: "-" (none) or lowercase hex of 1..63 bytes, no NUL. */
static bool
name_of(const char *v, const char *end, char *name)
{
	size_t n = (size_t)(end - v);

	if (n == 1 && *v == '-')
		return true;
	return journal_hex_text(v, end, name, LEDGER_STORE_NAME - 1) > 0;
}

/* The line [p, nl) that must start with `key` and a space: its value. */
static const char *
keyed(const char *p, const char *nl, const char *key)
{
	size_t k = strlen(key);

	if ((size_t)(nl - p) <= k || memcmp(p, key, k) != 0 || p[k] != ' ')
		return NULL;
	return p + k + 1;
}

static enum journal_bad
parse(const char *buf, size_t len, struct ledger_store *s, char *boot,
    char *why, size_t whysz)
{
	const char *p, *end = buf + len, *nl, *v, *f, *fe;
	uint64_t a, b;
	unsigned line = 0;

	if (len > LEDGER_STORE_MAX_BYTES)
		return journal_garbled(why, whysz,
		    "%zu bytes, more than %d", len,
		    LEDGER_STORE_MAX_BYTES);
	if (len < sizeof(MAGIC) - 1 || memcmp(buf, MAGIC, sizeof(MAGIC) - 1))
		return journal_garbled(why, whysz,
		    "no 'zeusd-ledger 1' header");
	for (p = buf + sizeof(MAGIC) - 1;; p = nl + 1, line++) {
		if (p >= end)
			return journal_garbled(why, whysz,
			    "truncated (no sum)");
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			return journal_garbled(why, whysz,
			    "truncated (a line without "
			    "its end)");
		if (line == 0) {
			if ((v = keyed(p, nl, "boot")) == NULL ||
			    !journal_boot_valid(v, (size_t)(nl - v)))
				return journal_garbled(why, whysz,
				    "no boot id");
			memcpy(boot, v, JOURNAL_BOOT_LEN);
			boot[JOURNAL_BOOT_LEN] = '\0';
			continue;
		}
		if (line == 1) {
			if ((v = keyed(p, nl, "gpus")) == NULL ||
			    !journal_number(v, nl, LEDGER_STORE_GPUS, &a))
				return journal_garbled(why, whysz,
				    "no gpus line");
			s->ngpu = (unsigned)a;
			continue;
		}
		if (line - 2 < s->ngpu) {
			struct ledger_store_gpu *g = &s->gpu[line - 2];

			if ((v = keyed(p, nl, "gpu")) == NULL ||
			    !field(&v, nl, &f, &fe) ||
			    !journal_number(f, fe, s->ngpu - 1, &a) ||
			    a != line - 2 || !field(&v, nl, &f, &fe) ||
			    !journal_number(f, fe, UINT64_MAX, &b) ||
			    !field(&v, nl, &f, &fe) || v != nl)
				return journal_garbled(why, whysz,
				    "a bad gpu line");
			g->unleased_mj = b;
			if (fe - f == 1 && *f == '-')
				continue;
			if (!journal_number(f, fe, UINT64_MAX, &b))
				return journal_garbled(why, whysz,
				    "a bad gpu line");
			g->based = true;
			g->last_mj = b;
			continue;
		}
		if ((v = keyed(p, nl, "sum")) != NULL) {
			char sum[JOURNAL_SUM_HEX + 1];

			journal_sum(buf, (size_t)(p - buf), sum);
			if ((size_t)(nl - v) != JOURNAL_SUM_HEX ||
			    memcmp(v, sum, JOURNAL_SUM_HEX) != 0)
				return journal_garbled(why, whysz,
				    "the sum does not "
				    "match");
			if (nl + 1 != end)
				return journal_garbled(why, whysz,
				    "bytes after the "
				    "sum");
			return JOURNAL_OK;
		}
		if ((v = keyed(p, nl, "user")) != NULL) {
			struct ledger_store_user *u;
			unsigned k = s->nusers;

			if (k == LEDGER_STORE_USERS)
				return journal_garbled(why, whysz,
				    "more than %d users",
				    LEDGER_STORE_USERS);
			u = &s->users[k];
			if (!field(&v, nl, &f, &fe) ||
			    !journal_number(f, fe, UINT32_MAX, &a))
				return journal_garbled(why, whysz,
				    "a bad user line");
			/* "(other)" is the 256th, and only it */
			if ((a == LEDGER_STORE_OTHER) !=
			    (k == LEDGER_STORE_USERS - 1))
				return journal_garbled(why, whysz,
				    "a user out of its "
				    "place");
			for (unsigned i = 0; i < k; i++)
				if (s->users[i].uid == (uint32_t)a)
					return journal_garbled(why, whysz,
					    "uid %" PRIu64
					    " twice", a);
			u->uid = (uint32_t)a;
			if (!field(&v, nl, &f, &fe) || !name_of(f, fe, u->name))
				return journal_garbled(why, whysz,
				    "a bad user name");
			for (unsigned i = 0; i < s->ngpu; i++)
				if (!field(&v, nl, &f, &fe) ||
				    !journal_number(f, fe, UINT64_MAX,
				    &u->mj[i]))
					return journal_garbled(why, whysz,
					    "a bad user "
					    "line");
			if (v != nl)
				return journal_garbled(why, whysz,
				    "a bad user line");
			s->nusers++;
			continue;
		}
		return journal_garbled(why, whysz,
		    "an unknown or misplaced line");
	}
}

enum journal_bad
ledger_store_parse(const char *buf, size_t len, struct ledger_store *s,
    char *boot, char *why, size_t whysz)
{
	enum journal_bad bad;

	memset(s, 0, sizeof(*s));
	boot[0] = '\0';
	why[0] = '\0';
	if ((bad = parse(buf, len, s, boot, why, whysz)) != JOURNAL_OK) {
		memset(s, 0, sizeof(*s));	/* nothing of it is used */
		boot[0] = '\0';
	}
	return bad;
}

/* ---- The file --------------------------------------------------------- */

int
ledger_store_save(int dirfd, const struct ledger_store *s, const char *boot,
    struct zerr *err)
{
	char *buf = malloc(LEDGER_STORE_MAX_BYTES);
	int len, e;

	if (buf == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	if ((len = ledger_store_format(s, boot, buf,
	    LEDGER_STORE_MAX_BYTES)) < 0) {
		free(buf);
		return zerr_set(err, ZERR_INTERNAL, "the energy ledger does "
		    "not fit its file");
	}
	e = journal_replace(dirfd, FILE_NAME, buf, (size_t)len);
	free(buf);
	if (e != 0)
		return zerr_set(err, ZERR_UNAVAILABLE, "the energy ledger's "
		    "file (--state-dir) cannot be written: %s", strerror(e));
	return 0;
}

int
ledger_store_load(int dirfd, const char *boot, unsigned ngpu,
    struct ledger_store *s, enum journal_bad *bad, char *why, size_t whysz)
{
	char fboot[JOURNAL_BOOT_LEN + 1];
	char *buf = malloc(LEDGER_STORE_MAX_BYTES + 1);
	size_t n;
	int rc;

	ledger_store_init(s, ngpu);
	*bad = JOURNAL_OK;
	why[0] = '\0';
	if (buf == NULL) {
		*bad = JOURNAL_GARBLED;
		snprintf(why, whysz, "out of memory");
		return -1;
	}
	rc = journal_read_private(dirfd, FILE_NAME, buf,
	    LEDGER_STORE_MAX_BYTES + 1, &n, bad, why, whysz);
	if (rc == 0 && (*bad = ledger_store_parse(buf, n, s, fboot, why,
	    whysz)) != JOURNAL_OK)
		rc = -1;
	free(buf);
	if (rc != 0) {
		ledger_store_init(s, ngpu);
		return rc;
	}
	/* fitted to the GPUs there are now: new ones start at 0 */
	for (unsigned i = ngpu; i < LEDGER_STORE_GPUS; i++) {
		memset(&s->gpu[i], 0, sizeof(s->gpu[i]));
		for (unsigned u = 0; u < s->nusers; u++)
			s->users[u].mj[i] = 0;
	}
	s->ngpu = ngpu < LEDGER_STORE_GPUS ? ngpu : LEDGER_STORE_GPUS;
	if (strcmp(fboot, boot) != 0) {
		*bad = JOURNAL_OTHER_BOOT;	/* the counters restarted */
		snprintf(why, whysz, "%s was written before the last reboot "
		    "(boot %s)", FILE_NAME, fboot);
		ledger_store_unbase(s);
	}
	return 0;
}

int
ledger_store_set_aside(int dirfd)
{
	return journal_rename(dirfd, FILE_NAME, FILE_ASIDE);
}
