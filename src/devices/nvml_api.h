/*
 * nvml_api.h - the project's own minimal declarations of the NVML ABI.
 *
 * Only the types, constants and functions that the NVML backend
 * (src/devices/nvml.c) and the simulator (sim/nvml_sim.c) use. Layouts and
 * values follow NVIDIA's public nvml.h; they are part of a stable C ABI, so
 * declaring them here lets the project build without the CUDA toolkit and
 * load the driver's library (or the simulator) with dlopen at run time, as
 * nvtop does.
 *
 * Function names are the versioned symbols the driver exports (nvml.h maps
 * the plain names onto them with macros, e.g. nvmlInit -> nvmlInit_v2).
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

/* Filled by nvmlDeviceGetPciInfo_v3 (the current layout). */
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

/* The functions, as the driver exports them. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
    nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name,
    unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
    nvmlFieldValue_t *values);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
    unsigned long long *energy);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
    unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
    unsigned int *minLimit, unsigned int *maxLimit);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
    nvmlEnableState_t *mode);
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
