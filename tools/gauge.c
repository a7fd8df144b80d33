/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gauge.c - `zeus gauge --pushgateway URL --job NAME [--period S]`: pushes
 * the power of each GPU (libzeus's power gauge) until SIGINT or SIGTERM.
 * See docs/libzeus.md.
 */
#include <string.h>

#include "subcmd.h"
#include "tool.h"
#include "zeus/zeus.h"

const char gauge_usage[] =
    "usage: zeus gauge --pushgateway URL --job NAME [--period S]\n"
    "                  [--window NAME] [--gpus LIST] [--instance NAME]\n"
    "                  [--source auto|direct|zeusd]\n"
    "                  [--socket PATH | --host-port HOST:PORT |\n"
    "                   --pipe-name NAME] [--token T]\n"
    "\n"
    "Pushes the power of each GPU every --period seconds (default 1) to\n"
    "window 'gauge' (or --window) until SIGINT or SIGTERM, then exits 0.\n";

struct gauge_opts {
	struct tool_opts t;		/* the shared ones (tool.h) */
	unsigned period_ms;
};

enum { O_PERIOD = TOOL_OPT_OWN };

static const struct tool_opt gauge_own[] = {
	{ "period", true, O_PERIOD },
};

/* The options; the index of the first operand, or -1 after a usage error
 * was printed. */
static int
gauge_args(int argc, char **argv, struct gauge_opts *o)
{
	const char *arg;
	int c;

	memset(o, 0, sizeof(*o));
	tool_args_begin(argc, argv, TOOL_OPTS_SOURCE | TOOL_OPTS_PUSH,
	    gauge_own, sizeof(gauge_own) / sizeof(gauge_own[0]), gauge_usage,
	    false, &o->t);
	while ((c = tool_args_next(&arg)) > 0)
		if (c != O_PERIOD ||
		    tool_parse_period(arg, &o->period_ms) != 0) {
			tool_args_bad(c, arg);
			return -1;
		}
	if (c < 0)
		return -1;
	return tool_args_end();
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

int
cmd_gauge(int argc, char **argv)
{
	struct zeus_monitor_options mo;
	struct zeus_client_options co;
	struct zeus_gauge_options go = { 0 };
	struct zeus_power_gauge *g = NULL;
	struct zeus_monitor *m = NULL;
	struct zeus_error e;
	const char *window;
	struct gauge_opts o;
	int first;

	first = gauge_args(argc, argv, &o);
	if (first < 0)
		return EXIT_USAGE;
	if (first != argc)
		return tool_usage_error("unexpected argument '%s'",
		    argv[first]);
	if (o.t.pushgateway == NULL)
		return tool_usage_error("needs --pushgateway URL and --job "
		    "NAME");
	window = o.t.window != NULL ? o.t.window : "gauge";
	tool_stop_prepare();
	monitor_opts(&o.t, &mo, &co);
	mo.cpu_indices = o.t.cpus.ids;	/* the gauge is GPU power only */
	mo.cpu_count = 0;
	if (zeus_monitor_create(&mo, &m, &e) != 0)
		return tool_fail(NULL, &e);
	go.monitor = m;
	go.push.url = o.t.pushgateway;
	go.push.job = o.t.job;
	go.push.instance = o.t.instance;
	go.update_period_ms = o.period_ms;
	if (zeus_power_gauge_create(&go, &g, &e) != 0 ||
	    zeus_power_gauge_begin_window(g, window, false, &e) != 0) {
		zeus_power_gauge_destroy(g);
		zeus_monitor_destroy(m);
		return tool_fail(NULL, &e);
	}
	tool_prefix(stderr);
	fprintf(stderr, "pushing GPU power of %zu GPUs to ",
	    zeus_monitor_gpus(m, NULL, 0));
	print_url(stderr, o.t.pushgateway);
	fprintf(stderr, " every %u ms; stop with ^C\n",
	    o.period_ms ? o.period_ms : 1000u);
	tool_stop_wait();
	if (zeus_power_gauge_end_window(g, window, false, &e) != 0 &&
	    !tool_already_logged(e.message))
		tool_fail(NULL, &e);
	zeus_power_gauge_destroy(g);
	zeus_monitor_destroy(m);
	return 0;
}
