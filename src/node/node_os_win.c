/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_os_win.c - node_os.h on Windows: the NVML simulator is
 * nvml-sim.dll next to zeusd.exe (the build folder, or wherever both were
 * copied); AMD SMI is Linux-only there, as upstream has it.
 */
#include "node/node_os.h"

#include <stdio.h>
#include <string.h>
#include <windows.h>

#define NODE_SIM_DLL "nvml-sim.dll"

const char *
node_os_sim_library(char *buf, size_t size)
{
	char exe[MAX_PATH + 1];
	DWORD n = GetModuleFileNameA(NULL, exe, sizeof(exe));
	char *slash;

	/* n == size: truncated; then the loader's own search (dynlib_win.c) */
	if (n == 0 || n >= sizeof(exe) ||
	    (slash = strrchr(exe, '\\')) == NULL)
		return NODE_SIM_DLL;
	slash[1] = '\0';
	if ((size_t)snprintf(buf, size, "%s%s", exe, NODE_SIM_DLL) >= size)
		return NODE_SIM_DLL;
	return buf;
}

int
node_os_amd_explicit(struct gpu_backend *gpu, bool simulate,
    struct zerr *err)
{
	(void)gpu;
	(void)simulate;
	return zerr_set(err, ZERR_INVALID, "AMD GPUs (AMD SMI) are supported "
	    "on Linux only; on Windows zeusd uses NVML");
}

int
node_os_amd_open(struct gpu_backend *gpu, struct zerr *err)
{
	(void)gpu;
	return zerr_set(err, ZERR_NOT_FOUND, "AMD SMI is Linux-only");
}
