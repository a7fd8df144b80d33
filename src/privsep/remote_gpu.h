/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_gpu.h - a GPU backend whose every driver call runs in the device
 * process (docs/design.md, "Two processes").
 *
 * The network process's node uses it in place of NVML or AMD SMI, so the
 * workers, queues, superseding and everything above them are the same code
 * with and without privilege separation. What needs no driver call is
 * answered here from copies taken before the split: the GPU count and
 * facts (struct gpu_info), the driver entry points an operation lacks (a
 * table the device process refreshes after a reload of the overrides), and
 * whether a GPU is lost (as of the last reply that said).
 */
#ifndef ZEUS_PRIVSEP_REMOTE_GPU_H
#define ZEUS_PRIVSEP_REMOTE_GPU_H

#include "devices/gpu.h"
#include "chan.h"

#define PSGPU_LACKS_MAX 160	/* a "lacks" answer, NUL included */

/* What an operation lacks, for every operation: "" when it can be tried. */
struct psgpu_lacks {
	char read[GPU_READ_OP_COUNT][PSGPU_LACKS_MAX];
	char write[GPU_WRITE_OP_COUNT][PSGPU_LACKS_MAX];
};

/* Fills `out` from a backend's read_lacks/write_lacks (the device side). */
void psgpu_lacks_of(struct gpu_backend *b, struct psgpu_lacks *out);

/*
 * A backend for `ngpu` GPUs (at most PSMSG_MAX_GPUS) whose facts are
 * info[0..ngpu-1] (copied), calling through `pool` (not owned).
 */
int psgpu_create(struct pschan_pool *pool, unsigned ngpu,
    const struct gpu_info *info, const struct psgpu_lacks *lacks,
    struct gpu_backend *out, struct zerr *err);

/* Replaces the lacks table (after the device process reloaded). */
void psgpu_set_lacks(struct gpu_backend *b, const struct psgpu_lacks *lacks);

/* Marks GPUs lost or found from a sample's bits. */
void psgpu_note_sample(struct gpu_backend *b, const struct psmsg_reply *rep);

/* Sets a GPU's lost flag (at the split: as the device backend has it). */
void psgpu_set_lost(struct gpu_backend *b, unsigned gpu, bool lost);

/*
 * The reply to rep->n (1..PSMSG_WRITES_MAX) writes of `gpu` sent together
 * at `sent_ns` (zclock_now_ns), now in: rc[i], and *errs[i] for a failure,
 * per write; the GPU's lost flag as of the last; and the batch's time,
 * which sizes the next batches (one write's share of 1 ms). For the
 * backend's own write_many, and for writes sent past its calls
 * (node/remote_write.h).
 */
void psgpu_writes_done(struct gpu_backend *b, unsigned gpu,
    const struct psmsg_writes_reply *rep, uint64_t sent_ns, int *rc,
    struct zerr *const *errs);

/*
 * A write's fields in a request (PSMSG_GPU_WRITE, or the header of a
 * PSMSG_AUDIT naming a dropped write): the operation's values only, who
 * it is for, a TCP writer's address, a restore's reason.
 */
void psgpu_write_fields(struct psmsg_request *req, const struct gpu_write *w);

/* A restore's reason ("process_exit", ...) as enum psmsg_reason. */
uint32_t psgpu_reason(const struct gpu_write *w);

/* True when b is a remote backend. */
bool psgpu_is_remote(const struct gpu_backend *b);

#endif
