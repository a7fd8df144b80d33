/* SPDX-License-Identifier: Apache-2.0 */
/*
 * groups.c - API group names and list parsing.
 */
#include "node/groups.h"

#include <stdio.h>
#include <string.h>

static const char *const group_names[GROUP_COUNT] = {
	[GROUP_GPU_CONTROL] = "gpu-control",
	[GROUP_GPU_READ] = "gpu-read",
	[GROUP_CPU_READ] = "cpu-read",
	[GROUP_METRICS] = "metrics",
};

const char *
group_name(enum api_group g)
{
	return (unsigned)g < GROUP_COUNT ? group_names[g] : "?";
}

int
group_from_name(const char *name, size_t len, enum api_group *out)
{
	for (unsigned i = 0; i < GROUP_COUNT; i++) {
		if (strlen(group_names[i]) == len &&
		    memcmp(group_names[i], name, len) == 0) {
			*out = (enum api_group)i;
			return 0;
		}
	}
	return -1;
}

int
group_parse_list(const char *list, group_set *out, char *bad, size_t bad_size)
{
	group_set set = 0;
	const char *p = list;

	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *s = p;
		enum api_group g;

		while (len > 0 && *s == ' ') {
			s++;
			len--;
		}
		while (len > 0 && s[len - 1] == ' ')
			len--;
		if (len == 0 || group_from_name(s, len, &g) != 0) {
			snprintf(bad, bad_size, "%.*s", (int)(len > 64 ? 64 : len), s);
			return -1;
		}
		set |= GROUP_BIT(g);
		if (end == NULL)
			break;
		p = end + 1;
	}
	*out = set;
	return 0;
}

void
group_set_format(group_set set, char *buf, size_t size)
{
	size_t o = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	for (unsigned i = 0; i < GROUP_COUNT; i++) {
		int n;

		if (!(set & GROUP_BIT(i)))
			continue;
		n = snprintf(buf + o, size - o, "%s%s", o ? ", " : "",
		    group_names[i]);
		if (n < 0 || (size_t)n >= size - o)
			return;
		o += (size_t)n;
	}
}
