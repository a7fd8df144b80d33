/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl_win.c - rapl.h on Windows, where there is no powercap tree: opening
 * fails (ZERR_NOT_FOUND, which libzeus's direct source reports as "no
 * CPUs"), and no package is ever seen. Only what libzeus calls is here;
 * zeusd refuses cpu-read on Windows before it would open RAPL (issue 31).
 * rapl.c and rapl_sysfs.c are the Linux build's.
 */
#include "rapl.h"

#include <stddef.h>

#include "common/err.h"

int
rapl_open(const char *root, struct rapl **out, struct zerr *err)
{
	*out = NULL;
	return zerr_set(err, ZERR_NOT_FOUND,
	    "RAPL (powercap) is only supported on Linux");
}

void
rapl_close(struct rapl *r)
{
	(void)r;
}

unsigned
rapl_count(const struct rapl *r)
{
	return 0;
}

unsigned
rapl_package_id(const struct rapl *r, unsigned i)
{
	return 0;
}

bool
rapl_has_dram(const struct rapl *r, unsigned i)
{
	return false;
}

int
rapl_index_of(const struct rapl *r, unsigned package_id)
{
	return -1;
}

int
rapl_read(struct rapl *r, unsigned i, uint64_t *cpu_uj, uint64_t *dram_uj,
    struct zerr *err)
{
	return zerr_set(err, ZERR_NOT_FOUND, "no RAPL package %u", i);
}

int
rapl_start_keepalive(struct rapl *r, unsigned interval_ms, struct zerr *err)
{
	return 0;
}

const char *
rapl_default_root(void)
{
	return "";
}
