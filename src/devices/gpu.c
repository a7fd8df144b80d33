/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.c - names of the GPU operations (shared by router, overrides, the
 * backends' messages and logs, so every place spells them the same way).
 */
#include "gpu.h"

static const char *const gpu_write_names[GPU_WRITE_OP_COUNT] = {
	[GPU_SET_POWER_LIMIT] = "set_power_limit",
	[GPU_SET_PERSISTENCE_MODE] = "set_persistence_mode",
	[GPU_SET_GPU_LOCKED_CLOCKS] = "set_gpu_locked_clocks",
	[GPU_RESET_GPU_LOCKED_CLOCKS] = "reset_gpu_locked_clocks",
	[GPU_SET_MEM_LOCKED_CLOCKS] = "set_mem_locked_clocks",
	[GPU_RESET_MEM_LOCKED_CLOCKS] = "reset_mem_locked_clocks",
	[GPU_RESET_LOCKED_CLOCKS] = "reset_locked_clocks",
};

const char *
gpu_write_op_name(enum gpu_write_op op)
{
	return (unsigned)op < GPU_WRITE_OP_COUNT ? gpu_write_names[op] : "?";
}

static const char *const gpu_read_names[GPU_READ_OP_COUNT] = {
	[GPU_GET_POWER] = "get_power",
	[GPU_GET_CUMULATIVE_ENERGY] = "get_cumulative_energy",
	[GPU_GET_POWER_LIMIT] = "get_power_limit",
	[GPU_GET_POWER_LIMIT_CONSTRAINTS] = "get_power_limit_constraints",
	[GPU_GET_PERSISTENCE_MODE] = "get_persistence_mode",
};

const char *
gpu_read_op_name(enum gpu_read_op op)
{
	return (unsigned)op < GPU_READ_OP_COUNT ? gpu_read_names[op] : "?";
}
