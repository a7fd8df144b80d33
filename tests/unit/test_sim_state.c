/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sim_state.c - the NVML simulator's GPU state (sim/nvml_state.c)
 * with and without its state file (ZEUS_SIM_STATE): settings and their
 * limits, the file made and kept across configures (which is what a new
 * process does), the energy counter going on from the file, a file garbled
 * while in use (changes fail, readings answer the last state), and every
 * header and record field of an untrusted file changed in turn, with the
 * checksum made right again so the value checks are the ones that answer:
 * each such file is refused whole or is a valid state, never misread.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvml_state.h"

#define HEADER 48
#define RECORD 64
#define SIZE4 (HEADER + 4 * RECORD)

static char dir[64];
static char path[96];

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_sim_state.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/gpus.state", dir);
	unsetenv("ZEUS_SIM_STATE");
	unsetenv("ZEUS_SIM_GPUS");
	unsetenv("ZEUS_SIM_PROFILE");
	unsetenv("ZEUS_SIM_PCI");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sim_state_release();
	unlink(path);
	rmdir(dir);
	unsetenv("ZEUS_SIM_STATE");
	unsetenv("ZEUS_SIM_GPUS");
	return 0;
}

static size_t
read_file(unsigned char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, size);
	close(fd);
	assert_true(n >= 0);
	return (size_t)n;
}

static void
write_file(const unsigned char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The checksum (FNV-1a 64, this field 0) made right for buf. */
static void
reseal(unsigned char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	memset(buf + 24, 0, 8);
	for (size_t i = 0; i < len; i++) {
		h ^= buf[i];
		h *= 0x100000001b3ULL;
	}
	memcpy(buf + 24, &h, 8);
}

static unsigned
limit_of(unsigned i)
{
	struct sim_model_gpu v;

	sim_state_view(sim_state_gpu(i), &v);
	return v.set.limit_mw;
}

static void
test_without_file(void **state)
{
	struct nvmlDevice_st *g;

	(void)state;
	assert_int_equal(sim_state_configure("1.0"), 0);
	assert_int_equal(sim_state_count(), 4);
	g = sim_state_gpu(0);
	assert_int_equal(limit_of(0), 400000);
	assert_int_equal(sim_state_set_limit(g, 99999), SIM_STATE_EINVAL);
	assert_int_equal(sim_state_set_limit(g, 250000), 0);
	assert_int_equal(limit_of(0), 250000);
	assert_int_equal(sim_state_lock_clocks(g, SIM_DOMAIN_GPU, 2, 1),
	    SIM_STATE_EINVAL);
	assert_int_equal(sim_state_lock_clocks(g, SIM_DOMAIN_GPU, 0, 900), 0);
	assert_int_equal(sim_state_unlock_clocks(g, SIM_DOMAIN_GPU), 0);
	assert_int_equal(sim_state_set_persistence(g, true), 0);
	/* a configure is a power-on */
	assert_int_equal(sim_state_configure("1.0"), 0);
	assert_int_equal(limit_of(0), 400000);
}

static void
test_file_kept(void **state)
{
	struct nvmlDevice_st *g;
	struct sim_model_gpu v;
	struct stat sb;
	double e1, e2;

	(void)state;
	setenv("ZEUS_SIM_STATE", path, 1);
	assert_int_equal(sim_state_configure("1.0"), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, SIZE4);
	assert_int_equal(sb.st_mode & 0777, 0600);
	g = sim_state_gpu(2);
	assert_int_equal(sim_state_set_limit(g, 150000), 0);
	assert_int_equal(sim_state_set_persistence(g, true), 0);
	assert_int_equal(sim_state_lock_clocks(g, SIM_DOMAIN_MEM, 405, 810),
	    0);
	e1 = sim_state_energy(g);
	sim_state_release();
	/* another process: the same GPUs */
	assert_int_equal(sim_state_configure("1.0"), 0);
	sim_state_view(g, &v);
	assert_int_equal(v.set.limit_mw, 150000);
	assert_true(v.set.persistence);
	assert_int_equal(v.set.mem_lock_min, 405);
	assert_int_equal(v.set.mem_lock_max, 810);
	assert_int_equal(limit_of(1), 400000);
	usleep(60000);
	e2 = sim_state_energy(g);
	assert_true(e2 > e1);
}

static void
test_garbled_in_use(void **state)
{
	unsigned char buf[SIZE4 + 1], bad[SIZE4];
	struct nvmlDevice_st *g;

	(void)state;
	setenv("ZEUS_SIM_STATE", path, 1);
	assert_int_equal(sim_state_configure("1.0"), 0);
	g = sim_state_gpu(0);
	assert_int_equal(sim_state_set_limit(g, 300000), 0);
	assert_int_equal(read_file(buf, sizeof(buf)), SIZE4);
	memcpy(bad, buf, SIZE4);
	bad[HEADER + 5] ^= 1;
	write_file(bad, SIZE4);
	assert_int_equal(sim_state_set_limit(g, 200000), SIM_STATE_EFILE);
	assert_int_equal(limit_of(0), 300000);
	assert_true(sim_state_energy(g) > 0);
	write_file(buf, 100);
	assert_int_equal(sim_state_set_limit(g, 200000), SIM_STATE_EFILE);
	/* good again: on with it */
	write_file(buf, SIZE4);
	assert_int_equal(sim_state_set_limit(g, 200000), 0);
	assert_int_equal(limit_of(0), 200000);
	/* the refused writes left the file alone */
	sim_state_release();
	assert_int_equal(sim_state_configure("1.0"), 0);
	assert_int_equal(limit_of(0), 200000);
}

static void
test_refused_at_configure(void **state)
{
	unsigned char buf[SIZE4 + 1], bad[SIZE4 + 8];

	(void)state;
	setenv("ZEUS_SIM_STATE", path, 1);
	assert_int_equal(sim_state_configure("1.0"), 0);
	sim_state_release();
	assert_int_equal(read_file(buf, sizeof(buf)), SIZE4);
	/* every length short of whole, and one over */
	for (size_t len = 1; len < SIZE4; len += 7) {
		write_file(buf, len);
		assert_int_equal(sim_state_configure("1.0"), -1);
	}
	memcpy(bad, buf, SIZE4);
	memset(bad + SIZE4, 0, 8);
	write_file(bad, SIZE4 + 8);
	assert_int_equal(sim_state_configure("1.0"), -1);
	/* another GPU count */
	write_file(buf, SIZE4);
	setenv("ZEUS_SIM_GPUS", "3", 1);
	assert_int_equal(sim_state_configure("1.0"), -1);
	unsetenv("ZEUS_SIM_GPUS");
	/* too long a path */
	{
		char longp[400];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[0] = '/';
		longp[sizeof(longp) - 1] = '\0';
		setenv("ZEUS_SIM_STATE", longp, 1);
		assert_int_equal(sim_state_configure("1.0"), -1);
		setenv("ZEUS_SIM_STATE", path, 1);
	}
	/* the good file still is */
	assert_int_equal(sim_state_configure("1.0"), 0);
}

/*
 * Every 32-bit word of the file set to awkward values, resealed: the
 * configure either refuses it or takes a state every reading of which is
 * in range (ASan and UBSan watch the rest).
 */
static void
test_every_field(void **state)
{
	static const uint32_t vals[] = { 0, 1, 2, 3, 64, 65, 405, 100000,
	    400001, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0x7ff00000u,
	    0xfff80000u };
	unsigned char buf[SIZE4 + 1], bad[SIZE4];

	(void)state;
	setenv("ZEUS_SIM_STATE", path, 1);
	assert_int_equal(sim_state_configure("1.0"), 0);
	sim_state_release();
	assert_int_equal(read_file(buf, sizeof(buf)), SIZE4);
	for (size_t off = 0; off < SIZE4; off += 4) {
		if (off == 24 || off == 28)
			continue;		/* the checksum itself */
		for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
			memcpy(bad, buf, SIZE4);
			memcpy(bad + off, &vals[k], 4);
			reseal(bad, SIZE4);
			write_file(bad, SIZE4);
			if (sim_state_configure("1.0") == 0) {
				for (unsigned i = 0; i < 4; i++) {
					struct sim_model_gpu v;
					double e;

					sim_state_view(sim_state_gpu(i), &v);
					assert_true(v.set.limit_mw >=
					    v.prof->min_limit_mw);
					assert_true(v.set.limit_mw <=
					    v.prof->max_limit_mw);
					e = sim_state_energy(sim_state_gpu(i));
					assert_true(e >= 0 && e <= 2e18);
				}
			}
			sim_state_release();
		}
	}
	write_file(buf, SIZE4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_without_file, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_file_kept, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_garbled_in_use, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_refused_at_configure,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_field, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
