/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_amdsmi.c - the AMD SMI backend: its pure parts (search order,
 * version policy, per-ABI struct layouts, power sentinel, energy check) and
 * the whole backend against the simulator built for each ABI
 * (AMDSMI_SIM24/25/26 from meson), linked under the library's soname into
 * a temporary directory named by AMDSMI_LIB_DIR; the simulator's delay
 * rules show whether calls are serialized.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/amdsmi.h"

static char tmpdir[64];
static char ctl_path[128];

static int
setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_amdsmi.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	unsetenv("ZEUS_AMDSMI_SIM_VERSION");
	unsetenv("ZEUS_AMDSMI_SIM_ENERGY_SCALE");
	unsetenv("ZEUS_AMDSMI_SIM_CURRENT_NA");
	unsetenv("ZEUS_AMDSMI_SIM_NO_POWER");
	unsetenv("ZEUS_SIM_FAULTS");
	unsetenv("ZEUS_SIM_GPUS");
	unsetenv("ROCM_PATH");
	setenv("AMDSMI_LIB_DIR", tmpdir, 1);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Links the simulator of `abi` into tmpdir as libamd_smi.so.<abi>. */
static void
link_sim(unsigned abi)
{
	const char *src = abi == 24 ? AMDSMI_SIM24 : abi == 25 ?
	    AMDSMI_SIM25 : AMDSMI_SIM26;
	char dst[128];

	snprintf(dst, sizeof(dst), "%s/libamd_smi.so.%u", tmpdir, abi);
	unlink(dst);
	assert_int_equal(symlink(src, dst), 0);
}

static void
test_search_dirs(void **state)
{
	char dirs[AMD_DIRS_MAX][AMD_PATH_MAX], path[128];
	const char *names[] = { "rocm-6.2.0", "rocm-6.10.1", "rocm-6.4.3",
	    "rocm-foo", "rocm", "rocm-7.0-custom" };
	bool loader;
	size_t n;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		assert_int_equal(mkdir(path, 0700), 0);
	}
	/* AMDSMI_LIB_DIR, else ROCM_PATH, is the whole search */
	n = amd_search_dirs("/x/lib", "/y", tmpdir, dirs, AMD_DIRS_MAX,
	    &loader);
	assert_int_equal(n, 1);
	assert_string_equal(dirs[0], "/x/lib");
	assert_false(loader);
	n = amd_search_dirs("", "/y", tmpdir, dirs, AMD_DIRS_MAX, &loader);
	assert_int_equal(n, 1);
	assert_string_equal(dirs[0], "/y/lib");
	assert_false(loader);
	/* neither: /opt/rocm, the newest /opt/rocm-X.Y.Z, then the loader */
	n = amd_search_dirs(NULL, NULL, tmpdir, dirs, AMD_DIRS_MAX, &loader);
	assert_int_equal(n, 2);
	assert_true(loader);
	snprintf(path, sizeof(path), "%s/rocm/lib", tmpdir);
	assert_string_equal(dirs[0], path);
	/* by version: 6.10.1 beats 6.4.3, which a name sort prefers */
	snprintf(path, sizeof(path), "%s/rocm-6.10.1/lib", tmpdir);
	assert_string_equal(dirs[1], path);
}

static int
check(unsigned abi, unsigned a, unsigned b, unsigned c, bool *ser,
    char *why, size_t whysize)
{
	amdsmi_version_any_t v;
	char ver[32];

	memset(&v, 0, sizeof(v));
	if (abi == 26) {
		v.v26.major = a;
		v.v26.minor = b;
		v.v26.release = c;
	} else {
		v.v24.year = abi == 24 || abi == 25 ? a : 0;
		v.v24.major = b;
		v.v24.minor = c;
	}
	return amd_version_check(abi, &v, ser, ver, sizeof(ver), why, whysize);
}

static void
test_version_policy(void **state)
{
	char why[512];
	bool ser;

	/* .24: ROCm 6.3 (24.7) and newer; 6.2 refused */
	assert_int_equal(check(24, 24, 7, 1, &ser, why, sizeof(why)), 0);
	assert_true(ser);
	assert_int_equal(check(24, 24, 6, 2, &ser, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "6.3"));
	assert_int_equal(check(24, 24, 5, 0, &ser, why, sizeof(why)), -1);
	/* .25: year 25 and major 25 */
	assert_int_equal(check(25, 25, 25, 4, &ser, why, sizeof(why)), 0);
	assert_true(ser);
	assert_int_equal(check(25, 25, 24, 0, &ser, why, sizeof(why)), -1);
	/* .26: no year, major 26 */
	assert_int_equal(check(26, 26, 2, 1, &ser, why, sizeof(why)), 0);
	assert_false(ser);
	/* before 26.2 the library is not thread-safe */
	assert_int_equal(check(26, 26, 1, 2, &ser, why, sizeof(why)), 0);
	assert_true(ser);
	assert_int_equal(check(26, 26, 0, 0, &ser, why, sizeof(why)), 0);
	assert_true(ser);
	/* a library whose version is not its soname's ABI */
	assert_int_equal(check(25, 24, 7, 0, &ser, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "does not match"));
	assert_int_equal(check(26, 25, 0, 0, &ser, why, sizeof(why)), -1);
}

static void
test_struct_layouts(void **state)
{
	/* the first word is the ABI number in every version layout */
	assert_int_equal(offsetof(amdsmi_version_v24_t, year), 0);
	assert_int_equal(offsetof(amdsmi_version_v24_t, major), 4);
	assert_int_equal(sizeof(amdsmi_version_v24_t), 24);
	assert_int_equal(offsetof(amdsmi_version_v25_t, major), 4);
	assert_int_equal(sizeof(amdsmi_version_v25_t), 24);
	assert_int_equal(offsetof(amdsmi_version_v26_t, major), 0);
	assert_int_equal(sizeof(amdsmi_version_v26_t), 24);
	assert_true(sizeof(amdsmi_version_any_t) >= 24);
	/* power info */
	assert_int_equal(sizeof(amdsmi_power_info_v24_t), 68);
	assert_int_equal(offsetof(amdsmi_power_info_v24_t,
	    current_socket_power), 0);
	assert_int_equal(offsetof(amdsmi_power_info_v24_t,
	    average_socket_power), 4);
	assert_int_equal(sizeof(amdsmi_power_info_v25_t), 40);
	assert_int_equal(offsetof(amdsmi_power_info_v25_t,
	    current_socket_power), 8);
	assert_int_equal(offsetof(amdsmi_power_info_v25_t,
	    average_socket_power), 12);
	assert_int_equal(sizeof(amdsmi_power_info_v26_t), 192);
	assert_int_equal(offsetof(amdsmi_power_info_v26_t,
	    current_socket_power), 8);
	assert_int_equal(offsetof(amdsmi_power_info_v26_t,
	    average_socket_power), 12);
	/* the same in all three */
	assert_int_equal(sizeof(amdsmi_power_cap_info_t), 64);
	assert_int_equal(sizeof(amdsmi_clk_info_t), 32);
	assert_int_equal(sizeof(amdsmi_bdf_t), 8);
	assert_int_equal(offsetof(amdsmi_asic_info_t, market_name), 0);
	assert_int_equal(sizeof(amdsmi_asic_info_t), 1024);
}

static void
test_clock_write_order(void **state)
{
	/* raising both above the old range: maximum first */
	assert_true(amd_clk_max_first(true, 1500, 1600));
	/* lowering, overlapping, touching, unknown: minimum first */
	assert_false(amd_clk_max_first(true, 1500, 500));
	assert_false(amd_clk_max_first(true, 1500, 1200));
	assert_false(amd_clk_max_first(true, 1500, 1500));
	assert_false(amd_clk_max_first(false, 0, 1600));
}

static void
test_power_sentinel(void **state)
{
	amdsmi_power_info_any_t p;
	uint32_t mw;

	memset(&p, 0, sizeof(p));
	p.v24.current_socket_power = 250;
	p.v24.average_socket_power = 240;
	assert_int_equal(amd_power_source(24, &p), AMD_POWER_CURRENT);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_CURRENT, &mw), 0);
	assert_int_equal(mw, 250000);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_AVERAGE, &mw), 0);
	assert_int_equal(mw, 240000);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_NONE, &mw), -1);
	p.v24.current_socket_power = AMDSMI_POWER_NA;
	assert_int_equal(amd_power_source(24, &p), AMD_POWER_AVERAGE);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_ANY, &mw), 0);
	assert_int_equal(mw, 240000);
	/* a GPU chosen for its current power does not fall back later */
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_CURRENT, &mw), -1);
	/* neither: a die that reports no power (MI250's second) */
	p.v24.average_socket_power = AMDSMI_POWER_NA;
	assert_int_equal(amd_power_source(24, &p), AMD_POWER_NONE);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_ANY, &mw), -1);
	assert_int_equal(amd_power_mw(24, &p, AMD_POWER_AVERAGE, &mw), -1);
	memset(&p, 0, sizeof(p));
	p.v25.current_socket_power = AMDSMI_POWER_NA32;
	p.v25.average_socket_power = 500;
	assert_int_equal(amd_power_source(25, &p), AMD_POWER_AVERAGE);
	assert_int_equal(amd_power_mw(25, &p, AMD_POWER_AVERAGE, &mw), 0);
	assert_int_equal(mw, 500000);
	assert_int_equal(amd_power_source(26, &p), AMD_POWER_AVERAGE);
	assert_int_equal(amd_power_mw(26, &p, AMD_POWER_ANY, &mw), 0);
	assert_int_equal(mw, 500000);
	/* more watts than fit in mW */
	p.v26.average_socket_power = UINT32_MAX / 1000 + 1;
	assert_int_equal(amd_power_source(26, &p), AMD_POWER_NONE);
	assert_int_equal(amd_power_source(23, &p), AMD_POWER_NONE);
	assert_int_equal(amd_power_mw(23, &p, AMD_POWER_ANY, &mw), -1);
	assert_string_equal(amd_power_source_name(AMD_POWER_NONE), "none");
}

static void
test_energy_verdict(void **state)
{
	assert_int_equal(amd_energy_verdict(150000, 150000), 1);
	assert_int_equal(amd_energy_verdict(150000, 15001), 1);
	assert_int_equal(amd_energy_verdict(150000, 1499990), 1);
	/* a factor of ten or more either way */
	assert_int_equal(amd_energy_verdict(100, 10), -1);
	assert_int_equal(amd_energy_verdict(100, 1000), -1);
	assert_int_equal(amd_energy_verdict(100, 0), -1);
	/* no power to compare with */
	assert_int_equal(amd_energy_verdict(0.0009, 0.0009), 0);
	assert_int_equal(amd_energy_verdict(0, 5), 0);
}

/* Opens, reads and writes through the backend on the simulator of `abi`. */
static void
exercise(unsigned abi)
{
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 250000 };
	struct gpu_backend b;
	struct gpu_info info;
	uint64_t e0, e1;
	uint32_t mw, lo, hi;
	struct zerr err;
	bool on;

	link_sim(abi);
	assert_int_equal(amd_backend_open(&b, &err), 0);
	assert_string_equal(b.ops->name, "amdsmi");
	assert_int_equal(b.ops->count(&b), 2);
	assert_int_equal(b.ops->info(&b, 1, &info, &err), 0);
	assert_string_equal(info.pci_address, "0000:c2:00.0");
	assert_string_equal(info.name, "AMD Instinct MI300X");
	assert_int_equal(info.caps.gpu_clock_max_mhz, 2100);
	assert_int_equal(info.caps.mem_clock_min_mhz, 900);
	assert_true(info.energy_available);
	assert_true(info.caps.power_limit);
	assert_int_equal(info.caps.limit_max_mw, 750000);
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	assert_int_equal(mw, 325000);
	assert_int_equal(b.ops->get_energy_mj(&b, 0, &e0, &err), 0);
	usleep(20000);
	assert_int_equal(b.ops->get_energy_mj(&b, 0, &e1, &err), 0);
	assert_true(e1 > e0);
	assert_int_equal(b.ops->get_power_limit_constraints(&b, 0, &lo, &hi,
	    &err), 0);
	assert_int_equal(lo, 200000);
	assert_int_equal(hi, 750000);
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	assert_int_equal(b.ops->get_power_limit_mw(&b, 0, &mw, &err), 0);
	assert_int_equal(mw, 250000);
	w.op = GPU_SET_GPU_LOCKED_CLOCKS;
	w.min_clock_mhz = 600;
	w.max_clock_mhz = 1500;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	w.min_clock_mhz = 1600;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	w.op = GPU_RESET_LOCKED_CLOCKS;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), 0);
	/* what AMD has no counterpart for */
	assert_non_null(b.ops->write_lacks(&b, GPU_SET_PERSISTENCE_MODE));
	assert_non_null(b.ops->write_lacks(&b, GPU_RESET_GPU_LOCKED_CLOCKS));
	assert_non_null(b.ops->read_lacks(&b, GPU_GET_PERSISTENCE_MODE));
	assert_null(b.ops->write_lacks(&b, GPU_SET_POWER_LIMIT));
	w.op = GPU_SET_PERSISTENCE_MODE;
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(b.ops->get_persistence_mode(&b, 0, &on, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	b.ops->destroy(&b);
}

static void
test_abi24(void **state)
{
	exercise(24);
}

static void
test_abi25(void **state)
{
	exercise(25);
}

static void
test_abi26(void **state)
{
	exercise(26);
}

static void
test_newest_soname_wins(void **state)
{
	struct gpu_backend b;
	struct zerr err;

	link_sim(24);
	link_sim(26);
	assert_int_equal(amd_backend_open(&b, &err), 0);
	b.ops->destroy(&b);
	/* ABI 26 loaded: a 24-only version would have been refused */
	setenv("ZEUS_AMDSMI_SIM_VERSION", "26.1.0", 1);	/* a .26 layout */
	assert_int_equal(amd_backend_open(&b, &err), 0);
	b.ops->destroy(&b);
}

static void
test_bad_version(void **state)
{
	struct gpu_backend b;
	struct zerr err;
	char p[128];

	link_sim(24);
	setenv("ZEUS_AMDSMI_SIM_VERSION", "24.6.2.0", 1);	/* ROCm 6.2 */
	assert_int_equal(amd_backend_open(&b, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "6.3"));
	/* a .25 soname reporting a .24 version: refused */
	snprintf(p, sizeof(p), "%s/libamd_smi.so.24", tmpdir);
	unlink(p);
	link_sim(25);
	setenv("ZEUS_AMDSMI_SIM_VERSION", "24.7.0.0", 1);
	assert_int_equal(amd_backend_open(&b, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "does not match"));
}

static void
test_no_library(void **state)
{
	struct gpu_backend b;
	struct zerr err;

	assert_int_equal(amd_backend_open(&b, &err), -1);
	assert_int_equal(err.kind, ZERR_NOT_FOUND);
	assert_non_null(strstr(err.msg, "libamd_smi.so.26"));
}

static void
test_energy_disagrees(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err;
	uint64_t mj;

	link_sim(25);
	setenv("ZEUS_AMDSMI_SIM_ENERGY_SCALE", "20", 1);
	assert_int_equal(amd_backend_open(&b, &err), 0);
	assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
	assert_false(info.energy_available);
	assert_int_equal(b.ops->get_energy_mj(&b, 0, &mj, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	b.ops->destroy(&b);
}

static void
test_current_na_and_perm(void **state)
{
	struct gpu_write w = { .op = GPU_SET_POWER_LIMIT,
	    .power_limit_mw = 300000 };
	struct gpu_backend b;
	struct zerr err;
	uint32_t mw;

	link_sim(26);
	setenv("ZEUS_AMDSMI_SIM_CURRENT_NA", "1", 1);
	setenv("ZEUS_SIM_FAULTS", "fail amdsmi_set_power_cap * NO_PERM", 1);
	assert_int_equal(amd_backend_open(&b, &err), 0);
	/* falls back to the average, which the simulator also gives */
	assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
	assert_int_equal(mw, 300000);
	assert_int_equal(b.ops->write(&b, 0, &w, &err), -1);
	assert_int_equal(err.kind, ZERR_FORBIDDEN);
	b.ops->destroy(&b);
}

/*
 * A die that reports no power (ZEUS_AMDSMI_SIM_NO_POWER, as MI250's
 * second): its power reads fail with 400 at every ABI, its energy counter
 * cannot be checked and is not offered, and the other GPU is unaffected.
 */
static void
test_die_without_power(void **state)
{
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err;
	uint32_t mw;
	uint64_t mj;

	setenv("ZEUS_AMDSMI_SIM_NO_POWER", "1", 1);
	for (unsigned abi = 24; abi <= 26; abi++) {
		link_sim(abi);
		assert_int_equal(amd_backend_open(&b, &err), 0);
		assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), -1);
		assert_int_equal(err.kind, ZERR_INVALID);
		assert_non_null(strstr(err.msg, "GPU 1: get_power failed: not "
		    "supported"));
		assert_int_equal(b.ops->info(&b, 1, &info, &err), 0);
		assert_false(info.energy_available);
		assert_int_equal(b.ops->get_energy_mj(&b, 1, &mj, &err), -1);
		assert_int_equal(err.kind, ZERR_INVALID);
		assert_int_equal(b.ops->get_power_limit_mw(&b, 1, &mw, &err),
		    0);
		assert_int_equal(b.ops->get_power_mw(&b, 0, &mw, &err), 0);
		assert_int_equal(mw, 300000);
		assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
		assert_true(info.energy_available);
		b.ops->destroy(&b);
	}
	/* a bad entry is the simulator's init error */
	setenv("ZEUS_AMDSMI_SIM_NO_POWER", "1,x", 1);
	assert_int_equal(amd_backend_open(&b, &err), -1);
	assert_non_null(strstr(err.msg, "amdsmi_init failed"));
}

/*
 * A library named by path, its ABI given (how --simulate loads the
 * simulator): each simulator build under its own file name, a short
 * energy check, and the refusals.
 */
static void
test_open_lib(void **state)
{
	const char *paths[] = { AMDSMI_SIM24, AMDSMI_SIM25, AMDSMI_SIM26 };
	struct gpu_backend b;
	struct gpu_info info;
	struct zerr err;
	uint32_t mw;

	for (unsigned abi = 24; abi <= 26; abi++) {
		assert_int_equal(amd_backend_open_lib(paths[abi - 24], abi, 50,
		    &b, &err), 0);
		assert_int_equal(b.ops->count(&b), 2);
		assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
		assert_int_equal(mw, 325000);
		assert_int_equal(b.ops->info(&b, 0, &info, &err), 0);
		assert_true(info.energy_available);
		b.ops->destroy(&b);
	}
	/* the .26 build read as .24: its version does not match */
	assert_int_equal(amd_backend_open_lib(AMDSMI_SIM26, 24, 50, &b, &err),
	    -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_non_null(strstr(err.msg, "does not match"));
	assert_int_equal(amd_backend_open_lib(AMDSMI_SIM26, 27, 50, &b, &err),
	    -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(amd_backend_open_lib(AMDSMI_SIM26, 26, 0, &b, &err),
	    -1);
	assert_int_equal(amd_backend_open_lib("/nonexistent/libamd_smi.so.26",
	    26, 50, &b, &err), -1);
	assert_int_equal(err.kind, ZERR_NOT_FOUND);
	assert_non_null(strstr(err.msg, "/nonexistent/libamd_smi.so.26"));
	assert_int_equal(amd_backend_open_lib("libc.so.6", 26, 50, &b, &err),
	    -1);
	assert_non_null(strstr(err.msg, "lacks symbol amdsmi_init"));
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *
slow_read(void *arg)
{
	struct gpu_backend *b = arg;
	struct zerr err;
	uint32_t mw;

	b->ops->get_power_mw(b, 0, &mw, &err);
	return NULL;
}

/*
 * How long a power read of GPU 1 takes while one of GPU 0 is held up for
 * 400 ms in the library: the whole wait when calls are serialized.
 */
static uint64_t
blocked_ms(unsigned abi)
{
	struct gpu_backend b;
	struct zerr err;
	pthread_t t;
	uint64_t t0;
	uint32_t mw;

	link_sim(abi);
	assert_int_equal(amd_backend_open(&b, &err), 0);
	setenv("ZEUS_SIM_CONTROL", ctl_path, 1);
	{
		FILE *f = fopen(ctl_path, "w");

		assert_non_null(f);
		fputs("delay amdsmi_get_power_info 0 400\n", f);
		fclose(f);
	}
	assert_int_equal(pthread_create(&t, NULL, slow_read, &b), 0);
	usleep(100000);
	t0 = now_ms();
	assert_int_equal(b.ops->get_power_mw(&b, 1, &mw, &err), 0);
	t0 = now_ms() - t0;
	pthread_join(t, NULL);
	unlink(ctl_path);
	b.ops->destroy(&b);
	return t0;
}

static void
test_serialized_before_26_2(void **state)
{
	snprintf(ctl_path, sizeof(ctl_path), "%s/ctl", tmpdir);
	assert_true(blocked_ms(24) >= 200);
	assert_true(blocked_ms(25) >= 200);
	assert_true(blocked_ms(26) < 200);	/* 26.2.1 */
	setenv("ZEUS_AMDSMI_SIM_VERSION", "26.1.0", 1);
	assert_true(blocked_ms(26) >= 200);
	unsetenv("ZEUS_SIM_CONTROL");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_search_dirs, setup,
		    teardown),
		cmocka_unit_test(test_version_policy),
		cmocka_unit_test(test_struct_layouts),
		cmocka_unit_test(test_clock_write_order),
		cmocka_unit_test(test_power_sentinel),
		cmocka_unit_test(test_energy_verdict),
		cmocka_unit_test_setup_teardown(test_abi24, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abi25, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abi26, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_soname_wins, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_bad_version, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_no_library, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_energy_disagrees, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_current_na_and_perm,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_die_without_power, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_open_lib, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serialized_before_26_2,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
