/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_os_posix.c - node_os.h on Linux: the simulators next to the binary
 * (/proc/self/exe) or installed under <libdir>/zeus, and ROCm's AMD SMI.
 */
#include "node/node_os.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/amdsmi.h"

#ifndef ZEUS_SIM_INSTALLED
#define ZEUS_SIM_INSTALLED "/usr/local/lib/zeus/libnvml-sim.so"
#endif
/* Where the simulators are installed (meson: <libdir>/zeus). */
#ifndef ZEUS_SIM_DIR
#define ZEUS_SIM_DIR "/usr/local/lib/zeus"
#endif
#define NODE_SIM_NAME "libnvml-sim.so"
/*
 * The simulated AMD GPUs' start-up energy check: their power is constant,
 * so a tenth of a second shows what the real check's half second would,
 * and a test suite that starts hundreds of daemons does not wait for it.
 */
#define NODE_AMD_SIM_CHECK_MS 100u

/* The simulator `name` next to the running binary (the build tree), or NULL. */
static const char *
node_sim_beside_exe(const char *name, char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t len = strlen(name) + 1;
	char *slash;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL &&
		    (size_t)(slash - exe) + len + 1 < size) {
			memcpy(buf, exe, (size_t)(slash - exe) + 1);
			memcpy(buf + (slash - exe) + 1, name, len);
			if (access(buf, R_OK) == 0)
				return buf;
		}
	}
	return NULL;
}

const char *
node_os_sim_library(char *buf, size_t size)
{
	const char *p = node_sim_beside_exe(NODE_SIM_NAME, buf, size);

	return p != NULL ? p : ZEUS_SIM_INSTALLED;
}

/*
 * `--simulate --gpu-backend amdsmi`: the AMD SMI simulator built for the
 * ABI that ZEUS_AMDSMI_SIM_ABI names (24, 25 or 26; default 26, the
 * newest), next to the binary or installed. Its file name does not say
 * the ABI the way a soname does, so the backend is told.
 */
static int
node_open_amd_sim(struct gpu_backend *gpu, struct zerr *err)
{
	const char *s = getenv("ZEUS_AMDSMI_SIM_ABI");
	char name[32], buf[PATH_MAX];
	const char *path;
	unsigned abi = AMD_ABI_NEWEST;

	if (s != NULL && *s != '\0') {
		if (strcmp(s, "24") == 0)
			abi = 24;
		else if (strcmp(s, "25") == 0)
			abi = 25;
		else if (strcmp(s, "26") == 0)
			abi = 26;
		else
			return zerr_set(err, ZERR_INVALID, "ZEUS_AMDSMI_SIM_ABI "
			    "must be 24, 25 or 26, not '%.32s'", s);
	}
	snprintf(name, sizeof(name), "libamdsmi-sim%u.so", abi);
	if ((path = node_sim_beside_exe(name, buf, sizeof(buf))) == NULL) {
		snprintf(buf, sizeof(buf), "%s/%s", ZEUS_SIM_DIR, name);
		path = buf;
	}
	return amd_backend_open_lib(path, abi, NODE_AMD_SIM_CHECK_MS,
	    gpu, err);
}

int
node_os_amd_explicit(struct gpu_backend *gpu, bool simulate,
    struct zerr *err)
{
	const char *dir = getenv("AMDSMI_LIB_DIR");

	/*
	 * With --simulate the simulator, unless AMDSMI_LIB_DIR names a
	 * library: an explicit library wins, as --nvml-library does over
	 * the NVML simulator.
	 */
	if (simulate && (dir == NULL || *dir == '\0'))
		return node_open_amd_sim(gpu, err);
	return amd_backend_open(gpu, err);
}

int
node_os_amd_open(struct gpu_backend *gpu, struct zerr *err)
{
	return amd_backend_open(gpu, err);
}
