/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_write.h - the GPU workers' waited-for writes of a split daemon's
 * network process, answered on the HTTP loop (docs/design.md, "Writes
 * answered on the loop").
 *
 * As the shared readers do (remote_read.h): each GPU worker sends a batch
 * of writes that requests wait for (block=true, gpu_cmd_is_waited_write)
 * as one PSMSG_GPU_WRITE or PSMSG_GPU_WRITES from the thread that queued
 * it, on a device channel of its own, and the HTTP loop reads the reply
 * and completes the requests: no worker-thread hop on either side of the
 * round trip. Any other batch (a read, a block=false write nobody's
 * connection waits for) goes to the worker's thread as before.
 *
 * Only writes a suspended request waits for: server_stop waits for those
 * before the loop stops, so no batch is ever left out with nobody to read
 * its reply.
 */
#ifndef ZEUS_REMOTE_WRITE_H
#define ZEUS_REMOTE_WRITE_H

#include <stdbool.h>

#include "common/err.h"

struct node;
struct loop;
struct remote_writes;

/*
 * The device channels remote_write_attach takes for `node` (a channel per
 * GPU). The split adds them to the pool. (Until the lease record was the
 * device process's alone, --gpu-leases took none: the network process
 * read a lease's energy on the worker's thread.)
 */
unsigned remote_write_channels(const struct node *node);

/*
 * For the network process's node (node_open_remote, over socket pairs,
 * as remote_read_attach): takes a channel per GPU
 * worker from the pool, has `loop` watch it and makes the worker
 * asynchronous (worker.h, worker_set_async). After node_open_remote,
 * before the loop starts.
 * `*out` is set even on failure, and freed with remote_write_free after
 * node_close (which stops the workers that point at it).
 */
int remote_write_attach(struct node *node, struct loop *loop,
    struct remote_writes **out, struct zerr *err);

void remote_write_free(struct remote_writes *rw);

#endif
