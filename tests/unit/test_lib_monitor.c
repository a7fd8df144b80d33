/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lib_monitor.c - unit tests of libzeus's energy monitor and histogram
 * over the direct source: the NVML simulator (NVML_SIM_PATH) and a fake
 * RAPL tree written into a mkdtemp directory.
 *
 * Covers window misuse, nesting and overlap, exact CPU/DRAM joules from
 * counters the test moves, CUDA_VISIBLE_DEVICES mapping, the power-
 * integration fallback against the counter of the same simulated GPU, the
 * sync callback, bucket validation and histogram observation (text only;
 * the Pushgateway tests are in tests/integration/test_libzeus.py), and the
 * device code's log lines going to libzeus's log handler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "zeus/zeus.h"

static char root[64];

static void
put(const char *rel, unsigned long long v, const char *s)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	if (s != NULL)
		fprintf(f, "%s\n", s);
	else
		fprintf(f, "%llu\n", v);
	fclose(f);
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static int
setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/zeus-rapl-XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static void
make_tree(void)
{
	char d[256];

	snprintf(d, sizeof(d), "%s/intel-rapl:0", root);
	mkdir(d, 0755);
	snprintf(d, sizeof(d), "%s/intel-rapl:0/intel-rapl:0:0", root);
	mkdir(d, 0755);
	snprintf(d, sizeof(d), "%s/intel-rapl:1", root);
	mkdir(d, 0755);
	put("intel-rapl:0/name", 0, "package-0");
	put("intel-rapl:0/energy_uj", 1000000, NULL);
	put("intel-rapl:0/max_energy_range_uj", 262143328850ULL, NULL);
	put("intel-rapl:0/intel-rapl:0:0/name", 0, "dram");
	put("intel-rapl:0/intel-rapl:0:0/energy_uj", 500, NULL);
	put("intel-rapl:0/intel-rapl:0:0/max_energy_range_uj", 65712999613ULL,
	    NULL);
	put("intel-rapl:1/name", 0, "package-1");
	put("intel-rapl:1/energy_uj", 0, NULL);
	put("intel-rapl:1/max_energy_range_uj", 262143328850ULL, NULL);
}

static int
teardown(void **state)
{
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	unsetenv("CUDA_VISIBLE_DEVICES");
	unsetenv("ZEUS_SIM_CONTROL");
	return 0;
}

static struct zeus_monitor *
open_monitor(const unsigned *gpus, size_t ng, const unsigned *cpus,
    size_t nc, unsigned period_ms)
{
	struct zeus_monitor_options o = {
		.gpu_indices = gpus, .gpu_count = ng,
		.cpu_indices = cpus, .cpu_count = nc,
		.source = ZEUS_SOURCE_DIRECT,
		.nvml_library = NVML_SIM_PATH, .rapl_dir = root,
		.power_sample_period_ms = period_ms,
	};
	struct zeus_monitor *m = NULL;
	struct zeus_error e;

	if (zeus_monitor_create(&o, &m, &e) != 0)
		fail_msg("create: %s", e.message);
	return m;
}

static void
test_windows(void **state)
{
	struct zeus_monitor *m;
	struct zeus_measurement a, b;
	struct zeus_error e;

	make_tree();
	m = open_monitor(NULL, 0, NULL, 0, 0);
	assert_int_equal(zeus_monitor_gpus(m, NULL, 0), 4);
	assert_int_equal(zeus_monitor_cpus(m, NULL, NULL, 0), 2);
	assert_int_equal(zeus_monitor_source(m), ZEUS_SOURCE_DIRECT);

	assert_int_equal(zeus_monitor_begin_window(m, "outer", false, &e), 0);
	assert_int_equal(zeus_monitor_begin_window(m, "outer", false, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	assert_int_equal(zeus_monitor_end_window(m, "nope", false, &a, &e),
	    -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	assert_int_equal(zeus_monitor_begin_window(m, "", false, &e), -1);

	put("intel-rapl:0/energy_uj", 3000000, NULL);	/* +2 J */
	assert_int_equal(zeus_monitor_begin_window(m, "inner", false, &e), 0);
	put("intel-rapl:0/energy_uj", 4500000, NULL);	/* +1.5 J */
	put("intel-rapl:0/intel-rapl:0:0/energy_uj", 250500, NULL);
	put("intel-rapl:1/energy_uj", 10000000, NULL);
	usleep(200000);
	/* Overlap: end outer first, inner still open. */
	assert_int_equal(zeus_monitor_end_window(m, "outer", false, &a, &e),
	    0);
	assert_true(zeus_monitor_window_open(m, "inner"));
	assert_false(zeus_monitor_window_open(m, "outer"));
	put("intel-rapl:0/energy_uj", 5500000, NULL);	/* +1 J */
	assert_int_equal(zeus_monitor_end_window(m, "inner", false, &b, &e),
	    0);

	assert_int_equal(a.cpu_count, 2);
	assert_int_equal(a.cpu[0].index, 0);
	assert_float_equal(a.cpu[0].joules, 3.5, 1e-9);
	assert_float_equal(a.cpu[1].joules, 10.0, 1e-9);
	assert_int_equal(a.dram_count, 1);
	assert_float_equal(a.dram[0].joules, 0.25, 1e-9);
	assert_float_equal(b.cpu[0].joules, 2.5, 1e-9);
	assert_true(b.time_s < a.time_s + 1 && b.time_s > 0.19);
	assert_int_equal(a.gpu_count, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(a.gpu[i].index, i);
		/* 200 ms at 50..400 W */
		assert_true(a.gpu[i].joules > 5 && a.gpu[i].joules < 100);
	}
	zeus_monitor_destroy(m);
}

static void
test_selection(void **state)
{
	const unsigned g[] = { 2 }, c[] = { 1 }, bad[] = { 7 }, dup[] = { 1, 1 };
	struct zeus_monitor_options o = {
		.source = ZEUS_SOURCE_DIRECT, .nvml_library = NVML_SIM_PATH,
		.rapl_dir = root,
	};
	struct zeus_monitor *m;
	struct zeus_error e;
	unsigned idx[4];
	bool dram[4];

	make_tree();
	m = open_monitor(g, 1, c, 1, 0);
	assert_int_equal(zeus_monitor_gpus(m, idx, 4), 1);
	assert_int_equal(idx[0], 2);
	assert_int_equal(zeus_monitor_cpus(m, idx, dram, 4), 1);
	assert_int_equal(idx[0], 1);
	assert_false(dram[0]);
	zeus_monitor_destroy(m);

	o.gpu_indices = bad;
	o.gpu_count = 1;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_NOT_FOUND);
	o.gpu_indices = dup;
	o.gpu_count = 2;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	o.gpu_indices = g;
	o.gpu_count = 0;	/* none */
	o.cpu_indices = bad;
	o.cpu_count = 1;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_NOT_FOUND);
	/* An explicit GPU list with no NVML is an error; "all" is none. */
	o.cpu_indices = NULL;
	o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
	o.gpu_indices = g;
	o.gpu_count = 1;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	o.gpu_indices = NULL;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	assert_int_equal(zeus_monitor_gpus(m, NULL, 0), 0);
	zeus_monitor_destroy(m);
}

static void
test_cuda_visible(void **state)
{
	struct zeus_monitor_options o = {
		.source = ZEUS_SOURCE_DIRECT, .nvml_library = NVML_SIM_PATH,
		.rapl_dir = root,
	};
	const unsigned one[] = { 1 };
	struct zeus_monitor *m;
	struct zeus_error e;
	unsigned idx[4];
	char ctl[128];
	FILE *f;

	make_tree();
	/* GPU 3 has no counter: seen through CUDA index 1 when "2,3". */
	snprintf(ctl, sizeof(ctl), "%s/ctl", root);
	f = fopen(ctl, "w");
	fprintf(f, "fail nvmlDeviceGetTotalEnergyConsumption 3 NOT_SUPPORTED\n");
	fclose(f);
	setenv("ZEUS_SIM_CONTROL", ctl, 1);
	setenv("CUDA_VISIBLE_DEVICES", "2, 3", 1);
	o.gpu_indices = one;
	o.gpu_count = 1;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	assert_int_equal(zeus_monitor_gpus(m, idx, 4), 1);
	assert_int_equal(idx[0], 1);
	assert_false(zeus_monitor_gpu_has_counter(m, 0));
	zeus_monitor_destroy(m);
	o.gpu_indices = NULL;
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	assert_int_equal(zeus_monitor_gpus(m, NULL, 0), 2);
	assert_true(zeus_monitor_gpu_has_counter(m, 0));
	zeus_monitor_destroy(m);

	setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2e1c3a-0000", 1);
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	assert_non_null(strstr(e.message, "UUID"));
	setenv("CUDA_VISIBLE_DEVICES", "0,9", 1);
	assert_int_equal(zeus_monitor_create(&o, &m, &e), -1);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	assert_int_equal(zeus_monitor_gpus(m, NULL, 0), 0);
	zeus_monitor_destroy(m);
}

/*
 * The fallback integrates sampled power. Monitor A is opened while the
 * control file hides GPU 0's counter; then the rule is lifted and monitor B
 * reads the counter of the same simulated GPU. Over one window both must
 * agree closely.
 */
static void
test_power_fallback(void **state)
{
	const unsigned g0[] = { 0 }, none[] = { 0 };
	struct zeus_monitor *a, *b;
	struct zeus_measurement ma, mb;
	struct zeus_error e;
	char ctl[128], tmp[140];
	FILE *f;

	make_tree();
	snprintf(ctl, sizeof(ctl), "%s/ctl", root);
	f = fopen(ctl, "w");
	fprintf(f, "fail nvmlDeviceGetTotalEnergyConsumption 0 NOT_SUPPORTED\n");
	fclose(f);
	setenv("ZEUS_SIM_CONTROL", ctl, 1);
	a = open_monitor(g0, 1, none, 0, 20);
	assert_false(zeus_monitor_gpu_has_counter(a, 0));
	snprintf(tmp, sizeof(tmp), "%s/ctl.new", root);
	f = fopen(tmp, "w");
	fprintf(f, "# lifted\n");
	fclose(f);
	rename(tmp, ctl);
	b = open_monitor(g0, 1, none, 0, 0);
	assert_true(zeus_monitor_gpu_has_counter(b, 0));

	assert_int_equal(zeus_monitor_begin_window(a, "w", false, &e), 0);
	assert_int_equal(zeus_monitor_begin_window(b, "w", false, &e), 0);
	usleep(1000000);
	assert_int_equal(zeus_monitor_end_window(b, "w", false, &mb, &e), 0);
	assert_int_equal(zeus_monitor_end_window(a, "w", false, &ma, &e), 0);
	/*
	 * The windows cannot open and close at the same instant: A's is the
	 * longer by the time between the calls, which a loaded machine can
	 * stretch to tens of milliseconds (watts' worth of joules). So compare
	 * average power over each window's own measured time.
	 */
	print_message("integrated %.3f J over %.3f s, counter %.3f J over "
	    "%.3f s\n", ma.gpu[0].joules, ma.time_s, mb.gpu[0].joules,
	    mb.time_s);
	assert_true(ma.time_s > 0 && mb.time_s > 0);
	assert_true(fabs(ma.gpu[0].joules / ma.time_s -
	    mb.gpu[0].joules / mb.time_s) <
	    0.05 * mb.gpu[0].joules / mb.time_s + 3.0);
	zeus_monitor_destroy(a);
	zeus_monitor_destroy(b);
}

static int sync_calls;

static void
on_sync(const unsigned *idx, size_t n, void *user)
{
	assert_int_equal(n, 4);
	assert_int_equal(idx[3], 3);
	assert_ptr_equal(user, &sync_calls);
	sync_calls++;
}

static void
test_sync(void **state)
{
	struct zeus_monitor_options o = {
		.source = ZEUS_SOURCE_DIRECT, .nvml_library = NVML_SIM_PATH,
		.rapl_dir = root, .sync = on_sync, .sync_user = &sync_calls,
	};
	struct zeus_monitor *m;
	struct zeus_error e;

	make_tree();
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	sync_calls = 0;
	zeus_monitor_begin_window(m, "x", true, &e);
	zeus_monitor_end_window(m, "x", false, NULL, &e);
	zeus_monitor_begin_window(m, "x", false, &e);
	zeus_monitor_end_window(m, "x", true, NULL, &e);
	assert_int_equal(sync_calls, 2);
	zeus_monitor_destroy(m);
}

static int warnings;

static void
on_log(enum zeus_log_level level, const char *msg, void *user)
{
	if (level == ZEUS_LOG_WARN && strstr(msg, "bucket value") != NULL)
		warnings++;
}

static void
test_histogram(void **state)
{
	const double empty[1] = { 0 }, unsorted[] = { 5, 1 };
	const double cpu_b[] = { 1, 3, 100 };
	const unsigned none[] = { 0 }, cpu0[] = { 0 };
	struct zeus_histogram_options ho = { 0 };
	struct zeus_energy_histogram *h;
	struct zeus_monitor *m;
	struct zeus_measurement meas;
	struct zeus_error e;
	char *text;

	make_tree();
	m = open_monitor(none, 0, cpu0, 1, 0);
	ho.monitor = m;
	ho.gpu_buckets = empty;
	ho.gpu_bucket_count = 0;
	assert_int_equal(zeus_energy_histogram_create(&ho, &h, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	assert_non_null(strstr(e.message, "GPU bucket range cannot be empty"));
	ho.gpu_buckets = NULL;
	ho.dram_buckets = unsorted;
	ho.dram_bucket_count = 2;
	assert_int_equal(zeus_energy_histogram_create(&ho, &h, &e), -1);
	ho.dram_buckets = NULL;
	ho.cpu_buckets = cpu_b;
	ho.cpu_bucket_count = 3;
	ho.push.url = "http://127.0.0.1:1";	/* no job: invalid */
	assert_int_equal(zeus_energy_histogram_create(&ho, &h, &e), -1);
	ho.push.url = NULL;
	assert_int_equal(zeus_energy_histogram_create(&ho, &h, &e), 0);

	zeus_set_log_handler(on_log, NULL);
	warnings = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(zeus_energy_histogram_begin_window(h, "step",
		    false, &e), 0);
		/* 2 J, then 2 J, then 200 J (above the last bound) */
		put("intel-rapl:0/energy_uj", 1000000ULL + (i + 1) * 2000000ULL +
		    (i == 2 ? 198000000ULL : 0), NULL);
		put("intel-rapl:0/intel-rapl:0:0/energy_uj", 500 +
		    (unsigned long long)(i + 1) * 6000000ULL, NULL);
		assert_int_equal(zeus_energy_histogram_end_window(h, "step",
		    false, &meas, &e), 0);
		put("intel-rapl:0/energy_uj", 1000000ULL + (i + 1) * 2000000ULL +
		    (i == 2 ? 198000000ULL : 0), NULL);
	}
	zeus_set_log_handler(NULL, NULL);
	assert_float_equal(meas.cpu[0].joules, 200.0, 1e-9);
	/* CPU: 200 > 100 once; DRAM: 6 J within 5..150, so no warning. */
	assert_int_equal(warnings, 1);
	text = zeus_energy_histogram_text(h, "step");
	assert_non_null(text);
	assert_non_null(strstr(text,
	    "energy_monitor_cpu_energy_joules_bucket{window=\"step\","
	    "index=\"0\",le=\"1\"} 0\n"
	    "energy_monitor_cpu_energy_joules_bucket{window=\"step\","
	    "index=\"0\",le=\"3\"} 2\n"
	    "energy_monitor_cpu_energy_joules_bucket{window=\"step\","
	    "index=\"0\",le=\"100\"} 2\n"
	    "energy_monitor_cpu_energy_joules_bucket{window=\"step\","
	    "index=\"0\",le=\"+Inf\"} 3\n"
	    "energy_monitor_cpu_energy_joules_sum{window=\"step\","
	    "index=\"0\"} 204\n"
	    "energy_monitor_cpu_energy_joules_count{window=\"step\","
	    "index=\"0\"} 3\n"));
	assert_non_null(strstr(text, "energy_monitor_dram_energy_joules_count"
	    "{window=\"step\",index=\"0\"} 3\n"));
	assert_null(strstr(text, "gpu"));
	free(text);
	assert_int_equal(zeus_energy_histogram_end_window(h, "step", false,
	    NULL, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	zeus_energy_histogram_destroy(h);
	zeus_monitor_destroy(m);
}

/*
 * The device code's log lines reach the zeus log handler through log.c's
 * sink hook (zlog_set_sink; see source_direct.c). Until log.c has that
 * hook, this weak stand-in takes the sink libzeus installs, and the test
 * calls it as log.c would; once log.c defines the hook, its definition
 * wins and the test goes through zlog() itself.
 */
typedef void (*test_sink_fn)(enum zlog_level, const char *, const char *);
static test_sink_fn test_sink;

__attribute__((weak)) void zlog_set_sink(test_sink_fn fn);
__attribute__((weak)) void
zlog_set_sink(test_sink_fn fn)
{
	test_sink = fn;
}

static char logged[8][512];
static enum zeus_log_level logged_level[8];
static int nlogged;

static void
keep_log(enum zeus_log_level level, const char *msg, void *user)
{
	if (nlogged < 8) {
		snprintf(logged[nlogged], sizeof(logged[0]), "%s", msg);
		logged_level[nlogged++] = level;
	}
}

static int
find_log(const char *needle)
{
	for (int i = 0; i < nlogged; i++)
		if (strstr(logged[i], needle) != NULL)
			return i;
	return -1;
}

static void
test_device_log_to_handler(void **state)
{
	struct zeus_monitor *m;
	int i;

	make_tree();
	m = open_monitor(NULL, 0, NULL, 0, 0);	/* installs the sink */
	nlogged = 0;
	zeus_set_log_handler(keep_log, NULL);
	if (test_sink != NULL)
		test_sink(ZLOG_WARN, "rapl_skip_entry", "entry=\"x\" why=test");
	else
		zlog(ZLOG_WARN, "rapl_skip_entry", "entry=\"x\" why=test");
	zeus_set_log_handler(NULL, NULL);
	i = find_log("rapl_skip_entry entry=\"x\" why=test");
	assert_true(i >= 0);
	assert_int_equal(logged_level[i], ZEUS_LOG_WARN);
	zeus_monitor_destroy(m);
}

/* Why a kind of device is absent goes to the handler, below warnings. */
static void
test_absent_devices_say_why(void **state)
{
	struct zeus_monitor_options o = {
		.source = ZEUS_SOURCE_DIRECT,
		.nvml_library = "/nonexistent/libnvidia-ml.so.1",
		.rapl_dir = root,	/* empty: no package */
	};
	struct zeus_monitor *m = NULL;
	struct zeus_error e;
	int i;

	nlogged = 0;
	zeus_set_log_handler(keep_log, NULL);
	assert_int_equal(zeus_monitor_create(&o, &m, &e), 0);
	zeus_set_log_handler(NULL, NULL);
	assert_int_equal(zeus_monitor_gpus(m, NULL, 0), 0);
	assert_int_equal(zeus_monitor_cpus(m, NULL, NULL, 0), 0);
	i = find_log("no GPUs: NVML: ");
	assert_true(i >= 0);
	assert_non_null(strstr(logged[i], "/nonexistent/libnvidia-ml.so.1"));
	assert_int_equal(logged_level[i], ZEUS_LOG_INFO);
	i = find_log("no CPUs: RAPL: no package under ");
	assert_true(i >= 0);
	assert_int_equal(logged_level[i], ZEUS_LOG_INFO);
	zeus_monitor_destroy(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selection, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_cuda_visible, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_power_fallback, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_histogram, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_device_log_to_handler,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_absent_devices_say_why,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
