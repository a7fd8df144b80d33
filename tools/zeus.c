/* SPDX-License-Identifier: Apache-2.0 */
/*
 * zeus.c - the `zeus` command-line tool, a thin shell over libzeus:
 *
 *   zeus measure [opts] -- COMMAND...   energy of one command (monitor +
 *                                       optional histogram push)
 *   zeus gauge --pushgateway URL --job NAME [--period S]
 *                                       pushes GPU power until SIGINT/TERM
 *   zeus daemon discover|power|energy|...
 *                                       queries a zeusd (client)
 *
 * Every subcommand has its own --help; a usage error is one line naming the
 * subcommand plus a pointer to that help, and exits 2. libzeus's warnings
 * come through this file's log handler, which prints each failure once
 * (see tool_log). See docs/libzeus.md.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cap_value.h"
#include "common/lease_label.h"
#include "measure_cap.h"
#include "tool.h"
#include "zeus/zeus.h"

static const char measure_usage[] =
    "usage: zeus measure [--gpus LIST] [--cpus LIST] [--json | --csv]\n"
    "                    [--output FILE] [--source auto|direct|zeusd]\n"
    "                    [--socket PATH | --host-port HOST:PORT |\n"
    "                     --pipe-name NAME] [--token T]\n"
    "                    [--pushgateway URL --job NAME [--window NAME]\n"
    "                     [--instance NAME] [--counter S]]\n"
    "                    [--power-limit WATTS] [--gpu-clocks MIN:MAX]\n"
    "                    [--mem-clocks MIN:MAX] [--lease-label LABEL]\n"
    "                    -- COMMAND...\n"
    "\n"
    "Runs COMMAND and prints the time and the energy of each device on\n"
    "stderr (--output FILE, or - for stdout): as text, as one JSON object\n"
    "(--json), or as CSV, a header line and one row per window (--csv).\n"
    "Exits with COMMAND's status (128+N when killed by signal N, 127 when\n"
    "it cannot be run), 1 when measuring fails, 2 on a usage error.\n"
    "LIST is 'all' (default), 'none', or comma-separated indices.\n"
    "Sources: zeusd when --socket/--host-port/--pipe-name is given or\n"
    "ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT or ZEUSD_PIPE_NAME is set (on Windows\n"
    "also when zeusd's default pipe \\\\.\\pipe\\zeusd exists), else NVML\n"
    "(ZEUS_NVML_LIBRARY) and RAPL (ZEUS_RAPL_DIR) directly.\n"
    "--pushgateway observes the window (default: COMMAND's base name) in\n"
    "the energy histogram and pushes it; --counter S also pushes the\n"
    "cumulative counter every S seconds while COMMAND runs. --instance\n"
    "defaults to the host name.\n"
    "--power-limit, --gpu-clocks, --mem-clocks (MHz) set the GPUs of --gpus\n"
    "through zeusd for COMMAND only: applied before it runs, released\n"
    "after (a zeusd with --gpu-leases restores them, also when zeus is\n"
    "killed, and reports the lease's energy, shown beside the measured).\n"
    "A refused setting stops before COMMAND runs, with zeusd's message,\n"
    "anything applied given back, and exit status 4 (invalid value),\n"
    "5 (no permission) or 6 (GPU leased by another user); 1 when zeusd\n"
    "cannot be reached or a setting could not be restored.\n"
    "--lease-label LABEL names the lease in zeusd's ledger (GET\n"
    "/gpu/leases, the audit log): 1 to 64 letters, digits, . _ : @ + / -.\n";

static const char gauge_usage[] =
    "usage: zeus gauge --pushgateway URL --job NAME [--period S]\n"
    "                  [--window NAME] [--gpus LIST] [--instance NAME]\n"
    "                  [--source auto|direct|zeusd]\n"
    "                  [--socket PATH | --host-port HOST:PORT |\n"
    "                   --pipe-name NAME] [--token T]\n"
    "\n"
    "Pushes the power of each GPU every --period seconds (default 1) to\n"
    "window 'gauge' (or --window) until SIGINT or SIGTERM, then exits 0.\n";

static const char daemon_usage[] =
    "usage: zeus daemon discover|power|energy [--gpus LIST] [--cpus LIST]\n"
    "                   [conn]\n"
    "       zeus daemon stream-gpu|stream-cpu [--count N] [--gpus LIST]\n"
    "                   [--cpus LIST] [conn]\n"
    "       zeus daemon set-power-limit --gpus LIST --mw N [conn]\n"
    "conn:  [--socket PATH | --host-port HOST:PORT | --pipe-name NAME]\n"
    "       [--token T] (default: ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT or\n"
    "       ZEUSD_PIPE_NAME, on Windows then \\\\.\\pipe\\zeusd; ZEUSD_TOKEN;\n"
    "       prefer ZEUSD_TOKEN: other users can read --token in ps)\n"
    "\n"
    "Prints the answer as JSON (streams: one JSON line per sample).\n"
    "Exits 4 when zeusd refuses (HTTP 4xx: bad input, unknown device,\n"
    "authentication), 1 on any other failure, 2 on a usage error.\n";

static const char main_usage[] =
    "usage: zeus measure [options] -- COMMAND...\n"
    "       zeus gauge --pushgateway URL --job NAME [options]\n"
    "       zeus daemon VERB [options]\n"
    "       zeus --version | --help\n"
    "\n"
    "'zeus SUBCOMMAND --help' describes each.\n";

/* The subcommand being run, for messages: "zeus measure: ...". */
static const char *tool_cmd = NULL;

void
tool_prefix(FILE *f)
{
	fprintf(f, "zeus%s%s: ", tool_cmd != NULL ? " " : "",
	    tool_cmd != NULL ? tool_cmd : "");
}

/* "zeus CMD: <msg>" and the pointer to CMD's help; returns 2. */
static int
usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
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

/* Whether a logged warning already said `msg`. */
static bool
tool_already_logged(const char *msg)
{
	bool seen = false;

	pthread_mutex_lock(&tool_log_lock);
	for (size_t i = 0; i < tool_nlogged && !seen; i++)
		seen = strstr(tool_logged[i], msg) != NULL;
	pthread_mutex_unlock(&tool_log_lock);
	return seen;
}

/* "zeus CMD: [what: ]<message>"; returns 1. */
static int
fail(const char *what, const struct zeus_error *e)
{
	tool_prefix(stderr);
	if (what != NULL)
		fprintf(stderr, "%s: ", what);
	fprintf(stderr, "%s\n", e->message);
	return EXIT_FAIL;
}

/* ---- options ------------------------------------------------------------------ */

/* A device list: all (ids NULL), none, or indices. */
struct idlist {
	unsigned ids[ZEUS_MAX_DEVICES];
	size_t n;
	bool all;
};

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

enum out_format { OUT_TEXT, OUT_JSON, OUT_CSV };

struct opts {
	struct idlist gpus, cpus;
	enum out_format format;
	const char *output, *pushgateway, *job, *window, *instance;
	const char *socket, *host_port, *pipe_name, *token;
	enum zeus_source source;
	unsigned period_ms;
	unsigned counter_ms;
	unsigned long count;
	unsigned long mw;
	bool has_mw;
	struct cap_settings cap;
};

enum { O_GPUS = 256, O_CPUS, O_JSON, O_CSV, O_OUTPUT, O_SOURCE, O_PUSH,
	O_JOB, O_WINDOW, O_INSTANCE, O_PERIOD, O_SOCKET, O_HOSTPORT, O_TOKEN,
	O_PIPE,
	O_COUNTER, O_COUNT, O_MW, O_POWER_LIMIT, O_GPU_CLOCKS, O_MEM_CLOCKS,
	O_LEASE_LABEL };

/* Which subcommands take an option. */
#define FOR_MEASURE 1u
#define FOR_GAUGE 2u
#define FOR_DAEMON 4u
#define FOR_ALL (FOR_MEASURE | FOR_GAUGE | FOR_DAEMON)

struct opt_def {
	const char *name;
	int has_arg;
	int val;
	unsigned for_cmds;
};

static const struct opt_def opt_defs[] = {
	{ "gpus", required_argument, O_GPUS, FOR_ALL },
	{ "cpus", required_argument, O_CPUS, FOR_MEASURE | FOR_DAEMON },
	{ "json", no_argument, O_JSON, FOR_MEASURE },
	{ "csv", no_argument, O_CSV, FOR_MEASURE },
	{ "output", required_argument, O_OUTPUT, FOR_MEASURE },
	{ "source", required_argument, O_SOURCE, FOR_MEASURE | FOR_GAUGE },
	{ "pushgateway", required_argument, O_PUSH, FOR_MEASURE | FOR_GAUGE },
	{ "job", required_argument, O_JOB, FOR_MEASURE | FOR_GAUGE },
	{ "window", required_argument, O_WINDOW, FOR_MEASURE | FOR_GAUGE },
	{ "instance", required_argument, O_INSTANCE, FOR_MEASURE | FOR_GAUGE },
	{ "period", required_argument, O_PERIOD, FOR_GAUGE },
	{ "socket", required_argument, O_SOCKET, FOR_ALL },
	{ "host-port", required_argument, O_HOSTPORT, FOR_ALL },
	{ "pipe-name", required_argument, O_PIPE, FOR_ALL },
	{ "token", required_argument, O_TOKEN, FOR_ALL },
	{ "counter", required_argument, O_COUNTER, FOR_MEASURE },
	{ "count", required_argument, O_COUNT, FOR_DAEMON },
	{ "mw", required_argument, O_MW, FOR_DAEMON },
	{ "power-limit", required_argument, O_POWER_LIMIT, FOR_MEASURE },
	{ "gpu-clocks", required_argument, O_GPU_CLOCKS, FOR_MEASURE },
	{ "mem-clocks", required_argument, O_MEM_CLOCKS, FOR_MEASURE },
	{ "lease-label", required_argument, O_LEASE_LABEL, FOR_MEASURE },
};

#define NOPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static const char *
opt_name(int val)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opt_defs[i].val == val)
			return opt_defs[i].name;
	return "?";
}

/* Seconds (decimal, > 0, at most a day) to ms. */
static int
parse_period(const char *s, unsigned *ms)
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

static int
parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno != 0 || *end != '\0' || *out > max ? -1 : 0;
}

static int
parse_opt(struct opts *o, int c, const char *arg)
{
	switch (c) {
	case O_GPUS: return parse_list(arg, &o->gpus);
	case O_CPUS: return parse_list(arg, &o->cpus);
	case O_JSON: o->format = OUT_JSON; return 0;
	case O_CSV: o->format = OUT_CSV; return 0;
	case O_OUTPUT: o->output = arg; return 0;
	case O_PUSH: o->pushgateway = arg; return 0;
	case O_JOB: o->job = arg; return 0;
	case O_WINDOW: o->window = arg; return 0;
	case O_INSTANCE: o->instance = arg; return 0;
	case O_PERIOD: return parse_period(arg, &o->period_ms);
	case O_SOCKET: o->socket = arg; return 0;
	case O_HOSTPORT: o->host_port = arg; return 0;
	case O_PIPE: o->pipe_name = arg; return 0;
	case O_TOKEN: o->token = arg; return 0;
	case O_COUNTER: return parse_period(arg, &o->counter_ms);
	case O_COUNT: return parse_ulong(arg, 1000000, &o->count);
	case O_MW:
		o->has_mw = true;
		return parse_ulong(arg, 0xffffffffUL, &o->mw);
	case O_POWER_LIMIT: return cap_parse_watts(arg, &o->cap);
	case O_GPU_CLOCKS:
		o->cap.has_gpu_clocks = true;
		return cap_value_clocks(arg, o->cap.gpu_clocks);
	case O_MEM_CLOCKS:
		o->cap.has_mem_clocks = true;
		return cap_value_clocks(arg, o->cap.mem_clocks);
	case O_LEASE_LABEL:
		o->cap.lease_label = arg;
		return lease_label_invalid(arg) != NULL ? -1 : 0;
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

/*
 * Parses argv after the subcommand: only the options of `for_cmd`, and
 * --help, which prints `help` and exits 0. Returns the index of the first
 * operand, or -1 after a usage error was printed. `permute`: options may
 * follow operands (daemon); else parsing stops at the first operand
 * (measure's command).
 */
static int
parse_args(int argc, char **argv, struct opts *o, unsigned for_cmd,
    const char *help, bool permute)
{
	struct option longs[NOPTS + 2];
	size_t n = 0;
	bool json = false, csv = false;
	int c;

	for (size_t i = 0; i < NOPTS; i++) {
		if (!(opt_defs[i].for_cmds & for_cmd))
			continue;
		longs[n].name = opt_defs[i].name;
		longs[n].has_arg = opt_defs[i].has_arg;
		longs[n].flag = NULL;
		longs[n].val = opt_defs[i].val;
		n++;
	}
	longs[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longs[n] = (struct option){ NULL, 0, NULL, 0 };
	memset(o, 0, sizeof(*o));
	o->gpus.all = o->cpus.all = true;
	optind = 1;
	opterr = 0;	/* our own one-line messages */
	while ((c = getopt_long(argc, argv, permute ? ":h" : "+:h", longs,
	    NULL)) != -1) {
		if (c == 'h') {
			fputs(help, stdout);
			exit(0);
		}
		if (c == ':') {
			usage_error("option '%s' needs a value",
			    argv[optind - 1]);
			return -1;
		}
		if (c == '?') {
			if (optopt != 0)
				usage_error("unknown option '-%c'", optopt);
			else
				usage_error("unknown option '%s'",
				    argv[optind - 1]);
			return -1;
		}
		json |= c == O_JSON;
		csv |= c == O_CSV;
		if (parse_opt(o, c, optarg) != 0) {
			usage_error("bad value for --%s: '%s'", opt_name(c),
			    optarg);
			return -1;
		}
	}
	if (json && csv) {
		usage_error("--json and --csv exclude each other");
		return -1;
	}
	if ((o->pushgateway != NULL) != (o->job != NULL)) {
		usage_error("--pushgateway and --job go together");
		return -1;
	}
	if ((o->socket != NULL) + (o->host_port != NULL) +
	    (o->pipe_name != NULL) > 1) {
		usage_error("--socket, --host-port and --pipe-name exclude each "
		    "other");
		return -1;
	}
	return optind;
}

/* Where zeusd is, from the flags (all NULL: the environment decides). */
static void
conn_opts(const struct opts *o, struct zeus_client_options *co)
{
	memset(co, 0, sizeof(*co));
	co->socket_path = o->socket;
	co->host_port = o->host_port;
	co->pipe_name = o->pipe_name;
	co->token = o->token;
}

static void
monitor_opts(const struct opts *o, struct zeus_monitor_options *mo,
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

/*
 * The monitor measures nothing although "all" of some kind was asked for
 * (no NVML, no RAPL, no zeusd, or a zeusd that offers nothing): say so,
 * with the library's reasons, rather than print a bare time later.
 */
static void
warn_if_nothing(struct zeus_monitor *m, const struct opts *o)
{
	char why[2 * ZEUS_ERR_MSG_MAX + 8] = "";

	if (zeus_monitor_gpus(m, NULL, 0) > 0 ||
	    zeus_monitor_cpus(m, NULL, NULL, 0) > 0 ||
	    (!o->gpus.all && !o->cpus.all))
		return;
	tool_prefix(stderr);
	if (zeus_monitor_source(m) == ZEUS_SOURCE_ZEUSD) {
		fprintf(stderr, "warning: nothing to measure: the zeusd lists "
		    "no GPU and no CPU package (or serves neither "
		    "gpu-read nor cpu-read)\n");
		return;
	}
	pthread_mutex_lock(&tool_log_lock);
	snprintf(why, sizeof(why), "%s%s%s", tool_why[0],
	    tool_why[0][0] != '\0' && tool_why[1][0] != '\0' ? "; " : "",
	    tool_why[1]);
	pthread_mutex_unlock(&tool_log_lock);
	fprintf(stderr, "warning: nothing to measure: no GPU through NVML "
	    "and no readable RAPL package%s%s%s; set ZEUS_NVML_LIBRARY or "
	    "ZEUS_RAPL_DIR, read RAPL as root, or name a zeusd "
	    "(ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT)\n", why[0] ? " (" : "", why,
	    why[0] ? ")" : "");
}

/* ---- measure ----------------------------------------------------------------- */

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

static double
meas_total(const struct zeus_measurement *m)
{
	double total = 0;

	for (size_t i = 0; i < m->gpu_count; i++)
		total += m->gpu[i].joules;
	for (size_t i = 0; i < m->cpu_count; i++)
		total += m->cpu[i].joules;
	for (size_t i = 0; i < m->dram_count; i++)
		total += m->dram[i].joules;
	return total;
}

/* With GPU settings (cap), each GPU's average power and the settings'
 * report too. */
static void
print_text(FILE *f, const struct zeus_measurement *m, int status,
    const struct cap *cap)
{
	fprintf(f, "zeus: time %.3f s\n", m->time_s);
	for (size_t i = 0; i < m->gpu_count; i++) {
		fprintf(f, "zeus: gpu %u %.3f J", m->gpu[i].index,
		    m->gpu[i].joules);
		if (cap != NULL && m->time_s > 0)
			fprintf(f, ", %.1f W average",
			    m->gpu[i].joules / m->time_s);
		fputc('\n', f);
	}
	for (size_t i = 0; i < m->cpu_count; i++)
		fprintf(f, "zeus: cpu %u %.3f J\n", m->cpu[i].index,
		    m->cpu[i].joules);
	for (size_t i = 0; i < m->dram_count; i++)
		fprintf(f, "zeus: dram %u %.3f J\n", m->dram[i].index,
		    m->dram[i].joules);
	fprintf(f, "zeus: total %.3f J (exit status %d)\n", meas_total(m),
	    status);
	if (cap != NULL)
		cap_print_text(f, cap, m);
}

static void
json_energy(FILE *f, const char *key, const struct zeus_energy *e, size_t n)
{
	char num[64];

	fprintf(f, ",\"%s\":{", key);
	for (size_t i = 0; i < n; i++) {
		fmt_num(num, sizeof(num), e[i].joules, J_DECIMALS, "null");
		fprintf(f, "%s\"%u\":%s", i ? "," : "", e[i].index, num);
	}
	fputc('}', f);
}

/* A JSON string; bytes that are not UTF-8 become '?'. */
static void
json_str(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *out;

	if (j == NULL) {
		char ascii[ZEUS_ERR_MSG_MAX];
		size_t i;

		for (i = 0; s[i] != '\0' && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
		ascii[i] = '\0';
		j = json_string(ascii);
	}
	out = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	fputs(out != NULL ? out : "null", f);
	free(out);
	json_decref(j);
}

static void
print_json(FILE *f, const struct zeus_measurement *m, int status,
    const char *push_error, const struct cap *cap)
{
	char num[64];

	fmt_num(num, sizeof(num), m->time_s, S_DECIMALS, "null");
	fprintf(f, "{\"time_s\":%s", num);
	json_energy(f, "gpu_energy_j", m->gpu, m->gpu_count);
	json_energy(f, "cpu_energy_j", m->cpu, m->cpu_count);
	json_energy(f, "dram_energy_j", m->dram, m->dram_count);
	fmt_num(num, sizeof(num), meas_total(m), J_DECIMALS, "null");
	fprintf(f, ",\"total_energy_j\":%s,\"exit_status\":%d"
	    ",\"push_error\":", num, status);
	if (push_error != NULL)
		json_str(f, push_error);
	else
		fputs("null", f);
	if (cap != NULL) {
		fputs(",\"gpu_avg_w\":{", f);
		for (size_t i = 0; i < m->gpu_count; i++) {
			fmt_num(num, sizeof(num), m->time_s > 0 ?
			    m->gpu[i].joules / m->time_s : NAN, J_DECIMALS,
			    "null");
			fprintf(f, "%s\"%u\":%s", i ? "," : "",
			    m->gpu[i].index, num);
		}
		fputc('}', f);
		cap_print_json(f, cap, m);
	}
	fputs("}\n", f);
}

/* A CSV field (RFC 4180): quoted when it holds , " CR or LF. */
static void
csv_str(FILE *f, const char *s)
{
	if (strpbrk(s, ",\"\r\n") == NULL) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void
csv_energy(FILE *f, const struct zeus_energy *e, size_t n, const char *kind,
    bool header)
{
	char num[64];

	for (size_t i = 0; i < n; i++) {
		if (header) {
			fprintf(f, ",%s%u_j", kind, e[i].index);
		} else {
			fmt_num(num, sizeof(num), e[i].joules, J_DECIMALS, "");
			fprintf(f, ",%s", num);
		}
	}
}

/* The header line, then one row per window (measure has one). */
static void
print_csv(FILE *f, const char *window, const struct zeus_measurement *m,
    int status, const struct cap *cap)
{
	char num[64];

	fputs("window,time_s", f);
	csv_energy(f, m->gpu, m->gpu_count, "gpu", true);
	csv_energy(f, m->cpu, m->cpu_count, "cpu", true);
	csv_energy(f, m->dram, m->dram_count, "dram", true);
	fputs(",total_j,exit_status", f);
	if (cap != NULL)
		cap_print_csv(f, cap, true);
	fputc('\n', f);
	csv_str(f, window);
	fmt_num(num, sizeof(num), m->time_s, S_DECIMALS, "");
	fprintf(f, ",%s", num);
	csv_energy(f, m->gpu, m->gpu_count, "gpu", false);
	csv_energy(f, m->cpu, m->cpu_count, "cpu", false);
	csv_energy(f, m->dram, m->dram_count, "dram", false);
	fmt_num(num, sizeof(num), meas_total(m), J_DECIMALS, "");
	fprintf(f, ",%s,%d", num, status);
	if (cap != NULL)
		cap_print_csv(f, cap, false);
	fputc('\n', f);
}

static FILE *
open_output(const char *path)
{
	if (path == NULL)
		return stderr;
	if (strcmp(path, "-") == 0)
		return stdout;
	return fopen(path, "w");
}

static const char *
base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s != NULL && s[1] != '\0' ? s + 1 : p;
}

/*
 * A push failure: kept for --json (the first one), and printed unless a
 * warning already said it (a counter's thread logs its first failure,
 * and the histogram's push to the same group fails the same way).
 */
static void
push_failed(const struct zeus_error *e, char *first, size_t size)
{
	if (first[0] == '\0')
		snprintf(first, size, "%s", e->message);
	if (tool_already_logged(e->message))
		return;
	tool_prefix(stderr);
	fprintf(stderr, "push failed: %s\n", e->message);
}

/*
 * zeusd's id of the monitor's GPU `index`: the index-th entry of
 * CUDA_VISIBLE_DEVICES, or the index itself when it is unset. The
 * monitor has already checked the variable (integers, none twice).
 */
static int
zeusd_gpu_id(unsigned index, unsigned *id)
{
	const char *s = getenv("CUDA_VISIBLE_DEVICES");

	if (s == NULL) {
		*id = index;
		return 0;
	}
	for (unsigned i = 0; *s != '\0'; i++) {
		char *end;
		unsigned long v;

		s += strspn(s, " \t");
		errno = 0;
		v = strtoul(s, &end, 10);
		if (end == s || errno != 0 || v > 0xffffffffUL)
			return -1;
		if (i == index) {
			*id = (unsigned)v;
			return 0;
		}
		s = strchr(end, ',');
		if (s == NULL)
			break;
		s++;
	}
	return -1;
}

/* The settings of --power-limit etc. on the monitor's GPUs; 0 or an exit
 * status (said). */
static int
measure_cap_start(const struct opts *o, struct zeus_monitor *m,
    struct cap **cap)
{
	struct zeus_client_options co;
	unsigned index[ZEUS_MAX_DEVICES], ids[ZEUS_MAX_DEVICES];
	size_t n = zeus_monitor_gpus(m, index, ZEUS_MAX_DEVICES);

	if (n == 0) {
		tool_prefix(stderr);
		fprintf(stderr, "no GPU to apply the settings to\n");
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++)
		if (zeusd_gpu_id(index[i], &ids[i]) != 0) {
			tool_prefix(stderr);
			fprintf(stderr, "GPU %u: not in CUDA_VISIBLE_DEVICES\n",
			    index[i]);
			return EXIT_FAIL;
		}
	conn_opts(o, &co);
	return cap_start(&o->cap, &co, index, ids, n, cap);
}

static int
cmd_measure(int argc, char **argv)
{
	struct zeus_monitor_options mo;
	struct zeus_client_options co;
	struct zeus_histogram_options ho = { 0 };
	struct zeus_energy_histogram *h = NULL;
	struct zeus_counter_options cto = { 0 };
	struct zeus_energy_counter *ctr = NULL;
	struct zeus_monitor *m = NULL;
	struct cap *cap = NULL;
	static struct zeus_measurement meas;
	static char push_error[ZEUS_ERR_MSG_MAX];
	struct zeus_error e;
	const char *window;
	struct opts o;
	int first, status, rc;
	bool restored = true;
	FILE *out;

	first = parse_args(argc, argv, &o, FOR_MEASURE, measure_usage, false);
	if (first < 0)
		return EXIT_USAGE;
	if (first >= argc)
		return usage_error("needs a command after --");
	if (o.counter_ms > 0 && o.pushgateway == NULL)
		return usage_error("--counter needs --pushgateway");
	if (cap_any(&o.cap) && o.source == ZEUS_SOURCE_DIRECT)
		return usage_error("GPU settings go through zeusd: not with "
		    "--source direct");
	if (o.cap.lease_label != NULL && !cap_any(&o.cap))
		return usage_error("--lease-label names the lease that "
		    "--power-limit, --gpu-clocks or --mem-clocks takes: not "
		    "without one");
	if (cap_any(&o.cap) && !o.gpus.all && o.gpus.n == 0)
		return usage_error("GPU settings need GPUs: not with --gpus "
		    "none");
	window = o.window != NULL ? o.window : base_name(argv[first]);
	monitor_opts(&o, &mo, &co);
	if (cap_any(&o.cap))
		mo.source = ZEUS_SOURCE_ZEUSD;	/* the GPUs zeusd sets */
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return fail(NULL, &e);
	warn_if_nothing(m, &o);
	if (cap_any(&o.cap) && (rc = measure_cap_start(&o, m, &cap)) != 0) {
		zeus_monitor_destroy(m);
		return rc;
	}
	if (o.pushgateway != NULL) {
		ho.monitor = m;
		ho.push.url = o.pushgateway;
		ho.push.job = o.job;
		ho.push.instance = o.instance;
		if (zeus_energy_histogram_create(&ho, &h, &e) != 0) {
			if (cap != NULL)
				cap_finish(cap);
			cap_free(cap);
			zeus_monitor_destroy(m);
			return fail("histogram", &e);
		}
		rc = zeus_energy_histogram_begin_window(h, window, false, &e);
		if (rc == 0 && o.counter_ms > 0) {
			cto.monitor = m;
			cto.push = ho.push;
			cto.update_period_ms = o.counter_ms;
			if (zeus_energy_counter_create(&cto, &ctr, &e) != 0 ||
			    zeus_energy_counter_begin_window(ctr, window, false,
			    &e) != 0) {
				fail("counter", &e);
				zeus_energy_counter_destroy(ctr);
				ctr = NULL;
			}
		}
	} else {
		rc = zeus_monitor_begin_window(m, window, false, &e);
	}
	if (rc != 0) {
		fail(NULL, &e);
		if (cap != NULL)
			cap_finish(cap);
		cap_free(cap);
		zeus_energy_histogram_destroy(h);
		zeus_monitor_destroy(m);
		return EXIT_FAIL;
	}
	if (cap != NULL)
		cap_keepalive_start(cap);
	status = tool_run_command(argv + first);
	if (ctr != NULL && zeus_energy_counter_end_window(ctr, window, false,
	    NULL, &e) != 0) {
		if (e.code == ZEUS_ERR_PUSH)
			push_failed(&e, push_error, sizeof(push_error));
		else
			fail("counter", &e);
	}
	zeus_energy_counter_destroy(ctr);
	if (h != NULL)
		rc = zeus_energy_histogram_end_window(h, window, false, &meas,
		    &e);
	else
		rc = zeus_monitor_end_window(m, window, false, &meas, &e);
	if (cap != NULL) {
		/* the settings go back whatever the measurement gave */
		cap_keepalive_stop(cap);
		restored = cap_finish(cap) == 0;
	}
	if (rc != 0 && e.code == ZEUS_ERR_PUSH) {
		/* The measurement is good; only the push failed. */
		push_failed(&e, push_error, sizeof(push_error));
		rc = 0;
	}
	if (rc != 0) {
		fail(NULL, &e);
	} else if ((out = open_output(o.output)) == NULL) {
		tool_prefix(stderr);
		fprintf(stderr, "cannot open %s: %s\n", o.output,
		    strerror(errno));
	} else {
		if (o.format == OUT_JSON)
			print_json(out, &meas, status, push_error[0] != '\0' ?
			    push_error : NULL, cap);
		else if (o.format == OUT_CSV)
			print_csv(out, window, &meas, status, cap);
		else
			print_text(out, &meas, status, cap);
		if (out != stderr && out != stdout)
			fclose(out);
		else
			fflush(out);
	}
	cap_free(cap);
	zeus_energy_histogram_destroy(h);
	zeus_monitor_destroy(m);
	return restored ? status : EXIT_FAIL;
}

/* A URL without its password (user:pass@ shown as ***@). */
static void
print_url(FILE *f, const char *url)
{
	const char *auth = strstr(url, "://"), *at = NULL;
	size_t n;

	if (auth != NULL) {
		auth += 3;
		n = strcspn(auth, "/?#");
		for (size_t i = 0; i < n; i++)
			if (auth[i] == '@')
				at = auth + i;
	}
	if (at == NULL)
		fputs(url, f);
	else
		fprintf(f, "%.*s***%s", (int)(auth - url), url, at);
}

/* ---- gauge --------------------------------------------------------------------- */

static int
cmd_gauge(int argc, char **argv)
{
	struct zeus_monitor_options mo;
	struct zeus_client_options co;
	struct zeus_gauge_options go = { 0 };
	struct zeus_power_gauge *g = NULL;
	struct zeus_monitor *m = NULL;
	struct zeus_error e;
	const char *window;
	struct opts o;
	int first;

	first = parse_args(argc, argv, &o, FOR_GAUGE, gauge_usage, false);
	if (first < 0)
		return EXIT_USAGE;
	if (first != argc)
		return usage_error("unexpected argument '%s'", argv[first]);
	if (o.pushgateway == NULL)
		return usage_error("needs --pushgateway URL and --job NAME");
	window = o.window != NULL ? o.window : "gauge";
	tool_stop_prepare();
	monitor_opts(&o, &mo, &co);
	mo.cpu_indices = o.cpus.ids;	/* the gauge is GPU power only */
	mo.cpu_count = 0;
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return fail(NULL, &e);
	go.monitor = m;
	go.push.url = o.pushgateway;
	go.push.job = o.job;
	go.push.instance = o.instance;
	go.update_period_ms = o.period_ms;
	if (zeus_power_gauge_create(&go, &g, &e) != 0 ||
	    zeus_power_gauge_begin_window(g, window, false, &e) != 0) {
		zeus_power_gauge_destroy(g);
		zeus_monitor_destroy(m);
		return fail(NULL, &e);
	}
	tool_prefix(stderr);
	fprintf(stderr, "pushing GPU power of %zu GPUs to ",
	    zeus_monitor_gpus(m, NULL, 0));
	print_url(stderr, o.pushgateway);
	fprintf(stderr, " every %u ms; stop with ^C\n",
	    o.period_ms ? o.period_ms : 1000u);
	tool_stop_wait();
	if (zeus_power_gauge_end_window(g, window, false, &e) != 0 &&
	    !tool_already_logged(e.message))
		fail(NULL, &e);
	zeus_power_gauge_destroy(g);
	zeus_monitor_destroy(m);
	return 0;
}

/* ---- daemon ---------------------------------------------------------------------- */

static json_t *
discovery_json(const struct zeus_discovery *d)
{
	json_t *o = json_object(), *g = json_array(), *c = json_array();

	for (size_t i = 0; i < d->gpu_count; i++)
		json_array_append_new(g, json_pack("{s:i,s:s,s:s,s:b}",
		    "id", (json_int_t)d->gpus[i].id, "name", d->gpus[i].name,
		    "pci_address", d->gpus[i].pci_address,
		    "cumulative_energy_available",
		    d->gpus[i].cumulative_energy_available));
	for (size_t i = 0; i < d->cpu_count; i++)
		json_array_append_new(c, json_pack("{s:i,s:b}", "id",
		    (json_int_t)d->cpus[i].id, "dram_available",
		    d->cpus[i].dram_available));
	json_object_set_new(o, "gpus", g);
	json_object_set_new(o, "cpus", c);
	json_object_set_new(o, "auth_required",
	    json_boolean(d->auth_required));
	return o;
}

static json_t *
gpu_json(const struct zeus_gpu_readings *r, bool energy)
{
	json_t *o = json_object();

	for (size_t i = 0; i < r->count; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%u", r->gpu[i].id);
		json_object_set_new(o, k, json_integer((json_int_t)(energy ?
		    r->gpu[i].energy_mj : r->gpu[i].power_mw)));
	}
	return o;
}

static json_t *
opt_int(bool has, uint64_t v)
{
	return has ? json_integer((json_int_t)v) : json_null();
}

static json_t *
cpu_json(const struct zeus_cpu_readings *r, bool energy)
{
	json_t *o = json_object();

	for (size_t i = 0; i < r->count; i++) {
		const struct zeus_cpu_reading *c = &r->cpu[i];
		char k[16];

		snprintf(k, sizeof(k), "%u", c->id);
		json_object_set_new(o, k, energy ?
		    json_pack("{s:o,s:o}", "cpu_energy_uj",
		    opt_int(c->has_cpu, c->cpu_energy_uj), "dram_energy_uj",
		    opt_int(c->has_dram, c->dram_energy_uj)) :
		    json_pack("{s:o,s:o}", "cpu_mw", opt_int(c->has_cpu,
		    c->cpu_mw), "dram_mw", opt_int(c->has_dram, c->dram_mw)));
	}
	return o;
}

/* power or energy of the asked GPUs and CPUs (skipping absent kinds). */
static int
daemon_read(struct zeus_client *c, const struct opts *o, bool energy,
    json_t *out, struct zeus_error *e)
{
	static struct zeus_discovery d;
	static struct zeus_gpu_readings g;
	static struct zeus_cpu_readings r;
	const unsigned *gi = o->gpus.all ? NULL : o->gpus.ids;
	const unsigned *ci = o->cpus.all ? NULL : o->cpus.ids;

	if (zeus_client_discover(c, &d, e) != 0)
		return -1;
	if ((gi != NULL ? o->gpus.n > 0 : d.gpu_count > 0) &&
	    (d.enabled_groups & ZEUS_GROUP_GPU_READ)) {
		if ((energy ? zeus_client_gpu_get_cumulative_energy(c, gi,
		    o->gpus.n, &g, e) : zeus_client_gpu_get_power(c, gi,
		    o->gpus.n, &g, e)) != 0)
			return -1;
		json_object_set_new(out, energy ? "gpu_energy_mj" :
		    "gpu_power_mw", gpu_json(&g, energy));
	}
	if ((ci != NULL ? o->cpus.n > 0 : d.cpu_count > 0) &&
	    (d.enabled_groups & ZEUS_GROUP_CPU_READ)) {
		if ((energy ? zeus_client_cpu_get_cumulative_energy(c, ci,
		    o->cpus.n, true, true, &r, e) : zeus_client_cpu_get_power(c,
		    ci, o->cpus.n, &r, e)) != 0)
			return -1;
		json_object_set_new(out, energy ? "cpu_energy" : "cpu_power",
		    cpu_json(&r, energy));
	}
	return 0;
}

static int
print_sample(const struct zeus_power_sample *s, void *user)
{
	unsigned long *left = user;

	if (s->is_gpu)
		printf("{\"gpu_id\": %u, \"timestamp_ms\": %lld, "
		    "\"power_mw\": %llu}\n", s->id, (long long)s->timestamp_ms,
		    (unsigned long long)s->power_mw);
	else if (s->has_dram)
		printf("{\"cpu_id\": %u, \"timestamp_ms\": %lld, "
		    "\"cpu_mw\": %llu, \"dram_mw\": %llu}\n", s->id,
		    (long long)s->timestamp_ms, (unsigned long long)s->cpu_mw,
		    (unsigned long long)s->dram_mw);
	else
		printf("{\"cpu_id\": %u, \"timestamp_ms\": %lld, "
		    "\"cpu_mw\": %llu, \"dram_mw\": null}\n", s->id,
		    (long long)s->timestamp_ms, (unsigned long long)s->cpu_mw);
	fflush(stdout);
	return *left > 0 && --*left == 0;
}

static const char *const daemon_verbs[] = { "discover", "power", "energy",
	"stream-gpu", "stream-cpu", "set-power-limit" };

/* Runs one verb; `out` gets what the JSON verbs print. */
static int
daemon_run(struct zeus_client *c, const struct opts *o, const char *verb,
    json_t **out, struct zeus_error *e)
{
	static struct zeus_discovery d;
	unsigned long left = o->count;

	if (strcmp(verb, "discover") == 0) {
		if (zeus_client_discover(c, &d, e) != 0)
			return -1;
		*out = discovery_json(&d);
		return 0;
	}
	if (strcmp(verb, "power") == 0 || strcmp(verb, "energy") == 0) {
		*out = json_object();
		return daemon_read(c, o, strcmp(verb, "energy") == 0, *out, e);
	}
	if (strcmp(verb, "stream-gpu") == 0)
		return zeus_client_gpu_stream_power(c, o->gpus.all ? NULL :
		    o->gpus.ids, o->gpus.n, print_sample, &left, NULL, e);
	if (strcmp(verb, "stream-cpu") == 0)
		return zeus_client_cpu_stream_power(c, o->cpus.all ? NULL :
		    o->cpus.ids, o->cpus.n, print_sample, &left, NULL, e);
	return zeus_client_gpu_set_power_limit(c, o->gpus.all ? NULL :
	    o->gpus.ids, o->gpus.n, (uint32_t)o->mw, true, e);
}

static int
cmd_daemon(int argc, char **argv)
{
	struct zeus_client_options co = { 0 };
	struct zeus_client *c;
	struct zeus_error e;
	json_t *out = NULL;
	const char *verb = NULL;
	struct opts o;
	int first, rc;
	char *s;

	first = parse_args(argc, argv, &o, FOR_DAEMON, daemon_usage, true);
	if (first < 0)
		return EXIT_USAGE;
	if (first == argc)
		return usage_error("needs a verb (discover, power, energy, "
		    "stream-gpu, stream-cpu, set-power-limit)");
	if (first + 1 != argc)
		return usage_error("unexpected argument '%s'", argv[first + 1]);
	for (size_t i = 0; i < sizeof(daemon_verbs) / sizeof(*daemon_verbs);
	    i++)
		if (strcmp(argv[first], daemon_verbs[i]) == 0)
			verb = daemon_verbs[i];
	if (verb == NULL)
		return usage_error("unknown verb '%s'", argv[first]);
	if (strcmp(verb, "set-power-limit") == 0 && !o.has_mw)
		return usage_error("set-power-limit needs --mw N");
	conn_opts(&o, &co);
	if (zeus_client_open(&co, &c, &e) != 0)
		return fail(verb, &e);
	rc = daemon_run(c, &o, verb, &out, &e);
	zeus_client_close(c);
	if (rc != 0) {
		json_decref(out);
		fail(verb, &e);
		/* Every verb alike: zeusd refused (4xx) or something failed. */
		return e.http_status >= 400 && e.http_status < 500 ?
		    EXIT_HTTP_4XX : EXIT_FAIL;
	}
	if (out != NULL) {
		s = json_dumps(out, JSON_INDENT(2));
		if (s != NULL)
			printf("%s\n", s);
		free(s);
		json_decref(out);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	zeus_set_log_handler(tool_log, NULL);
	if (argc < 2)
		return usage_error("needs a subcommand (measure, gauge, "
		    "daemon)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		printf("%s\n%s\n%s\n%s", main_usage, measure_usage,
		    gauge_usage, daemon_usage);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("zeus %s\n", zeus_version());
		return 0;
	}
	if (strcmp(argv[1], "measure") == 0 || strcmp(argv[1], "gauge") == 0 ||
	    strcmp(argv[1], "daemon") == 0)
		tool_cmd = argv[1];
	if (tool_cmd == NULL)
		return usage_error("unknown subcommand '%s'", argv[1]);
	if (strcmp(tool_cmd, "measure") == 0)
		return cmd_measure(argc - 1, argv + 1);
	if (strcmp(tool_cmd, "gauge") == 0)
		return cmd_gauge(argc - 1, argv + 1);
	return cmd_daemon(argc - 1, argv + 1);
}
