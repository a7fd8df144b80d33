/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_bench.c - the raw NVML side of tests/hw/nvidia.sh's report.
 *
 * Loads NVML (the driver's libnvidia-ml.so.1, or --nvml-library PATH) with
 * dlopen the way zeusd does, newer names first, and prints one JSON object:
 * the driver and NVML versions, and per GPU its name, UUID and the latency
 * of the calls behind /gpu/get_power (the instantaneous power field, else
 * the averaged reading) and /gpu/get_cumulative_energy, median and 99th
 * percentile over --iterations calls. Reads only: it changes nothing.
 * The script sets these next to zeusd's own latencies for the same reads.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/nvml_api.h"

#define BENCH_MAX_ITER 100000

static void *dl;

/* The first of `names` the library exports, or NULL. */
static void *
bench_sym(const char *a, const char *b)
{
	void *p = dlsym(dl, a);

	return p != NULL || b == NULL ? p : dlsym(dl, b);
}

static double
bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A driver string for JSON: printable ASCII, no quotes or backslashes. */
static void
bench_clean(char *s)
{
	for (; *s != '\0'; s++)
		if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
			*s = '?';
}

/* Prints "name": {"median": us, "p99": us} or null when a call failed. */
static void
bench_print(const char *name, double *t, int n, int ok)
{
	if (!ok) {
		printf(", \"%s\": null", name);
		return;
	}
	qsort(t, (size_t)n, sizeof(t[0]), bench_cmp);
	printf(", \"%s\": {\"median\": %.2f, \"p99\": %.2f}", name,
	    t[n / 2], t[(n * 99) / 100]);
}

int
main(int argc, char **argv)
{
	const char *lib = "libnvidia-ml.so.1";
	int iter = 1000;
	__typeof__(&nvmlInit_v2) init;
	__typeof__(&nvmlDeviceGetCount_v2) get_count;
	__typeof__(&nvmlDeviceGetHandleByIndex_v2) get_handle;
	__typeof__(&nvmlSystemGetDriverVersion) get_driver;
	__typeof__(&nvmlSystemGetNVMLVersion) get_nvml;
	__typeof__(&nvmlDeviceGetName) get_name;
	__typeof__(&nvmlDeviceGetUUID) get_uuid;
	__typeof__(&nvmlDeviceGetPowerUsage) get_power;
	__typeof__(&nvmlDeviceGetFieldValues) get_fields;
	__typeof__(&nvmlDeviceGetTotalEnergyConsumption) get_energy;
	__typeof__(&nvmlShutdown) shutdown;
	char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "unknown";
	char nvml[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = "unknown";
	unsigned int n;
	double *t;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--nvml-library") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
			iter = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--nvml-library PATH] "
			    "[--iterations N]\n", argv[0]);
			return 2;
		}
	}
	if (iter < 1 || iter > BENCH_MAX_ITER) {
		fprintf(stderr, "nvml_bench: --iterations must be 1..%d\n",
		    BENCH_MAX_ITER);
		return 2;
	}
	if ((dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		fprintf(stderr, "nvml_bench: %s\n", dlerror());
		return 1;
	}
	init = (__typeof__(init))bench_sym("nvmlInit_v2", "nvmlInit");
	get_count = (__typeof__(get_count))bench_sym("nvmlDeviceGetCount_v2",
	    "nvmlDeviceGetCount");
	get_handle = (__typeof__(get_handle))bench_sym(
	    "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	get_power = (__typeof__(get_power))bench_sym("nvmlDeviceGetPowerUsage",
	    NULL);
	shutdown = (__typeof__(shutdown))bench_sym("nvmlShutdown", NULL);
	get_driver = (__typeof__(get_driver))bench_sym(
	    "nvmlSystemGetDriverVersion", NULL);
	get_nvml = (__typeof__(get_nvml))bench_sym("nvmlSystemGetNVMLVersion",
	    NULL);
	get_name = (__typeof__(get_name))bench_sym("nvmlDeviceGetName", NULL);
	get_uuid = (__typeof__(get_uuid))bench_sym("nvmlDeviceGetUUID", NULL);
	get_fields = (__typeof__(get_fields))bench_sym(
	    "nvmlDeviceGetFieldValues", NULL);
	get_energy = (__typeof__(get_energy))bench_sym(
	    "nvmlDeviceGetTotalEnergyConsumption", NULL);
	if (init == NULL || get_count == NULL || get_handle == NULL ||
	    get_power == NULL || shutdown == NULL) {
		fprintf(stderr, "nvml_bench: %s lacks a required symbol\n",
		    lib);
		return 1;
	}
	if (init() != NVML_SUCCESS || get_count(&n) != NVML_SUCCESS) {
		fprintf(stderr, "nvml_bench: NVML init or count failed\n");
		return 1;
	}
	if (get_driver != NULL)
		get_driver(drv, sizeof(drv));
	if (get_nvml != NULL)
		get_nvml(nvml, sizeof(nvml));
	drv[sizeof(drv) - 1] = nvml[sizeof(nvml) - 1] = '\0';
	bench_clean(drv);
	bench_clean(nvml);
	if ((t = calloc((size_t)iter, sizeof(*t))) == NULL)
		return 1;
	printf("{\"driver\": \"%s\", \"nvml\": \"%s\", \"iterations\": %d, "
	    "\"gpus\": [", drv, nvml, iter);
	for (unsigned g = 0; g < n; g++) {
		char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
		nvmlFieldValue_t fv;
		nvmlDevice_t h;
		unsigned int mw;
		unsigned long long mj;
		int ok;

		if (get_handle(g, &h) != NVML_SUCCESS) {
			printf("%s{\"index\": %u, \"error\": \"no handle\"}",
			    g ? ", " : "", g);
			continue;
		}
		if (get_name != NULL)
			get_name(h, name, sizeof(name));
		if (get_uuid != NULL)
			get_uuid(h, uuid, sizeof(uuid));
		name[sizeof(name) - 1] = uuid[sizeof(uuid) - 1] = '\0';
		bench_clean(name);
		bench_clean(uuid);
		printf("%s{\"index\": %u, \"name\": \"%s\", \"uuid\": \"%s\"",
		    g ? ", " : "", g, name, uuid);
		ok = 1;
		for (int i = 0; i < iter && ok; i++) {
			double t0 = bench_now_us();

			ok = get_power(h, &mw) == NVML_SUCCESS;
			t[i] = bench_now_us() - t0;
		}
		bench_print("power_usage_us", t, iter, ok);
		ok = get_fields != NULL;
		for (int i = 0; i < iter && ok; i++) {
			double t0 = bench_now_us();

			memset(&fv, 0, sizeof(fv));
			fv.fieldId = NVML_FI_DEV_POWER_INSTANT;
			ok = get_fields(h, 1, &fv) == NVML_SUCCESS &&
			    fv.nvmlReturn == NVML_SUCCESS;
			t[i] = bench_now_us() - t0;
		}
		bench_print("power_instant_us", t, iter, ok);
		ok = get_energy != NULL;
		for (int i = 0; i < iter && ok; i++) {
			double t0 = bench_now_us();

			ok = get_energy(h, &mj) == NVML_SUCCESS;
			t[i] = bench_now_us() - t0;
		}
		bench_print("energy_us", t, iter, ok);
		printf("}");
	}
	printf("]}\n");
	free(t);
	shutdown();
	dlclose(dl);
	return 0;
}
