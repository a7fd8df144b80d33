/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi.h - the AMD GPU backend, on ROCm's AMD SMI library.
 *
 * Like the NVML backend it loads the vendor library with dlopen against our
 * own declarations (amdsmi_api.h), so the daemon builds and runs without
 * ROCm; the simulator (build/libamdsmi-sim{24,25,26}.so, see
 * docs/simulator.md and docs/amd.md) stands in for it in tests. The module
 * prefix is amd_ because the library owns amdsmi_.
 */
#ifndef ZEUS_AMDSMI_H
#define ZEUS_AMDSMI_H

#include <stdbool.h>
#include <stddef.h>

#include "amdsmi_api.h"
#include "gpu.h"

/* Sonames tried in each directory, newest first. */
#define AMD_ABI_NEWEST	26
#define AMD_ABI_OLDEST	24

/* At most this many directories are searched (see amd_search_dirs). */
#define AMD_DIRS_MAX	4
#define AMD_PATH_MAX	1024

/*
 * Opens the backend: loads libamd_smi.so.26, .25 or .24 from the first
 * directory of amd_search_dirs() that has one with the required symbols
 * (then from the loader's path, when no variable restricts it), checks the library's version against the soname's ABI and the
 * accepted releases, initialises it for AMD GPUs and gathers each GPU's
 * facts and capabilities, including whether its energy counter agrees
 * with its power readings. On failure returns -1 with `err` set:
 *   ZERR_NOT_FOUND  no usable library here (none can be loaded, or init
 *                   says the driver is not loaded)
 *   ZERR_INVALID    a library whose version zeusd refuses (named, why)
 *   ZERR_INTERNAL   anything else
 */
int amd_backend_open(struct gpu_backend *out, struct zerr *err);

/*
 * As amd_backend_open, but loads the library at `path` (not searched for)
 * and reads it as ABI `abi` (AMD_ABI_OLDEST..AMD_ABI_NEWEST), watching
 * the energy counters for `check_ms` (1..60000; amd_backend_open: 500) at
 * start-up. How `zeusd serve --simulate --gpu-backend amdsmi` loads the
 * simulator, whose file name says nothing of its ABI, and whose power is
 * constant, so a short check shows as much as a long one.
 */
int amd_backend_open_lib(const char *path, unsigned abi, unsigned check_ms,
    struct gpu_backend *out, struct zerr *err);

/*
 * The directories searched, in order, into dirs[0..n-1]: $AMDSMI_LIB_DIR
 * alone when set, else $ROCM_PATH/lib alone when set, else /opt/rocm/lib
 * and the newest <opt_root>/rocm-X.Y.Z/lib (by version, not by name), with
 * *loader true: the loader's own path is tried after them. `env_lib_dir`,
 * `env_rocm` may be NULL; empty counts as unset. `opt_root` is "/opt"
 * outside tests. Returns n.
 */
size_t amd_search_dirs(const char *env_lib_dir, const char *env_rocm,
    const char *opt_root, char dirs[][AMD_PATH_MAX], size_t max,
    bool *loader);

/*
 * The order of a clock domain's two limit writes: true for the maximum
 * first, which is when the old maximum is known and the new minimum is
 * above it; otherwise the minimum first.
 */
bool amd_clk_max_first(bool known, uint32_t old_max, uint32_t new_min);

/*
 * Whether zeusd accepts the library a `abi` soname loaded, given what its
 * amdsmi_get_lib_version wrote. 0: accepted, *serialize says whether calls
 * must be serialized (releases with thread-safety bugs). -1: refused, with
 * the reason in `why`. *ver gets "A.B.C".
 */
int amd_version_check(unsigned abi, const amdsmi_version_any_t *v,
    bool *serialize, char *ver, size_t versize, char *why, size_t whysize);

/*
 * Which socket power a GPU's readings come from, decided once at open
 * from its first power info, as the upstream daemon decides it: the
 * current socket power, else the average when the current one reads as
 * not available (0xFFFF, or the 0xFFFFFFFF the headers document), else
 * none: a GPU that reports no power at all, as the second die of an MI250
 * does. AMD_POWER_ANY: not decided (the first read failed), so each read
 * takes the current power, else the average.
 */
enum amd_power_src {
	AMD_POWER_ANY,
	AMD_POWER_CURRENT,
	AMD_POWER_AVERAGE,
	AMD_POWER_NONE,
};

/* The source for a power-info struct in `abi`'s layout (NONE: bad abi). */
enum amd_power_src amd_power_source(unsigned abi,
    const amdsmi_power_info_any_t *p);

/*
 * Socket power in mW from a power-info struct in `abi`'s layout, read
 * from `src`. -1 when that reading is not available (or src is NONE).
 */
int amd_power_mw(unsigned abi, const amdsmi_power_info_any_t *p,
    enum amd_power_src src, uint32_t *mw);

/* "any", "current", "average", "none": for the log. */
const char *amd_power_source_name(enum amd_power_src src);

/*
 * Whether a GPU's energy counter can be trusted, from the energy its power
 * reading implies over the check (`expected_mj`) and what the counter
 * advanced (`measured_mj`): 1 when within a factor of ten either way, -1
 * when not, 0 when it cannot be told (expected under 1 uJ: no power).
 */
int amd_energy_verdict(double expected_mj, double measured_mj);

#endif
