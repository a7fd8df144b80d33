/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib_bench.c - what a libzeus window costs next to the raw reads it makes.
 *
 *   lib_bench NVML_LIBRARY RAPL_DIR [ZEUSD_SOCKET] [ITERATIONS]
 *
 * For each source it times, per iteration, (a) begin+end of one window over
 * every GPU and CPU package and (b) the raw reads such a begin+end makes:
 * twice every GPU energy counter and every RAPL package (direct: NVML calls
 * and powercap preads through the same backends; zeusd: the two HTTP GETs
 * /gpu/get_cumulative_energy and /cpu/get_cumulative_energy, on a
 * kept-alive connection). Prints the median of 5 rounds in µs and the
 * ratio; the target is at most 2x. See docs/performance.md, "libzeus".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/nvml.h"
#include "devices/rapl.h"
#include "zeus/zeus.h"

#define ROUNDS 5

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp_double);
	return v[ROUNDS / 2];
}

static void
die(const char *what, const char *msg)
{
	fprintf(stderr, "lib_bench: %s: %s\n", what, msg);
	exit(1);
}

/* µs per begin+end of a window on m. */
static double
bench_window(struct zeus_monitor *m, long iters)
{
	struct zeus_measurement meas;
	struct zeus_error e;
	double t0 = now_us();

	for (long i = 0; i < iters; i++) {
		if (zeus_monitor_begin_window(m, "bench", false, &e) != 0 ||
		    zeus_monitor_end_window(m, "bench", false, &meas, &e) != 0)
			die("window", e.message);
	}
	return (now_us() - t0) / (double)iters;
}

/* µs for the direct source's raw reads of one begin+end. */
static double
bench_direct_raw(struct gpu_backend *g, struct rapl *r, long iters)
{
	unsigned ng = g->ops->count(g), nc = rapl_count(r);
	struct zerr z;
	double t0 = now_us();

	for (long i = 0; i < iters * 2; i++) {
		for (unsigned k = 0; k < ng; k++) {
			uint64_t mj;

			if (g->ops->get_energy_mj(g, k, &mj, &z) != 0)
				die("nvml", z.msg);
		}
		for (unsigned k = 0; k < nc; k++) {
			uint64_t cpu, dram;

			if (rapl_read(r, k, &cpu, rapl_has_dram(r, k) ? &dram :
			    NULL, &z) != 0)
				die("rapl", z.msg);
		}
	}
	return (now_us() - t0) / (double)iters;
}

/* µs for the zeusd source's raw reads of one begin+end. */
static double
bench_zeusd_raw(struct zeus_client *c, long iters)
{
	static struct zeus_gpu_readings g;
	static struct zeus_cpu_readings r;
	struct zeus_error e;
	double t0 = now_us();

	for (long i = 0; i < iters * 2; i++) {
		if (zeus_client_gpu_get_cumulative_energy(c, NULL, 0, &g,
		    &e) != 0 || zeus_client_cpu_get_cumulative_energy(c, NULL,
		    0, true, true, &r, &e) != 0)
			die("zeusd", e.message);
	}
	return (now_us() - t0) / (double)iters;
}

static void
report(const char *source, double *win, double *raw)
{
	double w = median(win), r = median(raw);

	printf("| %-6s | %10.1f | %10.1f | %5.2fx |\n", source, w, r, w / r);
}

int
main(int argc, char **argv)
{
	struct zeus_monitor_options o = { .source = ZEUS_SOURCE_DIRECT };
	struct zeus_client_options co = { 0 };
	long iters = argc > 4 ? strtol(argv[4], NULL, 10) : 2000;
	double win[ROUNDS], raw[ROUNDS];
	struct zeus_monitor *m;
	struct zeus_client *c;
	struct gpu_backend g;
	struct zeus_error e;
	struct rapl *r;
	struct zerr z;

	if (argc < 3 || iters <= 0)
		die("usage", "lib_bench NVML_LIBRARY RAPL_DIR [ZEUSD_SOCKET] "
		    "[ITERATIONS]");
	o.nvml_library = argv[1];
	o.rapl_dir = argv[2];
	if (zeus_monitor_create(&o, &m, &e) != 0)
		die("monitor", e.message);
	if (nvml_backend_open(argv[1], &g, &z) != 0 ||
	    rapl_open(argv[2], &r, &z) != 0)
		die("raw", z.msg);
	printf("%zu GPUs, %zu CPU packages, %ld windows per round, median "
	    "of %d rounds\n\n", zeus_monitor_gpus(m, NULL, 0),
	    zeus_monitor_cpus(m, NULL, NULL, 0), iters, ROUNDS);
	printf("| source | begin+end (µs) | raw reads (µs) | ratio |\n");
	printf("|---|---:|---:|---:|\n");
	for (int k = 0; k < ROUNDS; k++) {
		win[k] = bench_window(m, iters);
		raw[k] = bench_direct_raw(&g, r, iters);
	}
	report("direct", win, raw);
	zeus_monitor_destroy(m);
	g.ops->destroy(&g);
	rapl_close(r);
	if (argc < 4 || argv[3][0] == '\0')
		return 0;
	co.socket_path = argv[3];
	o.source = ZEUS_SOURCE_ZEUSD;
	o.zeusd = &co;
	if (zeus_monitor_create(&o, &m, &e) != 0 ||
	    zeus_client_open(&co, &c, &e) != 0)
		die("zeusd", e.message);
	for (int k = 0; k < ROUNDS; k++) {
		win[k] = bench_window(m, iters / 10 + 1);
		raw[k] = bench_zeusd_raw(c, iters / 10 + 1);
	}
	report("zeusd", win, raw);
	zeus_monitor_destroy(m);
	zeus_client_close(c);
	return 0;
}
