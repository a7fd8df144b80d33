/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl_sysfs_win.c - the RAPL source on Windows: there is no powercap
 * tree, so opening one fails (rapl_sysfs.c on Linux). zeusd.exe links the
 * shared RAPL core (rapl.c) and simulator (rapl_sim.c) with this file, and
 * refuses the cpu-read group at startup (main_win.c), so no package is
 * opened; libzeus's Windows build links rapl.c with it too, and its
 * direct source reports no CPUs.
 */
#include "rapl.h"

#include "common/err.h"

int
rapl_open(const char *root, struct rapl **out, struct zerr *err)
{
	(void)root;
	*out = NULL;
	return zerr_set(err, ZERR_NOT_FOUND,
	    "RAPL (powercap) is only supported on Linux");
}

const char *
rapl_default_root(void)
{
	return "";
}
