/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.h - the NVML GPU backend.
 *
 * Loads an NVML library with dlopen (the driver's libnvidia-ml.so.1, or any
 * library with the same ABI such as the simulator build/libnvml-sim.so),
 * resolves the functions it can use up front (older names standing in for
 * newer ones; only enumeration and power reads are required), and serves
 * the `struct gpu_backend_ops` interface of gpu.h on top of it.
 */
#ifndef ZEUS_NVML_H
#define ZEUS_NVML_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu.h"

/*
 * What differs per platform (nvml_os_posix.c, nvml_os_win.c): the library
 * names tried in order when no path is given (libnvidia-ml.so.1 and
 * libnvidia-ml.so; nvml.dll), who the driver lets change settings ("root",
 * "an administrator"), and who this process is ("uid 0", "user NAME").
 */
extern const char nvml_default_library[];
extern const char nvml_fallback_library[];
extern const char nvml_privileged[];
void nvml_os_whoami(char *buf, size_t size);
/*
 * Persistence mode is the platform's, not NVML's (Windows, as upstream
 * zeusd has it there: the driver stays loaded, so the mode reads as on,
 * enabling it is a no-op and disabling it is refused); false on Linux.
 */
extern const bool nvml_persistence_fixed;
#define NVML_DEFAULT_LIBRARY nvml_default_library
#define NVML_FALLBACK_LIBRARY nvml_fallback_library

/*
 * Opens the backend: loads `lib_path` (NULL: the default names above),
 * resolves its symbols, calls nvmlInit_v2 (or nvmlInit) and gathers each
 * GPU's handle, static facts and capabilities; logs what the driver lacks.
 * A GPU the driver reports lost is kept, flagged lost, without failing
 * open. On failure returns -1 with `err` set and nothing held:
 *   ZERR_NOT_FOUND  no NVML here: the library cannot be loaded, or
 *                   init says the driver is not loaded. With
 *                   `--gpu-backend auto` this means zero GPUs.
 *   ZERR_INTERNAL   anything else (a missing required symbol, named; a
 *                   failed init or device query, with the driver's error
 *                   string).
 * On success `out` owns the library; release it with out->ops->destroy.
 */
int nvml_backend_open(const char *lib_path, struct gpu_backend *out,
    struct zerr *err);

/* True when `lib_path` (NULL: the default names) can be dlopen'ed. */
bool nvml_library_available(const char *lib_path);

#endif
