/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faults.c - fault rules, the control file and the call log of both
 * simulators (faults.h says what and how).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

/* ------------------------------------------------------------------------
 * Parsing. Everything here is untrusted input.
 */

/* A decimal number no larger than max, the whole of s. */
static bool
sim_parse_decimal(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s == '\0' || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* A code name, with or without the dialect's prefix, or a number. */
static bool
sim_parse_code(const struct sim_dialect *d, const char *s, unsigned *out)
{
	size_t plen = d->prefix != NULL ? strlen(d->prefix) : 0;
	unsigned long v;

	if (plen > 0 && strncmp(s, d->prefix, plen) == 0)
		s += plen;
	else if (d->success != NULL && strcmp(s, d->success) == 0)
		s = "SUCCESS";
	for (unsigned i = 0; i < d->ncodes; i++) {
		if (strcmp(s, d->codes[i].name) == 0) {
			*out = d->codes[i].code;
			return true;
		}
	}
	if (!sim_parse_decimal(s, d->code_max, &v))
		return false;
	*out = (unsigned)v;
	return true;
}

int
sim_rule_parse(const struct sim_dialect *d, char *line,
    struct sim_rules *rules)
{
	char *save = NULL, *tok[4];
	unsigned ntok = 0;
	struct sim_rule r = { .fn = -1, .gpu = -1 };
	unsigned long v;

	for (char *t = strtok_r(line, " \t\r\n", &save); t != NULL;
	    t = strtok_r(NULL, " \t\r\n", &save)) {
		if (ntok == 0 && t[0] == '#')
			return 0;
		if (ntok == 4) {
			if (d->extra_words)
				break;
			return -1;
		}
		tok[ntok++] = t;
	}
	if (ntok == 0)
		return 0;
	if (ntok != 4)
		return -1;
	if (strcmp(tok[0], "fail") == 0)
		r.kind = SIM_FAIL;
	else if (strcmp(tok[0], "delay") == 0)
		r.kind = SIM_DELAY;
	else
		return -1;
	if (strcmp(tok[1], "*") != 0) {
		for (unsigned i = 0; i < d->nfns && r.fn < 0; i++)
			if (strcmp(tok[1], d->fns[i]) == 0)
				r.fn = (int)i;
		if (r.fn < 0)
			return -1;
	}
	if (strcmp(tok[2], "*") != 0) {
		if (!sim_parse_decimal(tok[2], d->gpu_max, &v))
			return -1;
		r.gpu = (int)v;
	}
	if (r.kind == SIM_FAIL) {
		if (!sim_parse_code(d, tok[3], &r.code))
			return -1;
	} else {
		if (!sim_parse_decimal(tok[3], SIM_MAX_DELAY_MS, &v))
			return -1;
		r.delay_ms = (unsigned)v;
	}
	if (rules->n == SIM_MAX_RULES)
		return -1;
	rules->r[rules->n++] = r;
	return 0;
}

/*
 * Replaces `rules` with those of `text`. A bad rule is reported on stderr
 * when the dialect is strict; it makes the whole parse fail (-1) when
 * `stop`, else it is skipped.
 */
int
sim_rules_parse(const struct sim_dialect *d, const char *text,
    const char *seps, bool stop, struct sim_rules *rules)
{
	char line[SIM_RULE_MAX];

	rules->n = 0;
	while (*text != '\0') {
		size_t len = strcspn(text, seps);

		if (len >= sizeof(line)) {
			if (d->strict)
				fprintf(stderr, "%s: rule longer than %d bytes\n",
				    d->tag, SIM_RULE_MAX - 1);
			if (stop)
				return -1;
		} else {
			memcpy(line, text, len);
			line[len] = '\0';
			if (sim_rule_parse(d, line, rules) != 0) {
				/* strtok_r cut the copy up: the text again */
				if (d->strict)
					fprintf(stderr, "%s: bad rule: %.*s\n",
					    d->tag, (int)(len < 80 ? len : 80),
					    text);
				if (stop)
					return -1;
			}
		}
		text += len;
		if (*text != '\0')
			text++;
	}
	return 0;
}

const struct sim_rule *
sim_rule_find(const struct sim_rules *rules, enum sim_rule_kind kind,
    unsigned fn, int gpu)
{
	for (unsigned i = 0; i < rules->n; i++) {
		const struct sim_rule *r = &rules->r[i];

		if (r->kind == kind && (r->fn < 0 || (unsigned)r->fn == fn) &&
		    (r->gpu < 0 || r->gpu == gpu))
			return r;
	}
	return NULL;
}

const struct sim_code *
sim_code_find(const struct sim_dialect *d, unsigned code)
{
	for (unsigned i = 0; i < d->ncodes; i++)
		if (d->codes[i].code == code)
			return &d->codes[i];
	return NULL;
}

/* ------------------------------------------------------------------------
 * Configuration and the control file.
 */

int
sim_faults_configure(struct sim_faults *f)
{
	const struct sim_dialect *d = f->d;
	const char *s;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	s = getenv("ZEUS_SIM_FAULTS");
	if (sim_rules_parse(d, s != NULL ? s : "", ";\n", d->strict,
	    &f->env_rules) != 0) {
		rc = -1;
		goto out;
	}

	f->file_rules.n = 0;
	f->stamp.valid = false;
	f->control_path[0] = '\0';
	s = getenv("ZEUS_SIM_CONTROL");
	if (!d->control_live && s != NULL && *s != '\0') {
		if (strlen(s) >= sizeof(f->control_path)) {
			if (d->strict) {
				fprintf(stderr, "%s: ZEUS_SIM_CONTROL too long\n",
				    d->tag);
				rc = -1;
				goto out;
			}
		} else {
			strcpy(f->control_path, s);
		}
	}

	s = getenv("ZEUS_SIM_LOG");
	if (f->log_fd < 0 && s != NULL && *s != '\0') {
		f->log_fd = sim_os_open_log(s);
		if (f->log_fd < 0 && d->strict) {
			fprintf(stderr, "%s: cannot open ZEUS_SIM_LOG: %s\n",
			    d->tag, strerror(errno));
			rc = -1;
		}
	}
out:
	pthread_mutex_unlock(&f->lock);
	return rc;
}

void
sim_faults_close_log(struct sim_faults *f)
{
	pthread_mutex_lock(&f->lock);
	if (f->log_fd >= 0)
		close(f->log_fd);
	f->log_fd = -1;
	pthread_mutex_unlock(&f->lock);
}

static bool
sim_stamp_same(const struct sim_stamp *a, const struct sim_stamp *b)
{
	return a->valid && b->valid && a->dev == b->dev && a->ino == b->ino &&
	    a->size == b->size && a->mtim_s == b->mtim_s &&
	    a->mtim_ns == b->mtim_ns && a->ctim_s == b->ctim_s &&
	    a->ctim_ns == b->ctim_ns;
}

/* Re-reads the control file if it changed. Under f->lock. */
static void
sim_control_refresh(struct sim_faults *f)
{
	struct sim_stamp st;
	char *buf;
	ssize_t got;
	size_t len = 0;
	int fd;

	if (f->d->control_live) {
		/* The path as it is now; a new one is read afresh. */
		const char *s = getenv("ZEUS_SIM_CONTROL");

		if (s == NULL || strlen(s) >= sizeof(f->control_path))
			s = "";
		if (strcmp(s, f->control_path) != 0) {
			strcpy(f->control_path, s);
			f->stamp.valid = false;
			f->file_rules.n = 0;
		}
	}
	if (f->control_path[0] == '\0')
		return;
	if (sim_os_stamp(f->control_path, &st) != 0) {
		f->stamp.valid = false;
		f->file_rules.n = 0;
		return;
	}
	if (sim_stamp_same(&f->stamp, &st))
		return;
	f->stamp = st;
	f->file_rules.n = 0;
	if ((fd = sim_os_open_read(f->control_path)) < 0)
		return;
	if ((buf = malloc(SIM_CONTROL_MAX + 1)) == NULL) {
		close(fd);
		return;
	}
	while (len < SIM_CONTROL_MAX &&
	    (got = read(fd, buf + len, SIM_CONTROL_MAX - len)) > 0)
		len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	sim_rules_parse(f->d, buf, "\n", false, &f->file_rules);
	free(buf);
}

/* The first matching rule of a kind, control file first. Under f->lock. */
static const struct sim_rule *
sim_rule_match(const struct sim_faults *f, enum sim_rule_kind kind,
    unsigned fn, int gpu)
{
	const struct sim_rule *r;

	r = sim_rule_find(&f->file_rules, kind, fn, gpu);
	if (r == NULL)
		r = sim_rule_find(&f->env_rules, kind, fn, gpu);
	return r;
}

/* ------------------------------------------------------------------------
 * Calls: fault injection, delay, log.
 */

void
sim_call_start(struct sim_call *c, unsigned fn, int gpu)
{
	c->fn = fn;
	c->gpu = gpu;
	c->start_ns = sim_now_ns();
	c->log_fd = -1;
	c->ruled = false;
	c->args[0] = '\0';
}

unsigned
sim_faults_begin(struct sim_faults *f, struct sim_call *c)
{
	const struct sim_rule *r;
	unsigned code = 0, delay_ms = 0;

	pthread_mutex_lock(&f->lock);
	c->log_fd = f->log_fd;
	sim_control_refresh(f);
	if ((r = sim_rule_match(f, SIM_FAIL, c->fn, c->gpu)) != NULL) {
		code = r->code;
		c->ruled = true;
	}
	if ((r = sim_rule_match(f, SIM_DELAY, c->fn, c->gpu)) != NULL)
		delay_ms = r->delay_ms;
	pthread_mutex_unlock(&f->lock);
	if (delay_ms > 0) {
		struct timespec ts = { delay_ms / 1000,
		    (long)(delay_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return code;
}

void
sim_faults_take_log(struct sim_faults *f, struct sim_call *c)
{
	pthread_mutex_lock(&f->lock);
	c->log_fd = f->log_fd;
	pthread_mutex_unlock(&f->lock);
}

void
sim_call_args(struct sim_call *c, const char *fmt, ...)
{
	va_list ap;

	if (c->log_fd < 0)	/* only the call log shows them */
		return;
	va_start(ap, fmt);
	vsnprintf(c->args, sizeof(c->args), fmt, ap);
	va_end(ap);
}

unsigned
sim_faults_end(const struct sim_faults *f, const struct sim_call *c,
    unsigned rc)
{
	const struct sim_code *code;
	char line[512], gpu[16], num[16];
	int n;

	if (c->log_fd < 0)
		return rc;
	if (c->gpu < 0)
		strcpy(gpu, "-");
	else
		snprintf(gpu, sizeof(gpu), "%d", c->gpu);
	code = sim_code_find(f->d, rc);
	snprintf(num, sizeof(num), "%u", rc);
	n = snprintf(line, sizeof(line), "%llu %s %s%s%s rc=%s end_ns=%llu\n",
	    (unsigned long long)c->start_ns,
	    c->fn < f->d->nfns ? f->d->fns[c->fn] : "?", gpu,
	    c->args[0] != '\0' ? " " : "", c->args,
	    code != NULL ? code->name : f->d->other != NULL ? f->d->other :
	    num, (unsigned long long)sim_now_ns());
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!write(c->log_fd, line, (size_t)n);
	return rc;
}
