/* SPDX-License-Identifier: Apache-2.0 */
/*
 * energy_window.c - a libzeus example: measures the energy of a piece of
 * work with a named window and, when given a Pushgateway URL, records it in
 * Zeus's energy histogram and pushes it.
 *
 *   ./energy_window [PUSHGATEWAY_URL JOB]
 *
 * Devices come from the environment: a zeusd (ZEUSD_SOCK_PATH or
 * ZEUSD_HOST_PORT) or NVML and RAPL directly (ZEUS_NVML_LIBRARY,
 * ZEUS_RAPL_DIR to override the library and the powercap tree).
 * Build: make (uses `pkg-config --cflags --libs zeus`).
 */
#include <stdio.h>
#include <time.h>

#include <zeus/zeus.h>

static void
work(void)
{
	struct timespec ts = { 0, 300 * 1000000L };

	nanosleep(&ts, NULL);	/* stands in for a training step */
}

int
main(int argc, char **argv)
{
	struct zeus_monitor *m;
	struct zeus_energy_histogram *h = NULL;
	struct zeus_histogram_options ho = { 0 };
	struct zeus_measurement meas;
	struct zeus_error err;
	int rc;

	if (zeus_monitor_create(NULL, &m, &err) != 0) {
		fprintf(stderr, "monitor: %s\n", err.message);
		return 1;
	}
	if (argc == 3) {
		ho.monitor = m;
		ho.push.url = argv[1];
		ho.push.job = argv[2];
		ho.push.instance = "example";
		if (zeus_energy_histogram_create(&ho, &h, &err) != 0) {
			fprintf(stderr, "histogram: %s\n", err.message);
			zeus_monitor_destroy(m);
			return 1;
		}
		zeus_energy_histogram_begin_window(h, "step", false, &err);
		work();
		rc = zeus_energy_histogram_end_window(h, "step", false, &meas,
		    &err);
	} else {
		zeus_monitor_begin_window(m, "step", false, &err);
		work();
		rc = zeus_monitor_end_window(m, "step", false, &meas, &err);
	}
	if (rc != 0 && err.code != ZEUS_ERR_PUSH) {
		fprintf(stderr, "measure: %s\n", err.message);
		return 1;
	}
	if (rc != 0)	/* the measurement is still good */
		fprintf(stderr, "push failed: %s\n", err.message);
	printf("libzeus %s: %.3f s\n", zeus_version(), meas.time_s);
	for (size_t i = 0; i < meas.gpu_count; i++)
		printf("gpu %u: %.3f J\n", meas.gpu[i].index,
		    meas.gpu[i].joules);
	for (size_t i = 0; i < meas.cpu_count; i++)
		printf("cpu %u: %.3f J\n", meas.cpu[i].index,
		    meas.cpu[i].joules);
	for (size_t i = 0; i < meas.dram_count; i++)
		printf("dram %u: %.3f J\n", meas.dram[i].index,
		    meas.dram[i].joules);
	zeus_energy_histogram_destroy(h);
	zeus_monitor_destroy(m);
	return rc == 0 ? 0 : 3;
}
