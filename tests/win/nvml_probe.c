/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_probe.c - the Windows build's NVML check (tests/integration/
 * test_windows.py runs it under wine): opens an NVML library through the
 * daemon's own NVML backend (src/devices/nvml.c over os/dynlib_win.c), prints
 * one line per GPU, sets GPU 0's power limit to the middle of its range,
 * reads it back and restores the limit it found; with a second argument
 * "denied" it expects the write to be refused (the simulator told to answer
 * NO_PERMISSION, or a real driver and no administrator) and prints the
 * error; with "read" it writes nothing (tests/hw/windows.ps1 on a real GPU
 * without -Write).
 *
 *   nvml_probe.exe <nvml library> [denied|read]
 *
 * Output (one key=value line each):
 *   backend=nvml count=<n>
 *   gpu=<i> name="<name>" arch=<arch> power_mw=<mw> limit_mw=<mw>
 *     min_mw=<mw> max_mw=<mw> energy_mj=<mj|->
 *   set_limit_mw=<mw> read_back_mw=<mw> restored_mw=<mw>
 * or write_error="<msg>" status=<the HTTP status zeusd would answer>
 * Exit 0 when all of that worked, 1 otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "devices/gpu.h"
#include "devices/nvml.h"

int
main(int argc, char **argv)
{
	struct gpu_backend b = { 0 };
	struct zerr err = { 0 };
	bool denied = argc > 2 && strcmp(argv[2], "denied") == 0;
	bool read_only = argc > 2 && strcmp(argv[2], "read") == 0;
	unsigned n;

	if (argc < 2) {
		fprintf(stderr, "usage: nvml_probe <nvml library> "
		    "[denied|read]\n");
		return 2;
	}
	if (nvml_backend_open(argv[1], &b, &err) != 0) {
		printf("open_error=\"%s\"\n", err.msg);
		return 1;
	}
	n = b.ops->count(&b);
	printf("backend=%s count=%u\n", b.ops->name, n);
	for (unsigned i = 0; i < n; i++) {
		struct gpu_info info;
		uint32_t mw = 0, lim = 0, lo = 0, hi = 0;
		uint64_t mj = 0;
		int erc;

		if (b.ops->info(&b, i, &info, &err) != 0 ||
		    b.ops->get_power_mw(&b, i, &mw, &err) != 0 ||
		    b.ops->get_power_limit_mw(&b, i, &lim, &err) != 0 ||
		    b.ops->get_power_limit_constraints(&b, i, &lo, &hi,
		    &err) != 0) {
			printf("gpu=%u error=\"%s\"\n", i, err.msg);
			b.ops->destroy(&b);
			return 1;
		}
		erc = b.ops->get_energy_mj(&b, i, &mj, &err);
		printf("gpu=%u name=\"%s\" arch=%s power_mw=%" PRIu32
		    " limit_mw=%" PRIu32 " min_mw=%" PRIu32 " max_mw=%" PRIu32,
		    i, info.name, info.architecture, mw, lim, lo, hi);
		if (erc == 0)
			printf(" energy_mj=%" PRIu64 "\n", mj);
		else
			printf(" energy_mj=-\n");
	}
	if (n > 0 && !read_only) {
		uint32_t lo = 0, hi = 0, back = 0, was = 0;
		struct gpu_write w = { .op = GPU_SET_POWER_LIMIT };
		struct gpu_write undo = { .op = GPU_SET_POWER_LIMIT };

		b.ops->get_power_limit_constraints(&b, 0, &lo, &hi, &err);
		b.ops->get_power_limit_mw(&b, 0, &was, &err);
		w.power_limit_mw = lo + (hi - lo) / 2;
		if (b.ops->write(&b, 0, &w, &err) != 0) {
			printf("write_error=\"%s\" status=%u\n", err.msg,
			    zerr_http_status(err.kind));
			b.ops->destroy(&b);
			return denied ? 0 : 1;
		}
		b.ops->get_power_limit_mw(&b, 0, &back, &err);
		undo.power_limit_mw = was;
		if (b.ops->write(&b, 0, &undo, &err) != 0)
			printf("restore_error=\"%s\"\n", err.msg);
		printf("set_limit_mw=%" PRIu32 " read_back_mw=%" PRIu32
		    " restored_mw=%" PRIu32 "\n", w.power_limit_mw, back, was);
		if (denied || back != w.power_limit_mw) {
			b.ops->destroy(&b);
			return 1;
		}
	}
	b.ops->destroy(&b);
	return 0;
}
