/* SPDX-License-Identifier: Apache-2.0 */
/*
 * measure.c - `zeus measure [opts] -- COMMAND...`: the energy of one
 * command (a monitor window, or the energy histogram's with
 * --pushgateway), reported as text, JSON or CSV (measure_out.c), with GPU
 * settings for the command only (--power-limit etc., measure_cap.c).
 * See docs/libzeus.md.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cap_value.h"
#include "common/lease_label.h"
#include "measure_cap.h"
#include "measure_out.h"
#include "subcmd.h"
#include "tool.h"
#include "zeus/zeus.h"

const char measure_usage[] =
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

enum out_format { OUT_TEXT, OUT_JSON, OUT_CSV };

struct measure_opts {
	struct tool_opts t;		/* the shared ones (tool.h) */
	enum out_format format;
	const char *output;
	unsigned counter_ms;
	struct cap_settings cap;
};

enum { O_JSON = TOOL_OPT_OWN, O_CSV, O_OUTPUT, O_COUNTER, O_POWER_LIMIT,
	O_GPU_CLOCKS, O_MEM_CLOCKS, O_LEASE_LABEL };

static const struct tool_opt measure_own[] = {
	{ "json", false, O_JSON },
	{ "csv", false, O_CSV },
	{ "output", true, O_OUTPUT },
	{ "counter", true, O_COUNTER },
	{ "power-limit", true, O_POWER_LIMIT },
	{ "gpu-clocks", true, O_GPU_CLOCKS },
	{ "mem-clocks", true, O_MEM_CLOCKS },
	{ "lease-label", true, O_LEASE_LABEL },
};

static int
measure_opt(struct measure_opts *o, int c, const char *arg)
{
	switch (c) {
	case O_JSON: o->format = OUT_JSON; return 0;
	case O_CSV: o->format = OUT_CSV; return 0;
	case O_OUTPUT: o->output = arg; return 0;
	case O_COUNTER: return tool_parse_period(arg, &o->counter_ms);
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
	}
	return -1;
}

/* The options; the index of the command's first word, or -1 after a
 * usage error was printed. */
static int
measure_args(int argc, char **argv, struct measure_opts *o)
{
	const char *arg;
	bool json = false, csv = false;
	int c;

	memset(o, 0, sizeof(*o));
	tool_args_begin(argc, argv, TOOL_OPTS_CPUS | TOOL_OPTS_SOURCE |
	    TOOL_OPTS_PUSH, measure_own, sizeof(measure_own) /
	    sizeof(measure_own[0]), measure_usage, false, &o->t);
	while ((c = tool_args_next(&arg)) > 0) {
		json |= c == O_JSON;
		csv |= c == O_CSV;
		if (measure_opt(o, c, arg) != 0) {
			tool_args_bad(c, arg);
			return -1;
		}
	}
	if (c < 0)
		return -1;
	if (json && csv) {
		tool_usage_error("--json and --csv exclude each other");
		return -1;
	}
	return tool_args_end();
}

/*
 * The monitor measures nothing although "all" of some kind was asked for
 * (no NVML, no RAPL, no zeusd, or a zeusd that offers nothing): say so,
 * with the library's reasons, rather than print a bare time later.
 */
static void
warn_if_nothing(struct zeus_monitor *m, const struct tool_opts *o)
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
	tool_log_why(why, sizeof(why));
	fprintf(stderr, "warning: nothing to measure: no GPU through NVML "
	    "and no readable RAPL package%s%s%s; set ZEUS_NVML_LIBRARY or "
	    "ZEUS_RAPL_DIR, read RAPL as root, or name a zeusd "
	    "(ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT)\n", why[0] ? " (" : "", why,
	    why[0] ? ")" : "");
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
measure_cap_start(const struct measure_opts *o, struct zeus_monitor *m,
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
	conn_opts(&o->t, &co);
	return cap_start(&o->cap, &co, index, ids, n, cap);
}

int
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
	struct measure_opts o;
	int first, status, rc;
	bool restored = true;
	FILE *out;

	first = measure_args(argc, argv, &o);
	if (first < 0)
		return EXIT_USAGE;
	if (first >= argc)
		return tool_usage_error("needs a command after --");
	if (o.counter_ms > 0 && o.t.pushgateway == NULL)
		return tool_usage_error("--counter needs --pushgateway");
	if (cap_any(&o.cap) && o.t.source == ZEUS_SOURCE_DIRECT)
		return tool_usage_error("GPU settings go through zeusd: not "
		    "with --source direct");
	if (o.cap.lease_label != NULL && !cap_any(&o.cap))
		return tool_usage_error("--lease-label names the lease that "
		    "--power-limit, --gpu-clocks or --mem-clocks takes: not "
		    "without one");
	if (cap_any(&o.cap) && !o.t.gpus.all && o.t.gpus.n == 0)
		return tool_usage_error("GPU settings need GPUs: not with "
		    "--gpus none");
	window = o.t.window != NULL ? o.t.window : base_name(argv[first]);
	monitor_opts(&o.t, &mo, &co);
	if (cap_any(&o.cap))
		mo.source = ZEUS_SOURCE_ZEUSD;	/* the GPUs zeusd sets */
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return tool_fail(NULL, &e);
	warn_if_nothing(m, &o.t);
	if (cap_any(&o.cap) && (rc = measure_cap_start(&o, m, &cap)) != 0) {
		zeus_monitor_destroy(m);
		return rc;
	}
	if (o.t.pushgateway != NULL) {
		ho.monitor = m;
		ho.push.url = o.t.pushgateway;
		ho.push.job = o.t.job;
		ho.push.instance = o.t.instance;
		if (zeus_energy_histogram_create(&ho, &h, &e) != 0) {
			if (cap != NULL)
				cap_finish(cap);
			cap_free(cap);
			zeus_monitor_destroy(m);
			return tool_fail("histogram", &e);
		}
		rc = zeus_energy_histogram_begin_window(h, window, false, &e);
		if (rc == 0 && o.counter_ms > 0) {
			cto.monitor = m;
			cto.push = ho.push;
			cto.update_period_ms = o.counter_ms;
			if (zeus_energy_counter_create(&cto, &ctr, &e) != 0 ||
			    zeus_energy_counter_begin_window(ctr, window, false,
			    &e) != 0) {
				tool_fail("counter", &e);
				zeus_energy_counter_destroy(ctr);
				ctr = NULL;
			}
		}
	} else {
		rc = zeus_monitor_begin_window(m, window, false, &e);
	}
	if (rc != 0) {
		tool_fail(NULL, &e);
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
			tool_fail("counter", &e);
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
		tool_fail(NULL, &e);
	} else if ((out = open_output(o.output)) == NULL) {
		tool_prefix(stderr);
		fprintf(stderr, "cannot open %s: %s\n", o.output,
		    strerror(errno));
	} else {
		if (o.format == OUT_JSON)
			measure_print_json(out, &meas, status,
			    push_error[0] != '\0' ? push_error : NULL, cap);
		else if (o.format == OUT_CSV)
			measure_print_csv(out, window, &meas, status, cap);
		else
			measure_print_text(out, &meas, status, cap);
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
