/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_sim.c - a simulated NVIDIA node behind the NVML C ABI: the entry
 * points.
 *
 * Built as build/libnvml-sim.so, it exports the NVML symbols that the NVML
 * backend (src/devices/nvml.c) resolves with dlopen, and those that NVML's
 * Python binding (nvidia-ml-py) and tools built on it call on start-up and
 * for power and energy work, with the signatures and struct layouts of
 * NVIDIA's nvml.h (declared in src/devices/nvml_api.h, which this file is
 * compiled against). So the daemon, libzeus, the tests and NVML-based tools
 * run unchanged on a machine without GPUs. docs/simulator.md is the
 * user-facing version of these comments.
 *
 * The simulator's parts, each with its own comment:
 *   model.h       the GPU models (profiles: V100-, A100-, H100-, H200-,
 *                 P100- or RTX 4090-like) and how power, energy, clocks,
 *                 utilization, temperature and memory use move over time
 *   nvml_state.h  the GPUs: identity (name, PCI address, UUID) and the
 *                 settings NVML can change (power limit, persistence mode,
 *                 locked clocks) with their limits, and the energy counter,
 *                 per process or shared by processes through a file;
 *                 ZEUS_SIM_PROFILE, _GPUS, _GPU_NAME, _PCI, _DRIVER_VERSION,
 *                 _STATE
 *   faults.h      fault rules (ZEUS_SIM_FAULTS, ZEUS_SIM_CONTROL) and the
 *                 call log (ZEUS_SIM_LOG), shared with amdsmi_sim.c
 *   this file     the NVML calls, mapped onto those, and the library's
 *                 life (init, shutdown): the first init (and one that
 *                 follows a full shutdown) reads the environment; a
 *                 malformed setting makes it fail with
 *                 NVML_ERROR_INVALID_ARGUMENT after one line on stderr
 *
 * NVML's side of the fault rules: <function> is an NVML symbol name as
 * exported (nvmlDeviceGetCount_v2; every variant accepts every name), <gpu>
 * 0..63, <code> an nvmlReturn_t name with or without NVML_ERROR_ (or
 * NVML_SUCCESS) or a number up to 999. Calls that take no GPU (the inits,
 * nvmlShutdown, the counts, the system queries) match only `*` rules; the
 * handle lookups match their index argument. A part's unsupported
 * operations answer NOT_SUPPORTED unless a `fail` rule decided otherwise
 * (SUCCESS included). For nvmlDeviceGetFieldValues an injected
 * NOT_SUPPORTED is reported in every field's nvmlReturn while the call
 * succeeds, which is how the driver reports a field it does not support;
 * other codes fail the call. Every call but nvmlErrorString is logged; its
 * args are the values passed (e.g. `nvmlDeviceSetPowerManagementLimit 1
 * 250000`, clocks as `<min> <max>`, persistence as 0/1, field ids for
 * GetFieldValues).
 *
 * Build variants stand for drivers: -DNVML_SIM_LEGACY leaves out every
 * entry point an old driver may lack (the versioned names, so only the
 * older ones remain, memory locked clocks, field values, the energy
 * counter, the architecture query, nvmlInitWithFlags), since what dlsym
 * finds cannot change at run time; -DNVML_SIM_OMIT_SETMEMCLOCKS leaves out
 * nvmlDeviceSetMemoryLockedClocks alone.
 *
 * Thread safety: NVML is thread-safe and so is this library. Its lock
 * guards the init count; nvml_state.c and faults.c guard their own state.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/nvml_api.h"
#include "faults.h"
#include "model.h"
#include "nvml_state.h"
#include "sim_os.h"

#define SIM_MAX_FIELDS 1024
#define SIM_MAX_CLOCKS 256		/* graphics clock table entries */

enum sim_fn {
	FN_INIT, FN_INIT_V1, FN_INIT_FLAGS, FN_SHUTDOWN, FN_DRIVER_VERSION,
	FN_NVML_VERSION, FN_GET_COUNT, FN_GET_COUNT_V1, FN_GET_HANDLE,
	FN_GET_HANDLE_V1, FN_GET_NAME, FN_GET_UUID, FN_GET_PCI, FN_GET_PCI_V2,
	FN_GET_PCI_V1, FN_GET_ARCH, FN_GET_FIELDS, FN_GET_POWER_USAGE,
	FN_GET_ENERGY, FN_GET_LIMIT, FN_GET_CONSTRAINTS, FN_GET_DEFAULT_LIMIT,
	FN_GET_ENFORCED_LIMIT, FN_GET_PERSISTENCE, FN_GET_CLOCK,
	FN_GET_MAX_CLOCK, FN_GET_MEM_CLOCKS, FN_GET_GFX_CLOCKS, FN_GET_MEMORY,
	FN_GET_MEMORY_V2, FN_GET_UTILIZATION, FN_GET_TEMPERATURE, FN_SET_LIMIT,
	FN_SET_PERSISTENCE, FN_SET_GPU_CLOCKS, FN_RESET_GPU_CLOCKS,
	FN_SET_MEM_CLOCKS, FN_RESET_MEM_CLOCKS, FN_COUNT
};

static const char *const sim_fn_names[FN_COUNT] = {
	[FN_INIT] = "nvmlInit_v2",
	[FN_INIT_V1] = "nvmlInit",
	[FN_INIT_FLAGS] = "nvmlInitWithFlags",
	[FN_SHUTDOWN] = "nvmlShutdown",
	[FN_DRIVER_VERSION] = "nvmlSystemGetDriverVersion",
	[FN_NVML_VERSION] = "nvmlSystemGetNVMLVersion",
	[FN_GET_COUNT] = "nvmlDeviceGetCount_v2",
	[FN_GET_COUNT_V1] = "nvmlDeviceGetCount",
	[FN_GET_HANDLE] = "nvmlDeviceGetHandleByIndex_v2",
	[FN_GET_HANDLE_V1] = "nvmlDeviceGetHandleByIndex",
	[FN_GET_NAME] = "nvmlDeviceGetName",
	[FN_GET_UUID] = "nvmlDeviceGetUUID",
	[FN_GET_PCI] = "nvmlDeviceGetPciInfo_v3",
	[FN_GET_PCI_V2] = "nvmlDeviceGetPciInfo_v2",
	[FN_GET_PCI_V1] = "nvmlDeviceGetPciInfo",
	[FN_GET_ARCH] = "nvmlDeviceGetArchitecture",
	[FN_GET_FIELDS] = "nvmlDeviceGetFieldValues",
	[FN_GET_POWER_USAGE] = "nvmlDeviceGetPowerUsage",
	[FN_GET_ENERGY] = "nvmlDeviceGetTotalEnergyConsumption",
	[FN_GET_LIMIT] = "nvmlDeviceGetPowerManagementLimit",
	[FN_GET_CONSTRAINTS] = "nvmlDeviceGetPowerManagementLimitConstraints",
	[FN_GET_DEFAULT_LIMIT] = "nvmlDeviceGetPowerManagementDefaultLimit",
	[FN_GET_ENFORCED_LIMIT] = "nvmlDeviceGetEnforcedPowerLimit",
	[FN_GET_PERSISTENCE] = "nvmlDeviceGetPersistenceMode",
	[FN_GET_CLOCK] = "nvmlDeviceGetClockInfo",
	[FN_GET_MAX_CLOCK] = "nvmlDeviceGetMaxClockInfo",
	[FN_GET_MEM_CLOCKS] = "nvmlDeviceGetSupportedMemoryClocks",
	[FN_GET_GFX_CLOCKS] = "nvmlDeviceGetSupportedGraphicsClocks",
	[FN_GET_MEMORY] = "nvmlDeviceGetMemoryInfo",
	[FN_GET_MEMORY_V2] = "nvmlDeviceGetMemoryInfo_v2",
	[FN_GET_UTILIZATION] = "nvmlDeviceGetUtilizationRates",
	[FN_GET_TEMPERATURE] = "nvmlDeviceGetTemperature",
	[FN_SET_LIMIT] = "nvmlDeviceSetPowerManagementLimit",
	[FN_SET_PERSISTENCE] = "nvmlDeviceSetPersistenceMode",
	[FN_SET_GPU_CLOCKS] = "nvmlDeviceSetGpuLockedClocks",
	[FN_RESET_GPU_CLOCKS] = "nvmlDeviceResetGpuLockedClocks",
	[FN_SET_MEM_CLOCKS] = "nvmlDeviceSetMemoryLockedClocks",
	[FN_RESET_MEM_CLOCKS] = "nvmlDeviceResetMemoryLockedClocks",
};

/* What each call needs of the part (SIM_LACKS_*): locked clocks need
 * Volta, memory locked clocks Ampere (NVML's docs). */
static const unsigned sim_fn_needs[FN_COUNT] = {
	[FN_GET_ENERGY] = SIM_LACKS_ENERGY,
	[FN_SET_GPU_CLOCKS] = SIM_LACKS_GPU_LOCK,
	[FN_RESET_GPU_CLOCKS] = SIM_LACKS_GPU_LOCK,
	[FN_SET_MEM_CLOCKS] = SIM_LACKS_MEM_LOCK,
	[FN_RESET_MEM_CLOCKS] = SIM_LACKS_MEM_LOCK,
};

#ifdef NVML_SIM_LEGACY
#define SIM_DRIVER_VERSION "450.80.02"
#define SIM_NVML_VERSION "11.450.80.02"
#else
#define SIM_DRIVER_VERSION "570.124.06"
#define SIM_NVML_VERSION "12.570.124.06"
#endif

/* Return codes: the name used in rules and logs, and the driver's text. */
static const struct sim_code sim_codes[] = {
	{ NVML_SUCCESS, "SUCCESS", "Success" },
	{ NVML_ERROR_UNINITIALIZED, "UNINITIALIZED", "Uninitialized" },
	{ NVML_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid Argument" },
	{ NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", "Not Supported" },
	{ NVML_ERROR_NO_PERMISSION, "NO_PERMISSION",
	    "Insufficient Permissions" },
	{ NVML_ERROR_ALREADY_INITIALIZED, "ALREADY_INITIALIZED",
	    "Already Initialized" },
	{ NVML_ERROR_NOT_FOUND, "NOT_FOUND", "Not Found" },
	{ NVML_ERROR_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE",
	    "Insufficient Size" },
	{ NVML_ERROR_INSUFFICIENT_POWER, "INSUFFICIENT_POWER",
	    "Insufficient External Power" },
	{ NVML_ERROR_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED",
	    "Driver Not Loaded" },
	{ NVML_ERROR_TIMEOUT, "TIMEOUT", "Timeout" },
	{ NVML_ERROR_IRQ_ISSUE, "IRQ_ISSUE", "Interrupt Request Issue" },
	{ NVML_ERROR_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND",
	    "NVML Shared Library Not Found" },
	{ NVML_ERROR_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND",
	    "Function Not Found" },
	{ NVML_ERROR_CORRUPTED_INFOROM, "CORRUPTED_INFOROM",
	    "Corrupted infoROM" },
	{ NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST", "GPU is lost" },
	{ NVML_ERROR_RESET_REQUIRED, "RESET_REQUIRED", "GPU requires restart" },
	{ NVML_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM",
	    "The operating system has blocked the request." },
	{ NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH",
	    "RM has detected an NVML/RM version mismatch." },
	{ NVML_ERROR_IN_USE, "IN_USE", "In use by another client" },
	{ NVML_ERROR_MEMORY, "MEMORY", "Insufficient Memory" },
	{ NVML_ERROR_NO_DATA, "NO_DATA", "No data" },
	{ NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "VGPU_ECC_NOT_SUPPORTED",
	    "The requested vgpu operation is not available on target device, "
	    "because ECC is enabled" },
	{ NVML_ERROR_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES",
	    "Insufficient Resources" },
	{ NVML_ERROR_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED",
	    "Frequency not supported" },
	{ NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH",
	    "Argument version mismatch" },
	{ NVML_ERROR_DEPRECATED, "DEPRECATED", "Deprecated" },
	{ NVML_ERROR_NOT_READY, "NOT_READY", "Not ready" },
	{ NVML_ERROR_GPU_NOT_FOUND, "GPU_NOT_FOUND", "GPU not found" },
	{ NVML_ERROR_INVALID_STATE, "INVALID_STATE", "Invalid state" },
	{ NVML_ERROR_UNKNOWN, "UNKNOWN", "Unknown Error" },
};

/* NVML's fault rules (faults.h). */
static const struct sim_dialect sim_dialect = {
	.tag = "nvml-sim",
	.fns = sim_fn_names,
	.nfns = FN_COUNT,
	.codes = sim_codes,
	.ncodes = sizeof(sim_codes) / sizeof(sim_codes[0]),
	.prefix = "NVML_ERROR_",
	.success = "NVML_SUCCESS",
	.code_max = 999,
	.gpu_max = SIM_MAX_GPUS - 1,
	.other = NULL,
	.strict = true,
	.extra_words = false,
	.control_live = false,
};

static struct sim_faults sim_faults = SIM_FAULTS_INIT(&sim_dialect);

static struct {
	pthread_mutex_t lock;		/* guards refs */
	unsigned refs;			/* nvmlInit_v2 minus nvmlShutdown */
} sim = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ------------------------------------------------------------------------
 * Calls: initialized or not, then fault injection, delay, log (faults.c).
 */

/*
 * Starts a call: checks that NVML is initialized, then applies the rules
 * and returns the injected code (NVML_SUCCESS when none), after sleeping
 * any injected delay.
 */
static nvmlReturn_t
sim_begin(struct sim_call *c, enum sim_fn fn, int gpu)
{
	unsigned refs;

	sim_call_start(c, fn, gpu);
	pthread_mutex_lock(&sim.lock);
	refs = sim.refs;
	pthread_mutex_unlock(&sim.lock);
	if (refs == 0)
		return NVML_ERROR_UNINITIALIZED;
	return (nvmlReturn_t)sim_faults_begin(&sim_faults, c);
}

/* Ends a call: appends its log line, returns rc. */
static nvmlReturn_t
sim_end(const struct sim_call *c, nvmlReturn_t rc)
{
	return (nvmlReturn_t)sim_faults_end(&sim_faults, c, (unsigned)rc);
}

/*
 * Starts a call on a device: an unknown handle is INVALID_ARGUMENT, as is
 * a handle past the current count (after a reconfiguration); an operation
 * the GPU's part lacks is NOT_SUPPORTED unless a rule decided.
 */
static nvmlReturn_t
sim_begin_dev(struct sim_call *c, enum sim_fn fn, nvmlDevice_t device)
{
	int gpu = sim_state_index(device);
	nvmlReturn_t rc = sim_begin(c, fn, gpu);

	if (rc == NVML_SUCCESS && (gpu < 0 ||
	    (unsigned)gpu >= sim_state_count()))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && !c->ruled &&
	    (device->prof->lacks & sim_fn_needs[fn]))
		rc = NVML_ERROR_NOT_SUPPORTED;
	return rc;
}

/* What a change of settings answered (nvml_state.h), as NVML's code: the
 * state file's failure is UNKNOWN. */
static nvmlReturn_t
sim_state_rc(int rc)
{
	return rc == 0 ? NVML_SUCCESS : rc == SIM_STATE_EINVAL ?
	    NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNKNOWN;
}

/* ------------------------------------------------------------------------
 * The NVML API.
 */


/* Every init: the first (after a full shutdown) reads the environment. */
static nvmlReturn_t
sim_init(enum sim_fn fn, const char *args)
{
	struct sim_call c;
	nvmlReturn_t rc;

	pthread_mutex_lock(&sim.lock);
	if (sim.refs == 0 && (sim_state_configure(SIM_DRIVER_VERSION) != 0 ||
	    sim_faults_configure(&sim_faults) != 0)) {
		sim_faults_close_log(&sim_faults);
		sim_state_release();
		pthread_mutex_unlock(&sim.lock);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	sim.refs++;
	pthread_mutex_unlock(&sim.lock);

	rc = sim_begin(&c, fn, -1);
	if (args != NULL)
		sim_call_args(&c, "%s", args);
	sim_end(&c, rc);
	if (rc != NVML_SUCCESS) {
		/* An injected failure: undo the reference. */
		pthread_mutex_lock(&sim.lock);
		if (--sim.refs == 0) {
			sim_faults_close_log(&sim_faults);
			sim_state_release();
		}
		pthread_mutex_unlock(&sim.lock);
	}
	return rc;
}

nvmlReturn_t
nvmlInit(void)
{
	return sim_init(FN_INIT_V1, NULL);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlInit_v2(void)
{
	return sim_init(FN_INIT, NULL);
}

/* NO_GPUS and NO_ATTACH change nothing here: there is always a "driver". */
nvmlReturn_t
nvmlInitWithFlags(unsigned int flags)
{
	char args[16];

	snprintf(args, sizeof(args), "%u", flags);
	return sim_init(FN_INIT_FLAGS, args);
}
#endif

nvmlReturn_t
nvmlShutdown(void)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin(&c, FN_SHUTDOWN, -1);

	sim_end(&c, rc);
	if (rc != NVML_SUCCESS)
		return rc;
	pthread_mutex_lock(&sim.lock);
	if (sim.refs > 0 && --sim.refs == 0) {
		sim_faults_close_log(&sim_faults);
		sim_state_release();
	}
	pthread_mutex_unlock(&sim.lock);
	return NVML_SUCCESS;
}

const char *
nvmlErrorString(nvmlReturn_t result)
{
	const struct sim_code *code = sim_code_find(&sim_dialect,
	    (unsigned)result);

	return code != NULL ? code->text : "Unknown Error";
}

/* Copies a string reply, or says how short the caller's buffer is. */
static nvmlReturn_t
sim_string(nvmlReturn_t rc, char *buf, unsigned int length, const char *s)
{
	if (rc == NVML_SUCCESS && buf == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && strlen(s) >= length)
		rc = NVML_ERROR_INSUFFICIENT_SIZE;
	if (rc == NVML_SUCCESS)
		memcpy(buf, s, strlen(s) + 1);
	return rc;
}

nvmlReturn_t
nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin(&c, FN_DRIVER_VERSION, -1);

	if (rc == NVML_SUCCESS) {
		char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];

		sim_state_driver_version(v, sizeof(v));
		rc = sim_string(rc, version, length, v);
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin(&c, FN_NVML_VERSION, -1);

	return sim_end(&c, sim_string(rc, version, length, SIM_NVML_VERSION));
}

static nvmlReturn_t
sim_get_count(enum sim_fn fn, unsigned int *deviceCount)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin(&c, fn, -1);

	if (rc == NVML_SUCCESS && deviceCount == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*deviceCount = sim_state_count();
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetCount(unsigned int *deviceCount)
{
	return sim_get_count(FN_GET_COUNT_V1, deviceCount);
}

static nvmlReturn_t
sim_get_handle(enum sim_fn fn, unsigned int index, nvmlDevice_t *device)
{
	struct sim_call c;
	int gpu = index < SIM_MAX_GPUS ? (int)index : -1;
	nvmlReturn_t rc = sim_begin(&c, fn, gpu);

	sim_call_args(&c, "%u", index);
	if (rc == NVML_SUCCESS && (index >= sim_state_count() ||
	    device == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*device = sim_state_gpu(index);
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return sim_get_handle(FN_GET_HANDLE_V1, index, device);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	return sim_get_count(FN_GET_COUNT, deviceCount);
}

nvmlReturn_t
nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	return sim_get_handle(FN_GET_HANDLE, index, device);
}
#endif

nvmlReturn_t
nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_NAME, device);

	return sim_end(&c, sim_string(rc, name, length,
	    rc == NVML_SUCCESS ? device->name : ""));
}

nvmlReturn_t
nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_UUID, device);

	return sim_end(&c, sim_string(rc, uuid, length,
	    rc == NVML_SUCCESS ? device->uuid : ""));
}

/*
 * The PCI facts, in the layout each name fills: the oldest writes only
 * busId[16], the five ids and four reserved words (52 bytes, so a caller
 * with the old struct is not overrun); the newer ones the whole current
 * struct. The driver's own strings: upper-case, 4- and 8-digit domains.
 */
static nvmlReturn_t
sim_get_pci(enum sim_fn fn, nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);
	size_t old = offsetof(nvmlPciInfo_t, busId) + 4 * sizeof(unsigned);

	if (rc == NVML_SUCCESS && pci == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return sim_end(&c, rc);
	memset(pci, 0, fn == FN_GET_PCI_V1 ? old : sizeof(*pci));
	pci->domain = device->domain;
	pci->bus = device->bus;
	pci->device = device->device;
	pci->pciDeviceId = device->prof->pci_id;
	pci->pciSubSystemId = 0x154710de;
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0",
	    device->domain & 0xffffu, device->bus, device->device);
	if (fn != FN_GET_PCI_V1)
		snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0",
		    device->domain, device->bus, device->device);
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return sim_get_pci(FN_GET_PCI_V1, device, pci);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return sim_get_pci(FN_GET_PCI_V2, device, pci);
}

nvmlReturn_t
nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return sim_get_pci(FN_GET_PCI, device, pci);
}

nvmlReturn_t
nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_ARCH, device);

	if (rc == NVML_SUCCESS && arch == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*arch = device->prof->arch;
	return sim_end(&c, rc);
}
#endif

#ifndef NVML_SIM_LEGACY
static long long
sim_realtime_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

nvmlReturn_t
nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
    nvmlFieldValue_t *values)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_FIELDS, device);
	nvmlReturn_t per_field = NVML_SUCCESS;
	uint64_t now = sim_now_ns();
	long long ts = sim_realtime_us();
	struct sim_model_gpu g;

	if (valuesCount >= 1 && values != NULL)
		sim_call_args(&c, "%u%s", values[0].fieldId,
		    valuesCount > 1 ? " ..." : "");
	if (rc == NVML_ERROR_NOT_SUPPORTED) {
		/* How the driver reports fields it does not support. */
		per_field = rc;
		rc = NVML_SUCCESS;
	}
	if (rc == NVML_SUCCESS && (values == NULL || valuesCount < 0 ||
	    valuesCount > SIM_MAX_FIELDS))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return sim_end(&c, rc);
	sim_state_view(device, &g);
	for (int i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *v = &values[i];

		v->timestamp = ts;
		v->latencyUsec = 0;
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
		v->nvmlReturn = per_field;
		if (per_field != NVML_SUCCESS)
			continue;
		if (v->fieldId == NVML_FI_DEV_POWER_INSTANT &&
		    !(g.prof->lacks & SIM_LACKS_INSTANT_POWER))
			v->value.uiVal = sim_model_power(&g, now);
		else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE)
			v->value.uiVal = sim_model_power_avg(&g, now);
		else
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
	}
	return sim_end(&c, rc);
}
#endif

nvmlReturn_t
nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_POWER_USAGE, device);

	if (rc == NVML_SUCCESS && power == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		struct sim_model_gpu g;

		sim_state_view(device, &g);
		*power = sim_model_power_avg(&g, sim_now_ns());
	}
	return sim_end(&c, rc);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
    unsigned long long *energy)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_ENERGY, device);

	if (rc == NVML_SUCCESS && energy == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*energy = (unsigned long long)sim_state_energy(device);
	return sim_end(&c, rc);
}

#endif

/* The power limit, logged as `fn`: the limit and the enforced limit agree. */
static nvmlReturn_t
sim_read_limit(enum sim_fn fn, nvmlDevice_t device, unsigned int *limit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);

	if (rc == NVML_SUCCESS && limit == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		struct sim_model_gpu g;

		sim_state_view(device, &g);
		*limit = g.set.limit_mw;
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
	return sim_read_limit(FN_GET_LIMIT, device, limit);
}

nvmlReturn_t
nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
    unsigned int *minLimit, unsigned int *maxLimit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_CONSTRAINTS, device);

	if (rc == NVML_SUCCESS && (minLimit == NULL || maxLimit == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		*minLimit = device->prof->min_limit_mw;
		*maxLimit = device->prof->max_limit_mw;
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_PERSISTENCE, device);

	if (rc == NVML_SUCCESS && mode == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		struct sim_model_gpu g;

		sim_state_view(device, &g);
		*mode = g.set.persistence ? NVML_FEATURE_ENABLED :
		    NVML_FEATURE_DISABLED;
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_SET_LIMIT, device);

	sim_call_args(&c, "%u", limit);
	if (rc == NVML_SUCCESS)
		rc = sim_state_rc(sim_state_set_limit(device, limit));
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t mode)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_SET_PERSISTENCE, device);

	sim_call_args(&c, "%d", (int)mode);
	if (rc == NVML_SUCCESS && mode != NVML_FEATURE_ENABLED &&
	    mode != NVML_FEATURE_DISABLED)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		rc = sim_state_rc(sim_state_set_persistence(device,
		    mode == NVML_FEATURE_ENABLED));
	return sim_end(&c, rc);
}

/* Locks a clock pair; values outside the part's range are clamped when
 * they take effect, as the driver does, but min > max is rejected. */
static nvmlReturn_t
sim_set_clocks(enum sim_fn fn, nvmlDevice_t device, unsigned min,
    unsigned max, enum sim_domain d)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);

	sim_call_args(&c, "%u %u", min, max);
	if (rc == NVML_SUCCESS)
		rc = sim_state_rc(sim_state_lock_clocks(device, d, min, max));
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
    unsigned int maxGpuClockMHz)
{
	return sim_set_clocks(FN_SET_GPU_CLOCKS, device, minGpuClockMHz,
	    maxGpuClockMHz, SIM_DOMAIN_GPU);
}

#if !defined(NVML_SIM_OMIT_SETMEMCLOCKS) && !defined(NVML_SIM_LEGACY)
/* Left out of test builds: a driver without memory locked clocks. */
nvmlReturn_t
nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device,
    unsigned int minMemClockMHz, unsigned int maxMemClockMHz)
{
	return sim_set_clocks(FN_SET_MEM_CLOCKS, device, minMemClockMHz,
	    maxMemClockMHz, SIM_DOMAIN_MEM);
}
#endif

static nvmlReturn_t
sim_reset_clocks(enum sim_fn fn, nvmlDevice_t device, enum sim_domain d)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);

	if (rc == NVML_SUCCESS)
		rc = sim_state_rc(sim_state_unlock_clocks(device, d));
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device)
{
	return sim_reset_clocks(FN_RESET_GPU_CLOCKS, device, SIM_DOMAIN_GPU);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device)
{
	return sim_reset_clocks(FN_RESET_MEM_CLOCKS, device, SIM_DOMAIN_MEM);
}
#endif

nvmlReturn_t
nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
    unsigned int *defaultLimit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_DEFAULT_LIMIT, device);

	if (rc == NVML_SUCCESS && defaultLimit == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*defaultLimit = device->prof->tdp_mw;
	return sim_end(&c, rc);
}

/* The limit in force: with one limit source, the power limit itself. */
nvmlReturn_t
nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
	return sim_read_limit(FN_GET_ENFORCED_LIMIT, device, limit);
}

/* Current clocks, which follow the load (model.c). */
nvmlReturn_t
nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
    unsigned int *clock)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_CLOCK, device);
	struct sim_model_gpu g;
	struct sim_clocks now;

	sim_call_args(&c, "%d", (int)type);
	if (rc == NVML_SUCCESS && (clock == NULL || (unsigned)type >
	    NVML_CLOCK_VIDEO))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return sim_end(&c, rc);
	sim_state_view(device, &g);
	sim_model_clocks(&g, sim_now_ns(), &now);
	*clock = type == NVML_CLOCK_MEM ? now.mem : type == NVML_CLOCK_VIDEO ?
	    now.video : now.gpu;
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
    unsigned int *clock)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_MAX_CLOCK, device);

	sim_call_args(&c, "%d", (int)type);
	if (rc == NVML_SUCCESS && (clock == NULL || (unsigned)type >
	    NVML_CLOCK_VIDEO))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*clock = type == NVML_CLOCK_MEM ?
		    sim_model_mem_clk_max(device->prof) :
		    type == NVML_CLOCK_VIDEO ?
		    device->prof->video_clk : device->prof->gpu_clk_max;
	return sim_end(&c, rc);
}

/*
 * A clock table, as NVML hands them out: descending; a *count too small
 * (NULL clocks with *count 0 is the usual first call) is answered with
 * INSUFFICIENT_SIZE and the count needed.
 */
static nvmlReturn_t
sim_clock_table(nvmlReturn_t rc, const unsigned *table, unsigned n,
    unsigned int *count, unsigned int *clocksMHz)
{
	if (rc == NVML_SUCCESS && count == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return rc;
	if (*count < n || clocksMHz == NULL) {
		*count = n;
		return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
	}
	memcpy(clocksMHz, table, n * sizeof(table[0]));
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int *count,
    unsigned int *clocksMHz)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_MEM_CLOCKS, device);
	unsigned n = rc == NVML_SUCCESS ?
	    sim_model_mem_clk_count(device->prof) : 0;

	return sim_end(&c, sim_clock_table(rc, rc == NVML_SUCCESS ?
	    device->prof->mem_clks : NULL, n, count, clocksMHz));
}

/* The graphics clocks that go with a supported memory clock. */
nvmlReturn_t
nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
    unsigned int memoryClockMHz, unsigned int *count,
    unsigned int *clocksMHz)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_GFX_CLOCKS, device);
	unsigned table[SIM_MAX_CLOCKS], n = 0;

	sim_call_args(&c, "%u", memoryClockMHz);
	if (rc == NVML_SUCCESS) {
		const struct sim_profile *p = device->prof;
		unsigned k = 0;

		while (k < sizeof(p->mem_clks) / sizeof(p->mem_clks[0]) &&
		    p->mem_clks[k] != 0 && p->mem_clks[k] != memoryClockMHz)
			k++;
		if (k == sizeof(p->mem_clks) / sizeof(p->mem_clks[0]) ||
		    p->mem_clks[k] == 0)
			rc = NVML_ERROR_NOT_FOUND;
		/* f > max: the subtraction wrapped below zero */
		for (unsigned f = p->gpu_clk_max; rc == NVML_SUCCESS &&
		    f >= p->gpu_clk_min && f <= p->gpu_clk_max &&
		    n < SIM_MAX_CLOCKS; f -= p->gpu_clk_step)
			table[n++] = f;
	}
	return sim_end(&c, sim_clock_table(rc, table, n, count, clocksMHz));
}

/* Memory use that follows the load (model.c). */
static void
sim_memory(const struct nvmlDevice_st *g, unsigned long long *total,
    unsigned long long *reserved, unsigned long long *used)
{
	sim_model_memory(g->prof, g->index, sim_now_ns(), total, reserved,
	    used);
}

nvmlReturn_t
nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_MEMORY, device);
	unsigned long long total, reserved, used;

	if (rc == NVML_SUCCESS && memory == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		/* v1 counts the driver's reserve as used. */
		sim_memory(device, &total, &reserved, &used);
		memory->total = total;
		memory->used = used + reserved;
		memory->free = total - memory->used;
	}
	return sim_end(&c, rc);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_MEMORY_V2, device);
	unsigned long long total, reserved, used;

	if (rc == NVML_SUCCESS && memory == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && memory->version != nvmlMemory_v2)
		rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (rc == NVML_SUCCESS) {
		sim_memory(device, &total, &reserved, &used);
		memory->total = total;
		memory->reserved = reserved;
		memory->used = used;
		memory->free = total - reserved - used;
	}
	return sim_end(&c, rc);
}
#endif

nvmlReturn_t
nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
    nvmlUtilization_t *utilization)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_UTILIZATION, device);

	if (rc == NVML_SUCCESS && utilization == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		sim_model_utilization(device->index, sim_now_ns(),
		    &utilization->gpu, &utilization->memory);
	return sim_end(&c, rc);
}

/* Degrees C: 30 at idle, warming with the power drawn above idle. */
nvmlReturn_t
nvmlDeviceGetTemperature(nvmlDevice_t device,
    nvmlTemperatureSensors_t sensorType, unsigned int *temp)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_TEMPERATURE, device);

	sim_call_args(&c, "%d", (int)sensorType);
	if (rc == NVML_SUCCESS && (temp == NULL ||
	    sensorType != NVML_TEMPERATURE_GPU))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		struct sim_model_gpu g;

		sim_state_view(device, &g);
		*temp = sim_model_temperature(&g, sim_now_ns());
	}
	return sim_end(&c, rc);
}
