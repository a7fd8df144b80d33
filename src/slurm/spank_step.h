/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spank_step.h - what zeus_spank.so, as root in slurmstepd, tells zeusd
 * about its job step (docs/slurm.md, "Confining jobs to their GPUs"):
 * POST /slurm/step_start when a step with GPUs starts, /slurm/step_end
 * when it ends. One short HTTP/1.1 exchange over zeusd's Unix socket,
 * without libcurl: slurmstepd is a threaded root daemon, and nothing of a
 * client library's global state should be set up in it.
 */
#ifndef ZEUS_SPANK_STEP_H
#define ZEUS_SPANK_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPANK_STEP_TARGET_MAX 640	/* the request target */

/* How the exchange went. */
enum spank_step_result {
	SPANK_STEP_DONE,		/* 200 */
	SPANK_STEP_NO_ZEUSD,		/* nothing listens, or 404 (a zeusd
					 * without the routes: gpu-control
					 * off, an older one) */
	SPANK_STEP_REFUSED,		/* any other answer, or no answer */
};

/*
 * The request target: "/slurm/step_start?job=J&step=S&uid=U&gpu_ids=0,1"
 * (start) or "/slurm/step_end?job=J&step=S". 0, or -1 when n is 0 on a
 * start or it does not fit `size`. Pure.
 */
int spank_step_target(char *buf, size_t size, bool start, uint32_t job,
    uint32_t step, uid_t uid, const unsigned *ids, size_t n);

/*
 * Whether an HTTP answer (its first bytes, `len` of them) is whole
 * enough to judge: its status (100..599) in *status and, after the
 * headers, the body's first bytes made printable into why (at most
 * why_size - 1, cut). 0, or -1 when it is not an HTTP/1.x status line.
 * Pure.
 */
int spank_step_answer(const char *buf, size_t len, unsigned *status,
    char *why, size_t why_size);

/*
 * POSTs `target` to zeusd at `socket`, waiting at most timeout_ms in all.
 * On SPANK_STEP_REFUSED, why says what came back (or what failed).
 */
enum spank_step_result spank_step_tell(const char *socket,
    const char *target, unsigned timeout_ms, char *why, size_t why_size);

#endif
