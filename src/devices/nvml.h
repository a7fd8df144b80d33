/*
 * nvml.h - the NVML GPU backend.
 *
 * Loads an NVML library with dlopen (the driver's libnvidia-ml.so.1, or any
 * library with the same ABI such as the simulator build/libnvml-sim.so),
 * resolves every function it needs up front, and serves the
 * `struct gpu_backend_ops` interface of gpu.h on top of it.
 */
#ifndef ZEUS_NVML_H
#define ZEUS_NVML_H

#include <stdbool.h>

#include "gpu.h"

/* Tried in order when no path is given. */
#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define NVML_FALLBACK_LIBRARY "libnvidia-ml.so"

/*
 * Opens the backend: loads `lib_path` (NULL: the default names above),
 * resolves every symbol, calls nvmlInit_v2 and gathers each GPU's handle
 * and static facts. On failure returns -1 with `err` set and nothing held:
 *   ZERR_NOT_FOUND  no NVML here: the library cannot be loaded, or
 *                   nvmlInit_v2 says the driver is not loaded. With
 *                   `--gpu-backend auto` this means zero GPUs.
 *   ZERR_INTERNAL   anything else (a missing symbol, named; a failed init
 *                   or device query, with the driver's error string).
 * On success `out` owns the library; release it with out->ops->destroy.
 */
int nvml_backend_open(const char *lib_path, struct gpu_backend *out,
    struct zerr *err);

/* True when `lib_path` (NULL: the default names) can be dlopen'ed. */
bool nvml_library_available(const char *lib_path);

#endif
