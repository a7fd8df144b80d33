/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.c - the NVML GPU backend: `struct gpu_backend_ops` over NVML.
 *
 * The library is loaded with dlopen against the project's own declarations
 * (nvml_api.h), so the daemon builds without the CUDA toolkit and runs on
 * the driver's libnvidia-ml.so.1 or on the simulator (sim/nvml_sim.c).
 *
 * Drivers from R470 to today differ in which entry points they export, so
 * symbols are resolved the way nvtop does it: what exists is used, a
 * versioned name falls back to the older one it replaced, and only what is
 * needed to enumerate the GPUs and read their power is required. Anything
 * else missing disables the operations that need it (they answer "not
 * supported by this NVIDIA driver (NVML lacks X)") and is logged once at
 * open, so a driver without, say, memory locked clocks still serves reads.
 *
 * Per GPU, open probes what the GPU supports (limits, clock tables, which
 * writes its architecture has) without changing anything. The driver still
 * decides when an operation runs: its "not supported", "no permission" and
 * "GPU is lost" become a 400, a 403 and a 503 whose messages say what they
 * mean. A lost GPU is flagged (gpu_backend_ops.lost) but still asked on
 * every call, so one the driver gets back is used again.
 *
 * State is fixed after open except each GPU's power source, an atomic that
 * only ever moves from the field-values API to the average-power call when
 * the driver says the instantaneous field is unsupported, and its lost
 * flag. NVML itself is thread-safe, so calls on different GPUs, and a power
 * read beside any other call on the same GPU, need no lock here.
 *
 * Driver strings (error texts, names, UUIDs) are untrusted: they are
 * bounded and reduced to printable ASCII before they reach a message or
 * the API.
 */
#include "nvml.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dynlib.h"
#include "common/log.h"
#include "nvml_api.h"

#define NVML_MAX_GPUS 256	/* more than any node has; bounds the driver */
#define NVML_TEXT_MAX 128	/* bound on a driver error string */
#define NVML_MAX_CLOCKS 512	/* bound on a supported-clocks table */

/* The functions we use, typed from nvml_api.h's declarations. */
struct nvml_fns {
	/* required: enumerate the GPUs and read their power */
	__typeof__(&nvmlInit_v2) init;
	__typeof__(&nvmlShutdown) shutdown;
	__typeof__(&nvmlDeviceGetCount_v2) get_count;
	__typeof__(&nvmlDeviceGetHandleByIndex_v2) get_handle;
	__typeof__(&nvmlDeviceGetPowerUsage) get_power_usage;
	/* optional: identity and probes */
	__typeof__(&nvmlErrorString) error_string;
	__typeof__(&nvmlSystemGetDriverVersion) get_driver_version;
	__typeof__(&nvmlDeviceGetName) get_name;
	__typeof__(&nvmlDeviceGetPciInfo_v3) get_pci;
	__typeof__(&nvmlDeviceGetUUID) get_uuid;
	__typeof__(&nvmlDeviceGetArchitecture) get_arch;
	__typeof__(&nvmlDeviceGetPowerManagementDefaultLimit) get_default_limit;
	__typeof__(&nvmlDeviceGetSupportedMemoryClocks) get_mem_clocks;
	__typeof__(&nvmlDeviceGetSupportedGraphicsClocks) get_gfx_clocks;
	__typeof__(&nvmlDeviceGetMaxClockInfo) get_max_clock;
	/* optional: reads of the API */
	__typeof__(&nvmlDeviceGetFieldValues) get_fields;
	__typeof__(&nvmlDeviceGetTotalEnergyConsumption) get_energy;
	__typeof__(&nvmlDeviceGetPowerManagementLimit) get_limit;
	__typeof__(&nvmlDeviceGetPowerManagementLimitConstraints)
	    get_constraints;
	__typeof__(&nvmlDeviceGetPersistenceMode) get_persistence;
	/* optional: writes of the API */
	__typeof__(&nvmlDeviceSetPowerManagementLimit) set_limit;
	__typeof__(&nvmlDeviceSetPersistenceMode) set_persistence;
	__typeof__(&nvmlDeviceSetGpuLockedClocks) set_gpu_clocks;
	__typeof__(&nvmlDeviceResetGpuLockedClocks) reset_gpu_clocks;
	__typeof__(&nvmlDeviceSetMemoryLockedClocks) set_mem_clocks;
	__typeof__(&nvmlDeviceResetMemoryLockedClocks) reset_mem_clocks;
};

#define NVML_NAMES_MAX 3

/*
 * One entry point: the names to try, newest first (each later one is an
 * older symbol with the same signature), whether open fails without it,
 * and what is lost without it (for the startup log).
 */
struct nvml_sym {
	const char *names[NVML_NAMES_MAX];
	size_t offset;
	bool required;
	const char *without;
};

#define NVML_REQ(field, ...) \
	{ { __VA_ARGS__ }, offsetof(struct nvml_fns, field), true, NULL }
#define NVML_OPT(field, without, ...) \
	{ { __VA_ARGS__ }, offsetof(struct nvml_fns, field), false, without }

static const struct nvml_sym nvml_syms[] = {
	NVML_REQ(init, "nvmlInit_v2", "nvmlInit"),
	NVML_REQ(shutdown, "nvmlShutdown"),
	NVML_REQ(get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
	NVML_REQ(get_handle, "nvmlDeviceGetHandleByIndex_v2",
	    "nvmlDeviceGetHandleByIndex"),
	NVML_REQ(get_power_usage, "nvmlDeviceGetPowerUsage"),
	NVML_OPT(error_string, "driver error texts", "nvmlErrorString"),
	NVML_OPT(get_driver_version, "driver version in the log",
	    "nvmlSystemGetDriverVersion"),
	NVML_OPT(get_name, "GPU names", "nvmlDeviceGetName"),
	NVML_OPT(get_pci, "PCI addresses", "nvmlDeviceGetPciInfo_v3",
	    "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"),
	NVML_OPT(get_uuid, "GPU UUIDs", "nvmlDeviceGetUUID"),
	NVML_OPT(get_arch, "architecture-based capability probes",
	    "nvmlDeviceGetArchitecture"),
	NVML_OPT(get_default_limit, "default power limit",
	    "nvmlDeviceGetPowerManagementDefaultLimit"),
	NVML_OPT(get_mem_clocks, "memory clock range",
	    "nvmlDeviceGetSupportedMemoryClocks"),
	NVML_OPT(get_gfx_clocks, "graphics clock range",
	    "nvmlDeviceGetSupportedGraphicsClocks"),
	NVML_OPT(get_max_clock, "maximum clocks", "nvmlDeviceGetMaxClockInfo"),
	NVML_OPT(get_fields, "instantaneous power (1 s average used instead)",
	    "nvmlDeviceGetFieldValues"),
	NVML_OPT(get_energy, "get_cumulative_energy",
	    "nvmlDeviceGetTotalEnergyConsumption"),
	NVML_OPT(get_limit, "get_power_limit",
	    "nvmlDeviceGetPowerManagementLimit"),
	NVML_OPT(get_constraints, "get_power_limit_constraints",
	    "nvmlDeviceGetPowerManagementLimitConstraints"),
	NVML_OPT(get_persistence, "get_persistence_mode",
	    "nvmlDeviceGetPersistenceMode"),
	NVML_OPT(set_limit, "set_power_limit",
	    "nvmlDeviceSetPowerManagementLimit"),
	NVML_OPT(set_persistence, "set_persistence_mode",
	    "nvmlDeviceSetPersistenceMode"),
	NVML_OPT(set_gpu_clocks, "set_gpu_locked_clocks",
	    "nvmlDeviceSetGpuLockedClocks"),
	NVML_OPT(reset_gpu_clocks, "reset_gpu_locked_clocks",
	    "nvmlDeviceResetGpuLockedClocks"),
	NVML_OPT(set_mem_clocks, "set_mem_locked_clocks",
	    "nvmlDeviceSetMemoryLockedClocks"),
	NVML_OPT(reset_mem_clocks, "reset_mem_locked_clocks",
	    "nvmlDeviceResetMemoryLockedClocks"),
};

#define NVML_NSYMS (sizeof(nvml_syms) / sizeof(nvml_syms[0]))

/* dynlib_sym hands back a void *; POSIX (and Win64) let it hold a function. */
_Static_assert(sizeof(void *) == sizeof(&nvmlInit_v2),
    "function pointers must fit in void *");

/* Where a GPU's power reading comes from. */
enum nvml_power_source {
	NVML_POWER_FIELD,	/* NVML_FI_DEV_POWER_INSTANT */
	NVML_POWER_USAGE,	/* nvmlDeviceGetPowerUsage (averaged) */
};

struct nvml_gpu {
	nvmlDevice_t dev;		/* NULL: lost before we got a handle */
	struct gpu_info info;
	atomic_int power_source;	/* enum nvml_power_source */
	atomic_bool lost;
};

struct nvml_ctx {
	struct dynlib *dl;
	struct nvml_fns fn;
	const char *used[NVML_NSYMS];	/* the name resolved, NULL: none */
	unsigned count;
	struct nvml_gpu gpus[];
};

/* ------------------------------------------------------------------------
 * Errors.
 */

/* Copies at most size-1 bytes of `s`, printable ASCII only. */
static void
nvml_clean(char *dst, size_t size, const char *s)
{
	size_t i = 0;

	if (s != NULL)
		for (; i + 1 < size && s[i] != '\0'; i++)
			dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	dst[i] = '\0';
}

/* The driver's text for `rc`, bounded and cleaned. */
static void
nvml_text(const struct nvml_fns *fn, nvmlReturn_t rc, char *buf, size_t size)
{
	buf[0] = '\0';
	if (fn->error_string != NULL)
		nvml_clean(buf, size, fn->error_string(rc));
	if (buf[0] == '\0')
		snprintf(buf, size, "NVML error %d", (int)rc);
}

/*
 * Keeps a GPU's lost flag in step with what the driver just said about it,
 * logging each change once. Returns rc.
 */
static nvmlReturn_t
nvml_seen(struct nvml_gpu *g, unsigned gpu, nvmlReturn_t rc)
{
	if (rc == NVML_ERROR_GPU_IS_LOST) {
		if (!atomic_exchange(&g->lost, true))
			zlog(ZLOG_WARN, "gpu_lost", "gpu=%u", gpu);
	} else if (rc == NVML_SUCCESS && atomic_load_explicit(&g->lost,
	    memory_order_relaxed)) {
		if (atomic_exchange(&g->lost, false))
			zlog(ZLOG_INFO, "gpu_recovered", "gpu=%u", gpu);
	}
	return rc;
}

/*
 * Fails a call on one GPU: names the GPU, the operation and the driver's
 * error, then says what the error means where that helps the operator.
 */
static int
nvml_fail(const struct nvml_ctx *c, struct zerr *err, unsigned gpu,
    const char *what, bool write, nvmlReturn_t rc)
{
	const char *name = gpu < c->count ? c->gpus[gpu].info.name : "";
	char text[NVML_TEXT_MAX];
	char who[300];

	nvml_text(&c->fn, rc, text, sizeof(text));
	switch (rc) {
	case NVML_ERROR_NO_PERMISSION:
		nvml_os_whoami(who, sizeof(who));
		if (write)
			return zerr_set(err, ZERR_FORBIDDEN, "GPU %u: %s failed: "
			    "%s (the NVIDIA driver lets only %s change this "
			    "setting; zeusd runs as %s)", gpu, what, text,
			    nvml_privileged, who);
		return zerr_set(err, ZERR_FORBIDDEN, "GPU %u: %s failed: %s "
		    "(the NVIDIA driver lets only privileged users read this; "
		    "zeusd runs as %s)", gpu, what, text, who);
	case NVML_ERROR_NOT_SUPPORTED:
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: %s "
		    "(not supported by this GPU%s%s)", gpu, what, text,
		    name[0] != '\0' ? ", " : "", name);
	case NVML_ERROR_INVALID_ARGUMENT:
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: %s", gpu,
		    what, text);
	case NVML_ERROR_GPU_IS_LOST:
		return zerr_set(err, ZERR_UNAVAILABLE, "GPU %u: %s failed: %s "
		    "(it has fallen off the bus or is otherwise inaccessible)", gpu, what, text);
	default:
		return zerr_set(err, ZERR_INTERNAL, "GPU %u: %s failed: %s", gpu,
		    what, text);
	}
}

/* Fails an operation the loaded library has no entry point for. */
static int
nvml_fail_lacks(struct zerr *err, unsigned gpu, const char *what,
    const char *sym)
{
	return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: not supported "
	    "by this NVIDIA driver (NVML lacks %s)", gpu, what, sym);
}

static struct nvml_gpu *
nvml_gpu_at(struct gpu_backend *b, unsigned gpu, struct zerr *err)
{
	struct nvml_ctx *c = b->ctx;

	if (gpu >= c->count) {
		zerr_set(err, ZERR_INVALID, "GPU %u does not exist (%u GPUs)",
		    gpu, c->count);
		return NULL;
	}
	return &c->gpus[gpu];
}

/*
 * The GPU for an operation: NULL with err set when it does not exist, or
 * was lost before open could get a handle for it (it never has one).
 */
static struct nvml_gpu *
nvml_gpu_for(struct gpu_backend *b, unsigned gpu, const char *what,
    bool write, struct zerr *err)
{
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);

	if (g != NULL && g->dev == NULL) {
		nvml_fail(b->ctx, err, gpu, what, write,
		    NVML_ERROR_GPU_IS_LOST);
		return NULL;
	}
	return g;
}

/* ------------------------------------------------------------------------
 * What the driver lacks.
 */

static const char *
nvml_read_lacks(struct gpu_backend *b, enum gpu_read_op op)
{
	const struct nvml_fns *fn = &((struct nvml_ctx *)b->ctx)->fn;

	switch (op) {
	case GPU_GET_POWER:
		return NULL;		/* required at open */
	case GPU_GET_CUMULATIVE_ENERGY:
		return fn->get_energy ? NULL :
		    "nvmlDeviceGetTotalEnergyConsumption";
	case GPU_GET_POWER_LIMIT:
		return fn->get_limit ? NULL :
		    "nvmlDeviceGetPowerManagementLimit";
	case GPU_GET_POWER_LIMIT_CONSTRAINTS:
		return fn->get_constraints ? NULL :
		    "nvmlDeviceGetPowerManagementLimitConstraints";
	case GPU_GET_PERSISTENCE_MODE:
		return fn->get_persistence ? NULL :
		    "nvmlDeviceGetPersistenceMode";
	case GPU_READ_OP_COUNT:
		break;
	}
	return NULL;
}

static const char *
nvml_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	const struct nvml_fns *fn = &((struct nvml_ctx *)b->ctx)->fn;

	switch (op) {
	case GPU_SET_POWER_LIMIT:
		return fn->set_limit ? NULL :
		    "nvmlDeviceSetPowerManagementLimit";
	case GPU_SET_PERSISTENCE_MODE:
		return fn->set_persistence ? NULL :
		    "nvmlDeviceSetPersistenceMode";
	case GPU_SET_GPU_LOCKED_CLOCKS:
		return fn->set_gpu_clocks ? NULL :
		    "nvmlDeviceSetGpuLockedClocks";
	case GPU_RESET_GPU_LOCKED_CLOCKS:
		return fn->reset_gpu_clocks ? NULL :
		    "nvmlDeviceResetGpuLockedClocks";
	case GPU_SET_MEM_LOCKED_CLOCKS:
		return fn->set_mem_clocks ? NULL :
		    "nvmlDeviceSetMemoryLockedClocks";
	case GPU_RESET_MEM_LOCKED_CLOCKS:
		return fn->reset_mem_clocks ? NULL :
		    "nvmlDeviceResetMemoryLockedClocks";
	case GPU_RESET_LOCKED_CLOCKS:
		/*
		 * A domain the driver cannot lock cannot be locked: resetting
		 * the other one is the whole job. Only both missing is refused.
		 */
		return fn->reset_gpu_clocks || fn->reset_mem_clocks ? NULL :
		    "nvmlDeviceResetGpuLockedClocks";
	case GPU_WRITE_OP_COUNT:
		break;
	}
	return NULL;
}

static bool
nvml_lost(struct gpu_backend *b, unsigned gpu)
{
	struct nvml_ctx *c = b->ctx;

	return gpu < c->count && atomic_load(&c->gpus[gpu].lost);
}

/* ------------------------------------------------------------------------
 * Reads.
 */

static unsigned
nvml_count(struct gpu_backend *b)
{
	return ((struct nvml_ctx *)b->ctx)->count;
}

static int
nvml_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);

	if (g == NULL)
		return -1;
	*out = g->info;
	return 0;
}

/* A field's value as u32 milliwatts, whatever type the driver chose. */
static bool
nvml_field_u32(const nvmlFieldValue_t *v, uint32_t *out)
{
	unsigned long long u;

	switch (v->valueType) {
	case NVML_VALUE_TYPE_UNSIGNED_INT:
		u = v->value.uiVal;
		break;
	case NVML_VALUE_TYPE_UNSIGNED_LONG:
		u = v->value.ulVal;
		break;
	case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
		u = v->value.ullVal;
		break;
	case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
		if (v->value.sllVal < 0)
			return false;
		u = (unsigned long long)v->value.sllVal;
		break;
	case NVML_VALUE_TYPE_SIGNED_INT:
		if (v->value.siVal < 0)
			return false;
		u = (unsigned long long)v->value.siVal;
		break;
	case NVML_VALUE_TYPE_UNSIGNED_SHORT:
		u = v->value.usVal;
		break;
	case NVML_VALUE_TYPE_DOUBLE:
		/* Written so that NaN fails too. */
		if (!(v->value.dVal >= 0.0 && v->value.dVal <= 4294967295.0))
			return false;
		u = (unsigned long long)v->value.dVal;
		break;
	default:
		return false;
	}
	if (u > UINT32_MAX)
		return false;
	*out = (uint32_t)u;
	return true;
}

/*
 * Reads NVML_FI_DEV_POWER_INSTANT. Returns 0 with *mw set, -1 with err set,
 * or 1 when the driver does not support the field (on the call or, as
 * drivers do, in the field's own return code).
 */
static int
nvml_power_field(const struct nvml_ctx *c, struct nvml_gpu *g, unsigned gpu,
    uint32_t *mw, struct zerr *err)
{
	nvmlFieldValue_t v;
	nvmlReturn_t rc;

	memset(&v, 0, sizeof(v));
	v.fieldId = NVML_FI_DEV_POWER_INSTANT;
	rc = nvml_seen(g, gpu, c->fn.get_fields(g->dev, 1, &v));
	if (rc == NVML_SUCCESS)
		rc = v.nvmlReturn;
	if (rc == NVML_ERROR_NOT_SUPPORTED)
		return 1;
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power", false, rc);
	if (!nvml_field_u32(&v, mw))
		return zerr_set(err, ZERR_INTERNAL, "GPU %u: get_power failed: "
		    "implausible value of type %d", gpu, (int)v.valueType);
	return 0;
}

static int
nvml_get_power_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, "get_power", false, err);
	unsigned int v;
	nvmlReturn_t rc;
	int r;

	if (g == NULL)
		return -1;
	if (atomic_load_explicit(&g->power_source, memory_order_relaxed) ==
	    NVML_POWER_FIELD) {
		if ((r = nvml_power_field(c, g, gpu, mw, err)) <= 0)
			return r;
		/* Remembered so later reads go straight to the fallback. */
		atomic_store_explicit(&g->power_source, NVML_POWER_USAGE,
		    memory_order_relaxed);
		zlog(ZLOG_INFO, "nvml_power_fallback", "gpu=%u reason=%s", gpu,
		    "instant_power_field_not_supported");
	}
	rc = nvml_seen(g, gpu, c->fn.get_power_usage(g->dev, &v));
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power", false, rc);
	*mw = v;
	return 0;
}

static int
nvml_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	static const char what[] = "get_cumulative_energy";
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, what, false, err);
	unsigned long long v;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if (c->fn.get_energy == NULL)
		return nvml_fail_lacks(err, gpu, what,
		    "nvmlDeviceGetTotalEnergyConsumption");
	/* Decided at open: answer as the driver did then. */
	if (!g->info.energy_available)
		return nvml_fail(c, err, gpu, what, false,
		    NVML_ERROR_NOT_SUPPORTED);
	rc = nvml_seen(g, gpu, c->fn.get_energy(g->dev, &v));
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, what, false, rc);
	*mj = v;
	return 0;
}

static int
nvml_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	static const char what[] = "get_power_limit";
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, what, false, err);
	unsigned int v;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if (c->fn.get_limit == NULL)
		return nvml_fail_lacks(err, gpu, what,
		    "nvmlDeviceGetPowerManagementLimit");
	rc = nvml_seen(g, gpu, c->fn.get_limit(g->dev, &v));
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, what, false, rc);
	*mw = v;
	return 0;
}

static int
nvml_get_power_limit_constraints(struct gpu_backend *b, unsigned gpu,
    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err)
{
	static const char what[] = "get_power_limit_constraints";
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, what, false, err);
	unsigned int lo, hi;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if (c->fn.get_constraints == NULL)
		return nvml_fail_lacks(err, gpu, what,
		    "nvmlDeviceGetPowerManagementLimitConstraints");
	rc = nvml_seen(g, gpu, c->fn.get_constraints(g->dev, &lo, &hi));
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, what, false, rc);
	*min_mw = lo;
	*max_mw = hi;
	return 0;
}

static int
nvml_get_persistence_mode(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	static const char what[] = "get_persistence_mode";
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, what, false, err);
	nvmlEnableState_t mode;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if (nvml_persistence_fixed) {
		*enabled = true;
		return 0;
	}
	if (c->fn.get_persistence == NULL)
		return nvml_fail_lacks(err, gpu, what,
		    "nvmlDeviceGetPersistenceMode");
	rc = nvml_seen(g, gpu, c->fn.get_persistence(g->dev, &mode));
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, what, false, rc);
	*enabled = mode == NVML_FEATURE_ENABLED;
	return 0;
}

/* ------------------------------------------------------------------------
 * Writes.
 */

/*
 * Both clock domains: the memory reset runs even if the GPU reset failed,
 * and a domain the driver has no reset for is skipped (write_lacks). A
 * domain the GPU answers Not Supported for is skipped too when the other
 * one was reset: it cannot be locked, so there is nothing to reset (an
 * H200 on driver 580 refuses memory locked clocks this way,
 * docs/hardware.md). Both unsupported is still the GPU's error.
 */
static int
nvml_reset_locked_clocks(const struct nvml_ctx *c, struct nvml_gpu *g,
    unsigned gpu, struct zerr *err)
{
	nvmlReturn_t rc_gpu = NVML_SUCCESS, rc_mem = NVML_SUCCESS;

	if (c->fn.reset_gpu_clocks != NULL)
		rc_gpu = nvml_seen(g, gpu, c->fn.reset_gpu_clocks(g->dev));
	if (c->fn.reset_mem_clocks != NULL)
		rc_mem = nvml_seen(g, gpu, c->fn.reset_mem_clocks(g->dev));
	if (c->fn.reset_gpu_clocks == NULL && c->fn.reset_mem_clocks == NULL)
		return nvml_fail_lacks(err, gpu, "reset_locked_clocks",
		    "nvmlDeviceResetGpuLockedClocks");
	if (rc_mem == NVML_ERROR_NOT_SUPPORTED && rc_gpu == NVML_SUCCESS &&
	    c->fn.reset_gpu_clocks != NULL)
		rc_mem = NVML_SUCCESS;
	else if (rc_gpu == NVML_ERROR_NOT_SUPPORTED && rc_mem == NVML_SUCCESS &&
	    c->fn.reset_mem_clocks != NULL)
		rc_gpu = NVML_SUCCESS;
	if (rc_gpu != NVML_SUCCESS)
		return nvml_fail(c, err, gpu,
		    "reset_locked_clocks (GPU clocks)", true, rc_gpu);
	if (rc_mem != NVML_SUCCESS)
		return nvml_fail(c, err, gpu,
		    "reset_locked_clocks (memory clocks)", true, rc_mem);
	return 0;
}

/* Persistence mode where the platform fixes it (nvml.h). */
static int
nvml_write_fixed_persistence(unsigned gpu, bool enabled, struct zerr *err)
{
	static atomic_bool logged;

	if (!enabled)
		return zerr_set(err, ZERR_INVALID,
		    "Persistence mode cannot be disabled on this platform.");
	if (!atomic_exchange(&logged, true))
		zlog(ZLOG_INFO, "persistence_mode_fixed", "gpu=%u msg=\"enabling "
		    "persistence mode is a no-op on this platform: the driver "
		    "keeps GPUs initialised\"", gpu);
	return 0;
}

static int
nvml_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	const char *what = gpu_write_op_name(w->op);
	struct nvml_gpu *g = nvml_gpu_for(b, gpu, what, true, err);
	const char *lacks;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if ((unsigned)w->op >= GPU_WRITE_OP_COUNT)
		return zerr_set(err, ZERR_INVALID, "GPU %u: unknown write "
		    "operation %d", gpu, (int)w->op);
	if (w->op == GPU_SET_PERSISTENCE_MODE && nvml_persistence_fixed)
		return nvml_write_fixed_persistence(gpu, w->enabled, err);
	if ((lacks = nvml_write_lacks(b, w->op)) != NULL)
		return nvml_fail_lacks(err, gpu, what, lacks);
	switch (w->op) {
	case GPU_SET_POWER_LIMIT:
		rc = c->fn.set_limit(g->dev, w->power_limit_mw);
		break;
	case GPU_SET_PERSISTENCE_MODE:
		rc = c->fn.set_persistence(g->dev, w->enabled ?
		    NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED);
		break;
	case GPU_SET_GPU_LOCKED_CLOCKS:
		rc = c->fn.set_gpu_clocks(g->dev, w->min_clock_mhz,
		    w->max_clock_mhz);
		break;
	case GPU_RESET_GPU_LOCKED_CLOCKS:
		rc = c->fn.reset_gpu_clocks(g->dev);
		break;
	case GPU_SET_MEM_LOCKED_CLOCKS:
		rc = c->fn.set_mem_clocks(g->dev, w->min_clock_mhz,
		    w->max_clock_mhz);
		break;
	case GPU_RESET_MEM_LOCKED_CLOCKS:
		rc = c->fn.reset_mem_clocks(g->dev);
		break;
	case GPU_RESET_LOCKED_CLOCKS:
	default:
		return nvml_reset_locked_clocks(c, g, gpu, err);
	}
	if (nvml_seen(g, gpu, rc) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, what, true, rc);
	return 0;
}

static void
nvml_destroy(struct gpu_backend *b)
{
	struct nvml_ctx *c = b->ctx;

	if (c == NULL)
		return;
	c->fn.shutdown();
	dynlib_close(c->dl);
	free(c);
	b->ctx = NULL;
	b->ops = NULL;
}

static const struct gpu_backend_ops nvml_ops = {
	.name = "nvml",
	.count = nvml_count,
	.info = nvml_info,
	.get_power_mw = nvml_get_power_mw,
	.get_energy_mj = nvml_get_energy_mj,
	.get_power_limit_mw = nvml_get_power_limit_mw,
	.get_power_limit_constraints = nvml_get_power_limit_constraints,
	.get_persistence_mode = nvml_get_persistence_mode,
	.write = nvml_write,
	.read_lacks = nvml_read_lacks,
	.write_lacks = nvml_write_lacks,
	.lost = nvml_lost,
	.destroy = nvml_destroy,
};

/* ------------------------------------------------------------------------
 * Opening.
 */

/* Loads the library; *used is the name that worked. */
static struct dynlib *
nvml_load(const char *lib_path, const char **used, struct zerr *err)
{
	const char *names[2] = { NVML_DEFAULT_LIBRARY, NVML_FALLBACK_LIBRARY };
	const char *why;
	struct dynlib *dl;

	if (lib_path != NULL) {
		names[0] = lib_path;
		names[1] = NULL;
	}
	for (int i = 0; i < 2 && names[i] != NULL; i++) {
		if ((dl = dynlib_open(names[i], true)) != NULL) {
			*used = names[i];
			return dl;
		}
	}
	why = dynlib_error();
	if (lib_path != NULL)
		zerr_set(err, ZERR_NOT_FOUND, "cannot load NVML library "
		    "'%.512s': %.512s", lib_path, why != NULL ? why : "?");
	else
		zerr_set(err, ZERR_NOT_FOUND, "cannot load NVML library (tried "
		    "%s and %s): %.512s", NVML_DEFAULT_LIBRARY,
		    NVML_FALLBACK_LIBRARY, why != NULL ? why : "?");
	return NULL;
}

/*
 * Resolves every entry point: the first name of each that the library
 * exports. Fails only when a required one has none, naming them all.
 */
static int
nvml_resolve(struct dynlib *dl, const char *lib, struct nvml_fns *fn,
    const char **used, struct zerr *err)
{
	memset(fn, 0, sizeof(*fn));
	for (size_t i = 0; i < NVML_NSYMS; i++) {
		const struct nvml_sym *s = &nvml_syms[i];
		void *p = NULL;

		used[i] = NULL;
		for (int k = 0; k < NVML_NAMES_MAX && s->names[k] != NULL &&
		    p == NULL; k++) {
			if ((p = dynlib_sym(dl, s->names[k])) != NULL)
				used[i] = s->names[k];
		}
		if (p == NULL && s->required)
			return zerr_set(err, ZERR_INTERNAL, "NVML library "
			    "'%.512s' lacks symbol %s%s%s", lib, s->names[0],
			    s->names[1] != NULL ? " (nor its older name " : "",
			    s->names[1] != NULL ? s->names[1] : "");
		memcpy((char *)fn + s->offset, &p, sizeof(p));
	}
	return 0;
}

/* The name resolved for the entry point at `offset` in struct nvml_fns. */
static const char *
nvml_used(const char **used, size_t offset)
{
	for (size_t i = 0; i < NVML_NSYMS; i++)
		if (nvml_syms[i].offset == offset)
			return used[i] != NULL ? used[i] : nvml_syms[i].names[0];
	return "?";
}

/* A clock table's min and max, ignoring zeros. */
static void
nvml_range(const unsigned *v, unsigned n, uint32_t *lo, uint32_t *hi)
{
	*lo = *hi = 0;
	for (unsigned i = 0; i < n; i++) {
		if (v[i] == 0)
			continue;
		if (*lo == 0 || v[i] < *lo)
			*lo = v[i];
		if (v[i] > *hi)
			*hi = v[i];
	}
}

/*
 * A supported-clocks table, asked the way NVML wants it: the size first
 * (INSUFFICIENT_SIZE with the count), then the values. mem_mhz is 0 for the
 * memory table. Returns the count (0: none or unreadable).
 */
static unsigned
nvml_clock_table(const struct nvml_ctx *c, struct nvml_gpu *g, unsigned gpu,
    unsigned mem_mhz, unsigned *buf)
{
	unsigned int n = 0;
	nvmlReturn_t rc;

	if (mem_mhz == 0)
		rc = c->fn.get_mem_clocks(g->dev, &n, NULL);
	else
		rc = c->fn.get_gfx_clocks(g->dev, mem_mhz, &n, NULL);
	if (nvml_seen(g, gpu, rc) != NVML_ERROR_INSUFFICIENT_SIZE || n == 0)
		return 0;
	if (n > NVML_MAX_CLOCKS)
		n = NVML_MAX_CLOCKS;
	if (mem_mhz == 0)
		rc = c->fn.get_mem_clocks(g->dev, &n, buf);
	else
		rc = c->fn.get_gfx_clocks(g->dev, mem_mhz, &n, buf);
	if (nvml_seen(g, gpu, rc) != NVML_SUCCESS || n > NVML_MAX_CLOCKS)
		return 0;
	return n;
}

/* Clock ranges: the supported tables, else the maxima alone. */
static void
nvml_probe_clocks(const struct nvml_ctx *c, struct nvml_gpu *g, unsigned gpu)
{
	struct gpu_caps *k = &g->info.caps;
	unsigned *buf = calloc(NVML_MAX_CLOCKS, sizeof(*buf));
	unsigned int v;
	unsigned n;

	if (buf != NULL && c->fn.get_mem_clocks != NULL) {
		n = nvml_clock_table(c, g, gpu, 0, buf);
		nvml_range(buf, n, &k->mem_clock_min_mhz,
		    &k->mem_clock_max_mhz);
	}
	if (buf != NULL && c->fn.get_gfx_clocks != NULL &&
	    k->mem_clock_max_mhz != 0) {
		n = nvml_clock_table(c, g, gpu, k->mem_clock_max_mhz, buf);
		nvml_range(buf, n, &k->gpu_clock_min_mhz,
		    &k->gpu_clock_max_mhz);
	}
	free(buf);
	if (c->fn.get_max_clock == NULL)
		return;
	if (k->gpu_clock_max_mhz == 0 && nvml_seen(g, gpu,
	    c->fn.get_max_clock(g->dev, NVML_CLOCK_GRAPHICS, &v)) ==
	    NVML_SUCCESS)
		k->gpu_clock_max_mhz = v;
	if (k->mem_clock_max_mhz == 0 && nvml_seen(g, gpu,
	    c->fn.get_max_clock(g->dev, NVML_CLOCK_MEM, &v)) == NVML_SUCCESS)
		k->mem_clock_max_mhz = v;
}

static const char *
nvml_arch_name(nvmlDeviceArchitecture_t a)
{
	static const char *const names[] = {
		[NVML_DEVICE_ARCH_KEPLER] = "kepler",
		[NVML_DEVICE_ARCH_MAXWELL] = "maxwell",
		[NVML_DEVICE_ARCH_PASCAL] = "pascal",
		[NVML_DEVICE_ARCH_VOLTA] = "volta",
		[NVML_DEVICE_ARCH_TURING] = "turing",
		[NVML_DEVICE_ARCH_AMPERE] = "ampere",
		[NVML_DEVICE_ARCH_ADA] = "ada",
		[NVML_DEVICE_ARCH_HOPPER] = "hopper",
		[NVML_DEVICE_ARCH_BLACKWELL] = "blackwell",
	};

	if (a < sizeof(names) / sizeof(names[0]) && names[a] != NULL)
		return names[a];
	return "unknown";
}

/*
 * What the GPU supports, without changing anything: the driver must have
 * the setter; the power limit must be readable; locked clocks need Volta
 * and memory locked clocks Ampere (as NVML documents them), when the
 * architecture is known. Failed probes leave values at 0 and never fail
 * open.
 */
static void
nvml_probe_caps(const struct nvml_ctx *c, struct nvml_gpu *g, unsigned gpu)
{
	struct gpu_caps *k = &g->info.caps;
	nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
	nvmlEnableState_t mode;
	unsigned int lo, hi, def;
	bool known;

	if (c->fn.get_arch != NULL && nvml_seen(g, gpu,
	    c->fn.get_arch(g->dev, &arch)) != NVML_SUCCESS)
		arch = NVML_DEVICE_ARCH_UNKNOWN;
	snprintf(g->info.architecture, sizeof(g->info.architecture), "%s",
	    nvml_arch_name(arch));
	known = strcmp(g->info.architecture, "unknown") != 0;

	if (c->fn.get_constraints != NULL && nvml_seen(g, gpu,
	    c->fn.get_constraints(g->dev, &lo, &hi)) == NVML_SUCCESS) {
		k->limit_min_mw = lo;
		k->limit_max_mw = hi;
	}
	if (c->fn.get_default_limit != NULL && nvml_seen(g, gpu,
	    c->fn.get_default_limit(g->dev, &def)) == NVML_SUCCESS)
		k->limit_default_mw = def;
	k->power_limit = c->fn.set_limit != NULL && k->limit_max_mw != 0;

	k->persistence_mode = c->fn.set_persistence != NULL &&
	    (c->fn.get_persistence == NULL || nvml_seen(g, gpu,
	    c->fn.get_persistence(g->dev, &mode)) != NVML_ERROR_NOT_SUPPORTED);
	k->gpu_locked_clocks = c->fn.set_gpu_clocks != NULL &&
	    (!known || arch >= NVML_DEVICE_ARCH_VOLTA);
	k->mem_locked_clocks = c->fn.set_mem_clocks != NULL &&
	    (!known || arch >= NVML_DEVICE_ARCH_AMPERE);
	nvml_probe_clocks(c, g, gpu);
}

/*
 * A GPU's identity: name, PCI address, UUID. Only "GPU is lost" is
 * forgiven (the GPU is listed as lost, the others keep working); any other
 * failure fails open as before.
 */
static int
nvml_identify(struct nvml_ctx *c, struct nvml_gpu *g, unsigned i,
    struct zerr *err)
{
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	nvmlPciInfo_t pci;
	nvmlReturn_t rc;

	memset(name, 0, sizeof(name));
	if (c->fn.get_name != NULL) {
		rc = nvml_seen(g, i, c->fn.get_name(g->dev, name,
		    sizeof(name)));
		if (rc != NVML_SUCCESS && rc != NVML_ERROR_GPU_IS_LOST)
			return nvml_fail(c, err, i, "nvmlDeviceGetName", false,
			    rc);
		name[sizeof(name) - 1] = '\0';
		nvml_clean(g->info.name, sizeof(g->info.name),
		    rc == NVML_SUCCESS ? name : "");
	}
	/* Larger than every older layout the fallbacks fill. */
	memset(&pci, 0, sizeof(pci));
	if (c->fn.get_pci != NULL) {
		rc = nvml_seen(g, i, c->fn.get_pci(g->dev, &pci));
		if (rc != NVML_SUCCESS && rc != NVML_ERROR_GPU_IS_LOST)
			return nvml_fail(c, err, i, "nvmlDeviceGetPciInfo",
			    false, rc);
		/* As `lspci -D` prints it; NVML has no function number. */
		if (rc == NVML_SUCCESS)
			snprintf(g->info.pci_address,
			    sizeof(g->info.pci_address), "%04x:%02x:%02x.0",
			    pci.domain, pci.bus & 0xff, pci.device & 0xff);
	}
	memset(uuid, 0, sizeof(uuid));
	if (c->fn.get_uuid != NULL && nvml_seen(g, i, c->fn.get_uuid(g->dev,
	    uuid, sizeof(uuid))) == NVML_SUCCESS) {
		uuid[sizeof(uuid) - 1] = '\0';
		nvml_clean(g->info.uuid, sizeof(g->info.uuid), uuid);
	}
	return 0;
}

/* Fills in a GPU's handle, identity and capabilities. */
static int
nvml_setup_gpu(struct nvml_ctx *c, unsigned i, struct zerr *err)
{
	struct nvml_gpu *g = &c->gpus[i];
	unsigned long long energy;
	uint32_t mw;
	nvmlReturn_t rc;
	struct zerr probe;

	atomic_init(&g->lost, false);
	atomic_init(&g->power_source, c->fn.get_fields != NULL ?
	    NVML_POWER_FIELD : NVML_POWER_USAGE);
	snprintf(g->info.architecture, sizeof(g->info.architecture),
	    "unknown");
	rc = c->fn.get_handle(i, &g->dev);
	if (rc == NVML_ERROR_GPU_IS_LOST) {
		/* No handle, ever: every call on it answers "lost". */
		g->dev = NULL;
		nvml_seen(g, i, rc);
		return 0;
	}
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, i, "nvmlDeviceGetHandleByIndex", false,
		    rc);
	if (nvml_identify(c, g, i, err) != 0)
		return -1;

	if (c->fn.get_energy != NULL) {
		rc = nvml_seen(g, i, c->fn.get_energy(g->dev, &energy));
		g->info.energy_available = rc != NVML_ERROR_NOT_SUPPORTED;
		if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED)
			zlog(ZLOG_WARN, "nvml_energy_probe_failed", "gpu=%u "
			    "rc=%d", i, (int)rc);
	}
	if (c->fn.get_fields != NULL &&
	    nvml_power_field(c, g, i, &mw, &probe) == 1)
		atomic_init(&g->power_source, NVML_POWER_USAGE);
	nvml_probe_caps(c, g, i);
	return 0;
}

/* Appends " word" to a bounded list. */
static void
nvml_list_add(char *buf, size_t size, const char *word)
{
	size_t len = strlen(buf);

	snprintf(buf + len, size - len, "%s%s", len ? " " : "", word);
}

/*
 * Once at open: which entry points are missing and what that disables,
 * and which older names stood in for newer ones.
 */
static void
nvml_log_symbols(const struct nvml_ctx *c)
{
	char missing[1024] = "", lost[1024] = "", older[512] = "";
	char q1[1100], q2[1100], q3[600];

	for (size_t i = 0; i < NVML_NSYMS; i++) {
		const struct nvml_sym *s = &nvml_syms[i];

		if (c->used[i] == NULL) {
			nvml_list_add(missing, sizeof(missing), s->names[0]);
			nvml_list_add(lost, sizeof(lost), s->without);
		} else if (c->used[i] != s->names[0]) {
			nvml_list_add(older, sizeof(older), c->used[i]);
		}
	}
	if (missing[0] != '\0')
		zlog(ZLOG_WARN, "nvml_features_missing", "symbols=%s "
		    "unavailable=%s", zlog_quote(q1, sizeof(q1), missing),
		    zlog_quote(q2, sizeof(q2), lost));
	if (older[0] != '\0')
		zlog(ZLOG_INFO, "nvml_older_entry_points", "symbols=%s",
		    zlog_quote(q3, sizeof(q3), older));
}

static void
nvml_log_open(const struct nvml_ctx *c, const char *lib)
{
	char q[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 8], ql[600];
	char ver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
	char clean[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], qv[100];
	char qu[NVML_DEVICE_UUID_V2_BUFFER_SIZE + 8];

	if (c->fn.get_driver_version == NULL ||
	    c->fn.get_driver_version(ver, sizeof(ver)) != NVML_SUCCESS)
		strcpy(ver, "unknown");
	ver[sizeof(ver) - 1] = '\0';
	nvml_clean(clean, sizeof(clean), ver);
	zlog(ZLOG_INFO, "nvml_open", "library=%s driver=%s gpus=%u",
	    zlog_quote(ql, sizeof(ql), lib), zlog_quote(qv, sizeof(qv), clean),
	    c->count);
	nvml_log_symbols(c);
	for (unsigned i = 0; i < c->count; i++) {
		const struct nvml_gpu *g = &c->gpus[i];
		const struct gpu_caps *k = &g->info.caps;

		zlog(ZLOG_INFO, "nvml_gpu", "gpu=%u name=%s pci=%s uuid=%s "
		    "arch=%s lost=%s energy=%s power=%s power_limit=%s "
		    "persistence_mode=%s gpu_locked_clocks=%s "
		    "mem_locked_clocks=%s", i,
		    zlog_quote(q, sizeof(q), g->info.name),
		    g->info.pci_address[0] ? g->info.pci_address : "unknown",
		    zlog_quote(qu, sizeof(qu), g->info.uuid),
		    g->info.architecture,
		    atomic_load(&g->lost) ? "true" : "false",
		    g->info.energy_available ? "available" : "not_supported",
		    atomic_load(&g->power_source) == NVML_POWER_FIELD ?
		    "instant_field" : "average_fallback",
		    k->power_limit ? "yes" : "no",
		    k->persistence_mode ? "yes" : "no",
		    k->gpu_locked_clocks ? "yes" : "no",
		    k->mem_locked_clocks ? "yes" : "no");
	}
}

/* Runs after init succeeded; on failure the caller shuts down. */
static struct nvml_ctx *
nvml_enumerate(struct dynlib *dl, const struct nvml_fns *fn, const char **used,
    struct zerr *err)
{
	struct nvml_ctx *c;
	unsigned int n;
	nvmlReturn_t rc;

	if ((rc = fn->get_count(&n)) != NVML_SUCCESS) {
		char text[NVML_TEXT_MAX];

		nvml_text(fn, rc, text, sizeof(text));
		zerr_set(err, ZERR_INTERNAL, "%s failed: %s",
		    nvml_used(used, offsetof(struct nvml_fns, get_count)), text);
		return NULL;
	}
	if (n > NVML_MAX_GPUS) {
		zerr_set(err, ZERR_INTERNAL, "NVML reports %u GPUs, more than "
		    "the %u supported", n, NVML_MAX_GPUS);
		return NULL;
	}
	c = calloc(1, sizeof(*c) + (size_t)n * sizeof(c->gpus[0]));
	if (c == NULL) {
		zerr_set(err, ZERR_INTERNAL, "out of memory");
		return NULL;
	}
	c->dl = dl;
	c->fn = *fn;
	memcpy(c->used, used, sizeof(c->used));
	c->count = n;
	for (unsigned i = 0; i < n; i++) {
		if (nvml_setup_gpu(c, i, err) != 0) {
			free(c);
			return NULL;
		}
	}
	return c;
}

int
nvml_backend_open(const char *lib_path, struct gpu_backend *out,
    struct zerr *err)
{
	const char *used[NVML_NSYMS];
	const char *lib = NULL;
	struct nvml_fns fn;
	struct nvml_ctx *c;
	nvmlReturn_t rc;
	struct dynlib *dl;

	if ((dl = nvml_load(lib_path, &lib, err)) == NULL)
		return -1;
	if (nvml_resolve(dl, lib, &fn, used, err) != 0) {
		dynlib_close(dl);
		return -1;
	}
	if ((rc = fn.init()) != NVML_SUCCESS) {
		char text[NVML_TEXT_MAX];

		nvml_text(&fn, rc, text, sizeof(text));
		zerr_set(err, rc == NVML_ERROR_DRIVER_NOT_LOADED ?
		    ZERR_NOT_FOUND : ZERR_INTERNAL, "%s failed: %s",
		    nvml_used(used, offsetof(struct nvml_fns, init)), text);
		dynlib_close(dl);
		return -1;
	}
	if ((c = nvml_enumerate(dl, &fn, used, err)) == NULL) {
		fn.shutdown();
		dynlib_close(dl);
		return -1;
	}
	nvml_log_open(c, lib);
	out->ops = &nvml_ops;
	out->ctx = c;
	return 0;
}

bool
nvml_library_available(const char *lib_path)
{
	const char *names[2] = { NVML_DEFAULT_LIBRARY, NVML_FALLBACK_LIBRARY };
	struct dynlib *dl;

	if (lib_path != NULL) {
		names[0] = lib_path;
		names[1] = NULL;
	}
	for (int i = 0; i < 2 && names[i] != NULL; i++) {
		if ((dl = dynlib_open(names[i], false)) != NULL) {
			dynlib_close(dl);
			return true;
		}
	}
	return false;
}
