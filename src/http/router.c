/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.c - the route table and path canonicalisation (see router.h).
 */
#include "http/router.h"

#include <string.h>

#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"
#include "http/handlers.h"
#include "http/query.h"

#define R_GPU_W(p, op) { p, "POST", GROUP_GPU_CONTROL, ROUTE_SCOPE, false, \
	handle_gpu_write, op }
#define R_GPU_R(p, op) { p, "GET", GROUP_GPU_READ, ROUTE_SCOPE, false, \
	handle_gpu_read, op }

static const struct route router_table[] = {
	{ "/discover", "GET", -1, ROUTE_OPEN, false, handle_discover, 0 },
	{ "/time", "GET", -1, ROUTE_OPEN, false, handle_time, 0 },
	{ "/auth/whoami", "GET", -1, ROUTE_TOKEN, true, handle_whoami, 0 },
	R_GPU_W("/gpu/set_power_limit", GPU_SET_POWER_LIMIT),
	R_GPU_W("/gpu/set_persistence_mode", GPU_SET_PERSISTENCE_MODE),
	R_GPU_W("/gpu/set_gpu_locked_clocks", GPU_SET_GPU_LOCKED_CLOCKS),
	R_GPU_W("/gpu/reset_gpu_locked_clocks",
	    GPU_RESET_GPU_LOCKED_CLOCKS),
	R_GPU_W("/gpu/set_mem_locked_clocks", GPU_SET_MEM_LOCKED_CLOCKS),
	R_GPU_W("/gpu/reset_mem_locked_clocks",
	    GPU_RESET_MEM_LOCKED_CLOCKS),
	R_GPU_W("/gpu/reset_locked_clocks", GPU_RESET_LOCKED_CLOCKS),
	R_GPU_R("/gpu/get_power", GPU_CMD_GET_POWER),
	R_GPU_R("/gpu/get_cumulative_energy", GPU_CMD_GET_ENERGY),
	R_GPU_R("/gpu/get_power_limit", GPU_CMD_GET_POWER_LIMIT),
	R_GPU_R("/gpu/get_power_limit_constraints",
	    GPU_CMD_GET_CONSTRAINTS),
	R_GPU_R("/gpu/get_persistence_mode", GPU_CMD_GET_PERSISTENCE),
	{ "/gpu/leases", "GET", GROUP_GPU_READ, ROUTE_SCOPE, false,
	    handle_gpu_leases, 0 },
	{ "/gpu/release", "POST", GROUP_GPU_CONTROL, ROUTE_SCOPE, false,
	    handle_gpu_release, 0 },
	{ "/slurm/step_start", "POST", GROUP_GPU_CONTROL, ROUTE_SCOPE, false,
	    handle_slurm_step, 1 },
	{ "/slurm/step_end", "POST", GROUP_GPU_CONTROL, ROUTE_SCOPE, false,
	    handle_slurm_step, 0 },
	{ "/metrics", "GET", GROUP_METRICS, ROUTE_SCOPE, false, handle_metrics,
	    0 },
	{ "/cpu/get_cumulative_energy", "GET", GROUP_CPU_READ, ROUTE_SCOPE,
	    false, handle_cpu_energy, CPU_CMD_GET_ENERGY },
	{ "/cpu/get_power", "GET", GROUP_CPU_READ, ROUTE_SCOPE, false,
	    handle_cpu_power, CPU_CMD_GET_POWER },
	{ "/gpu/stream_power", "GET", GROUP_GPU_READ, ROUTE_SCOPE, false,
	    handle_gpu_stream, 0 },
	{ "/cpu/stream_power", "GET", GROUP_CPU_READ, ROUTE_SCOPE, false,
	    handle_cpu_stream, 0 },
};

const struct route *
router_routes(size_t *count)
{
	*count = sizeof(router_table) / sizeof(router_table[0]);
	return router_table;
}

const struct route *
router_lookup(const char *path)
{
	for (size_t i = 0; i < sizeof(router_table) / sizeof(router_table[0]);
	    i++)
		if (strcmp(router_table[i].path, path) == 0)
			return &router_table[i];
	return NULL;
}

int
router_canonical_path(const char *raw, size_t len, char *out, size_t size)
{
	char dec[1024];
	long n;
	size_t o = 0, i = 0;

	if (len >= sizeof(dec) || size < 2)
		return -1;
	n = query_unescape(raw, len, false, dec, sizeof(dec));
	if (n < 0)
		return -1;
	out[o++] = '/';
	while ((size_t)i < (size_t)n) {
		size_t start, seg;

		while ((size_t)i < (size_t)n && dec[i] == '/')
			i++;
		start = i;
		while ((size_t)i < (size_t)n && dec[i] != '/')
			i++;
		seg = i - start;
		if (seg == 0 || (seg == 1 && dec[start] == '.'))
			continue;
		if (seg == 2 && dec[start] == '.' && dec[start + 1] == '.') {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--;	/* the slash before the segment */
			continue;
		}
		if (o > 1)
			out[o++] = '/';
		if (o + seg + 1 > size)
			return -1;
		memcpy(out + o, dec + start, seg);
		o += seg;
		if (o + 2 > size)
			return -1;
	}
	out[o] = '\0';
	return 0;
}
