/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remote_read.h - the shared readers of a split daemon's network process,
 * answered on the HTTP loop (docs/design.md, "Reads answered on the loop").
 *
 * The GPU power reader and the CPU energy reader (node.h) send each batch
 * as one PSMSG_SAMPLE from the thread that queued it, on a device channel of
 * their own, and the HTTP loop reads the reply and completes the requests:
 * no reader-thread hop on either side of the round trip. A batch the reply
 * alone cannot answer goes to the reader's thread, which runs it as before.
 */
#ifndef ZEUS_REMOTE_READ_H
#define ZEUS_REMOTE_READ_H

#include "common/err.h"

struct node;
struct loop;
struct remote_reads;

/*
 * For the network process's node (node_open_remote, over socket pairs:
 * zeusd.exe's direct calls have no asynchronous channel and do not come
 * here): takes a channel per reader from the pool, has
 * `loop` watch it and makes the reader asynchronous (worker.h,
 * worker_set_async). After node_open_remote, before the loop starts.
 * `*out` is set even on failure, and freed with remote_read_free after
 * node_close (which stops the readers that point at it).
 */
int remote_read_attach(struct node *node, struct loop *loop,
    struct remote_reads **out, struct zerr *err);

void remote_read_free(struct remote_reads *rr);

#endif
