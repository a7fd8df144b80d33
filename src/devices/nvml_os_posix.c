/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_os_posix.c - what the NVML backend says differently on Linux
 * (nvml.h): where the library is, who may change settings, who we are.
 */
#include "nvml.h"

#include <stdio.h>
#include <unistd.h>

const char nvml_default_library[] = "libnvidia-ml.so.1";
const char nvml_fallback_library[] = "libnvidia-ml.so";
const bool nvml_persistence_fixed = false;
const char nvml_privileged[] = "root";

void
nvml_os_whoami(char *buf, size_t size)
{
	snprintf(buf, size, "uid %u", (unsigned)geteuid());
}
