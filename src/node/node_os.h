/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_os.h - what node.c finds per platform: the NVML simulator's file
 * (next to the binary, or installed) and AMD SMI, which exists on Linux
 * only. node_os_posix.c and node_os_win.c; meson picks one.
 */
#ifndef ZEUS_NODE_OS_H
#define ZEUS_NODE_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "devices/gpu.h"

/* The NVML simulator for `--simulate`: a path in buf, or a library name. */
const char *node_os_sim_library(char *buf, size_t size);

/*
 * `--gpu-backend amdsmi`: the AMD SMI backend (with `simulate`, its
 * simulator unless AMDSMI_LIB_DIR names a library).
 */
int node_os_amd_explicit(struct gpu_backend *gpu, bool simulate,
    struct zerr *err);

/* `--gpu-backend auto`'s second probe; ZERR_NOT_FOUND: none here. */
int node_os_amd_open(struct gpu_backend *gpu, struct zerr *err);

#endif
