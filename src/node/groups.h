/* SPDX-License-Identifier: Apache-2.0 */
/*
 * groups.h - the API groups a route belongs to, and scope names.
 *
 * A group is both what `--enable` switches on and the JWT scope a route
 * needs, so one enum serves both. Sets of groups are bitmasks.
 */
#ifndef ZEUS_GROUPS_H
#define ZEUS_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

enum api_group {
	GROUP_GPU_CONTROL,
	GROUP_GPU_READ,
	GROUP_CPU_READ,
	GROUP_METRICS,
	GROUP_COUNT
};

typedef unsigned group_set;	/* bit (1u << enum api_group) */

#define GROUP_BIT(g) (1u << (g))
/* `metrics` (GET /metrics) is ours, enabled by default with the reads. */
#define GROUP_DEFAULT_SET \
	(GROUP_BIT(GROUP_GPU_CONTROL) | GROUP_BIT(GROUP_GPU_READ) | \
	 GROUP_BIT(GROUP_CPU_READ) | GROUP_BIT(GROUP_METRICS))

/* "gpu-control", ... */
const char *group_name(enum api_group g);

/* Parses one name; returns -1 when unknown. Exact match, no trimming. */
int group_from_name(const char *name, size_t len, enum api_group *out);

/*
 * Parses a comma-separated list ("gpu-read, cpu-read"); elements are trimmed
 * of spaces, empty elements and unknown names fail. On failure writes the
 * offending element (truncated) into `bad` and returns -1.
 */
int group_parse_list(const char *list, group_set *out, char *bad,
    size_t bad_size);

/* Writes "a, b" style names of a set into buf (", " separated). */
void group_set_format(group_set set, char *buf, size_t size);

#endif
