/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi_api.h - our own declarations of the part of AMD SMI (ROCm's
 * libamd_smi) that zeusd uses, so that the daemon builds without ROCm and
 * loads the library with dlopen.
 *
 * The library's ABI changed between its sonames .24 (ROCm 6.x up to 6.3),
 * .25 (ROCm 6.4) and .26 (ROCm 7): the power-info struct gained a leading
 * 64-bit socket_power in .25 and wider voltage fields in .26, and the
 * version struct lost its `year` field in .26. Each layout is declared
 * here under its ABI number; the first 32-bit word of the version struct
 * is the ABI number in all three (the year in .24/.25, the major in .26),
 * which is how the backend checks that the library speaks its soname's
 * layouts. The simulator (sim/amdsmi_sim.c) is
 * compiled against this header with AMDSMI_SIM_ABI set, so a signature that
 * drifts from what the backend calls does not build.
 *
 * Only the functions and enumerators zeusd needs are declared.
 */
#ifndef ZEUS_AMDSMI_API_H
#define ZEUS_AMDSMI_API_H

#include <stdint.h>

typedef uint32_t amdsmi_status_t;

#define AMDSMI_STATUS_SUCCESS		0
#define AMDSMI_STATUS_INVAL		1
#define AMDSMI_STATUS_NOT_SUPPORTED	2
#define AMDSMI_STATUS_NOT_YET_IMPLEMENTED 3
#define AMDSMI_STATUS_FAIL_LOAD_MODULE	4
#define AMDSMI_STATUS_FAIL_LOAD_SYMBOL	5
#define AMDSMI_STATUS_DRM_ERROR		6
#define AMDSMI_STATUS_API_FAILED	7
#define AMDSMI_STATUS_TIMEOUT		8
#define AMDSMI_STATUS_RETRY		9
#define AMDSMI_STATUS_NO_PERM		10
#define AMDSMI_STATUS_INTERRUPT		11
#define AMDSMI_STATUS_IO		12
#define AMDSMI_STATUS_ADDRESS_FAULT	13
#define AMDSMI_STATUS_FILE_ERROR	14
#define AMDSMI_STATUS_OUT_OF_RESOURCES	15
#define AMDSMI_STATUS_INTERNAL_EXCEPTION 16
#define AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS 17
#define AMDSMI_STATUS_INIT_ERROR	18
#define AMDSMI_STATUS_BUSY		30
#define AMDSMI_STATUS_NOT_FOUND		31
#define AMDSMI_STATUS_NOT_INIT		32
#define AMDSMI_STATUS_DRIVER_NOT_LOADED	34
#define AMDSMI_STATUS_NO_DATA		40
#define AMDSMI_STATUS_UNKNOWN_ERROR	0xFFFFFFFFu

/* amdsmi_init flags */
#define AMDSMI_INIT_AMD_GPUS		(UINT64_C(1) << 1)

typedef void *amdsmi_socket_handle;
typedef void *amdsmi_processor_handle;

/* amdsmi_clk_type_t */
typedef enum {
	AMDSMI_CLK_TYPE_SYS = 0,	/* graphics (GFX) */
	AMDSMI_CLK_TYPE_DF = 1,
	AMDSMI_CLK_TYPE_DCEF = 2,
	AMDSMI_CLK_TYPE_SOC = 3,
	AMDSMI_CLK_TYPE_MEM = 4,
} amdsmi_clk_type_t;

typedef enum {
	CLK_LIMIT_MIN = 0,
	CLK_LIMIT_MAX = 1,
} amdsmi_clk_limit_type_t;

typedef enum {
	AMDSMI_DEV_PERF_LEVEL_AUTO = 0,
	AMDSMI_DEV_PERF_LEVEL_LOW = 1,
	AMDSMI_DEV_PERF_LEVEL_HIGH = 2,
	AMDSMI_DEV_PERF_LEVEL_MANUAL = 3,
} amdsmi_dev_perf_level_t;

/* PCI address, packed as the library packs it. */
typedef union {
	struct {
		uint64_t function_number : 3;
		uint64_t device_number : 5;
		uint64_t bus_number : 8;
		uint64_t domain_number : 48;
	} fields;
	uint64_t as_uint;
} amdsmi_bdf_t;

/* Microwatts throughout. The same in all three ABIs. */
typedef struct {
	uint64_t power_cap;
	uint64_t default_power_cap;
	uint64_t dpm_cap;
	uint64_t min_power_cap;
	uint64_t max_power_cap;
	uint64_t reserved[3];
} amdsmi_power_cap_info_t;

/* --- amdsmi_version_t, per ABI --------------------------------------- */

/* .24 and .25: year is the ABI number (24.7.x is ROCm 6.3; 25.25.x 6.4) */
typedef struct {
	uint32_t year;
	uint32_t major;
	uint32_t minor;
	uint32_t release;
	const char *build;
} amdsmi_version_v24_t;

typedef amdsmi_version_v24_t amdsmi_version_v25_t;

/* .26 dropped the year: major is the ABI number */
typedef struct {
	uint32_t major;
	uint32_t minor;
	uint32_t release;
	const char *build;
} amdsmi_version_v26_t;

/* Large enough for any of them: what the backend passes before it knows. */
typedef union {
	uint32_t abi;		/* first word: year (.24, .25) or major (.26) */
	amdsmi_version_v24_t v24;
	amdsmi_version_v25_t v25;
	amdsmi_version_v26_t v26;
	unsigned char pad[64];
} amdsmi_version_any_t;

/* --- amdsmi_power_info_t, per ABI ------------------------------------ */

/* Socket power in watts; AMDSMI_POWER_NA where the GPU cannot report it. */
#define AMDSMI_POWER_NA			0xFFFFu
#define AMDSMI_POWER_NA32		0xFFFFFFFFu

typedef struct {			/* 68 bytes */
	uint32_t current_socket_power;
	uint32_t average_socket_power;
	uint32_t gfx_voltage;
	uint32_t soc_voltage;
	uint32_t mem_voltage;
	uint32_t power_limit;
	uint32_t reserved[11];
} amdsmi_power_info_v24_t;

typedef struct {			/* 40 bytes */
	uint64_t socket_power;
	uint32_t current_socket_power;
	uint32_t average_socket_power;
	uint32_t gfx_voltage;
	uint32_t soc_voltage;
	uint32_t mem_voltage;
	uint32_t power_limit;
	uint32_t reserved[2];
} amdsmi_power_info_v25_t;

typedef struct {			/* 192 bytes */
	uint64_t socket_power;
	uint32_t current_socket_power;
	uint32_t average_socket_power;
	uint64_t gfx_voltage;
	uint64_t soc_voltage;
	uint64_t mem_voltage;
	uint32_t power_limit;
	uint64_t reserved[18];
} amdsmi_power_info_v26_t;

typedef union {
	amdsmi_power_info_v24_t v24;
	amdsmi_power_info_v25_t v25;
	amdsmi_power_info_v26_t v26;
} amdsmi_power_info_any_t;

/* Clock information in MHz; the same in all three ABIs (32 bytes). */
typedef struct {
	uint32_t clk;
	uint32_t min_clk;
	uint32_t max_clk;
	uint8_t clk_locked;
	uint8_t clk_deep_sleep;
	uint32_t reserved[4];
} amdsmi_clk_info_t;

/*
 * ASIC information: only market_name (offset 0) is read. The real struct
 * is some 448 bytes in .24 and 896 in .26, so the backend passes 1024.
 */
#define AMDSMI_MARKET_NAME_LEN	256
typedef struct {
	char market_name[AMDSMI_MARKET_NAME_LEN];
	unsigned char rest[768];
} amdsmi_asic_info_t;

/*
 * The simulator is built once per ABI and exports the layout of that ABI
 * under the library's own names.
 */
#if defined(AMDSMI_SIM_ABI)
#if AMDSMI_SIM_ABI == 24
typedef amdsmi_version_v24_t amdsmi_version_t;
typedef amdsmi_power_info_v24_t amdsmi_power_info_t;
#elif AMDSMI_SIM_ABI == 25
typedef amdsmi_version_v25_t amdsmi_version_t;
typedef amdsmi_power_info_v25_t amdsmi_power_info_t;
#elif AMDSMI_SIM_ABI == 26
typedef amdsmi_version_v26_t amdsmi_version_t;
typedef amdsmi_power_info_v26_t amdsmi_power_info_t;
#else
#error "AMDSMI_SIM_ABI must be 24, 25 or 26"
#endif
#else
/* The backend passes the unions; the library writes its own layout. */
typedef amdsmi_version_any_t amdsmi_version_t;
typedef amdsmi_power_info_any_t amdsmi_power_info_t;
#endif

/* --- functions (the exported names) ---------------------------------- */

amdsmi_status_t amdsmi_init(uint64_t init_flags);
amdsmi_status_t amdsmi_shut_down(void);
amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status,
    const char **status_string);
amdsmi_status_t amdsmi_get_lib_version(amdsmi_version_t *version);
amdsmi_status_t amdsmi_get_socket_handles(uint32_t *socket_count,
    amdsmi_socket_handle *socket_handles);
amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket,
    uint32_t *processor_count, amdsmi_processor_handle *processor_handles);
amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h,
    amdsmi_bdf_t *bdf);
amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h,
    unsigned int *uuid_length, char *uuid);
amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h,
    amdsmi_power_info_t *info);
amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h,
    uint64_t *energy_accumulator, float *counter_resolution,
    uint64_t *timestamp);
amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_processor_handle h,
    uint32_t sensor_ind, amdsmi_power_cap_info_t *info);
amdsmi_status_t amdsmi_set_power_cap(amdsmi_processor_handle h,
    uint32_t sensor_ind, uint64_t cap);
amdsmi_status_t amdsmi_set_gpu_clk_limit(amdsmi_processor_handle h,
    amdsmi_clk_type_t clk_type, amdsmi_clk_limit_type_t limit_type,
    uint64_t clk_value);
amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h,
    amdsmi_clk_type_t clk_type, amdsmi_clk_info_t *info);
amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h,
    amdsmi_asic_info_t *info);
amdsmi_status_t amdsmi_set_gpu_perf_level(amdsmi_processor_handle h,
    amdsmi_dev_perf_level_t perf_lvl);

#endif
