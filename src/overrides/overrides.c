/* SPDX-License-Identifier: Apache-2.0 */
/*
 * overrides.c - GPU command overrides: load, validate, run, wrap (see
 * overrides.h; user documentation in docs/overrides.md).
 *
 * Everything that can be checked is checked at load: the file's trust, the
 * TOML (toml.c), the tables and keys, the word splitting of each command
 * (words.c), every placeholder of every word, the error_pattern (compiled
 * once with PCRE2; compiled code is shareable between threads, match data
 * is per call). At run time only numbers are substituted into words that
 * are already known to be valid, and the argv runs through spawn.c.
 */
#include "overrides.h"

#define PCRE2_CODE_UNIT_WIDTH 8

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fileio.h"
#include "../common/log.h"
#include "spawn.h"
#include "toml.h"
#include "words.h"

/* Room for one substituted word: a value is at most 10 digits and its
 * shortest placeholder 8 bytes, so twice the input always suffices. */
#define OV_WORD_MAX (2 * WORDS_MAX_INPUT + 1)

struct ov_command {
	struct words argv;	/* split, not yet substituted */
	unsigned line;
};

struct ov_op {
	bool present;
	struct ov_command *cmds;
	size_t n_cmds;
	pcre2_code *re;		/* NULL without error_pattern */
	unsigned timeout_s;
};

struct overrides {
	struct ov_op ops[GPU_WRITE_OP_COUNT];
	atomic_uint refs;	/* overrides_free drops one; see ov_acquire */
};

/* ---- placeholders ---------------------------------------------------- */

enum ov_ph {
	PH_GPU_ID,
	PH_POWER_LIMIT_MW,
	PH_POWER_LIMIT_W,
	PH_MIN_CLOCK_MHZ,
	PH_MAX_CLOCK_MHZ,
	PH_ENABLED,
	PH_COUNT
};

static const char *const ph_names[PH_COUNT] = {
	[PH_GPU_ID] = "gpu_id",
	[PH_POWER_LIMIT_MW] = "power_limit_mw",
	[PH_POWER_LIMIT_W] = "power_limit_w",
	[PH_MIN_CLOCK_MHZ] = "min_clock_mhz",
	[PH_MAX_CLOCK_MHZ] = "max_clock_mhz",
	[PH_ENABLED] = "enabled",
};

/* The placeholders each operation may use, as a bit set of enum ov_ph. */
static unsigned
ph_allowed(enum gpu_write_op op)
{
	unsigned m = 1u << PH_GPU_ID;

	switch (op) {
	case GPU_SET_POWER_LIMIT:
		return m | 1u << PH_POWER_LIMIT_MW | 1u << PH_POWER_LIMIT_W;
	case GPU_SET_PERSISTENCE_MODE:
		return m | 1u << PH_ENABLED;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		return m | 1u << PH_MIN_CLOCK_MHZ | 1u << PH_MAX_CLOCK_MHZ;
	default:
		return m;
	}
}

static void
ph_allowed_list(enum gpu_write_op op, char *buf, size_t size)
{
	unsigned m = ph_allowed(op);
	size_t o = 0;

	buf[0] = '\0';
	for (int i = 0; i < PH_COUNT && o < size; i++)
		if (m & 1u << i)
			o += (size_t)snprintf(buf + o, size - o, "%s{%s}",
			    o ? ", " : "", ph_names[i]);
}

static int
ph_lookup(const char *name, size_t len)
{
	for (int i = 0; i < PH_COUNT; i++)
		if (strlen(ph_names[i]) == len &&
		    memcmp(ph_names[i], name, len) == 0)
			return i;
	return -1;
}

static int
ov_put(char *out, size_t size, size_t *o, const char *s, size_t n)
{
	if (out == NULL)
		return 0;
	if (*o + n >= size)
		return -1;
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
	return 0;
}

/*
 * Reads the placeholder starting at word[*i] == '{'. Returns its index,
 * or -1 with `why` describing the fault.
 */
static int
ph_scan_one(const char *word, size_t *i, enum gpu_write_op op, char *why,
    size_t whysize)
{
	size_t s = *i + 1, j = s + strcspn(word + s, "{}");
	int n = (int)(j - s > 64 ? 64 : j - s);
	char allowed[160];
	int ph;

	if (word[j] == '\0') {
		snprintf(why, whysize, "unterminated placeholder '{%.*s' "
		    "(write '{{' for a literal brace)", n, word + s);
		return -1;
	}
	if (word[j] == '{') {
		snprintf(why, whysize, "malformed placeholder '{%.*s{' (write "
		    "'{{' and '}}' for literal braces)", n, word + s);
		return -1;
	}
	if (j == s) {
		snprintf(why, whysize, "empty placeholder '{}'");
		return -1;
	}
	ph = ph_lookup(word + s, j - s);
	if (ph < 0) {
		snprintf(why, whysize, "unknown placeholder '{%.*s}'", n,
		    word + s);
		return -1;
	}
	if (!(ph_allowed(op) & 1u << ph)) {
		ph_allowed_list(op, allowed, sizeof(allowed));
		snprintf(why, whysize, "placeholder '{%s}' is not allowed for "
		    "%s (allowed: %s)", ph_names[ph], gpu_write_op_name(op),
		    allowed);
		return -1;
	}
	*i = j + 1;
	return ph;
}

/*
 * Validates the placeholders of `word` for `op` and, when `vals` is not
 * NULL, writes the substituted word into out. `{{` and `}}` stand for
 * literal braces. Returns 0, or -1 with `why` filled in.
 */
static int
ph_expand(const char *word, enum gpu_write_op op, const uint64_t *vals,
    char *out, size_t size, char *why, size_t whysize)
{
	size_t i = 0, o = 0;

	if (out != NULL)
		out[0] = '\0';
	while (word[i] != '\0') {
		char c = word[i];
		int ph;

		if ((c == '{' || c == '}') && word[i + 1] == c) {
			i += 2;
		} else if (c == '}') {
			snprintf(why, whysize, "unbalanced '}' (write '}}' for "
			    "a literal brace)");
			return -1;
		} else if (c == '{') {
			char num[24];

			if ((ph = ph_scan_one(word, &i, op, why, whysize)) < 0)
				return -1;
			if (vals == NULL)
				continue;
			snprintf(num, sizeof(num), "%" PRIu64, vals[ph]);
			if (ov_put(out, size, &o, num, strlen(num)) < 0)
				goto long_word;
			continue;
		} else {
			i++;
		}
		if (ov_put(out, size, &o, &c, 1) < 0)
			goto long_word;
	}
	return 0;
long_word:
	snprintf(why, whysize, "substituted word too long");
	return -1;
}

/* ---- loading --------------------------------------------------------- */

static int ov_fail(struct zerr *err, const char *name, unsigned line,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
ov_fail(struct zerr *err, const char *name, unsigned line, const char *fmt,
    ...)
{
	char msg[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return zerr_set(err, ZERR_INVALID, "%s: line %u: %s", name, line,
	    msg);
}

static int
ov_op_by_name(const char *name)
{
	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++)
		if (strcmp(gpu_write_op_name((enum gpu_write_op)op), name) == 0)
			return op;
	return -1;
}

static int
ov_load_command(struct ov_op *o, enum gpu_write_op op,
    const struct toml_value *item, const char *name, struct zerr *err)
{
	struct ov_command *c = &o->cmds[o->n_cmds];
	char why[512], q[256];
	struct zerr werr;

	zlog_quote(q, sizeof(q), item->str);
	c->line = item->line;
	if (words_split(item->str, &c->argv, &werr) < 0)
		return ov_fail(err, name, item->line, "[%s] command %s: %s",
		    gpu_write_op_name(op), q, werr.msg);
	o->n_cmds++;
	if (c->argv.n == 0)
		return ov_fail(err, name, item->line, "[%s] command %s is "
		    "empty", gpu_write_op_name(op), q);
	if (c->argv.v[0][0] != '/' && strchr(c->argv.v[0], '/') != NULL)
		return ov_fail(err, name, item->line, "[%s] command %s: the "
		    "program must be an absolute path or a name looked up in "
		    "PATH", gpu_write_op_name(op), q);
	for (size_t w = 0; w < c->argv.n; w++)
		if (ph_expand(c->argv.v[w], op, NULL, NULL, 0, why,
		    sizeof(why)) < 0)
			return ov_fail(err, name, item->line, "[%s] command "
			    "%s: %s", gpu_write_op_name(op), q, why);
	return 0;
}

static int
ov_load_commands(struct ov_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	const char *opn = gpu_write_op_name(op);

	if (k->v.type != TOML_ARRAY)
		return ov_fail(err, name, k->line, "[%s] commands must be an "
		    "array of strings", opn);
	if (k->v.n_items == 0)
		return ov_fail(err, name, k->line, "[%s] commands is empty",
		    opn);
	if (k->v.n_items > OVERRIDES_MAX_COMMANDS)
		return ov_fail(err, name, k->line, "[%s] more than %d "
		    "commands", opn, OVERRIDES_MAX_COMMANDS);
	o->cmds = calloc(k->v.n_items, sizeof(*o->cmds));
	if (o->cmds == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	for (size_t i = 0; i < k->v.n_items; i++)
		if (ov_load_command(o, op, &k->v.items[i], name, err) < 0)
			return -1;
	return 0;
}

static int
ov_load_pattern(struct ov_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	PCRE2_UCHAR emsg[256];
	PCRE2_SIZE off;
	int code;

	if (k->v.type != TOML_STRING)
		return ov_fail(err, name, k->line, "[%s] error_pattern must be "
		    "a string", gpu_write_op_name(op));
	if (k->v.str[0] == '\0')
		return ov_fail(err, name, k->line, "[%s] error_pattern is "
		    "empty (it would match every output)",
		    gpu_write_op_name(op));
	o->re = pcre2_compile((PCRE2_SPTR)k->v.str, PCRE2_ZERO_TERMINATED, 0,
	    &code, &off, NULL);
	if (o->re == NULL) {
		pcre2_get_error_message(code, emsg, sizeof(emsg));
		return ov_fail(err, name, k->line, "[%s] error_pattern: %s at "
		    "offset %zu", gpu_write_op_name(op), (const char *)emsg,
		    (size_t)off);
	}
	return 0;
}

static int
ov_load_timeout(struct ov_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	if (k->v.type != TOML_INT || k->v.i < 1 ||
	    k->v.i > OVERRIDES_MAX_TIMEOUT_S)
		return ov_fail(err, name, k->line, "[%s] timeout_s must be an "
		    "integer from 1 to %d", gpu_write_op_name(op),
		    OVERRIDES_MAX_TIMEOUT_S);
	o->timeout_s = (unsigned)k->v.i;
	return 0;
}

static int
ov_load_table(struct overrides *ov, const struct toml_table *t,
    const char *name, struct zerr *err)
{
	int op = ov_op_by_name(t->name);
	struct ov_op *o;
	bool have_cmds = false;

	if (op < 0)
		return ov_fail(err, name, t->line, "unknown table [%s] "
		    "(expected one of: set_power_limit, set_persistence_mode, "
		    "set_gpu_locked_clocks, reset_gpu_locked_clocks, "
		    "set_mem_locked_clocks, reset_mem_locked_clocks, "
		    "reset_locked_clocks)", t->name);
	o = &ov->ops[op];
	o->present = true;
	o->timeout_s = OVERRIDES_DEFAULT_TIMEOUT_S;
	for (size_t i = 0; i < t->n_keys; i++) {
		const struct toml_key *k = &t->keys[i];
		int rc;

		if (strcmp(k->name, "commands") == 0) {
			rc = ov_load_commands(o, op, k, name, err);
			have_cmds = true;
		} else if (strcmp(k->name, "error_pattern") == 0) {
			rc = ov_load_pattern(o, op, k, name, err);
		} else if (strcmp(k->name, "timeout_s") == 0) {
			rc = ov_load_timeout(o, op, k, name, err);
		} else {
			rc = ov_fail(err, name, k->line, "unknown key '%s' in "
			    "[%s] (expected commands, error_pattern or "
			    "timeout_s)", k->name, t->name);
		}
		if (rc < 0)
			return -1;
	}
	if (!have_cmds)
		return ov_fail(err, name, t->line, "[%s] has no commands",
		    t->name);
	return 0;
}

int
overrides_parse(const char *text, size_t len, const char *name,
    struct overrides **out, struct zerr *err)
{
	struct toml_doc *doc;
	struct overrides *ov;
	struct zerr terr;

	*out = NULL;
	if (toml_parse(text, len, &doc, &terr) < 0)
		return zerr_set(err, terr.kind, "%s: %s", name, terr.msg);
	ov = calloc(1, sizeof(*ov));
	if (ov != NULL)
		atomic_init(&ov->refs, 1);
	if (ov == NULL) {
		toml_free(doc);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	if (doc->tables[0].n_keys > 0) {
		ov_fail(err, name, doc->tables[0].keys[0].line, "key '%s' must "
		    "be inside an operation's table, such as "
		    "[set_power_limit]", doc->tables[0].keys[0].name);
		goto fail;
	}
	for (size_t i = 1; i < doc->n_tables; i++)
		if (ov_load_table(ov, &doc->tables[i], name, err) < 0)
			goto fail;
	toml_free(doc);
	*out = ov;
	return 0;
fail:
	toml_free(doc);
	overrides_free(ov);
	return -1;
}

/* The trust check, on the descriptor actually read (no race with a swap). */
static int
ov_trust(int fd, const char *path, struct stat *st, struct zerr *err)
{
	uid_t euid = geteuid();

	if (fstat(fd, st) < 0)
		return zerr_set(err, ZERR_INTERNAL, "%s: cannot stat: %s",
		    path, strerror(errno));
	if (!S_ISREG(st->st_mode))
		return zerr_set(err, ZERR_FORBIDDEN, "%s: not a regular file",
		    path);
	if (st->st_uid != 0 && st->st_uid != euid)
		return zerr_set(err, ZERR_FORBIDDEN, "%s: owned by uid %u, "
		    "which is neither root nor the daemon's user (uid %u); "
		    "refusing to run commands from it", path,
		    (unsigned)st->st_uid, (unsigned)euid);
	if (st->st_mode & S_IWOTH)
		return zerr_set(err, ZERR_FORBIDDEN, "%s: world-writable "
		    "(mode %04o); refusing to run commands from it", path,
		    (unsigned)(st->st_mode & 07777));
	if (st->st_mode & S_IWGRP) {
		char q[512];

		zlog(ZLOG_WARN, "overrides_file_group_writable",
		    "path=%s mode=%04o", zlog_quote(q, sizeof(q), path),
		    (unsigned)(st->st_mode & 07777));
	}
	return 0;
}

static int
ov_read_all(int fd, const char *path, char **text, size_t *len,
    struct zerr *err)
{
	/* one byte more than allowed tells "at the limit" from "too large" */
	char *buf = malloc(TOML_MAX_INPUT + 1);
	ssize_t n;

	if (buf == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	n = fileio_read_all(fd, buf, TOML_MAX_INPUT + 1);
	if (n < 0) {
		free(buf);
		return zerr_set(err, ZERR_INTERNAL, "%s: cannot read: %s", path,
		    strerror(errno));
	}
	if (n > TOML_MAX_INPUT) {
		free(buf);
		return zerr_set(err, ZERR_INVALID, "%s: larger than %d bytes",
		    path, TOML_MAX_INPUT);
	}
	*text = buf;
	*len = (size_t)n;
	return 0;
}

int
overrides_load(const char *path, struct overrides **out, struct zerr *err)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	/* O_NONBLOCK: a FIFO planted at the path must not hang startup. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, errno == EACCES ? ZERR_FORBIDDEN :
		    ZERR_INVALID, "%s: cannot open: %s", path,
		    strerror(errno));
	if (ov_trust(fd, path, &st, err) < 0 ||
	    ov_read_all(fd, path, &text, &len, err) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	rc = overrides_parse(text, len, path, out, err);
	free(text);
	if (rc == 0)
		zlog(ZLOG_INFO, "overrides_loaded", "operations=%u",
		    overrides_count(*out));
	return rc;
}

bool
overrides_has(const struct overrides *ov, enum gpu_write_op op)
{
	return ov != NULL && (unsigned)op < GPU_WRITE_OP_COUNT &&
	    ov->ops[op].present;
}

unsigned
overrides_count(const struct overrides *ov)
{
	unsigned n = 0;

	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++)
		n += overrides_has(ov, (enum gpu_write_op)op);
	return n;
}

void
overrides_free(struct overrides *ov)
{
	if (ov == NULL || atomic_fetch_sub(&ov->refs, 1) != 1)
		return;
	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++) {
		struct ov_op *o = &ov->ops[op];

		for (size_t i = 0; i < o->n_cmds; i++)
			words_free(&o->cmds[i].argv);
		free(o->cmds);
		pcre2_code_free(o->re);
	}
	free(ov);
}

/* ---- running --------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at u (n bytes left), 0 if invalid. */
static size_t
ov_utf8_len(const unsigned char *u, size_t n)
{
	size_t len = 0;
	uint32_t cp, min;

	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf) {
		len = 2; cp = u[0] & 0x1f; min = 0x80;
	} else if (u[0] >= 0xe0 && u[0] <= 0xef) {
		len = 3; cp = u[0] & 0x0f; min = 0x800;
	} else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
		len = 4; cp = u[0] & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((u[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (u[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static bool
ov_space(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/*
 * Copies s (n bytes) into out, trimmed of surrounding white space and cut
 * to its last `keep` bytes, with control bytes (other than newline and
 * tab) and broken UTF-8 replaced by '?': the message stays readable and is
 * always valid UTF-8, as a JSON answer needs.
 */
static void
ov_sanitize(const char *s, size_t n, size_t keep, char *out, size_t size)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (n > 0 && ov_space(u[n - 1]))
		n--;
	while (i < n && ov_space(u[i]))
		i++;
	if (n - i > keep) {
		i = n - keep;
		while (i < n && (u[i] & 0xc0) == 0x80)
			i++;	/* start on a character boundary */
		o = (size_t)snprintf(out, size, "[...]");
	}
	while (i < n && o + 5 < size) {
		size_t len = ov_utf8_len(u + i, n - i);

		if (len == 1 && u[i] != '\n' && u[i] != '\t' &&
		    (u[i] < 0x20 || u[i] == 0x7f))
			len = 0;
		if (len == 0) {
			out[o++] = '?';
			i++;
			continue;
		}
		memcpy(out + o, u + i, len);
		o += len;
		i += len;
	}
	out[o] = '\0';
}

/* The argv as a shell would need it quoted, for messages and logs. */
static void
ov_display(char *const argv[], char *out, size_t size)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-";
	char raw[1024];
	size_t o = 0;

	raw[0] = '\0';
	for (size_t w = 0; argv[w] != NULL && o + 4 < sizeof(raw); w++) {
		const char *a = argv[w];
		bool plain = *a != '\0' && strspn(a, safe) == strlen(a);

		if (w > 0)
			raw[o++] = ' ';
		if (!plain)
			raw[o++] = '\'';
		for (; *a != '\0' && o + 6 < sizeof(raw); a++) {
			if (*a == '\'' && !plain) {
				memcpy(raw + o, "'\\''", 4);
				o += 4;
			} else {
				raw[o++] = *a;
			}
		}
		if (!plain)
			raw[o++] = '\'';
		raw[o] = '\0';
	}
	ov_sanitize(raw, o, size > 8 ? size - 8 : 0, out, size);
}

/* Whether the pattern occurs in one captured stream. */
static int
ov_match(const pcre2_code *re, const struct spawn_output *o, bool *hit,
    char *why, size_t whysize)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	int rc;

	if (md == NULL) {
		snprintf(why, whysize, "out of memory matching error_pattern");
		return -1;
	}
	rc = pcre2_match(re, (PCRE2_SPTR)o->data, o->len, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	*hit = rc >= 0;
	if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
		PCRE2_UCHAR emsg[200];

		pcre2_get_error_message(rc, emsg, sizeof(emsg));
		snprintf(why, whysize, "error_pattern could not be matched: "
		    "%s", (const char *)emsg);
		return -1;
	}
	return 0;
}

/* Fills `why` and returns -1 when the finished command counts as failed. */
static int
ov_judge(const struct ov_op *o, const struct spawn_result *res,
    char *why, size_t whysize)
{
	bool hit = false;

	spawn_describe(res, o->timeout_s * 1000u, why, whysize);
	if (res->status != SPAWN_EXITED || res->code != 0)
		return -1;
	if (o->re == NULL)
		return 0;
	if (ov_match(o->re, &res->out, &hit, why, whysize) < 0)
		return -1;
	if (!hit && ov_match(o->re, &res->err, &hit, why, whysize) < 0)
		return -1;
	if (hit) {
		snprintf(why, whysize, "output matched error_pattern");
		return -1;
	}
	return 0;
}

/*
 * Builds the failure message: `head`, then stdout and stderr sharing what
 * is left of ZERR_MSG_MAX (the tail of each, where errors usually are).
 */
static int
ov_failure(struct zerr *err, const char *head, const struct spawn_result *r)
{
	char bo[ZERR_MSG_MAX], be[ZERR_MSG_MAX];
	size_t used = strlen(head) + 40;
	size_t room = used < ZERR_MSG_MAX ? ZERR_MSG_MAX - used : 0;
	size_t half = room / 2, ko = half, ke = half;

	if (r->out.len < half)
		ke = room - r->out.len;
	else if (r->err.len < half)
		ko = room - r->err.len;
	ov_sanitize(r->out.data, r->out.len, ko, bo, sizeof(bo));
	ov_sanitize(r->err.data, r->err.len, ke, be, sizeof(be));
	return zerr_set(err, ZERR_INTERNAL, "%s; stdout: \"%s\"; stderr: "
	    "\"%s\"", head, bo, be);
}

static void
ov_log(const char *opn, unsigned gpu, const char *disp,
    const struct spawn_result *r, const char *why, bool failed)
{
	char qc[1200], qw[300];

	zlog(failed ? ZLOG_WARN : ZLOG_INFO, "override_command",
	    "op=%s gpu=%u cmd=%s result=%s duration_ms=%" PRIu64
	    " stdout_bytes=%" PRIu64 " stderr_bytes=%" PRIu64, opn, gpu,
	    zlog_quote(qc, sizeof(qc), disp), zlog_quote(qw, sizeof(qw), why),
	    r->duration_ms, r->out.total, r->err.total);
}

/* Substitutes every word of one command into a fresh argv. */
static char **
ov_argv(const struct ov_command *c, enum gpu_write_op op,
    const uint64_t *vals, char *why, size_t whysize)
{
	char **argv = calloc(c->argv.n + 1, sizeof(*argv));
	char *word = malloc(OV_WORD_MAX);
	size_t w;

	if (argv == NULL || word == NULL)
		goto fail;
	for (w = 0; w < c->argv.n; w++) {
		if (ph_expand(c->argv.v[w], op, vals, word, OV_WORD_MAX, why,
		    whysize) < 0 || (argv[w] = strdup(word)) == NULL)
			goto fail;
	}
	free(word);
	return argv;
fail:
	snprintf(why, whysize, "out of memory");
	for (w = 0; argv != NULL && argv[w] != NULL; w++)
		free(argv[w]);
	free(argv);
	free(word);
	return NULL;
}

static void
ov_argv_free(char **argv)
{
	for (size_t w = 0; argv[w] != NULL; w++)
		free(argv[w]);
	free(argv);
}

/* Runs command k of op; -1 with the failure in err. */
static int
ov_run_command(const struct ov_op *o, enum gpu_write_op op, size_t k,
    unsigned gpu, const uint64_t *vals, struct zerr *err)
{
	const char *opn = gpu_write_op_name(op);
	struct spawn_result res;
	struct zerr serr;
	char why[256], disp[600], head[1024];
	char **argv = ov_argv(&o->cmds[k], op, vals, why, sizeof(why));
	int rc;

	if (argv == NULL)
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: %s", opn,
		    gpu, why);
	ov_display(argv, disp, sizeof(disp));
	if (spawn_run(argv, o->timeout_s * 1000u, &res, &serr) < 0) {
		spawn_result_free(&res);
		ov_argv_free(argv);
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: cannot run "
		    "%s: %s", opn, gpu, disp, serr.msg);
	}
	ov_argv_free(argv);
	rc = ov_judge(o, &res, why, sizeof(why));
	ov_log(opn, gpu, disp, &res, rc < 0 ? why : "ok", rc < 0);
	if (rc < 0) {
		snprintf(head, sizeof(head), "%s on GPU %u: override command "
		    "%zu of %zu failed (%s): %s", opn, gpu, k + 1, o->n_cmds,
		    why, disp);
		ov_failure(err, head, &res);
	}
	spawn_result_free(&res);
	return rc;
}

int
overrides_run(const struct overrides *ov, unsigned gpu,
    const struct gpu_write *w, struct zerr *err)
{
	uint64_t vals[PH_COUNT];
	const struct ov_op *o;

	if (!overrides_has(ov, w->op))
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: no override "
		    "configured", gpu_write_op_name(w->op), gpu);
	o = &ov->ops[w->op];
	vals[PH_GPU_ID] = gpu;
	vals[PH_POWER_LIMIT_MW] = w->power_limit_mw;
	vals[PH_POWER_LIMIT_W] = w->power_limit_mw / 1000;
	vals[PH_MIN_CLOCK_MHZ] = w->min_clock_mhz;
	vals[PH_MAX_CLOCK_MHZ] = w->max_clock_mhz;
	vals[PH_ENABLED] = w->enabled ? 1 : 0;
	for (size_t k = 0; k < o->n_cmds; k++)
		if (ov_run_command(o, w->op, k, gpu, vals, err) < 0)
			return -1;
	return 0;
}

/* ---- the backend wrapper --------------------------------------------- */

/*
 * `ov` can be swapped by a reload (overrides_swap) while GPU workers run
 * writes, some of them for a command's whole timeout. So a write takes its
 * own reference under `lock` (ov_acquire) and drops it when done; the swap
 * replaces the pointer under the same lock and drops the backend's
 * reference; the last of them frees the old file's overrides. A write runs
 * wholly with the file it started with.
 */
struct ov_backend {
	pthread_mutex_t lock;
	struct overrides *ov;
	struct gpu_backend inner;
};

static struct overrides *
ov_acquire(struct ov_backend *ob)
{
	struct overrides *ov;

	pthread_mutex_lock(&ob->lock);
	ov = ob->ov;
	atomic_fetch_add(&ov->refs, 1);
	pthread_mutex_unlock(&ob->lock);
	return ov;
}

static struct gpu_backend *
ov_inner(struct gpu_backend *b)
{
	struct ov_backend *ob = b->ctx;

	return ob->inner.ops != NULL ? &ob->inner : NULL;
}

static int
ov_no_driver(unsigned gpu, struct zerr *err)
{
	return zerr_set(err, ZERR_INTERNAL, "GPU %u: no GPU driver available",
	    gpu);
}

static unsigned
ov_count(struct gpu_backend *b)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->count(in) : 0;
}

/* What the GPU supports, counting the writes an override runs instead. */
static int
ov_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct ov_backend *ob = b->ctx;
	struct gpu_backend *in = ov_inner(b);

	if (in == NULL)
		return ov_no_driver(gpu, err);
	if (in->ops->info(in, gpu, out, err) != 0)
		return -1;
	out->caps.power_limit |= overrides_has(ob->ov, GPU_SET_POWER_LIMIT);
	out->caps.persistence_mode |= overrides_has(ob->ov,
	    GPU_SET_PERSISTENCE_MODE);
	out->caps.gpu_locked_clocks |= overrides_has(ob->ov,
	    GPU_SET_GPU_LOCKED_CLOCKS);
	out->caps.mem_locked_clocks |= overrides_has(ob->ov,
	    GPU_SET_MEM_LOCKED_CLOCKS);
	return 0;
}

static const char *
ov_read_lacks(struct gpu_backend *b, enum gpu_read_op op)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->read_lacks(in, op) : NULL;
}

/* An overridden write needs nothing from the driver. */
static const char *
ov_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	struct ov_backend *ob = b->ctx;
	struct gpu_backend *in = ov_inner(b);

	if (overrides_has(ob->ov, op) || in == NULL)
		return NULL;
	if (op == GPU_RESET_LOCKED_CLOCKS &&
	    (overrides_has(ob->ov, GPU_RESET_GPU_LOCKED_CLOCKS) ||
	    overrides_has(ob->ov, GPU_RESET_MEM_LOCKED_CLOCKS)))
		return NULL;
	return in->ops->write_lacks(in, op);
}

static bool
ov_lost(struct gpu_backend *b, unsigned gpu)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL && in->ops->lost(in, gpu);
}

static int
ov_get_power_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->get_power_mw(in, gpu, mw, err) :
	    ov_no_driver(gpu, err);
}

static int
ov_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->get_energy_mj(in, gpu, mj, err) :
	    ov_no_driver(gpu, err);
}

static int
ov_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->get_power_limit_mw(in, gpu, mw, err) :
	    ov_no_driver(gpu, err);
}

static int
ov_get_power_limit_constraints(struct gpu_backend *b, unsigned gpu,
    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->get_power_limit_constraints(in, gpu,
	    min_mw, max_mw, err) : ov_no_driver(gpu, err);
}

static int
ov_get_persistence_mode(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	return in != NULL ? in->ops->get_persistence_mode(in, gpu, enabled,
	    err) : ov_no_driver(gpu, err);
}

/* One write through its override, or through the inner backend. */
static int
ov_write_one(struct gpu_backend *b, const struct overrides *ov, unsigned gpu,
    const struct gpu_write *w, struct zerr *err)
{
	struct gpu_backend *in = ov_inner(b);

	if (overrides_has(ov, w->op))
		return overrides_run(ov, gpu, w, err);
	return in != NULL ? in->ops->write(in, gpu, w, err) :
	    ov_no_driver(gpu, err);
}

static int
ov_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct overrides *ov = ov_acquire(b->ctx);
	struct gpu_write g = { .op = GPU_RESET_GPU_LOCKED_CLOCKS };
	struct gpu_write m = { .op = GPU_RESET_MEM_LOCKED_CLOCKS };
	struct zerr second;
	int rg, rm;

	if (w->op != GPU_RESET_LOCKED_CLOCKS || overrides_has(ov, w->op) ||
	    (!overrides_has(ov, g.op) && !overrides_has(ov, m.op))) {
		rg = ov_write_one(b, ov, gpu, w, err);
		overrides_free(ov);
		return rg;
	}
	/* Both domains, each its own way; the first error wins. */
	rg = ov_write_one(b, ov, gpu, &g, err);
	rm = ov_write_one(b, ov, gpu, &m, rg < 0 ? &second : err);
	overrides_free(ov);
	return rg < 0 || rm < 0 ? -1 : 0;
}

static void
ov_destroy(struct gpu_backend *b)
{
	struct ov_backend *ob = b->ctx;

	if (ob == NULL)
		return;
	if (ob->inner.ops != NULL && ob->inner.ops->destroy != NULL)
		ob->inner.ops->destroy(&ob->inner);
	overrides_free(ob->ov);
	pthread_mutex_destroy(&ob->lock);
	free(ob);
	b->ctx = NULL;
}

static const struct gpu_backend_ops ov_ops = {
	.name = "overrides",
	.count = ov_count,
	.info = ov_info,
	.get_power_mw = ov_get_power_mw,
	.get_energy_mj = ov_get_energy_mj,
	.get_power_limit_mw = ov_get_power_limit_mw,
	.get_power_limit_constraints = ov_get_power_limit_constraints,
	.get_persistence_mode = ov_get_persistence_mode,
	.write = ov_write,
	.read_lacks = ov_read_lacks,
	.write_lacks = ov_write_lacks,
	.lost = ov_lost,
	.destroy = ov_destroy,
};

int
overrides_wrap(struct overrides *ov, struct gpu_backend inner,
    struct gpu_backend *out)
{
	struct ov_backend *ob = calloc(1, sizeof(*ob));

	if (ob == NULL)
		return -1;
	pthread_mutex_init(&ob->lock, NULL);
	ob->ov = ov;
	ob->inner = inner;
	out->ops = &ov_ops;
	out->ctx = ob;
	return 0;
}

int
overrides_swap(struct gpu_backend *b, struct overrides *ov,
    struct overrides **old)
{
	struct ov_backend *ob;

	if (b->ops != &ov_ops)
		return -1;
	ob = b->ctx;
	pthread_mutex_lock(&ob->lock);
	*old = ob->ov;
	ob->ov = ov;
	pthread_mutex_unlock(&ob->lock);
	return 0;
}
