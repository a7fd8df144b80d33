/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_nvml.c - the NVML backend against the simulator (build/libnvml-sim.so).
 *
 * Each test configures the simulator through its environment (read at
 * nvmlInit_v2), opens the backend, and observes the simulator through its
 * call log and steers it through its control file, both in a fresh
 * temporary directory. NVML_SIM_PATH, NVML_SIM_NOMEM_PATH (no
 * nvmlDeviceSetMemoryLockedClocks) and NVML_SIM_LEGACY_PATH (an old
 * driver's entry points) come from meson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices/nvml.h"

static char tmpdir[64];
static char log_path[128];
static char control_path[128];

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Replaces the control file atomically, as docs/simulator.md advises. */
static void
write_control(const char *text)
{
	char tmp[160];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", control_path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, control_path), 0);
}

/* The call log, as one string (caller frees). */
static char *
read_log(void)
{
	FILE *f = fopen(log_path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(buf);
	if (f == NULL)
		return buf;
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Lines of the log that contain `needle`. */
static unsigned
log_count(const char *needle)
{
	char *buf = read_log(), *line, *save = NULL;
	unsigned n = 0;

	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		if (strstr(line, needle) != NULL)
			n++;
	free(buf);
	return n;
}

static int
setup(void **state)
{
	strcpy(tmpdir, "/tmp/test_nvml.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(log_path, sizeof(log_path), "%s/calls.log", tmpdir);
	snprintf(control_path, sizeof(control_path), "%s/control", tmpdir);
	unsetenv("ZEUS_SIM_GPUS");
	unsetenv("ZEUS_SIM_GPU_NAME");
	unsetenv("ZEUS_SIM_PCI");
	unsetenv("ZEUS_SIM_FAULTS");
	unsetenv("ZEUS_SIM_PROFILE");
	unsetenv("ZEUS_SIM_DRIVER_VERSION");
	setenv("ZEUS_SIM_LOG", log_path, 1);
	setenv("ZEUS_SIM_CONTROL", control_path, 1);
	*state = NULL;
	return 0;
}

static int
teardown(void **state)
{
	char path[160];

	snprintf(path, sizeof(path), "%s.tmp", control_path);
	unlink(path);
	unlink(control_path);
	unlink(log_path);
	rmdir(tmpdir);
	return 0;
}

static void
open_sim(struct gpu_backend *b)
{
	struct zerr err = { 0 };

	if (nvml_backend_open(NVML_SIM_PATH, b, &err) != 0)
		fail_msg("open failed: %s", err.msg);
	assert_string_equal(b->ops->name, "nvml");
}

/* ------------------------------------------------------------------------ */

static void
test_open_count_info(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };

	setenv("ZEUS_SIM_GPUS", "3", 1);
	setenv("ZEUS_SIM_GPU_NAME", "NVIDIA Test\tGPU", 1);
	setenv("ZEUS_SIM_PCI", "0001:3B:00.0,0000:af:1f.0", 1);
	open_sim(&b);
	assert_int_equal(b.ops->count(&b), 3);
	assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
	/* The control byte from the driver is not passed on. */
	assert_string_equal(info.name, "NVIDIA Test?GPU");
	assert_string_equal(info.pci_address, "0001:3b:00.0");
	assert_true(info.energy_available);
	assert_int_equal(b.ops->info(&b, 1, &info, &err), 0);
	assert_string_equal(info.pci_address, "0000:af:1f.0");
	assert_int_equal(b.ops->info(&b, 2, &info, &err), 0);
	assert_string_equal(info.pci_address, "0000:03:00.0");
	assert_int_equal(b.ops->info(&b, 3, &info, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	b.ops->destroy(&b);
	assert_int_equal(log_count("nvmlShutdown - rc=SUCCESS"), 1);
}

static void
test_defaults(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };
	uint32_t lo, hi, limit;
	bool on;

	open_sim(&b);
	assert_int_equal(b.ops->count(&b), 4);
	for (unsigned i = 0; i < 4; i++) {
		char want[32];

		assert_int_equal(b.ops->info(&b, i, &info, &err), 0);
		assert_string_equal(info.name, "NVIDIA A100-SXM4-80GB");
		snprintf(want, sizeof(want), "0000:%02x:00.0", i + 1);
		assert_string_equal(info.pci_address, want);
		assert_int_equal(b.ops->get_power_limit_constraints(&b, i, &lo,
		    &hi, &err), 0);
		assert_int_equal(lo, 100000);
		assert_int_equal(hi, 400000);
		assert_int_equal(b.ops->get_power_limit_mw(&b, i, &limit,
		    &err), 0);
		assert_int_equal(limit, 400000);
		assert_int_equal(b.ops->get_persistence_mode(&b, i, &on, &err),
		    0);
		assert_false(on);
	}
	b.ops->destroy(&b);
}

static void
test_zero_gpus(void **state)
{
	struct gpu_backend b;

	setenv("ZEUS_SIM_GPUS", "0", 1);
	open_sim(&b);
	assert_int_equal(b.ops->count(&b), 0);
	b.ops->destroy(&b);
}

static void
test_power_moves_within_limit(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 150000 };
	uint32_t mw, first = 0;
	bool moved = false;

	open_sim(&b);
	for (int i = 0; i < 10; i++) {
		for (unsigned g = 0; g < 4; g++) {
			assert_int_equal(b.ops->get_power_mw(&b, g, &mw, &err),
			    0);
			assert_true(mw > 10000 && mw <= 400000);
		}
		if (i == 0)
			first = mw;
		else if (mw != first)
			moved = true;
		sleep_ms(30);
	}
	assert_true(moved);
	/* Power never goes above the limit. */
	for (unsigned g = 0; g < 4; g++)
		assert_int_equal(b.ops->write(&b, g, &w, &err), 0);
	for (int i = 0; i < 20; i++) {
		for (unsigned g = 0; g < 4; g++) {
			assert_int_equal(b.ops->get_power_mw(&b, g, &mw, &err),
			    0);
			assert_true(mw <= 150000);
		}
		sleep_ms(10);
	}
	/* The instant field was used, not the fallback. */
	assert_true(log_count("nvmlDeviceGetFieldValues 0 186") > 0);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage"), 0);
	b.ops->destroy(&b);
}

static void
test_locked_clocks_lower_power(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write lock = { .op = GPU_SET_GPU_LOCKED_CLOCKS,
	    .min_clock_mhz = 210, .max_clock_mhz = 210 };
	uint32_t before, after;

	open_sim(&b);
	assert_int_equal(b.ops->get_power_mw(&b, 0, &before, &err), 0);
	assert_int_equal(b.ops->write(&b, 0, &lock, &err), 0);
	assert_int_equal(b.ops->get_power_mw(&b, 0, &after, &err), 0);
	assert_true(after < before);
	assert_int_equal(log_count("nvmlDeviceSetGpuLockedClocks 0 210 210 "
	    "rc=SUCCESS"), 1);
	b.ops->destroy(&b);
}

static void
test_energy_monotonic(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	uint64_t e0, e1, e2;

	open_sim(&b);
	assert_int_equal(b.ops->get_energy_mj(&b, 1, &e0, &err), 0);
	sleep_ms(150);
	assert_int_equal(b.ops->get_energy_mj(&b, 1, &e1, &err), 0);
	/* 150 ms at 50..400 W: 7.5 J to 60 J, with slack for a slow host. */
	assert_true(e1 > e0);
	assert_true(e1 - e0 >= 5000);
	assert_true(e1 - e0 <= 400000);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(b.ops->get_energy_mj(&b, 1, &e2, &err), 0);
		assert_true(e2 >= e1);
		e1 = e2;
	}
	b.ops->destroy(&b);
}

static void
test_set_limit_round_trip_and_log(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 250000 };
	struct gpu_write pm = { .op = GPU_SET_PERSISTENCE_MODE,
	    .enabled = true };
	struct gpu_write mem = { .op = GPU_SET_MEM_LOCKED_CLOCKS,
	    .min_clock_mhz = 500, .max_clock_mhz = 1000 };
	uint32_t limit;
	bool on;

	open_sim(&b);
	assert_int_equal(b.ops->write(&b, 1, &w, &err), 0);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &limit, &err), 0);
	assert_int_equal(limit, 250000);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 0, &limit, &err), 0);
	assert_int_equal(limit, 400000);
	assert_int_equal(b.ops->write(&b, 2, &pm, &err), 0);
	assert_int_equal(b.ops->get_persistence_mode(&b, 2, &on, &err), 0);
	assert_true(on);
	assert_int_equal(b.ops->write(&b, 3, &mem, &err), 0);
	assert_int_equal(log_count(" nvmlDeviceSetPowerManagementLimit 1 "
	    "250000 rc=SUCCESS"), 1);
	assert_int_equal(log_count(" nvmlDeviceSetPersistenceMode 2 1 "
	    "rc=SUCCESS"), 1);
	assert_int_equal(log_count(" nvmlDeviceSetMemoryLockedClocks 3 500 "
	    "1000 rc=SUCCESS"), 1);
	b.ops->destroy(&b);
}

static void
test_invalid_limit(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 50000 };
	struct gpu_write clk = { .op = GPU_SET_GPU_LOCKED_CLOCKS,
	    .min_clock_mhz = 1200, .max_clock_mhz = 800 };
	uint32_t limit;

	open_sim(&b);
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "GPU 1"));
	assert_non_null(strstr(err.msg, "set_power_limit"));
	assert_non_null(strstr(err.msg, "Invalid Argument"));
	w.power_limit_mw = 400001;
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &limit, &err), 0);
	assert_int_equal(limit, 400000);
	assert_int_equal(b.ops->write(&b, 0, &clk, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(log_count("nvmlDeviceSetPowerManagementLimit 1 50000 "
	    "rc=INVALID_ARGUMENT"), 1);
	b.ops->destroy(&b);
}

static void
test_injected_no_permission(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 200000 };

	open_sim(&b);
	write_control("# test\nfail nvmlDeviceSetPowerManagementLimit 1 "
	    "NO_PERMISSION\n");
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	assert_non_null(strstr(err.msg, "GPU 1"));
	assert_non_null(strstr(err.msg, "Insufficient Permissions"));
	/* Other GPUs are unaffected. */
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	/* Lifted at run time. */
	write_control("");
	assert_int_equal(b.ops->write(&b, 1, &w, &err), 0);
	b.ops->destroy(&b);
}

static void
test_injected_gpu_lost(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_RESET_GPU_LOCKED_CLOCKS };
	uint32_t mw;
	uint64_t mj;

	open_sim(&b);
	assert_false(b.ops->lost(&b, 2));
	write_control("fail * 2 GPU_IS_LOST\n");
	assert_int_equal(b.ops->get_power_mw(&b, 2, &mw, &err), -1);
	assert_int_equal(err.kind, ZERR_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "GPU is lost"));
	assert_non_null(strstr(err.msg, "fallen off the bus"));
	assert_true(b.ops->lost(&b, 2));
	assert_int_equal(b.ops->get_energy_mj(&b, 2, &mj, &err), -1);
	assert_int_equal(err.kind, ZERR_UNAVAILABLE);
	assert_int_equal(b.ops->write(&b, 2, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "GPU 2: reset_gpu_locked_clocks"));
	assert_int_equal(b.ops->get_power_mw(&b, 3, &mw, &err), 0);
	assert_false(b.ops->lost(&b, 3));
	/* A lost GPU's failed field read does not switch it to the fallback. */
	write_control("");
	assert_true(b.ops->lost(&b, 2));
	assert_int_equal(b.ops->get_power_mw(&b, 2, &mw, &err), 0);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage"), 0);
	/* The first call that works clears the flag. */
	assert_false(b.ops->lost(&b, 2));
	b.ops->destroy(&b);
}

/* A GPU lost before open got its handle: listed, lost, never asked. */
static void
test_gpu_lost_at_open(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };
	uint32_t mw;
	unsigned asked;

	setenv("ZEUS_SIM_FAULTS", "fail * 2 GPU_IS_LOST", 1);
	open_sim(&b);
	assert_int_equal(b.ops->count(&b), 4);
	assert_true(b.ops->lost(&b, 2));
	assert_false(b.ops->lost(&b, 1));
	assert_int_equal(b.ops->info(&b, 2, &info, &err), 0);
	assert_string_equal(info.name, "");
	assert_string_equal(info.uuid, "");
	assert_false(info.energy_available);
	assert_false(info.caps.power_limit);
	asked = log_count(" 2 ");
	assert_int_equal(b.ops->get_power_mw(&b, 2, &mw, &err), -1);
	assert_int_equal(err.kind, ZERR_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "GPU 2: get_power failed: GPU is lost"));
	assert_int_equal(log_count(" 2 "), asked);
	assert_int_equal(b.ops->get_power_mw(&b, 3, &mw, &err), 0);

	/*
	 * Lost during identification: kept, with what could be read; the
	 * later probes that worked cleared the flag again.
	 */
	b.ops->destroy(&b);
	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetPciInfo_v3 1 GPU_IS_LOST",
	    1);
	open_sim(&b);
	assert_int_equal(b.ops->info(&b, 1, &info, &err), 0);
	assert_string_equal(info.name, "NVIDIA A100-SXM4-80GB");
	assert_string_equal(info.pci_address, "");
	assert_false(b.ops->lost(&b, 1));
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	b.ops->destroy(&b);
}

/* The driver's errors become messages that say what they mean. */
static void
test_error_messages(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_MEM_LOCKED_CLOCKS,
	    .min_clock_mhz = 405, .max_clock_mhz = 810 };
	bool on;
	char want[64];

	open_sim(&b);
	write_control("fail nvmlDeviceSetMemoryLockedClocks 1 NO_PERMISSION\n"
	    "fail nvmlDeviceGetPersistenceMode 1 NO_PERMISSION\n"
	    "fail nvmlDeviceSetMemoryLockedClocks 2 NOT_SUPPORTED\n");
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	snprintf(want, sizeof(want), "zeusd runs as uid %u)",
	    (unsigned)geteuid());
	assert_non_null(strstr(err.msg, "GPU 1: set_mem_locked_clocks failed: "
	    "Insufficient Permissions (the NVIDIA driver lets only root "
	    "change this setting; "));
	assert_non_null(strstr(err.msg, want));
	assert_int_equal(b.ops->get_persistence_mode(&b, 1, &on, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	assert_non_null(strstr(err.msg, "only privileged users read this"));
	assert_int_equal(b.ops->write(&b, 2, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_string_equal(err.msg, "GPU 2: set_mem_locked_clocks failed: Not "
	    "Supported (not supported by this GPU, NVIDIA A100-SXM4-80GB)");
	b.ops->destroy(&b);
}

static void
test_energy_not_supported(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };
	uint64_t mj;

	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetTotalEnergyConsumption 3 "
	    "NOT_SUPPORTED", 1);
	open_sim(&b);
	assert_int_equal(b.ops->info(&b, 3, &info, &err), 0);
	assert_false(info.energy_available);
	assert_int_equal(b.ops->get_energy_mj(&b, 3, &mj, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "Not Supported"));
	assert_int_equal(b.ops->info(&b, 2, &info, &err), 0);
	assert_true(info.energy_available);
	assert_int_equal(b.ops->get_energy_mj(&b, 2, &mj, &err), 0);
	b.ops->destroy(&b);
}

static void
test_power_field_fallback(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	uint32_t mw;
	unsigned fields;

	/* GPU 1 lacks the field from the start. */
	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetFieldValues 1 "
	    "NOT_SUPPORTED", 1);
	open_sim(&b);
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	assert_true(mw > 0 && mw <= 400000);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage 1 rc=SUCCESS"), 1);
	/* Only the startup probe asked GPU 1 for the field. */
	assert_int_equal(log_count("nvmlDeviceGetFieldValues 1 "), 1);

	/* GPU 0 loses it at run time: one failed try, then the fallback. */
	assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
	write_control("fail nvmlDeviceGetFieldValues 0 NOT_SUPPORTED\n");
	assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
	fields = log_count("nvmlDeviceGetFieldValues 0 ");
	for (int i = 0; i < 5; i++)
		assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
	assert_int_equal(log_count("nvmlDeviceGetFieldValues 0 "), fields);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage 0 rc=SUCCESS"), 6);
	b.ops->destroy(&b);
}

static void
test_reset_locked_clocks(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_RESET_LOCKED_CLOCKS };

	open_sim(&b);
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_int_equal(log_count("nvmlDeviceResetGpuLockedClocks 0 "
	    "rc=SUCCESS"), 1);
	assert_int_equal(log_count("nvmlDeviceResetMemoryLockedClocks 0 "
	    "rc=SUCCESS"), 1);

	/* The first fails: the second still runs, the first error is kept. */
	write_control("fail nvmlDeviceResetGpuLockedClocks 1 NO_PERMISSION\n"
	    "fail nvmlDeviceResetMemoryLockedClocks 1 GPU_IS_LOST\n");
	assert_int_equal(b.ops->write(&b, 1, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	assert_non_null(strstr(err.msg, "Insufficient Permissions"));
	assert_int_equal(log_count("nvmlDeviceResetMemoryLockedClocks 1 "
	    "rc=GPU_IS_LOST"), 1);

	/* Only the second fails: its error is reported. */
	write_control("fail nvmlDeviceResetMemoryLockedClocks 2 UNKNOWN\n");
	assert_int_equal(b.ops->write(&b, 2, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "memory"));
	assert_int_equal(log_count("nvmlDeviceResetGpuLockedClocks 2 "
	    "rc=SUCCESS"), 1);

	/*
	 * A domain the GPU cannot lock (an H200's memory clocks answer Not
	 * Supported): nothing to reset there, the other reset is the answer.
	 */
	write_control("fail nvmlDeviceResetMemoryLockedClocks 3 "
	    "NOT_SUPPORTED\n");
	zerr_clear(&err);
	assert_int_equal(b.ops->write(&b, 3, &w, &err), 0);
	assert_int_equal(log_count("nvmlDeviceResetMemoryLockedClocks 3 "
	    "rc=NOT_SUPPORTED"), 1);
	/* both unsupported: the GPU's error */
	write_control("fail nvmlDeviceResetGpuLockedClocks 0 NOT_SUPPORTED\n"
	    "fail nvmlDeviceResetMemoryLockedClocks 0 NOT_SUPPORTED\n");
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "Not Supported"));
	b.ops->destroy(&b);
}

static void
test_env_fault_lifted_by_control(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	uint32_t limit;

	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetPowerManagementLimit * "
	    "UNKNOWN;delay nvmlDeviceGetPowerManagementLimit 0 0", 1);
	open_sim(&b);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 0, &limit, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "Unknown Error"));
	write_control("fail nvmlDeviceGetPowerManagementLimit 0 SUCCESS\n");
	assert_int_equal(b.ops->get_power_limit_mw(&b, 0, &limit, &err), 0);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &limit, &err), -1);
	b.ops->destroy(&b);
}

struct reader {
	struct gpu_backend *b;
	unsigned gpu;
	uint64_t worst_ms;
	int failures;
};

static void *
reader_main(void *arg)
{
	struct reader *r = arg;
	struct zerr err = { 0 };
	uint32_t mw;

	for (int i = 0; i < 20; i++) {
		uint64_t t0 = now_ms(), dt;

		if (r->b->ops->get_power_mw(r->b, r->gpu, &mw, &err) != 0)
			r->failures++;
		dt = now_ms() - t0;
		if (dt > r->worst_ms)
			r->worst_ms = dt;
		sleep_ms(10);
	}
	return NULL;
}

/* A slow write on a GPU holds up neither its power reads nor other GPUs. */
static void
test_delay_does_not_block_reads(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 300000 };
	struct reader r[2];
	pthread_t t[2];
	uint64_t t0;

	open_sim(&b);
	write_control("delay nvmlDeviceSetPowerManagementLimit 0 300\n");
	for (unsigned i = 0; i < 2; i++) {
		r[i] = (struct reader){ .b = &b, .gpu = i };
		assert_int_equal(pthread_create(&t[i], NULL, reader_main,
		    &r[i]), 0);
	}
	t0 = now_ms();
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_true(now_ms() - t0 >= 290);
	for (unsigned i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].failures, 0);
		assert_true(r[i].worst_ms < 150);
	}
	b.ops->destroy(&b);
}

static void *
hammer_main(void *arg)
{
	struct reader *r = arg;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT };
	uint32_t mw;
	uint64_t mj;

	for (int i = 0; i < 200; i++) {
		w.power_limit_mw = 100000 + (uint32_t)i * 1000;
		if (r->b->ops->write(r->b, r->gpu, &w, &err) != 0 ||
		    r->b->ops->get_power_mw(r->b, r->gpu, &mw, &err) != 0 ||
		    r->b->ops->get_energy_mj(r->b, r->gpu, &mj, &err) != 0)
			r->failures++;
	}
	return NULL;
}

static void
test_concurrent_calls(void **state)
{
	struct gpu_backend b;
	struct reader r[8];
	pthread_t t[8];

	unsetenv("ZEUS_SIM_LOG");
	setenv("ZEUS_SIM_GPUS", "8", 1);
	open_sim(&b);
	for (unsigned i = 0; i < 8; i++) {
		/* Two threads per GPU on half the GPUs. */
		r[i] = (struct reader){ .b = &b, .gpu = i % 4 };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main,
		    &r[i]), 0);
	}
	for (unsigned i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].failures, 0);
	}
	b.ops->destroy(&b);
}

/* ------------------------------------------------------------------------
 * The loader.
 */

static void
test_missing_library(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };

	assert_int_equal(nvml_backend_open("/nonexistent/libnvml-x.so", &b,
	    &err), -1);
	assert_int_equal(err.kind, ZERR_NOT_FOUND);
	assert_non_null(strstr(err.msg, "cannot load NVML library"));
	assert_non_null(strstr(err.msg, "/nonexistent/libnvml-x.so"));
	assert_false(nvml_library_available("/nonexistent/libnvml-x.so"));
	assert_true(nvml_library_available(NVML_SIM_PATH));
	/* The driver's default names, on a host without the driver. */
	if (!nvml_library_available(NULL)) {
		assert_int_equal(nvml_backend_open(NULL, &b, &err), -1);
		assert_int_equal(err.kind, ZERR_NOT_FOUND);
		assert_non_null(strstr(err.msg, "libnvidia-ml.so.1"));
	}
}

/* A driver without one optional entry point: everything else works. */
static void
test_missing_symbol(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };
	struct gpu_write w = { .op = GPU_SET_MEM_LOCKED_CLOCKS,
	    .min_clock_mhz = 405, .max_clock_mhz = 810 };
	struct gpu_write r = { .op = GPU_RESET_MEM_LOCKED_CLOCKS };
	uint32_t mw;

	if (nvml_backend_open(NVML_SIM_NOMEM_PATH, &b, &err) != 0)
		fail_msg("open failed: %s", err.msg);
	assert_string_equal(b.ops->write_lacks(&b, GPU_SET_MEM_LOCKED_CLOCKS),
	    "nvmlDeviceSetMemoryLockedClocks");
	assert_null(b.ops->write_lacks(&b, GPU_RESET_MEM_LOCKED_CLOCKS));
	assert_null(b.ops->write_lacks(&b, GPU_SET_POWER_LIMIT));
	assert_null(b.ops->read_lacks(&b, GPU_GET_CUMULATIVE_ENERGY));
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_string_equal(err.msg, "GPU 0: set_mem_locked_clocks failed: not "
	    "supported by this NVIDIA driver (NVML lacks "
	    "nvmlDeviceSetMemoryLockedClocks)");
	assert_int_equal(b.ops->write(&b, 0, &r, &err), 0);
	assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
	assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
	assert_false(info.caps.mem_locked_clocks);
	assert_true(info.caps.gpu_locked_clocks);
	b.ops->destroy(&b);
}

/*
 * An old driver: only the unversioned names, no energy counter, field
 * values, architecture query or memory locked clocks. Reads and the writes
 * it has work; the rest says what the driver lacks.
 */
static void
test_legacy_driver(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err = { 0 };
	struct gpu_write reset = { .op = GPU_RESET_LOCKED_CLOCKS };
	struct gpu_write lim = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 250000 };
	uint32_t mw, lo, hi;
	uint64_t mj;

	setenv("ZEUS_SIM_GPUS", "2", 1);
	setenv("ZEUS_SIM_PCI", "0002:3b:00.0", 1);
	if (nvml_backend_open(NVML_SIM_LEGACY_PATH, &b, &err) != 0)
		fail_msg("open failed: %s", err.msg);
	assert_int_equal(log_count("nvmlInit - rc=SUCCESS"), 1);
	assert_int_equal(log_count("nvmlDeviceGetCount - rc=SUCCESS"), 1);
	assert_int_equal(log_count("nvmlDeviceGetHandleByIndex 1 1 "
	    "rc=SUCCESS"), 1);
	assert_int_equal(b.ops->count(&b), 2);
	assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
	assert_string_equal(info.pci_address, "0002:3b:00.0");
	assert_memory_equal(info.uuid, "GPU-", 4);
	assert_string_equal(info.architecture, "unknown");
	assert_false(info.energy_available);
	assert_true(info.caps.gpu_locked_clocks);
	assert_false(info.caps.mem_locked_clocks);
	assert_true(info.caps.power_limit);
	assert_int_equal(info.caps.limit_default_mw, 400000);
	assert_int_equal(info.caps.mem_clock_max_mhz, 1593);
	assert_int_equal(info.caps.gpu_clock_max_mhz, 1410);
	assert_int_equal(info.caps.gpu_clock_min_mhz, 210);

	/* Power comes from the averaged reading. */
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage 1 rc=SUCCESS"), 1);
	assert_int_equal(b.ops->get_power_limit_constraints(&b, 1, &lo, &hi,
	    &err), 0);
	assert_int_equal(b.ops->write(&b, 1, &lim, &err), 0);

	assert_string_equal(b.ops->read_lacks(&b, GPU_GET_CUMULATIVE_ENERGY),
	    "nvmlDeviceGetTotalEnergyConsumption");
	assert_int_equal(b.ops->get_energy_mj(&b, 0, &mj, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "NVML lacks "
	    "nvmlDeviceGetTotalEnergyConsumption"));
	assert_string_equal(b.ops->write_lacks(&b, GPU_RESET_MEM_LOCKED_CLOCKS),
	    "nvmlDeviceResetMemoryLockedClocks");
	/* Both domains: only the one the driver can lock is reset. */
	assert_null(b.ops->write_lacks(&b, GPU_RESET_LOCKED_CLOCKS));
	assert_int_equal(b.ops->write(&b, 0, &reset, &err), 0);
	assert_int_equal(log_count("nvmlDeviceResetGpuLockedClocks 0 "
	    "rc=SUCCESS"), 1);
	b.ops->destroy(&b);
	assert_int_equal(log_count("nvmlShutdown - rc=SUCCESS"), 1);
}

/* What each profile's GPU supports, as probed at open. */
static void
test_profiles_caps(void **state)
{
	struct gpu_backend b;
	struct gpu_info v, h, g, p;
	struct zerr err = { 0 };
	struct gpu_write mem = { .op = GPU_SET_MEM_LOCKED_CLOCKS,
	    .min_clock_mhz = 877, .max_clock_mhz = 877 };
	uint32_t mw;
	uint64_t mj;

	setenv("ZEUS_SIM_PROFILE", "v100,h200,rtx4090,p100", 1);
	open_sim(&b);
	assert_int_equal(b.ops->count(&b), 4);
	assert_int_equal(b.ops->info(&b, 0, &v, &err), 0);
	assert_int_equal(b.ops->info(&b, 1, &h, &err), 0);
	assert_int_equal(b.ops->info(&b, 2, &g, &err), 0);
	assert_int_equal(b.ops->info(&b, 3, &p, &err), 0);
	assert_string_equal(v.name, "Tesla V100-SXM2-32GB");
	assert_string_equal(v.architecture, "volta");
	assert_true(v.energy_available && v.caps.gpu_locked_clocks);
	assert_false(v.caps.mem_locked_clocks);
	assert_int_equal(v.caps.limit_min_mw, 150000);
	assert_int_equal(v.caps.limit_max_mw, 300000);
	assert_int_equal(v.caps.mem_clock_min_mhz, 877);
	assert_string_equal(h.architecture, "hopper");
	assert_true(h.caps.mem_locked_clocks && h.caps.persistence_mode);
	assert_int_equal(h.caps.limit_max_mw, 700000);
	assert_int_equal(h.caps.mem_clock_max_mhz, 3201);
	assert_string_equal(g.architecture, "ada");
	assert_int_equal(g.caps.limit_default_mw, 450000);
	assert_int_equal(g.caps.limit_max_mw, 600000);
	assert_int_equal(g.caps.mem_clock_min_mhz, 405);
	assert_int_equal(g.caps.mem_clock_max_mhz, 10501);
	assert_string_equal(p.architecture, "pascal");
	assert_false(p.energy_available || p.caps.gpu_locked_clocks ||
	    p.caps.mem_locked_clocks);
	assert_true(p.caps.power_limit);
	assert_int_equal(strcmp(v.uuid, h.uuid) != 0, 1);

	/* The GPU decides: a V100 refuses memory locked clocks. */
	assert_int_equal(b.ops->write(&b, 0, &mem, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "Tesla V100-SXM2-32GB"));
	/* No instant power field on the GeForce: the average is used. */
	assert_int_equal(b.ops->get_power_mw(&b, 2, &mw, &err), 0);
	assert_int_equal(log_count("nvmlDeviceGetPowerUsage 2 rc=SUCCESS"), 1);
	assert_int_equal(b.ops->get_energy_mj(&b, 3, &mj, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	b.ops->destroy(&b);

	/* A bad profile fails the init, loudly. */
	setenv("ZEUS_SIM_PROFILE", "a100,k80", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	assert_non_null(strstr(err.msg, "Invalid Argument"));
}

static void
test_init_failures(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };

	setenv("ZEUS_SIM_FAULTS", "fail nvmlInit_v2 * DRIVER_NOT_LOADED", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	assert_int_equal(err.kind, ZERR_NOT_FOUND);
	assert_non_null(strstr(err.msg, "Driver Not Loaded"));

	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetCount_v2 * UNKNOWN", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "nvmlDeviceGetCount_v2"));
	/* The half-open library was shut down again. */
	assert_int_equal(log_count("nvmlShutdown - rc=SUCCESS"), 1);

	/* Identity failures other than "lost" still fail open. */
	setenv("ZEUS_SIM_FAULTS", "fail nvmlDeviceGetPciInfo_v3 1 UNKNOWN", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	assert_int_equal(err.kind, ZERR_INTERNAL);
	assert_non_null(strstr(err.msg, "GPU 1"));

	/* Bad simulator settings fail the init, loudly. */
	unsetenv("ZEUS_SIM_FAULTS");
	setenv("ZEUS_SIM_GPUS", "65", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	assert_non_null(strstr(err.msg, "Invalid Argument"));
	setenv("ZEUS_SIM_GPUS", "2x", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	unsetenv("ZEUS_SIM_GPUS");
	setenv("ZEUS_SIM_PCI", "0000:zz:00.0", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	unsetenv("ZEUS_SIM_PCI");
	setenv("ZEUS_SIM_FAULTS", "fail nvmlNoSuchFunction 0 UNKNOWN", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	setenv("ZEUS_SIM_FAULTS", "delay * * 600001", 1);
	assert_int_equal(nvml_backend_open(NVML_SIM_PATH, &b, &err), -1);
	/* And a good one still opens after all that. */
	unsetenv("ZEUS_SIM_FAULTS");
	open_sim(&b);
	b.ops->destroy(&b);
}

/* Bad control-file lines are skipped; good ones around them still apply. */
static void
test_control_file_bad_lines(void **state)
{
	struct gpu_backend b;
	struct zerr err = { 0 };
	uint32_t mw;

	open_sim(&b);
	write_control("bogus line\nfail * 1 NOT_A_CODE\nfail * 9999 UNKNOWN\n"
	    "\n# comment\nfail nvmlDeviceGetPowerManagementLimit 1 15\n");
	assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &mw, &err), -1);
	assert_non_null(strstr(err.msg, "GPU is lost"));
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	unlink(control_path);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &mw, &err), 0);
	b.ops->destroy(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_count_info, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_gpus, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_power_moves_within_limit,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_locked_clocks_lower_power,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_energy_monotonic, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_set_limit_round_trip_and_log, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_limit, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_injected_no_permission,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_gpu_lost_at_open, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_error_messages, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_legacy_driver, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_profiles_caps, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_injected_gpu_lost, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_energy_not_supported,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_power_field_fallback,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_locked_clocks,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_env_fault_lifted_by_control, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_delay_does_not_block_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_calls, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_missing_library, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_missing_symbol, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_init_failures, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_control_file_bad_lines,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
