/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spank_report.h - the line a Slurm job step gets on its stderr when its
 * task ends: the energy zeusd's ledger charged to the step's leases
 * (found by their label, "slurm:JOB.STEP") on its GPUs (docs/slurm.md).
 */
#ifndef ZEUS_SPANK_REPORT_H
#define ZEUS_SPANK_REPORT_H

#include <stddef.h>

#include "zeus/client.h"

/*
 * The newest ended lease on ids[i] labelled `label`, in found[i] (NULL:
 * none yet). Returns how many of the n were found.
 */
size_t spank_report_find(const struct zeus_leases *v, const char *label,
    const unsigned *ids, size_t n, const struct zeus_lease **found);

/*
 * The line (no newline) for the n GPUs whose leases are found[]:
 * "zeus: slurm:42.0: GPU energy 1234.5 J over 10.2 s (avg 121.0 W in
 * all) on GPU 0: 617.2 J, GPU 1: 617.3 J", a GPU without a figure saying
 * "unavailable" and left out of the sum.
 */
void spank_report_line(char *buf, size_t size, const char *label,
    const unsigned *ids, size_t n, const struct zeus_lease *const *found);

/*
 * In a process of its own: waits until the process of `pidfd` exits,
 * then asks zeusd at `socket` (for up to `wait_ms`) for the step's ended
 * leases and writes the line to stderr. Never returns.
 */
void spank_report_run(const char *socket, int pidfd, const char *label,
    const unsigned *ids, size_t n, unsigned wait_ms);

#endif
