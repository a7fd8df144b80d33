/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_rapl.h - a RAPL counter source whose every file read runs in the
 * device process (docs/design.md, "Two processes").
 *
 * The network process opens its RAPL core (rapl_open_source) over this
 * source with the package descriptions taken before the split, so locking,
 * batching and power from deltas are the same code with and without
 * privilege separation. The values that come back are already
 * wrap-compensated: wrap tracking and the keepalive that feeds it run in
 * the device process, on its own core over the files (tracks_wraps), so an
 * idle daemon's keepalive passes wake that process alone.
 */
#ifndef ZEUS_PRIVSEP_REMOTE_RAPL_H
#define ZEUS_PRIVSEP_REMOTE_RAPL_H

#include "devices/rapl.h"
#include "chan.h"

/* The source's table; its context comes from psrapl_create. */
extern const struct rapl_source_ops psrapl_ops;

/*
 * A context calling through `pool` (not owned) for the packages of `dev`
 * (the device process's core, as forked), whose counter labels (file
 * paths, for error messages) are copied. NULL when out of memory. Freed by
 * the source's destroy (rapl_close).
 */
void *psrapl_create(struct pschan_pool *pool, const struct rapl *dev);

/* Package i's energy in a PSMSG_SAMPLE reply (ok: the device read it). */
void psrapl_raw_of(const struct psmsg_reply *rep, unsigned i,
    struct rapl_raw_sample *out);

#endif
