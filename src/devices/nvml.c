/*
 * nvml.c - the NVML GPU backend: `struct gpu_backend_ops` over NVML.
 *
 * The library is loaded with dlopen against the project's own declarations
 * (nvml_api.h), so the daemon builds without the CUDA toolkit and runs on
 * the driver's libnvidia-ml.so.1 or on the simulator (sim/nvml_sim.c). Every
 * symbol is resolved at open, so a library that lacks one fails at startup
 * with its name rather than at the first request that needs it.
 *
 * State is fixed after open except each GPU's power source, an atomic that
 * only ever moves from the field-values API to the average-power call when
 * the driver says the instantaneous field is unsupported. NVML itself is
 * thread-safe, so calls on different GPUs, and a power read beside any other
 * call on the same GPU, need no lock here.
 *
 * Driver strings (error texts, names) are untrusted: they are bounded and
 * reduced to printable ASCII before they reach a message or the API.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "nvml_api.h"

#define NVML_MAX_GPUS 256	/* more than any node has; bounds the driver */
#define NVML_TEXT_MAX 128	/* bound on a driver error string */

/* The functions we use, typed from nvml_api.h's declarations. */
struct nvml_fns {
	__typeof__(&nvmlInit_v2) init;
	__typeof__(&nvmlShutdown) shutdown;
	__typeof__(&nvmlErrorString) error_string;
	__typeof__(&nvmlDeviceGetCount_v2) get_count;
	__typeof__(&nvmlDeviceGetHandleByIndex_v2) get_handle;
	__typeof__(&nvmlDeviceGetName) get_name;
	__typeof__(&nvmlDeviceGetPciInfo_v3) get_pci;
	__typeof__(&nvmlDeviceGetFieldValues) get_fields;
	__typeof__(&nvmlDeviceGetPowerUsage) get_power_usage;
	__typeof__(&nvmlDeviceGetTotalEnergyConsumption) get_energy;
	__typeof__(&nvmlDeviceGetPowerManagementLimit) get_limit;
	__typeof__(&nvmlDeviceGetPowerManagementLimitConstraints)
	    get_constraints;
	__typeof__(&nvmlDeviceGetPersistenceMode) get_persistence;
	__typeof__(&nvmlDeviceSetPowerManagementLimit) set_limit;
	__typeof__(&nvmlDeviceSetPersistenceMode) set_persistence;
	__typeof__(&nvmlDeviceSetGpuLockedClocks) set_gpu_clocks;
	__typeof__(&nvmlDeviceResetGpuLockedClocks) reset_gpu_clocks;
	__typeof__(&nvmlDeviceSetMemoryLockedClocks) set_mem_clocks;
	__typeof__(&nvmlDeviceResetMemoryLockedClocks) reset_mem_clocks;
};

struct nvml_sym {
	const char *name;
	size_t offset;
};

#define NVML_SYM(field, sym) { #sym, offsetof(struct nvml_fns, field) }

static const struct nvml_sym nvml_syms[] = {
	NVML_SYM(init, nvmlInit_v2),
	NVML_SYM(shutdown, nvmlShutdown),
	NVML_SYM(error_string, nvmlErrorString),
	NVML_SYM(get_count, nvmlDeviceGetCount_v2),
	NVML_SYM(get_handle, nvmlDeviceGetHandleByIndex_v2),
	NVML_SYM(get_name, nvmlDeviceGetName),
	NVML_SYM(get_pci, nvmlDeviceGetPciInfo_v3),
	NVML_SYM(get_fields, nvmlDeviceGetFieldValues),
	NVML_SYM(get_power_usage, nvmlDeviceGetPowerUsage),
	NVML_SYM(get_energy, nvmlDeviceGetTotalEnergyConsumption),
	NVML_SYM(get_limit, nvmlDeviceGetPowerManagementLimit),
	NVML_SYM(get_constraints, nvmlDeviceGetPowerManagementLimitConstraints),
	NVML_SYM(get_persistence, nvmlDeviceGetPersistenceMode),
	NVML_SYM(set_limit, nvmlDeviceSetPowerManagementLimit),
	NVML_SYM(set_persistence, nvmlDeviceSetPersistenceMode),
	NVML_SYM(set_gpu_clocks, nvmlDeviceSetGpuLockedClocks),
	NVML_SYM(reset_gpu_clocks, nvmlDeviceResetGpuLockedClocks),
	NVML_SYM(set_mem_clocks, nvmlDeviceSetMemoryLockedClocks),
	NVML_SYM(reset_mem_clocks, nvmlDeviceResetMemoryLockedClocks),
};

/* dlsym hands back a void *; POSIX guarantees it can hold a function. */
_Static_assert(sizeof(void *) == sizeof(&nvmlInit_v2),
    "function pointers must fit in void *");

/* Where a GPU's power reading comes from. */
enum nvml_power_source {
	NVML_POWER_FIELD,	/* NVML_FI_DEV_POWER_INSTANT */
	NVML_POWER_USAGE,	/* nvmlDeviceGetPowerUsage (averaged) */
};

struct nvml_gpu {
	nvmlDevice_t dev;
	struct gpu_info info;
	atomic_int power_source;	/* enum nvml_power_source */
};

struct nvml_ctx {
	void *dl;
	struct nvml_fns fn;
	unsigned count;
	struct nvml_gpu gpus[];
};

/* ------------------------------------------------------------------------
 * Errors.
 */

static enum zerr_kind
nvml_kind(nvmlReturn_t rc)
{
	switch (rc) {
	case NVML_ERROR_NO_PERMISSION:
		return ZERR_FORBIDDEN;
	case NVML_ERROR_INVALID_ARGUMENT:
	case NVML_ERROR_NOT_SUPPORTED:
		return ZERR_INVALID;
	default:
		return ZERR_INTERNAL;
	}
}

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
	nvml_clean(buf, size, fn->error_string(rc));
	if (buf[0] == '\0')
		snprintf(buf, size, "NVML error %d", (int)rc);
}

/* Fails a call on one GPU: names the GPU, the operation and the error. */
static int
nvml_fail(const struct nvml_ctx *c, struct zerr *err, unsigned gpu,
    const char *what, nvmlReturn_t rc)
{
	char text[NVML_TEXT_MAX];

	nvml_text(&c->fn, rc, text, sizeof(text));
	return zerr_set(err, nvml_kind(rc), "GPU %u: %s failed: %s", gpu,
	    what, text);
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
nvml_power_field(const struct nvml_ctx *c, const struct nvml_gpu *g,
    unsigned gpu, uint32_t *mw, struct zerr *err)
{
	nvmlFieldValue_t v;
	nvmlReturn_t rc;

	memset(&v, 0, sizeof(v));
	v.fieldId = NVML_FI_DEV_POWER_INSTANT;
	rc = c->fn.get_fields(g->dev, 1, &v);
	if (rc == NVML_SUCCESS)
		rc = v.nvmlReturn;
	if (rc == NVML_ERROR_NOT_SUPPORTED)
		return 1;
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power", rc);
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
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
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
	if ((rc = c->fn.get_power_usage(g->dev, &v)) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power", rc);
	*mw = v;
	return 0;
}

static int
nvml_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
	unsigned long long v;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	/* Decided at open: answer as the driver did then. */
	if (!g->info.energy_available)
		return nvml_fail(c, err, gpu, "get_cumulative_energy",
		    NVML_ERROR_NOT_SUPPORTED);
	if ((rc = c->fn.get_energy(g->dev, &v)) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_cumulative_energy", rc);
	*mj = v;
	return 0;
}

static int
nvml_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
	unsigned int v;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if ((rc = c->fn.get_limit(g->dev, &v)) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power_limit", rc);
	*mw = v;
	return 0;
}

static int
nvml_get_power_limit_constraints(struct gpu_backend *b, unsigned gpu,
    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
	unsigned int lo, hi;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if ((rc = c->fn.get_constraints(g->dev, &lo, &hi)) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_power_limit_constraints",
		    rc);
	*min_mw = lo;
	*max_mw = hi;
	return 0;
}

static int
nvml_get_persistence_mode(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
	nvmlEnableState_t mode;
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
	if ((rc = c->fn.get_persistence(g->dev, &mode)) != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, "get_persistence_mode", rc);
	*enabled = mode == NVML_FEATURE_ENABLED;
	return 0;
}

/* ------------------------------------------------------------------------
 * Writes.
 */

/* Both clock domains: the memory reset runs even if the GPU reset failed. */
static int
nvml_reset_locked_clocks(const struct nvml_ctx *c, const struct nvml_gpu *g,
    unsigned gpu, struct zerr *err)
{
	nvmlReturn_t rc_gpu = c->fn.reset_gpu_clocks(g->dev);
	nvmlReturn_t rc_mem = c->fn.reset_mem_clocks(g->dev);

	if (rc_gpu != NVML_SUCCESS)
		return nvml_fail(c, err, gpu,
		    "reset_locked_clocks (GPU clocks)", rc_gpu);
	if (rc_mem != NVML_SUCCESS)
		return nvml_fail(c, err, gpu,
		    "reset_locked_clocks (memory clocks)", rc_mem);
	return 0;
}

static int
nvml_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	const struct nvml_ctx *c = b->ctx;
	struct nvml_gpu *g = nvml_gpu_at(b, gpu, err);
	nvmlReturn_t rc;

	if (g == NULL)
		return -1;
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
		return nvml_reset_locked_clocks(c, g, gpu, err);
	default:
		return zerr_set(err, ZERR_INVALID, "GPU %u: unknown write "
		    "operation %d", gpu, (int)w->op);
	}
	if (rc != NVML_SUCCESS)
		return nvml_fail(c, err, gpu, gpu_write_op_name(w->op), rc);
	return 0;
}

static void
nvml_destroy(struct gpu_backend *b)
{
	struct nvml_ctx *c = b->ctx;

	if (c == NULL)
		return;
	c->fn.shutdown();
	dlclose(c->dl);
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
	.destroy = nvml_destroy,
};

/* ------------------------------------------------------------------------
 * Opening.
 */

/* Loads the library; *used is the name that worked. */
static void *
nvml_load(const char *lib_path, const char **used, struct zerr *err)
{
	const char *names[2] = { NVML_DEFAULT_LIBRARY, NVML_FALLBACK_LIBRARY };
	const char *why;
	void *dl;

	if (lib_path != NULL) {
		names[0] = lib_path;
		names[1] = NULL;
	}
	for (int i = 0; i < 2 && names[i] != NULL; i++) {
		if ((dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) != NULL) {
			*used = names[i];
			return dl;
		}
	}
	why = dlerror();
	if (lib_path != NULL)
		zerr_set(err, ZERR_NOT_FOUND, "cannot load NVML library "
		    "'%.512s': %.512s", lib_path, why != NULL ? why : "?");
	else
		zerr_set(err, ZERR_NOT_FOUND, "cannot load NVML library (tried "
		    "%s and %s): %.512s", NVML_DEFAULT_LIBRARY,
		    NVML_FALLBACK_LIBRARY, why != NULL ? why : "?");
	return NULL;
}

static int
nvml_resolve(void *dl, const char *lib, struct nvml_fns *fn, struct zerr *err)
{
	for (size_t i = 0; i < sizeof(nvml_syms) / sizeof(nvml_syms[0]); i++) {
		void *p;

		dlerror();
		if ((p = dlsym(dl, nvml_syms[i].name)) == NULL)
			return zerr_set(err, ZERR_INTERNAL, "NVML library "
			    "'%.512s' lacks symbol %s", lib, nvml_syms[i].name);
		memcpy((char *)fn + nvml_syms[i].offset, &p, sizeof(p));
	}
	return 0;
}

/* Fills in a GPU's handle, name, PCI address and capabilities. */
static int
nvml_setup_gpu(struct nvml_ctx *c, unsigned i, struct zerr *err)
{
	struct nvml_gpu *g = &c->gpus[i];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	nvmlPciInfo_t pci;
	unsigned long long energy;
	uint32_t mw;
	nvmlReturn_t rc;
	struct zerr probe;

	if ((rc = c->fn.get_handle(i, &g->dev)) != NVML_SUCCESS)
		return nvml_fail(c, err, i, "nvmlDeviceGetHandleByIndex_v2", rc);
	memset(name, 0, sizeof(name));
	if ((rc = c->fn.get_name(g->dev, name, sizeof(name))) != NVML_SUCCESS)
		return nvml_fail(c, err, i, "nvmlDeviceGetName", rc);
	name[sizeof(name) - 1] = '\0';
	nvml_clean(g->info.name, sizeof(g->info.name), name);
	memset(&pci, 0, sizeof(pci));
	if ((rc = c->fn.get_pci(g->dev, &pci)) != NVML_SUCCESS)
		return nvml_fail(c, err, i, "nvmlDeviceGetPciInfo_v3", rc);
	/* As `lspci -D` prints it; NVML has no function number: it is 0. */
	snprintf(g->info.pci_address, sizeof(g->info.pci_address),
	    "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);

	rc = c->fn.get_energy(g->dev, &energy);
	g->info.energy_available = rc != NVML_ERROR_NOT_SUPPORTED;
	if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED)
		zlog(ZLOG_WARN, "nvml_energy_probe_failed", "gpu=%u rc=%d", i,
		    (int)rc);

	atomic_init(&g->power_source, NVML_POWER_FIELD);
	if (nvml_power_field(c, g, i, &mw, &probe) == 1)
		atomic_init(&g->power_source, NVML_POWER_USAGE);
	return 0;
}

static void
nvml_log_open(const struct nvml_ctx *c, const char *lib)
{
	char q[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 8], ql[600];

	zlog(ZLOG_INFO, "nvml_open", "library=%s gpus=%u",
	    zlog_quote(ql, sizeof(ql), lib), c->count);
	for (unsigned i = 0; i < c->count; i++) {
		const struct nvml_gpu *g = &c->gpus[i];

		zlog(ZLOG_INFO, "nvml_gpu", "gpu=%u name=%s pci=%s energy=%s "
		    "power=%s", i, zlog_quote(q, sizeof(q), g->info.name),
		    g->info.pci_address,
		    g->info.energy_available ? "available" : "not_supported",
		    atomic_load(&g->power_source) == NVML_POWER_FIELD ?
		    "instant_field" : "average_fallback");
	}
}

/* Runs after nvmlInit_v2 succeeded; on failure the caller shuts down. */
static struct nvml_ctx *
nvml_enumerate(void *dl, const struct nvml_fns *fn, struct zerr *err)
{
	struct nvml_ctx *c;
	unsigned int n;
	nvmlReturn_t rc;

	if ((rc = fn->get_count(&n)) != NVML_SUCCESS) {
		char text[NVML_TEXT_MAX];

		nvml_text(fn, rc, text, sizeof(text));
		zerr_set(err, ZERR_INTERNAL, "nvmlDeviceGetCount_v2 failed: %s",
		    text);
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
	const char *lib = NULL;
	struct nvml_fns fn;
	struct nvml_ctx *c;
	nvmlReturn_t rc;
	void *dl;

	if ((dl = nvml_load(lib_path, &lib, err)) == NULL)
		return -1;
	if (nvml_resolve(dl, lib, &fn, err) != 0) {
		dlclose(dl);
		return -1;
	}
	if ((rc = fn.init()) != NVML_SUCCESS) {
		char text[NVML_TEXT_MAX];

		nvml_text(&fn, rc, text, sizeof(text));
		zerr_set(err, rc == NVML_ERROR_DRIVER_NOT_LOADED ?
		    ZERR_NOT_FOUND : ZERR_INTERNAL, "nvmlInit_v2 failed: %s",
		    text);
		dlclose(dl);
		return -1;
	}
	if ((c = nvml_enumerate(dl, &fn, err)) == NULL) {
		fn.shutdown();
		dlclose(dl);
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
	void *dl;

	if (lib_path != NULL) {
		names[0] = lib_path;
		names[1] = NULL;
	}
	for (int i = 0; i < 2 && names[i] != NULL; i++) {
		if ((dl = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL)) != NULL) {
			dlclose(dl);
			return true;
		}
	}
	return false;
}
