/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.c - the pieces the `zeus` subcommands share (tool.h): the message
 * prefix and usage errors, libzeus's log handler, the number format, and
 * the options more than one subcommand takes. It calls libzeus only,
 * never a subcommand.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The subcommand being run, for messages: "zeus measure: ...". */
static const char *tool_cmd = NULL;

void
tool_set_cmd(const char *cmd)
{
	tool_cmd = cmd;
}

void
tool_prefix(FILE *f)
{
	fprintf(f, "zeus%s%s: ", tool_cmd != NULL ? " " : "",
	    tool_cmd != NULL ? tool_cmd : "");
}

int
tool_usage_error(const char *fmt, ...)
{
	va_list ap;

	tool_prefix(stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'zeus%s%s --help' for more information.\n",
	    tool_cmd != NULL ? " " : "", tool_cmd != NULL ? tool_cmd : "");
	return EXIT_USAGE;
}

int
tool_fail(const char *what, const struct zeus_error *e)
{
	tool_prefix(stderr);
	if (what != NULL)
		fprintf(stderr, "%s: ", what);
	fprintf(stderr, "%s\n", e->message);
	return EXIT_FAIL;
}

/* ---- libzeus's log lines ------------------------------------------------ */

/*
 * Warnings and errors are printed with the subcommand's prefix and kept,
 * so that a failure the library already logged (a background push) is not
 * printed again when the call that ends it returns the same error. INFO
 * lines saying why a kind of device is absent are kept for the "nothing
 * to measure" message. The handler runs under libzeus's log lock; ours
 * guards what the main thread reads.
 */
#define TOOL_KEPT 16

static pthread_mutex_t tool_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char tool_logged[TOOL_KEPT][ZEUS_ERR_MSG_MAX];
static size_t tool_nlogged;
static char tool_why[2][ZEUS_ERR_MSG_MAX];	/* "no GPUs: ...", CPUs */

static void
tool_log(enum zeus_log_level level, const char *msg, void *user)
{
	(void)user;
	pthread_mutex_lock(&tool_log_lock);
	if (level >= ZEUS_LOG_WARN) {
		tool_prefix(stderr);
		fprintf(stderr, "%s: %s\n", level == ZEUS_LOG_WARN ?
		    "warning" : "error", msg);
		if (tool_nlogged < TOOL_KEPT)
			snprintf(tool_logged[tool_nlogged++],
			    sizeof(tool_logged[0]), "%s", msg);
	} else if (strncmp(msg, "no GPUs: ", 9) == 0) {
		snprintf(tool_why[0], sizeof(tool_why[0]), "%s", msg + 9);
	} else if (strncmp(msg, "no CPUs: ", 9) == 0) {
		snprintf(tool_why[1], sizeof(tool_why[1]), "%s", msg + 9);
	}
	pthread_mutex_unlock(&tool_log_lock);
}

void
tool_log_install(void)
{
	zeus_set_log_handler(tool_log, NULL);
}

bool
tool_already_logged(const char *msg)
{
	bool seen = false;

	pthread_mutex_lock(&tool_log_lock);
	for (size_t i = 0; i < tool_nlogged && !seen; i++)
		seen = strstr(tool_logged[i], msg) != NULL;
	pthread_mutex_unlock(&tool_log_lock);
	return seen;
}

void
tool_log_why(char *buf, size_t size)
{
	pthread_mutex_lock(&tool_log_lock);
	snprintf(buf, size, "%s%s%s", tool_why[0],
	    tool_why[0][0] != '\0' && tool_why[1][0] != '\0' ? "; " : "",
	    tool_why[1]);
	pthread_mutex_unlock(&tool_log_lock);
}

/* ---- numbers ------------------------------------------------------------ */

/*
 * A number as people write it: x rounded to `decimals` places (the finest
 * resolution of what was measured), then the shortest of %.15g..%.17g
 * that reads back as that same double, so 0.505396906 rather than
 * 0.50539690599999998. Not finite: "null" (JSON) or "" (CSV).
 */
void
fmt_num(char *buf, size_t size, double x, int decimals, const char *nan)
{
	double scale = pow(10.0, decimals), r;

	if (!isfinite(x)) {
		snprintf(buf, size, "%s", nan);
		return;
	}
	r = round(x * scale) / scale;
	if (!isfinite(r))
		r = x;
	if (r == 0.0)
		r = 0.0;	/* no "-0" */
	for (int p = 15; p <= 17; p++) {
		snprintf(buf, size, "%.*g", p, r);
		if (strtod(buf, NULL) == r)
			break;
	}
}

/* ---- options ------------------------------------------------------------ */

enum { O_GPUS = 256, O_CPUS, O_SOURCE, O_PUSH, O_JOB, O_WINDOW, O_INSTANCE,
	O_SOCKET, O_HOSTPORT, O_PIPE, O_TOKEN };

/* always: every subcommand takes it */
#define ALWAYS 0u

static const struct opt_def {
	struct tool_opt opt;
	unsigned needs;		/* TOOL_OPTS_*, or ALWAYS */
} shared_opts[] = {
	{ { "gpus", true, O_GPUS }, ALWAYS },
	{ { "cpus", true, O_CPUS }, TOOL_OPTS_CPUS },
	{ { "source", true, O_SOURCE }, TOOL_OPTS_SOURCE },
	{ { "pushgateway", true, O_PUSH }, TOOL_OPTS_PUSH },
	{ { "job", true, O_JOB }, TOOL_OPTS_PUSH },
	{ { "window", true, O_WINDOW }, TOOL_OPTS_PUSH },
	{ { "instance", true, O_INSTANCE }, TOOL_OPTS_PUSH },
	{ { "socket", true, O_SOCKET }, ALWAYS },
	{ { "host-port", true, O_HOSTPORT }, ALWAYS },
	{ { "pipe-name", true, O_PIPE }, ALWAYS },
	{ { "token", true, O_TOKEN }, ALWAYS },
};

#define NSHARED (sizeof(shared_opts) / sizeof(shared_opts[0]))

/* The parse under way (getopt's state is global anyway). */
static struct {
	int argc;
	char **argv;
	const struct tool_opt *own;
	size_t nown;
	const char *help;
	bool permute;
	struct tool_opts *o;
	struct option longs[NSHARED + TOOL_MAX_OWN + 2];
} args;

static int
parse_list(const char *s, struct idlist *l)
{
	l->n = 0;
	l->all = strcmp(s, "all") == 0;
	if (l->all || strcmp(s, "none") == 0)
		return 0;
	while (*s != '\0') {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9' || l->n == ZEUS_MAX_DEVICES)
			return -1;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno != 0 || v > 0xffffffffUL ||
		    (*end != ',' && *end != '\0'))
			return -1;
		l->ids[l->n++] = (unsigned)v;
		s = *end == ',' ? end + 1 : end;
		if (*end == ',' && *s == '\0')
			return -1;
	}
	return 0;
}

/* A shared option's value into *o; 0 or -1. */
static int
parse_shared(struct tool_opts *o, int c, const char *arg)
{
	switch (c) {
	case O_GPUS: return parse_list(arg, &o->gpus);
	case O_CPUS: return parse_list(arg, &o->cpus);
	case O_PUSH: o->pushgateway = arg; return 0;
	case O_JOB: o->job = arg; return 0;
	case O_WINDOW: o->window = arg; return 0;
	case O_INSTANCE: o->instance = arg; return 0;
	case O_SOCKET: o->socket = arg; return 0;
	case O_HOSTPORT: o->host_port = arg; return 0;
	case O_PIPE: o->pipe_name = arg; return 0;
	case O_TOKEN: o->token = arg; return 0;
	case O_SOURCE:
		if (strcmp(arg, "auto") == 0)
			o->source = ZEUS_SOURCE_AUTO;
		else if (strcmp(arg, "direct") == 0)
			o->source = ZEUS_SOURCE_DIRECT;
		else if (strcmp(arg, "zeusd") == 0)
			o->source = ZEUS_SOURCE_ZEUSD;
		else
			return -1;
		return 0;
	}
	return -1;
}

static void
add_long(size_t *n, const struct tool_opt *opt)
{
	args.longs[*n].name = opt->name;
	args.longs[*n].has_arg = opt->has_arg ? required_argument :
	    no_argument;
	args.longs[*n].flag = NULL;
	args.longs[*n].val = opt->val;
	(*n)++;
}

void
tool_args_begin(int argc, char **argv, unsigned shared,
    const struct tool_opt *own, size_t nown, const char *help, bool permute,
    struct tool_opts *o)
{
	size_t n = 0;

	if (nown > TOOL_MAX_OWN)
		abort();	/* a subcommand's table outgrew TOOL_MAX_OWN */
	for (size_t i = 0; i < NSHARED; i++)
		if (shared_opts[i].needs == ALWAYS ||
		    (shared_opts[i].needs & shared))
			add_long(&n, &shared_opts[i].opt);
	for (size_t i = 0; i < nown; i++)
		add_long(&n, &own[i]);
	args.longs[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	args.longs[n] = (struct option){ NULL, 0, NULL, 0 };
	args.argc = argc;
	args.argv = argv;
	args.own = own;
	args.nown = nown;
	args.help = help;
	args.permute = permute;
	args.o = o;
	memset(o, 0, sizeof(*o));
	o->gpus.all = o->cpus.all = true;
	optind = 1;
	opterr = 0;	/* our own one-line messages */
}

/* The name of the option `val`, shared or the subcommand's own. */
static const char *
opt_name(int val)
{
	for (size_t i = 0; args.longs[i].name != NULL; i++)
		if (args.longs[i].val == val)
			return args.longs[i].name;
	return "?";
}

int
tool_args_bad(int val, const char *arg)
{
	return tool_usage_error("bad value for --%s: '%s'", opt_name(val),
	    arg);
}

int
tool_args_next(const char **arg)
{
	int c;

	while ((c = getopt_long(args.argc, args.argv,
	    args.permute ? ":h" : "+:h", args.longs, NULL)) != -1) {
		if (c == 'h') {
			fputs(args.help, stdout);
			exit(0);
		}
		if (c == ':') {
			tool_usage_error("option '%s' needs a value",
			    args.argv[optind - 1]);
			return -1;
		}
		if (c == '?') {
			if (optopt != 0)
				tool_usage_error("unknown option '-%c'",
				    optopt);
			else
				tool_usage_error("unknown option '%s'",
				    args.argv[optind - 1]);
			return -1;
		}
		if (c >= TOOL_OPT_OWN) {
			*arg = optarg;
			return c;
		}
		if (parse_shared(args.o, c, optarg) != 0) {
			tool_args_bad(c, optarg);
			return -1;
		}
	}
	return 0;
}

int
tool_args_end(void)
{
	const struct tool_opts *o = args.o;

	if ((o->pushgateway != NULL) != (o->job != NULL)) {
		tool_usage_error("--pushgateway and --job go together");
		return -1;
	}
	if ((o->socket != NULL) + (o->host_port != NULL) +
	    (o->pipe_name != NULL) > 1) {
		tool_usage_error("--socket, --host-port and --pipe-name "
		    "exclude each other");
		return -1;
	}
	return optind;
}

int
tool_parse_period(const char *s, unsigned *ms)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= 0.01) ||
	    v > 86400.0)
		return -1;
	*ms = (unsigned)(v * 1000.0 + 0.5);
	return 0;
}

void
conn_opts(const struct tool_opts *o, struct zeus_client_options *co)
{
	memset(co, 0, sizeof(*co));
	co->socket_path = o->socket;
	co->host_port = o->host_port;
	co->pipe_name = o->pipe_name;
	co->token = o->token;
}

void
monitor_opts(const struct tool_opts *o, struct zeus_monitor_options *mo,
    struct zeus_client_options *co)
{
	memset(mo, 0, sizeof(*mo));
	conn_opts(o, co);
	if (!o->gpus.all) {
		mo->gpu_indices = o->gpus.ids;
		mo->gpu_count = o->gpus.n;
	}
	if (!o->cpus.all) {
		mo->cpu_indices = o->cpus.ids;
		mo->cpu_count = o->cpus.n;
	}
	mo->source = o->source;
	if (o->socket != NULL || o->host_port != NULL || o->pipe_name != NULL)
		mo->zeusd = co;
}
