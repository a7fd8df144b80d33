/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - the lease journal's records (journal.h): the format and
 * its strict reader, the same on every platform. The files themselves
 * (the atomic write, the load, the boot id) are journal_files.c, Linux
 * only: zeusd.exe keeps no journal (docs/windows.md).
 */
#include "access/journal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <nettle/sha2.h>

#include "common/hex.h"

#define MAGIC "zeusd-lease 1\n"

/* ---- The format ------------------------------------------------------------- */

bool
journal_rec_pending(const struct journal_rec *r)
{
	return r->has_limit || r->has_persist || r->gpu_clocks ||
	    r->mem_clocks;
}

void
journal_sum(const char *buf, size_t len, char out[JOURNAL_SUM_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, len, (const uint8_t *)buf);
	sha256_digest(&ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * SHA256_DIGEST_SIZE] = '\0';
}

bool
journal_put(char *buf, size_t size, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*at >= size)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(buf + *at, size - *at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *at)
		return false;
	*at += (size_t)n;
	return true;
}

bool
journal_put_hex(char *buf, size_t size, size_t *at, const char *s, size_t n)
{
	bool ok = true;

	for (size_t i = 0; ok && i < n; i++)
		ok = journal_put(buf, size, at, "%02x",
		    (unsigned)(unsigned char)s[i]);
	return ok;
}

int
journal_hex_text(const char *v, const char *end, char *out, size_t max)
{
	size_t n = (size_t)(end - v);

	if (n == 0 || n % 2 != 0 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (v[i] >= 'A' && v[i] <= 'F')
			return -1;	/* one spelling: lowercase */
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_digit_value((unsigned char)v[2 * i]);
		int lo = hex_digit_value((unsigned char)v[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0)
			return -1;
		out[i] = (char)(hi << 4 | lo);
	}
	return (int)(n / 2);
}

int
journal_format(const struct journal_rec *r, const char *boot, char *buf,
    size_t size)
{
	char sum[2 * SHA256_DIGEST_SIZE + 1];
	size_t at = 0;
	bool ok;

	ok = journal_put(buf, size, &at, MAGIC "boot %.*s\ngpu %u\nuid %"
	    PRIu32 "\n", JOURNAL_BOOT_LEN, boot, r->gpu, r->uid);
	if (ok && r->cgroup[0] != '\0') {
		/* hex: a path may hold any byte but NUL and '/' separates */
		ok = journal_put(buf, size, &at, "cgroup ") &&
		    journal_put_hex(buf, size, &at, r->cgroup,
		    strnlen(r->cgroup, sizeof(r->cgroup)));
		if (ok)
			ok = journal_put(buf, size, &at, "\n");
	}
	if (ok && r->label[0] != '\0')
		ok = journal_put(buf, size, &at, "label %.*s\n",
		    LEASE_LABEL_MAX, r->label);
	if (ok && r->has_start)
		ok = journal_put(buf, size, &at, "started_ms %" PRIu64 "\n",
		    r->started_ms);
	if (ok && r->has_energy)
		ok = journal_put(buf, size, &at, "energy_mj %" PRIu64 "\n",
		    r->energy_mj);
	if (ok && r->has_limit)
		ok = journal_put(buf, size, &at, "limit_mw %" PRIu32 "\n",
		    r->limit_mw);
	if (ok && r->has_persist)
		ok = journal_put(buf, size, &at, "persistence %d\n",
		    r->persist ? 1 : 0);
	if (ok && r->gpu_clocks)
		ok = journal_put(buf, size, &at, "gpu_clocks 1\n");
	if (ok && r->mem_clocks)
		ok = journal_put(buf, size, &at, "mem_clocks 1\n");
	for (unsigned i = 0; ok && i < r->npid && i < JOURNAL_MAX_PIDS; i++)
		ok = journal_put(buf, size, &at, "pid %" PRId32 " %" PRIu64
		    "\n", r->pid[i], r->start[i]);
	if (!ok)
		return -1;
	journal_sum(buf, at, sum);
	if (!journal_put(buf, size, &at, "sum %s\n", sum) ||
	    at > JOURNAL_MAX_BYTES)
		return -1;
	return (int)at;
}

const char *
journal_bad_name(enum journal_bad bad)
{
	static const char *const names[] = {
		[JOURNAL_OK] = "ok",
		[JOURNAL_GARBLED] = "garbled",
		[JOURNAL_OTHER_BOOT] = "other_boot",
		[JOURNAL_UNSAFE] = "unsafe",
	};

	return (unsigned)bad < sizeof(names) / sizeof(names[0]) ?
	    names[bad] : "unknown";
}

enum journal_bad
journal_garbled(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return JOURNAL_GARBLED;
}

/*
 * A decimal number of at most `max`, no sign, no leading zero (but "0"),
 * ending at `end`; false otherwise.
 */
bool
journal_number(const char *s, const char *end, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s >= end || (*s == '0' && end - s > 1))
		return false;
	for (; s < end; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

bool
journal_boot_valid(const char *s, size_t n)
{
	if (n != JOURNAL_BOOT_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-' : hex_digit_value((unsigned char)s[i]) <
		    0 || (s[i] >= 'A' && s[i] <= 'F'))
			return false;
	}
	return true;
}

/* The lines, in their order; a key may be absent unless `must`. */
enum { K_BOOT, K_GPU, K_UID, K_CGROUP, K_LABEL, K_START, K_ENERGY, K_LIMIT, K_PERSIST, K_GCLK,
    K_MCLK, K_PID, K_SUM, K_END };
static const struct {
	const char *name;
	bool must, many;
} keys[K_END] = {
	[K_BOOT] = { "boot", true, false },
	[K_GPU] = { "gpu", true, false },
	[K_UID] = { "uid", true, false },
	[K_CGROUP] = { "cgroup", false, false },
	[K_LABEL] = { "label", false, false },
	[K_START] = { "started_ms", false, false },
	[K_ENERGY] = { "energy_mj", false, false },
	[K_LIMIT] = { "limit_mw", false, false },
	[K_PERSIST] = { "persistence", false, false },
	[K_GCLK] = { "gpu_clocks", false, false },
	[K_MCLK] = { "mem_clocks", false, false },
	[K_PID] = { "pid", false, true },
	[K_SUM] = { "sum", true, false },
};

static enum journal_bad
parse(const char *buf, size_t len, struct journal_rec *r, char *boot,
    char *why, size_t whysz)
{
	const char *p, *end = buf + len;
	int last = -1;

	memset(r, 0, sizeof(*r));
	boot[0] = '\0';
	why[0] = '\0';
	if (len > JOURNAL_MAX_BYTES)
		return journal_garbled(why, whysz,
		    "%zu bytes, more than %d", len,
		    JOURNAL_MAX_BYTES);
	if (len < sizeof(MAGIC) - 1 || memcmp(buf, MAGIC, sizeof(MAGIC) - 1))
		return journal_garbled(why, whysz, "no 'zeusd-lease 1' header");
	p = buf + sizeof(MAGIC) - 1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *sp, *v;
		uint64_t a, b;
		int k;

		if (nl == NULL)
			return journal_garbled(why, whysz,
			    "truncated (a line without "
			    "its end)");
		if (last == K_SUM)
			return journal_garbled(why, whysz,
			    "bytes after the sum");
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (sp == NULL)
			return journal_garbled(why, whysz,
			    "a line without a value");
		for (k = 0; k < K_END; k++)
			if ((size_t)(sp - p) == strlen(keys[k].name) &&
			    memcmp(p, keys[k].name, (size_t)(sp - p)) == 0)
				break;
		if (k == K_END)
			return journal_garbled(why, whysz, "an unknown line");
		if (k < last || (k == last && !keys[k].many))
			return journal_garbled(why, whysz,
			    "'%s' out of its place",
			    keys[k].name);
		for (int m = last + 1; m < k; m++)
			if (keys[m].must)
				return journal_garbled(why, whysz,
				    "no '%s' line",
				    keys[m].name);
		v = sp + 1;
		switch (k) {
		case K_BOOT:
			if (!journal_boot_valid(v, (size_t)(nl - v)))
				return journal_garbled(why, whysz,
				    "a bad boot id");
			memcpy(boot, v, JOURNAL_BOOT_LEN);
			boot[JOURNAL_BOOT_LEN] = '\0';
			break;
		case K_GPU:
			if (!journal_number(v, nl, JOURNAL_MAX_GPU, &a))
				return journal_garbled(why, whysz, "a bad gpu");
			r->gpu = (unsigned)a;
			break;
		case K_UID:
			if (!journal_number(v, nl, UINT32_MAX - 1, &a))
				return journal_garbled(why, whysz, "a bad uid");
			r->uid = (uint32_t)a;
			break;
		case K_CGROUP:
			if (journal_hex_text(v, nl, r->cgroup,
			    sizeof(r->cgroup) - 1) < 0)
				return journal_garbled(why, whysz,
				    "a bad cgroup");
			break;
		case K_LABEL: {
			size_t n = (size_t)(nl - v);

			if (n == 0 || n > LEASE_LABEL_MAX)
				return journal_garbled(why, whysz,
				    "a bad label");
			memcpy(r->label, v, n);
			r->label[n] = '\0';
			if (lease_label_invalid(r->label) != NULL)
				return journal_garbled(why, whysz,
				    "a bad label");
			break;
		}
		case K_START:
		case K_ENERGY:
			if (!journal_number(v, nl, UINT64_MAX, &a))
				return journal_garbled(why, whysz, "a bad %s",
				    keys[k].name);
			if (k == K_START) {
				r->has_start = true;
				r->started_ms = a;
			} else {
				r->has_energy = true;
				r->energy_mj = a;
			}
			break;
		case K_LIMIT:
			if (!journal_number(v, nl, UINT32_MAX, &a))
				return journal_garbled(why, whysz,
				    "a bad limit_mw");
			r->has_limit = true;
			r->limit_mw = (uint32_t)a;
			break;
		case K_PERSIST:
			if (!journal_number(v, nl, 1, &a))
				return journal_garbled(why, whysz,
				    "a bad persistence");
			r->has_persist = true;
			r->persist = a == 1;
			break;
		case K_GCLK:
		case K_MCLK:
			if (nl - v != 1 || *v != '1')
				return journal_garbled(why, whysz, "a bad %s",
				    keys[k].name);
			if (k == K_GCLK)
				r->gpu_clocks = true;
			else
				r->mem_clocks = true;
			break;
		case K_PID: {
			const char *sp2 = memchr(v, ' ', (size_t)(nl - v));

			if (r->npid == JOURNAL_MAX_PIDS)
				return journal_garbled(why, whysz,
				    "more than %d pids",
				    JOURNAL_MAX_PIDS);
			if (sp2 == NULL ||
			    !journal_number(v, sp2, INT32_MAX, &a) || a == 0 ||
			    !journal_number(sp2 + 1, nl, UINT64_MAX, &b))
				return journal_garbled(why, whysz,
				    "a bad pid line");
			r->pid[r->npid] = (int32_t)a;
			r->start[r->npid++] = b;
			break;
		}
		case K_SUM: {
			char sum[2 * SHA256_DIGEST_SIZE + 1];

			journal_sum(buf, (size_t)(p - buf), sum);
			if ((size_t)(nl - v) != 2 * SHA256_DIGEST_SIZE ||
			    memcmp(v, sum, 2 * SHA256_DIGEST_SIZE) != 0)
				return journal_garbled(why, whysz,
				    "the sum does not "
				    "match");
			break;
		}
		}
		last = k;
		p = nl + 1;
	}
	if (last != K_SUM)
		return journal_garbled(why, whysz, "truncated (no sum)");
	if (!journal_rec_pending(r))
		return journal_garbled(why, whysz,
		    "a lease that changed nothing");
	return JOURNAL_OK;
}

enum journal_bad
journal_parse(const char *buf, size_t len, struct journal_rec *r, char *boot,
    char *why, size_t whysz)
{
	enum journal_bad bad = parse(buf, len, r, boot, why, whysz);

	if (bad != JOURNAL_OK) {	/* nothing of a refused file is used */
		memset(r, 0, sizeof(*r));
		boot[0] = '\0';
	}
	return bad;
}
