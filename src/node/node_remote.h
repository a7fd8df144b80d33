/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_remote.h - what the network process of a split daemon is told of the
 * device process's node (docs/design.md, "Two processes"). The network
 * process is a fresh image (zeusd started again by fork + exec), so it gets
 * no copy of the device process's struct node: the device process writes
 * this plain record (node_remote_describe), the network process reads it
 * and opens its node from it (node_open_remote, node.h). No pointer inside:
 * the record is copied as bytes between two processes of one binary.
 */
#ifndef ZEUS_NODE_REMOTE_H
#define ZEUS_NODE_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/gpu.h"
#include "devices/rapl.h"
#include "privsep/msg.h"
#include "privsep/remote_gpu.h"

#define NODE_REMOTE_LABEL_MAX 64	/* a RAPL zone's label, NUL included */

struct node_remote_desc {
	bool device_apart;		/* node.h: another process than ours */
	unsigned queue_max;
	unsigned overrides;
	bool has_gpu;			/* the device node has a GPU backend */
	unsigned ngpu;
	struct gpu_info gpu_info[PSMSG_MAX_GPUS];
	struct psgpu_lacks lacks;
	uint64_t lost;			/* GPUs the backend reports lost */
	bool has_rapl;			/* the device node has RAPL */
	unsigned ncpu;
	struct rapl_package_desc pkg[PSMSG_MAX_PKGS];
	/* rapl_zone_label's answers ("" for none) */
	char label[PSMSG_MAX_PKGS][2][NODE_REMOTE_LABEL_MAX];
};

struct node;

/*
 * Fills `out` from the device process's node. -1 with err when the node has
 * more GPUs or packages than privilege separation handles.
 */
int node_remote_describe(const struct node *dev, struct node_remote_desc *out,
    struct zerr *err);

#endif
