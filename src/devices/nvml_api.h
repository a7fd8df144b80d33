/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_api.h - the project's own minimal declarations of the NVML ABI.
 *
 * Only the types, constants and functions that the NVML backend
 * (src/devices/nvml.c), the simulator (sim/nvml_sim.c) and the hardware
 * check (tests/hw/) use. Layouts and values follow NVIDIA's public nvml.h;
 * they are part of a stable C ABI, so declaring them here lets the project
 * build without the CUDA toolkit and load the driver's library (or the
 * simulator) with dlopen at run time, as nvtop does.
 *
 * Function names are the symbols the driver exports. nvml.h maps the plain
 * names onto versioned ones with macros (nvmlInit -> nvmlInit_v2); the
 * plain names are still exported for old binaries and are all an old
 * driver has, so both are declared: the backend falls back from one to the
 * other. Every function the simulator exports must be declared here: the
 * simulator is compiled against this header with -Wmissing-prototypes, so
 * a definition that is missing here, or whose signature differs, does not
 * build (tests/unit/test_nvml_abi.c checks the rest).
 */
#ifndef ZEUS_NVML_API_H
#define ZEUS_NVML_API_H

typedef enum nvmlReturn_enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_ALREADY_INITIALIZED = 5,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_INSUFFICIENT_POWER = 8,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_IRQ_ISSUE = 11,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_CORRUPTED_INFOROM = 14,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_RESET_REQUIRED = 16,
	NVML_ERROR_OPERATING_SYSTEM = 17,
	NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
	NVML_ERROR_IN_USE = 19,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_NO_DATA = 21,
	NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
	NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
	NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_DEPRECATED = 26,
	NVML_ERROR_NOT_READY = 27,
	NVML_ERROR_GPU_NOT_FOUND = 28,
	NVML_ERROR_INVALID_STATE = 29,
	NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* An opaque handle owned by the library. */
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef enum nvmlEnableState_enum {
	NVML_FEATURE_DISABLED = 0,
	NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/* Buffer sizes nvml.h guarantees to be large enough. */
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* Filled by nvmlDeviceGetPciInfo_v3 (the current layout; 68 bytes). */
typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;		/* 0 to 0xffffffff */
	unsigned int bus;		/* 0 to 0xff */
	unsigned int device;		/* 0 to 31 */
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* Field-values API (nvmlDeviceGetFieldValues). */
#define NVML_FI_DEV_POWER_AVERAGE 185	/* averaged over 1 s, mW */
#define NVML_FI_DEV_POWER_INSTANT 186	/* current power, mW */

typedef enum nvmlValueType_enum {
	NVML_VALUE_TYPE_DOUBLE = 0,
	NVML_VALUE_TYPE_UNSIGNED_INT = 1,
	NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
	NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
	NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
	NVML_VALUE_TYPE_SIGNED_INT = 5,
	NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
} nvmlValueType_t;

typedef union nvmlValue_st {
	double dVal;
	int siVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	signed long long sllVal;
	unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
	unsigned int fieldId;		/* in: an NVML_FI_* id */
	unsigned int scopeId;		/* in: 0 for device-wide fields */
	long long timestamp;		/* out: CPU time of the value, us since 1970 */
	long long latencyUsec;		/* out */
	nvmlValueType_t valueType;	/* out: which member of value is set */
	nvmlReturn_t nvmlReturn;	/* out: per-field result, check it */
	nvmlValue_t value;		/* out */
} nvmlFieldValue_t;

/* nvmlDeviceGetArchitecture. */
typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffffu

/* nvmlDeviceGetClockInfo / nvmlDeviceGetMaxClockInfo. */
typedef enum nvmlClockType_enum {
	NVML_CLOCK_GRAPHICS = 0,
	NVML_CLOCK_SM = 1,
	NVML_CLOCK_MEM = 2,
	NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

/* nvmlDeviceGetTemperature. */
typedef enum nvmlTemperatureSensors_enum {
	NVML_TEMPERATURE_GPU = 0
} nvmlTemperatureSensors_t;

/* nvmlDeviceGetMemoryInfo: bytes. */
typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/* nvmlDeviceGetMemoryInfo_v2: `version` must be nvmlMemory_v2. */
typedef struct nvmlMemory_v2_st {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

/* NVML's versioned-struct tag: the size, and the version in the top byte. */
#define NVML_STRUCT_VERSION(size, ver) ((unsigned int)(size) | ((ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

/* nvmlDeviceGetUtilizationRates: percent over the last sample period. */
typedef struct nvmlUtilization_st {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

/* nvmlInitWithFlags. */
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80

/*
 * The functions, as the driver exports them. Versioned names first, then
 * the older names they replaced, with the same signatures. The oldest
 * nvmlDeviceGetPciInfo fills an older, shorter nvmlPciInfo_t (busId[16],
 * the five ids, then reserved words): domain, bus and device sit where the
 * current layout has them, so callers pass the current, larger struct to
 * whichever of the three they found and read only those fields.
 */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
    nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index,
    nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name,
    unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid,
    unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
    nvmlDeviceArchitecture_t *arch);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
    nvmlFieldValue_t *values);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
    unsigned long long *energy);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
    unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
    unsigned int *minLimit, unsigned int *maxLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
    unsigned int *defaultLimit);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
    unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
    nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
    unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device,
    nvmlClockType_t type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device,
    unsigned int *count, unsigned int *clocksMHz);
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
    unsigned int memoryClockMHz, unsigned int *count,
    unsigned int *clocksMHz);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
    nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
    nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
    nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
    nvmlTemperatureSensors_t sensorType, unsigned int *temp);
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device,
    unsigned int limit);
nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device,
    nvmlEnableState_t mode);
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device,
    unsigned int minGpuClockMHz, unsigned int maxGpuClockMHz);
nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device);
nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device,
    unsigned int minMemClockMHz, unsigned int maxMemClockMHz);
nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device);

#endif
