/*
 * zeus.c - the `zeus` command-line tool, a thin shell over libzeus:
 *
 *   zeus measure [opts] -- COMMAND...   energy of one command (monitor +
 *                                       optional histogram push)
 *   zeus gauge --pushgateway URL --job NAME [--period S]
 *                                       pushes GPU power until SIGINT/TERM
 *   zeus daemon discover|power|energy   queries a zeusd (client)
 *
 * See `zeus --help` and docs/libzeus.md.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zeus/zeus.h"

extern char **environ;

static const char usage_text[] =
    "usage: zeus measure [--gpus LIST] [--cpus LIST] [--json]\n"
    "                    [--output FILE] [--source auto|direct|zeusd]\n"
    "                    [--pushgateway URL --job NAME [--window NAME]\n"
    "                     [--instance NAME] [--counter S]] -- COMMAND...\n"
    "       zeus gauge --pushgateway URL --job NAME [--period S]\n"
    "                  [--window NAME] [--gpus LIST] [--instance NAME]\n"
    "       zeus daemon discover|power|energy [--gpus LIST] [--cpus LIST]\n"
    "                  [--socket PATH | --host-port HOST:PORT] [--token T]\n"
    "       zeus daemon stream-gpu|stream-cpu [--count N] [ids, conn...]\n"
    "       zeus daemon set-power-limit --gpus LIST --mw N [conn...]\n"
    "       zeus --version | --help\n"
    "\n"
    "LIST is 'all' (default), 'none', or comma-separated indices.\n"
    "measure prints time and energy on stderr (--output FILE or - for\n"
    "stdout) and exits with the command's status (128+N when killed by\n"
    "signal N, 127 when it cannot be run, 2 on a usage error).\n"
    "--counter S also pushes a cumulative energy counter every S seconds\n"
    "while the command runs.\n"
    "Sources: zeusd when ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT is set, else\n"
    "NVML (ZEUS_NVML_LIBRARY) and RAPL (ZEUS_RAPL_DIR) directly.\n";

static int
usage(int rc)
{
	fputs(usage_text, rc == 0 ? stdout : stderr);
	return rc;
}

static int
fail(const char *what, const struct zeus_error *e)
{
	fprintf(stderr, "zeus: %s: %s\n", what, e->message);
	return 1;
}

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

struct opts {
	struct idlist gpus, cpus;
	bool json;
	const char *output, *pushgateway, *job, *window, *instance;
	const char *socket, *host_port, *token;
	enum zeus_source source;
	unsigned period_ms;
	unsigned counter_ms;
	unsigned long count;
	unsigned long mw;
};

enum { O_GPUS = 256, O_CPUS, O_JSON, O_OUTPUT, O_SOURCE, O_PUSH, O_JOB,
	O_WINDOW, O_INSTANCE, O_PERIOD, O_SOCKET, O_HOSTPORT, O_TOKEN,
	O_COUNTER, O_COUNT, O_MW };

static const struct option long_opts[] = {
	{ "gpus", required_argument, NULL, O_GPUS },
	{ "cpus", required_argument, NULL, O_CPUS },
	{ "json", no_argument, NULL, O_JSON },
	{ "output", required_argument, NULL, O_OUTPUT },
	{ "source", required_argument, NULL, O_SOURCE },
	{ "pushgateway", required_argument, NULL, O_PUSH },
	{ "job", required_argument, NULL, O_JOB },
	{ "window", required_argument, NULL, O_WINDOW },
	{ "instance", required_argument, NULL, O_INSTANCE },
	{ "period", required_argument, NULL, O_PERIOD },
	{ "socket", required_argument, NULL, O_SOCKET },
	{ "host-port", required_argument, NULL, O_HOSTPORT },
	{ "token", required_argument, NULL, O_TOKEN },
	{ "counter", required_argument, NULL, O_COUNTER },
	{ "count", required_argument, NULL, O_COUNT },
	{ "mw", required_argument, NULL, O_MW },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

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
	case O_JSON: o->json = true; return 0;
	case O_OUTPUT: o->output = arg; return 0;
	case O_PUSH: o->pushgateway = arg; return 0;
	case O_JOB: o->job = arg; return 0;
	case O_WINDOW: o->window = arg; return 0;
	case O_INSTANCE: o->instance = arg; return 0;
	case O_PERIOD: return parse_period(arg, &o->period_ms);
	case O_SOCKET: o->socket = arg; return 0;
	case O_HOSTPORT: o->host_port = arg; return 0;
	case O_TOKEN: o->token = arg; return 0;
	case O_COUNTER: return parse_period(arg, &o->counter_ms);
	case O_COUNT: return parse_ulong(arg, 1000000, &o->count);
	case O_MW: return parse_ulong(arg, 0xffffffffUL, &o->mw);
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
 * Parses argv after the subcommand; returns the index of the first operand.
 * `permute`: options may follow operands (daemon); else parsing stops at
 * the first operand (measure's command).
 */
static int
parse_args(int argc, char **argv, struct opts *o, bool permute)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->gpus.all = o->cpus.all = true;
	optind = 1;
	while ((c = getopt_long(argc, argv, permute ? "h" : "+h",
	    long_opts, NULL)) != -1) {
		if (c == 'h')
			exit(usage(0));
		if (c == '?' || parse_opt(o, c, optarg) != 0) {
			if (c != '?')
				fprintf(stderr, "zeus: bad value for --%s: "
				    "'%s'\n", long_opts[c - O_GPUS].name,
				    optarg);
			return -1;
		}
	}
	if ((o->pushgateway != NULL) != (o->job != NULL)) {
		fprintf(stderr, "zeus: --pushgateway and --job go together\n");
		return -1;
	}
	return optind;
}

static void
monitor_opts(const struct opts *o, struct zeus_monitor_options *mo,
    struct zeus_client_options *co)
{
	memset(mo, 0, sizeof(*mo));
	memset(co, 0, sizeof(*co));
	if (!o->gpus.all) {
		mo->gpu_indices = o->gpus.ids;
		mo->gpu_count = o->gpus.n;
	}
	if (!o->cpus.all) {
		mo->cpu_indices = o->cpus.ids;
		mo->cpu_count = o->cpus.n;
	}
	mo->source = o->source;
	if (o->socket != NULL || o->host_port != NULL) {
		co->socket_path = o->socket;
		co->host_port = o->host_port;
		co->token = o->token;
		mo->zeusd = co;
	}
}

/* ---- measure ----------------------------------------------------------------- */

static json_t *
energy_obj(const struct zeus_energy *e, size_t n, double *total)
{
	json_t *o = json_object();

	for (size_t i = 0; i < n; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%u", e[i].index);
		json_object_set_new(o, k, json_real(e[i].joules));
		*total += e[i].joules;
	}
	return o;
}

static void
print_text(FILE *f, const struct zeus_measurement *m, int status)
{
	double total = 0;

	fprintf(f, "zeus: time %.3f s\n", m->time_s);
	for (size_t i = 0; i < m->gpu_count; i++) {
		fprintf(f, "zeus: gpu %u %.3f J\n", m->gpu[i].index,
		    m->gpu[i].joules);
		total += m->gpu[i].joules;
	}
	for (size_t i = 0; i < m->cpu_count; i++) {
		fprintf(f, "zeus: cpu %u %.3f J\n", m->cpu[i].index,
		    m->cpu[i].joules);
		total += m->cpu[i].joules;
	}
	for (size_t i = 0; i < m->dram_count; i++) {
		fprintf(f, "zeus: dram %u %.3f J\n", m->dram[i].index,
		    m->dram[i].joules);
		total += m->dram[i].joules;
	}
	fprintf(f, "zeus: total %.3f J (exit status %d)\n", total, status);
}

static void
print_json(FILE *f, const struct zeus_measurement *m, int status,
    const struct zeus_error *push_err)
{
	double total = 0;
	json_t *o = json_object();
	char *s;

	json_object_set_new(o, "time_s", json_real(m->time_s));
	json_object_set_new(o, "gpu_energy_j", energy_obj(m->gpu,
	    m->gpu_count, &total));
	json_object_set_new(o, "cpu_energy_j", energy_obj(m->cpu,
	    m->cpu_count, &total));
	json_object_set_new(o, "dram_energy_j", energy_obj(m->dram,
	    m->dram_count, &total));
	json_object_set_new(o, "total_energy_j", json_real(total));
	json_object_set_new(o, "exit_status", json_integer(status));
	json_object_set_new(o, "push_error", push_err != NULL ?
	    json_string(push_err->message) : json_null());
	s = json_dumps(o, JSON_COMPACT);
	if (s != NULL)
		fprintf(f, "%s\n", s);
	free(s);
	json_decref(o);
}

/* Runs argv; returns its status as a shell would (127: cannot run). */
static int
run_command(char **argv)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	pid_t pid;
	int st, rc;

	rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc != 0) {
		fprintf(stderr, "zeus: cannot run '%s': %s\n", argv[0],
		    strerror(rc));
		return 127;
	}
	/* Like time(1): the terminal's ^C is for the command, not for us. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
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
	static struct zeus_measurement meas;
	struct zeus_error e, push_e;
	bool push_failed = false;
	const char *window;
	struct opts o;
	int first, status, rc;
	FILE *out;

	first = parse_args(argc, argv, &o, false);
	if (first < 0 || first >= argc)
		return first < 0 ? usage(2) : (fprintf(stderr,
		    "zeus: measure needs a command after --\n"), 2);
	window = o.window != NULL ? o.window : base_name(argv[first]);
	monitor_opts(&o, &mo, &co);
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return fail("monitor", &e);
	if (o.pushgateway != NULL) {
		ho.monitor = m;
		ho.push.url = o.pushgateway;
		ho.push.job = o.job;
		ho.push.instance = o.instance;
		if (zeus_energy_histogram_create(&ho, &h, &e) != 0) {
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
		zeus_energy_histogram_destroy(h);
		zeus_monitor_destroy(m);
		return fail("begin", &e);
	}
	status = run_command(argv + first);
	if (ctr != NULL && zeus_energy_counter_end_window(ctr, window, false,
	    NULL, &e) != 0)
		fprintf(stderr, "zeus: counter: %s\n", e.message);
	zeus_energy_counter_destroy(ctr);
	if (h != NULL)
		rc = zeus_energy_histogram_end_window(h, window, false, &meas,
		    &e);
	else
		rc = zeus_monitor_end_window(m, window, false, &meas, &e);
	if (rc != 0 && e.code == ZEUS_ERR_PUSH) {
		/* The measurement is good; only the push failed. */
		push_failed = true;
		push_e = e;
		fprintf(stderr, "zeus: push failed: %s\n", e.message);
		rc = 0;
	}
	if (rc != 0) {
		fail("end", &e);
	} else if ((out = open_output(o.output)) == NULL) {
		fprintf(stderr, "zeus: cannot open %s: %s\n", o.output,
		    strerror(errno));
	} else {
		if (o.json)
			print_json(out, &meas, status,
			    push_failed ? &push_e : NULL);
		else
			print_text(out, &meas, status);
		if (out != stderr && out != stdout)
			fclose(out);
		else
			fflush(out);
	}
	zeus_energy_histogram_destroy(h);
	zeus_monitor_destroy(m);
	return status;
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
	sigset_t set;
	struct opts o;
	int sig, first;

	first = parse_args(argc, argv, &o, false);
	if (first < 0 || first != argc || o.pushgateway == NULL)
		return usage(2);
	window = o.window != NULL ? o.window : "gauge";
	/* Block before any thread starts so only sigwait sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	monitor_opts(&o, &mo, &co);
	mo.cpu_indices = o.cpus.ids;	/* the gauge is GPU power only */
	mo.cpu_count = 0;
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return fail("monitor", &e);
	go.monitor = m;
	go.push.url = o.pushgateway;
	go.push.job = o.job;
	go.push.instance = o.instance;
	go.update_period_ms = o.period_ms;
	if (zeus_power_gauge_create(&go, &g, &e) != 0 ||
	    zeus_power_gauge_begin_window(g, window, false, &e) != 0) {
		zeus_power_gauge_destroy(g);
		zeus_monitor_destroy(m);
		return fail("gauge", &e);
	}
	fprintf(stderr, "zeus: pushing GPU power of %zu GPUs to %s every "
	    "%u ms; stop with ^C\n", zeus_monitor_gpus(m, NULL, 0),
	    o.pushgateway, o.period_ms ? o.period_ms : 1000u);
	while (sigwait(&set, &sig) != 0)
		;
	if (zeus_power_gauge_end_window(g, window, false, &e) != 0)
		fprintf(stderr, "zeus: gauge: %s\n", e.message);
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

/* stream-gpu / stream-cpu / set-power-limit */
static int
daemon_other(struct zeus_client *c, const struct opts *o, const char *what,
    struct zeus_error *e)
{
	unsigned long left = o->count;

	if (strcmp(what, "stream-gpu") == 0)
		return zeus_client_gpu_stream_power(c, o->gpus.all ? NULL :
		    o->gpus.ids, o->gpus.n, print_sample, &left, NULL, e);
	if (strcmp(what, "stream-cpu") == 0)
		return zeus_client_cpu_stream_power(c, o->cpus.all ? NULL :
		    o->cpus.ids, o->cpus.n, print_sample, &left, NULL, e);
	return zeus_client_gpu_set_power_limit(c, o->gpus.all ? NULL :
	    o->gpus.ids, o->gpus.n, (uint32_t)o->mw, true, e);
}

static int
cmd_daemon(int argc, char **argv)
{
	static struct zeus_discovery d;
	struct zeus_client_options co = { 0 };
	struct zeus_client *c;
	struct zeus_error e;
	json_t *out = NULL;
	struct opts o;
	int first, rc = 0;
	const char *what;
	char *s;

	first = parse_args(argc, argv, &o, true);
	if (first < 0 || first + 1 != argc)
		return usage(2);
	what = argv[first];
	if (strcmp(what, "discover") != 0 && strcmp(what, "power") != 0 &&
	    strcmp(what, "energy") != 0 && strcmp(what, "stream-gpu") != 0 &&
	    strcmp(what, "stream-cpu") != 0 &&
	    strcmp(what, "set-power-limit") != 0)
		return usage(2);
	co.socket_path = o.socket;
	co.host_port = o.host_port;
	co.token = o.token;
	if (zeus_client_open(&co, &c, &e) != 0)
		return fail("zeusd", &e);
	if (strcmp(what, "discover") == 0) {
		rc = zeus_client_discover(c, &d, &e);
		if (rc == 0)
			out = discovery_json(&d);
	} else if (strcmp(what, "power") != 0 && strcmp(what, "energy") != 0) {
		rc = daemon_other(c, &o, what, &e);
		zeus_client_close(c);
		if (rc != 0) {
			fprintf(stderr, "zeus: %s: %s\n", what, e.message);
			return e.http_status >= 400 && e.http_status < 500 ? 4 : 1;
		}
		return 0;
	} else {
		out = json_object();
		rc = daemon_read(c, &o, strcmp(what, "energy") == 0, out, &e);
	}
	zeus_client_close(c);
	if (rc != 0) {
		json_decref(out);
		return fail(what, &e);
	}
	s = json_dumps(out, JSON_INDENT(2));
	if (s != NULL)
		printf("%s\n", s);
	free(s);
	json_decref(out);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		return usage(2);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return usage(0);
	if (strcmp(argv[1], "--version") == 0) {
		printf("zeus %s\n", zeus_version());
		return 0;
	}
	if (strcmp(argv[1], "measure") == 0)
		return cmd_measure(argc - 1, argv + 1);
	if (strcmp(argv[1], "gauge") == 0)
		return cmd_gauge(argc - 1, argv + 1);
	if (strcmp(argv[1], "daemon") == 0)
		return cmd_daemon(argc - 1, argv + 1);
	fprintf(stderr, "zeus: unknown command '%s'\n", argv[1]);
	return usage(2);
}
