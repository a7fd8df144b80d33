/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load.c - reading an overrides file: the trust check, the TOML (toml.c),
 * the tables and keys, the word splitting of each command (words.c), every
 * placeholder of every word (expand.c), the error_pattern; and the
 * reference count of the result (see overrides.h).
 *
 * Everything that can be checked is checked here, at startup or on reload,
 * so a bad file stops the daemon (or keeps the old file) instead of failing
 * a request later. The error_pattern is compiled once with PCRE2: compiled
 * code is shareable between threads, match data is per call (run.c).
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "toml.h"

static int ovload_fail(struct zerr *err, const char *name, unsigned line,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
ovload_fail(struct zerr *err, const char *name, unsigned line, const char *fmt,
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
ovload_op_by_name(const char *name)
{
	for (int op = 0; op < GPU_WRITE_OP_COUNT; op++)
		if (strcmp(gpu_write_op_name((enum gpu_write_op)op), name) == 0)
			return op;
	return -1;
}

static int
ovload_command(struct overrides_op *o, enum gpu_write_op op,
    const struct toml_value *item, const char *name, struct zerr *err)
{
	struct overrides_cmd *c = &o->cmds[o->n_cmds];
	char why[512], q[256];
	struct zerr werr;

	zlog_quote(q, sizeof(q), item->str);
	c->line = item->line;
	if (words_split(item->str, &c->argv, &werr) < 0)
		return ovload_fail(err, name, item->line, "[%s] command %s: %s",
		    gpu_write_op_name(op), q, werr.msg);
	o->n_cmds++;
	if (c->argv.n == 0)
		return ovload_fail(err, name, item->line, "[%s] command %s is "
		    "empty", gpu_write_op_name(op), q);
	if (c->argv.v[0][0] != '/' && strchr(c->argv.v[0], '/') != NULL)
		return ovload_fail(err, name, item->line, "[%s] command %s: "
		    "the program must be an absolute path or a name looked up "
		    "in PATH", gpu_write_op_name(op), q);
	for (size_t w = 0; w < c->argv.n; w++)
		if (ovexp_expand(c->argv.v[w], op, NULL, NULL, 0, why,
		    sizeof(why)) < 0)
			return ovload_fail(err, name, item->line, "[%s] "
			    "command %s: %s", gpu_write_op_name(op), q, why);
	return 0;
}

static int
ovload_commands(struct overrides_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	const char *opn = gpu_write_op_name(op);

	if (k->v.type != TOML_ARRAY)
		return ovload_fail(err, name, k->line, "[%s] commands must be "
		    "an array of strings", opn);
	if (k->v.n_items == 0)
		return ovload_fail(err, name, k->line, "[%s] commands is empty",
		    opn);
	if (k->v.n_items > OVERRIDES_MAX_COMMANDS)
		return ovload_fail(err, name, k->line, "[%s] more than %d "
		    "commands", opn, OVERRIDES_MAX_COMMANDS);
	o->cmds = calloc(k->v.n_items, sizeof(*o->cmds));
	if (o->cmds == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	for (size_t i = 0; i < k->v.n_items; i++)
		if (ovload_command(o, op, &k->v.items[i], name, err) < 0)
			return -1;
	return 0;
}

static int
ovload_pattern(struct overrides_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	PCRE2_UCHAR emsg[256];
	PCRE2_SIZE off;
	int code;

	if (k->v.type != TOML_STRING)
		return ovload_fail(err, name, k->line, "[%s] error_pattern "
		    "must be a string", gpu_write_op_name(op));
	if (k->v.str[0] == '\0')
		return ovload_fail(err, name, k->line, "[%s] error_pattern is "
		    "empty (it would match every output)",
		    gpu_write_op_name(op));
	o->re = pcre2_compile((PCRE2_SPTR)k->v.str, PCRE2_ZERO_TERMINATED, 0,
	    &code, &off, NULL);
	if (o->re == NULL) {
		pcre2_get_error_message(code, emsg, sizeof(emsg));
		return ovload_fail(err, name, k->line, "[%s] error_pattern: "
		    "%s at offset %zu", gpu_write_op_name(op),
		    (const char *)emsg, (size_t)off);
	}
	return 0;
}

static int
ovload_timeout(struct overrides_op *o, enum gpu_write_op op,
    const struct toml_key *k, const char *name, struct zerr *err)
{
	if (k->v.type != TOML_INT || k->v.i < 1 ||
	    k->v.i > OVERRIDES_MAX_TIMEOUT_S)
		return ovload_fail(err, name, k->line, "[%s] timeout_s must "
		    "be an integer from 1 to %d", gpu_write_op_name(op),
		    OVERRIDES_MAX_TIMEOUT_S);
	o->timeout_s = (unsigned)k->v.i;
	return 0;
}

static int
ovload_table(struct overrides *ov, const struct toml_table *t,
    const char *name, struct zerr *err)
{
	int op = ovload_op_by_name(t->name);
	struct overrides_op *o;
	bool have_cmds = false;

	if (op < 0)
		return ovload_fail(err, name, t->line, "unknown table [%s] "
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
			rc = ovload_commands(o, op, k, name, err);
			have_cmds = true;
		} else if (strcmp(k->name, "error_pattern") == 0) {
			rc = ovload_pattern(o, op, k, name, err);
		} else if (strcmp(k->name, "timeout_s") == 0) {
			rc = ovload_timeout(o, op, k, name, err);
		} else {
			rc = ovload_fail(err, name, k->line, "unknown key "
			    "'%s' in [%s] (expected commands, error_pattern or "
			    "timeout_s)", k->name, t->name);
		}
		if (rc < 0)
			return -1;
	}
	if (!have_cmds)
		return ovload_fail(err, name, t->line, "[%s] has no commands",
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
		ovload_fail(err, name, doc->tables[0].keys[0].line, "key '%s' "
		    "must be inside an operation's table, such as "
		    "[set_power_limit]", doc->tables[0].keys[0].name);
		goto fail;
	}
	for (size_t i = 1; i < doc->n_tables; i++)
		if (ovload_table(ov, &doc->tables[i], name, err) < 0)
			goto fail;
	toml_free(doc);
	*out = ov;
	return 0;
fail:
	toml_free(doc);
	overrides_free(ov);
	return -1;
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
		struct overrides_op *o = &ov->ops[op];

		for (size_t i = 0; i < o->n_cmds; i++)
			words_free(&o->cmds[i].argv);
		free(o->cmds);
		pcre2_code_free(o->re);
	}
	free(ov);
}
