/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c - running the override of one write: substitute the write's values
 * into each command's words (expand.c), run the argv through spawn.c, judge
 * the outcome (exit status, timeout, error_pattern matched with PCRE2 in
 * stdout and stderr), log it, and turn a failure into an error message
 * with the tail of what the command printed (sanitize.c).
 *
 * Only numbers are substituted, into words load.c already found valid, and
 * nothing goes through a shell.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "spawn.h"

/* Whether the pattern occurs in one captured stream. */
static int
ovrun_match(const pcre2_code *re, const struct spawn_output *o, bool *hit,
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
ovrun_judge(const struct overrides_op *o, const struct spawn_result *res,
    char *why, size_t whysize)
{
	bool hit = false;

	spawn_describe(res, o->timeout_s * 1000u, why, whysize);
	if (res->status != SPAWN_EXITED || res->code != 0)
		return -1;
	if (o->re == NULL)
		return 0;
	if (ovrun_match(o->re, &res->out, &hit, why, whysize) < 0)
		return -1;
	if (!hit && ovrun_match(o->re, &res->err, &hit, why, whysize) < 0)
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
ovrun_failure(struct zerr *err, const char *head, const struct spawn_result *r)
{
	char bo[ZERR_MSG_MAX], be[ZERR_MSG_MAX];
	size_t used = strlen(head) + 40;
	size_t room = used < ZERR_MSG_MAX ? ZERR_MSG_MAX - used : 0;
	size_t half = room / 2, ko = half, ke = half;

	if (r->out.len < half)
		ke = room - r->out.len;
	else if (r->err.len < half)
		ko = room - r->err.len;
	ovsan_text(r->out.data, r->out.len, ko, bo, sizeof(bo));
	ovsan_text(r->err.data, r->err.len, ke, be, sizeof(be));
	return zerr_set(err, ZERR_INTERNAL, "%s; stdout: \"%s\"; stderr: "
	    "\"%s\"", head, bo, be);
}

static void
ovrun_log(const char *opn, unsigned gpu, const char *disp,
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
ovrun_argv(const struct overrides_cmd *c, enum gpu_write_op op,
    const uint64_t *vals, char *why, size_t whysize)
{
	char **argv = calloc(c->argv.n + 1, sizeof(*argv));
	char *word = malloc(OVEXP_WORD_MAX);
	size_t w;

	if (argv == NULL || word == NULL)
		goto fail;
	for (w = 0; w < c->argv.n; w++) {
		if (ovexp_expand(c->argv.v[w], op, vals, word, OVEXP_WORD_MAX,
		    why, whysize) < 0 || (argv[w] = strdup(word)) == NULL)
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
ovrun_argv_free(char **argv)
{
	for (size_t w = 0; argv[w] != NULL; w++)
		free(argv[w]);
	free(argv);
}

/* Runs command k of op; -1 with the failure in err. */
static int
ovrun_command(const struct overrides_op *o, enum gpu_write_op op, size_t k,
    unsigned gpu, const uint64_t *vals, struct zerr *err)
{
	const char *opn = gpu_write_op_name(op);
	struct spawn_result res;
	struct zerr serr;
	char why[256], disp[600], head[1024];
	char **argv = ovrun_argv(&o->cmds[k], op, vals, why, sizeof(why));
	int rc;

	if (argv == NULL)
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: %s", opn,
		    gpu, why);
	ovsan_argv(argv, disp, sizeof(disp));
	if (spawn_run(argv, o->timeout_s * 1000u, &res, &serr) < 0) {
		spawn_result_free(&res);
		ovrun_argv_free(argv);
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: cannot run "
		    "%s: %s", opn, gpu, disp, serr.msg);
	}
	ovrun_argv_free(argv);
	rc = ovrun_judge(o, &res, why, sizeof(why));
	ovrun_log(opn, gpu, disp, &res, rc < 0 ? why : "ok", rc < 0);
	if (rc < 0) {
		snprintf(head, sizeof(head), "%s on GPU %u: override command "
		    "%zu of %zu failed (%s): %s", opn, gpu, k + 1, o->n_cmds,
		    why, disp);
		ovrun_failure(err, head, &res);
	}
	spawn_result_free(&res);
	return rc;
}

int
overrides_run(const struct overrides *ov, unsigned gpu,
    const struct gpu_write *w, struct zerr *err)
{
	uint64_t vals[OVEXP_COUNT];
	const struct overrides_op *o;

	if (!overrides_has(ov, w->op))
		return zerr_set(err, ZERR_INTERNAL, "%s on GPU %u: no override "
		    "configured", gpu_write_op_name(w->op), gpu);
	o = &ov->ops[w->op];
	ovexp_values(gpu, w, vals);
	for (size_t k = 0; k < o->n_cmds; k++)
		if (ovrun_command(o, w->op, k, gpu, vals, err) < 0)
			return -1;
	return 0;
}
