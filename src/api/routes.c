/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.c - the route table (see routes.h).
 */
#include "api/routes.h"

#include "api/handlers.h"
#include "devices/cpu_cmd.h"
#include "devices/gpu_cmd.h"

#define R_GPU_W(p, op) { p, "POST", GROUP_GPU_CONTROL, ROUTE_SCOPE, false, \
	handle_gpu_write, op }
#define R_GPU_R(p, op) { p, "GET", GROUP_GPU_READ, ROUTE_SCOPE, false, \
	handle_gpu_read, op }

static const struct route route_table[] = {
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

static const struct routes api_table = {
	.table = route_table,
	.n = sizeof(route_table) / sizeof(route_table[0]),
};

const struct routes *
api_routes(void)
{
	return &api_table;
}
