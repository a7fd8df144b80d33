/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon.c - `zeus daemon VERB`: one request to a zeusd through libzeus's
 * client (discover, power, energy, the power streams, set-power-limit),
 * its answer printed as JSON. See docs/libzeus.md.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "subcmd.h"
#include "tool.h"
#include "zeus/zeus.h"

const char daemon_usage[] =
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

struct daemon_opts {
	struct tool_opts t;		/* the shared ones (tool.h) */
	unsigned long count;
	unsigned long mw;
	bool has_mw;
};

enum { O_COUNT = TOOL_OPT_OWN, O_MW };

static const struct tool_opt daemon_own[] = {
	{ "count", true, O_COUNT },
	{ "mw", true, O_MW },
};

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
daemon_opt(struct daemon_opts *o, int c, const char *arg)
{
	switch (c) {
	case O_COUNT: return parse_ulong(arg, 1000000, &o->count);
	case O_MW:
		o->has_mw = true;
		return parse_ulong(arg, 0xffffffffUL, &o->mw);
	}
	return -1;
}

/* The options, also after the verb; the index of the verb, or -1 after a
 * usage error was printed. */
static int
daemon_args(int argc, char **argv, struct daemon_opts *o)
{
	const char *arg;
	int c;

	memset(o, 0, sizeof(*o));
	tool_args_begin(argc, argv, TOOL_OPTS_CPUS, daemon_own,
	    sizeof(daemon_own) / sizeof(daemon_own[0]), daemon_usage, true,
	    &o->t);
	while ((c = tool_args_next(&arg)) > 0)
		if (daemon_opt(o, c, arg) != 0) {
			tool_args_bad(c, arg);
			return -1;
		}
	if (c < 0)
		return -1;
	return tool_args_end();
}

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
daemon_read(struct zeus_client *c, const struct daemon_opts *o, bool energy,
    json_t *out, struct zeus_error *e)
{
	static struct zeus_discovery d;
	static struct zeus_gpu_readings g;
	static struct zeus_cpu_readings r;
	const struct idlist *gpus = &o->t.gpus, *cpus = &o->t.cpus;
	const unsigned *gi = gpus->all ? NULL : gpus->ids;
	const unsigned *ci = cpus->all ? NULL : cpus->ids;

	if (zeus_client_discover(c, &d, e) != 0)
		return -1;
	if ((gi != NULL ? gpus->n > 0 : d.gpu_count > 0) &&
	    (d.enabled_groups & ZEUS_GROUP_GPU_READ)) {
		if ((energy ? zeus_client_gpu_get_cumulative_energy(c, gi,
		    gpus->n, &g, e) : zeus_client_gpu_get_power(c, gi,
		    gpus->n, &g, e)) != 0)
			return -1;
		json_object_set_new(out, energy ? "gpu_energy_mj" :
		    "gpu_power_mw", gpu_json(&g, energy));
	}
	if ((ci != NULL ? cpus->n > 0 : d.cpu_count > 0) &&
	    (d.enabled_groups & ZEUS_GROUP_CPU_READ)) {
		if ((energy ? zeus_client_cpu_get_cumulative_energy(c, ci,
		    cpus->n, true, true, &r, e) : zeus_client_cpu_get_power(c,
		    ci, cpus->n, &r, e)) != 0)
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
daemon_run(struct zeus_client *c, const struct daemon_opts *o,
    const char *verb, json_t **out, struct zeus_error *e)
{
	static struct zeus_discovery d;
	const struct idlist *gpus = &o->t.gpus, *cpus = &o->t.cpus;
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
		return zeus_client_gpu_stream_power(c, gpus->all ? NULL :
		    gpus->ids, gpus->n, print_sample, &left, NULL, e);
	if (strcmp(verb, "stream-cpu") == 0)
		return zeus_client_cpu_stream_power(c, cpus->all ? NULL :
		    cpus->ids, cpus->n, print_sample, &left, NULL, e);
	return zeus_client_gpu_set_power_limit(c, gpus->all ? NULL :
	    gpus->ids, gpus->n, (uint32_t)o->mw, true, e);
}

int
cmd_daemon(int argc, char **argv)
{
	struct zeus_client_options co = { 0 };
	struct zeus_client *c;
	struct zeus_error e;
	json_t *out = NULL;
	const char *verb = NULL;
	struct daemon_opts o;
	int first, rc;
	char *s;

	first = daemon_args(argc, argv, &o);
	if (first < 0)
		return EXIT_USAGE;
	if (first == argc)
		return tool_usage_error("needs a verb (discover, power, "
		    "energy, stream-gpu, stream-cpu, set-power-limit)");
	if (first + 1 != argc)
		return tool_usage_error("unexpected argument '%s'",
		    argv[first + 1]);
	for (size_t i = 0; i < sizeof(daemon_verbs) / sizeof(*daemon_verbs);
	    i++)
		if (strcmp(argv[first], daemon_verbs[i]) == 0)
			verb = daemon_verbs[i];
	if (verb == NULL)
		return tool_usage_error("unknown verb '%s'", argv[first]);
	if (strcmp(verb, "set-power-limit") == 0 && !o.has_mw)
		return tool_usage_error("set-power-limit needs --mw N");
	conn_opts(&o.t, &co);
	if (zeus_client_open(&co, &c, &e) != 0)
		return tool_fail(verb, &e);
	rc = daemon_run(c, &o, verb, &out, &e);
	zeus_client_close(c);
	if (rc != 0) {
		json_decref(out);
		tool_fail(verb, &e);
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
