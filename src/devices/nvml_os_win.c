/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_os_win.c - what the NVML backend says differently on Windows
 * (nvml.h). The driver installs nvml.dll into System32 (what upstream
 * zeusd loads); older drivers left it only under NVSMI. Settings need an
 * administrator there.
 */
#include "nvml.h"

#include <stdio.h>
#include <windows.h>

const char nvml_default_library[] = "nvml.dll";
const char nvml_fallback_library[] =
    "C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvml.dll";
const char nvml_privileged[] = "an administrator";
const bool nvml_persistence_fixed = true;

void
nvml_os_whoami(char *buf, size_t size)
{
	char name[257];
	DWORD n = sizeof(name);

	if (GetUserNameA(name, &n))
		snprintf(buf, size, "user %s", name);
	else
		snprintf(buf, size, "an unknown user");
}
