/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.h - the device process's executor: one validated request in, one
 * hardware operation on the real backends, one reply out.
 *
 * It holds no state of its own, so the device process can run one executor
 * thread per channel over the same `struct psexec`: the backends already
 * tolerate concurrent calls (gpu.h, rapl.h). Queues and everything else
 * stateful about requests stay in the network process; this only turns a
 * message into a driver call and the result into a message. (RAPL wrap
 * tracking is the device process's, inside its struct rapl, next to the
 * keepalive that feeds it: see rapl_read below.)
 */
#ifndef ZEUS_PRIVSEP_EXEC_H
#define ZEUS_PRIVSEP_EXEC_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "devices/gpu.h"
#include "msg.h"

struct psexec {
	struct gpu_backend *gpu;	/* may have ops == NULL when ngpu == 0 */
	unsigned ngpu, npkg;
	uint64_t dram_mask;		/* bit i: package i has a DRAM zone */
	/*
	 * Package `pkg`'s energy as rapl_sample gives it: wrap-compensated
	 * cumulative µJ of the package and, when dram_uj is not NULL (only
	 * for packages in dram_mask), of its DRAM, and the CLOCK_MONOTONIC
	 * time right after the read. NULL when npkg == 0.
	 */
	int (*rapl_read)(void *ctx, unsigned pkg, uint64_t *cpu_uj,
	    uint64_t *dram_uj, uint64_t *mono_ns, struct zerr *err);
	void *rapl_ctx;
	pid_t net;		/* the network process, whose descriptors
				 * PSMSG_PROC counts too; 0: none */
};

/*
 * Runs `req`, which psmsg_request_check accepted against limits matching
 * `x`, and fills the whole of *rep (zeroed first: no byte of this process's
 * memory goes to the other one unless it is a field).
 *
 * The reply echoes magic, op and id. rc, err_kind and err_msg come from the
 * backend's zerr; `lost` is the backend's lost() after a GPU operation.
 * PSMSG_SAMPLE always has rc 0 and reports per device: gpu_ok/gpu_lost and
 * gpu_mw[i] per GPU (the first failure's kind in err_gpu_kind, its message
 * in err_msg), pkg_ok, cpu_uj[i], dram_uj[i] (packages in dram_mask) and
 * mono_ns[i] per package.
 *
 * A request that slipped past the check anyway (an index out of range, a
 * missing backend) is answered with ZERR_INTERNAL without calling anything.
 */
void psexec_run(const struct psexec *x, const struct psmsg_request *req,
    struct psmsg_reply *rep);

#endif
