/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers.h - the route handlers, one function per endpoint (the route
 * table, routes.c, names them; http calls them through it). Each parses
 * its query with query_parse(), builds device commands (never calling a
 * backend itself) and answers through request.h.
 */
#ifndef ZEUS_HANDLERS_H
#define ZEUS_HANDLERS_H

struct request;

/* handlers_basic.c */
void handle_discover(struct request *req);
void handle_time(struct request *req);
void handle_whoami(struct request *req);

/* handlers_gpu.c */
void handle_gpu_write(struct request *req);
void handle_gpu_read(struct request *req);

/* the energy ledger: GET /gpu/leases, POST /gpu/release */
void handle_gpu_leases(struct request *req);
void handle_gpu_release(struct request *req);

/* handlers_slurm.c: POST /slurm/step_start, /slurm/step_end (op 1, 0) */
void handle_slurm_step(struct request *req);

/* handlers_metrics.c */
void handle_metrics(struct request *req);

/* handlers_cpu.c */
void handle_cpu_energy(struct request *req);
void handle_cpu_power(struct request *req);

/* handlers_stream.c */
void handle_gpu_stream(struct request *req);
void handle_cpu_stream(struct request *req);

#endif
