/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi.c - the AMD GPU backend on ROCm's AMD SMI library (see amdsmi.h,
 * docs/amd.md).
 *
 * The library is loaded with dlopen and called through a table of function
 * pointers resolved up front: enumeration, the version query and the power
 * read are required, everything else is optional and reported through
 * read_lacks / write_lacks when missing. The soname that loaded tells the
 * ABI, and the library's own version (whose first word is that same
 * number in every ABI) must agree with it; power-info structs are then read
 * in that ABI's layout.
 *
 * Mapping onto the gpu.h operations:
 *   get_power                   amdsmi_get_power_info: current socket
 *                               power, else the average, as chosen per
 *                               GPU at open (W -> mW); a GPU that reports
 *                               neither (MI250's second die) answers 400
 *   get_cumulative_energy       amdsmi_get_energy_count: accumulator x
 *                               resolution (uJ -> mJ), only for GPUs whose
 *                               counter agreed with their power at open
 *   get_power_limit(_constraints), set_power_limit
 *                               amdsmi_{get,set}_power_cap(_info) on
 *                               sensor 0, in microwatts
 *   set_gpu/mem_locked_clocks   amdsmi_set_gpu_clk_limit, one call per
 *                               limit, in the order that never crosses them
 *                               (amd_lock_clocks)
 *   reset_locked_clocks         amdsmi_set_gpu_perf_level(AUTO), which
 *                               drops both domains' limits at once
 * Persistence mode and resetting one clock domain alone have no AMD SMI
 * counterpart and are refused (400) before anything is queued.
 *
 * Threading: calls from different threads go straight to the library,
 * except for releases before 26.2 (every .24 and .25, 26.0 and 26.1),
 * which are not thread-safe: there one mutex serializes every call. Clock ranges are remembered per GPU and
 * only touched under that GPU's worker, so they need no lock of their own.
 */
#include "amdsmi.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define AMD_TEXT_MAX	128
#define AMD_GPUS_MAX	64
/* How long the energy counter is watched at open (all GPUs at once). */
#define AMD_ENERGY_CHECK_MS	500u

struct amd_fns {
	amdsmi_status_t (*init)(uint64_t);
	amdsmi_status_t (*shut_down)(void);
	amdsmi_status_t (*status_string)(amdsmi_status_t, const char **);
	amdsmi_status_t (*lib_version)(amdsmi_version_any_t *);
	amdsmi_status_t (*socket_handles)(uint32_t *, amdsmi_socket_handle *);
	amdsmi_status_t (*processor_handles)(amdsmi_socket_handle, uint32_t *,
	    amdsmi_processor_handle *);
	amdsmi_status_t (*bdf)(amdsmi_processor_handle, amdsmi_bdf_t *);
	amdsmi_status_t (*uuid)(amdsmi_processor_handle, unsigned int *,
	    char *);
	amdsmi_status_t (*power_info)(amdsmi_processor_handle,
	    amdsmi_power_info_any_t *);
	amdsmi_status_t (*energy)(amdsmi_processor_handle, uint64_t *, float *,
	    uint64_t *);
	amdsmi_status_t (*cap_info)(amdsmi_processor_handle, uint32_t,
	    amdsmi_power_cap_info_t *);
	amdsmi_status_t (*set_cap)(amdsmi_processor_handle, uint32_t,
	    uint64_t);
	amdsmi_status_t (*clk_limit)(amdsmi_processor_handle,
	    amdsmi_clk_type_t, amdsmi_clk_limit_type_t, uint64_t);
	amdsmi_status_t (*perf_level)(amdsmi_processor_handle,
	    amdsmi_dev_perf_level_t);
	amdsmi_status_t (*clock_info)(amdsmi_processor_handle,
	    amdsmi_clk_type_t, amdsmi_clk_info_t *);
	amdsmi_status_t (*asic_info)(amdsmi_processor_handle,
	    amdsmi_asic_info_t *);
};

struct amd_sym {
	const char *name;
	size_t offset;
	bool required;
};

#define AMD_SYM(n, f, r) { n, offsetof(struct amd_fns, f), r }
static const struct amd_sym amd_syms[] = {
	AMD_SYM("amdsmi_init", init, true),
	AMD_SYM("amdsmi_shut_down", shut_down, true),
	AMD_SYM("amdsmi_status_code_to_string", status_string, false),
	AMD_SYM("amdsmi_get_lib_version", lib_version, true),
	AMD_SYM("amdsmi_get_socket_handles", socket_handles, true),
	AMD_SYM("amdsmi_get_processor_handles", processor_handles, true),
	AMD_SYM("amdsmi_get_gpu_device_bdf", bdf, false),
	AMD_SYM("amdsmi_get_gpu_device_uuid", uuid, false),
	AMD_SYM("amdsmi_get_power_info", power_info, true),
	AMD_SYM("amdsmi_get_energy_count", energy, false),
	AMD_SYM("amdsmi_get_power_cap_info", cap_info, false),
	AMD_SYM("amdsmi_set_power_cap", set_cap, false),
	AMD_SYM("amdsmi_set_gpu_clk_limit", clk_limit, false),
	AMD_SYM("amdsmi_set_gpu_perf_level", perf_level, false),
	AMD_SYM("amdsmi_get_clock_info", clock_info, false),
	AMD_SYM("amdsmi_get_gpu_asic_info", asic_info, false),
};
#define AMD_NSYMS (sizeof(amd_syms) / sizeof(amd_syms[0]))

/* A clock domain's range as last read or written; valid false: unknown. */
struct amd_bounds {
	bool valid;
	uint32_t min, max;
};

struct amd_gpu {
	amdsmi_processor_handle h;
	struct gpu_info info;
	struct amd_bounds clk[2];	/* [0] graphics, [1] memory */
	enum amd_power_src power;	/* set at open, then only read */
};

struct amd_ctx {
	void *dl;
	struct amd_fns fn;
	unsigned abi;
	bool serialize;
	unsigned check_ms;		/* the start-up energy check's length */
	pthread_mutex_t lock;
	unsigned count;
	struct amd_gpu gpus[AMD_GPUS_MAX];
};

/* Not supported on AMD at all: the sentences read_lacks/write_lacks give. */
static const char amd_no_persistence[] =
    "AMD GPUs have no persistence mode (AMD SMI has no such setting)";
static const char amd_no_single_reset[] =
    "AMD SMI resets GPU and memory clocks together "
    "(use reset_locked_clocks)";

/* ------------------------------------------------------------------------
 * Pure helpers (unit-tested).
 */

/* "rocm-6.2.1" -> its version packed for comparison; 0 if not one. */
static uint64_t
amd_rocm_dir_version(const char *name)
{
	unsigned long part[3] = { 0, 0, 0 };
	const char *s;
	char *end;

	if (strncmp(name, "rocm-", 5) != 0)
		return 0;
	s = name + 5;
	for (int i = 0; i < 3; i++) {
		if (*s < '0' || *s > '9')
			return i == 0 ? 0 : 1 + (part[0] << 40 | part[1] << 20 |
			    part[2]);
		part[i] = strtoul(s, &end, 10);
		if (part[i] >= (1UL << 20))
			return 0;
		s = end;
		if (*s == '.')
			s++;
		else
			break;
	}
	if (*s != '\0')
		return 0;	/* "rocm-6.2-custom" is not a release */
	return 1 + (part[0] << 40 | part[1] << 20 | part[2]);
}

size_t
amd_search_dirs(const char *env_lib_dir, const char *env_rocm,
    const char *opt_root, char dirs[][AMD_PATH_MAX], size_t max,
    bool *loader)
{
	char best[256] = "";
	uint64_t best_v = 0;
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	/*
	 * Either variable, when set, is the whole search: an operator who
	 * names an installation must not silently get another one.
	 */
	*loader = false;
	if (env_lib_dir != NULL && env_lib_dir[0] != '\0') {
		if (n < max)
			snprintf(dirs[n++], AMD_PATH_MAX, "%s", env_lib_dir);
		return n;
	}
	if (env_rocm != NULL && env_rocm[0] != '\0') {
		if (n < max)
			snprintf(dirs[n++], AMD_PATH_MAX, "%s/lib", env_rocm);
		return n;
	}
	*loader = true;
	if (n < max)
		snprintf(dirs[n++], AMD_PATH_MAX, "%s/rocm/lib", opt_root);
	if (n < max && (d = opendir(opt_root)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			uint64_t v = amd_rocm_dir_version(de->d_name);

			if (v > best_v && strlen(de->d_name) < sizeof(best)) {
				best_v = v;
				snprintf(best, sizeof(best), "%s", de->d_name);
			}
		}
		closedir(d);
		if (best_v != 0)
			snprintf(dirs[n++], AMD_PATH_MAX, "%s/%s/lib", opt_root,
			    best);
	}
	return n;
}

int
amd_version_check(unsigned abi, const amdsmi_version_any_t *v,
    bool *serialize, char *ver, size_t versize, char *why, size_t whysize)
{
	bool ok;

	*serialize = false;
	if (abi == 26)
		snprintf(ver, versize, "%u.%u.%u", v->v26.major, v->v26.minor,
		    v->v26.release);
	else
		snprintf(ver, versize, "%u.%u.%u.%u", v->v24.year, v->v24.major,
		    v->v24.minor, v->v24.release);
	switch (abi) {
	case 24:
		ok = v->v24.year == 24 && v->v24.major >= 7;
		if (v->v24.year == 24 && v->v24.major < 7) {
			snprintf(why, whysize, "AMD SMI %s is from ROCm 6.2 or "
			    "older; the oldest ROCm zeusd supports is 6.3 "
			    "(24.7)", ver);
			return -1;
		}
		break;
	case 25:
		ok = v->v25.year == 25 && v->v25.major == 25;
		break;
	case 26:
		ok = v->v26.major == 26;
		break;
	default:
		ok = false;
		break;
	}
	if (!ok) {
		snprintf(why, whysize, "libamd_smi.so.%u reports library "
		    "version %s, which does not match its ABI (its structs "
		    "cannot be read with that ABI's layout)", abi, ver);
		return -1;
	}
	/*
	 * Before 26.2 the library is not safe to call from several threads:
	 * .24 can crash, .25 and 26.0/26.1 can mix up values across GPUs.
	 */
	*serialize = abi != 26 || v->v26.minor < 2;
	return 0;
}

/* A socket power field that holds watts, not "not available". */
static bool
amd_power_valid(uint32_t w)
{
	return w != AMDSMI_POWER_NA && w != AMDSMI_POWER_NA32 &&
	    w <= UINT32_MAX / 1000;
}

/* The current and average socket power of a struct in `abi`'s layout. */
static int
amd_power_fields(unsigned abi, const amdsmi_power_info_any_t *p, uint32_t *cur,
    uint32_t *avg)
{
	switch (abi) {
	case 24:
		*cur = p->v24.current_socket_power;
		*avg = p->v24.average_socket_power;
		return 0;
	case 25:
		*cur = p->v25.current_socket_power;
		*avg = p->v25.average_socket_power;
		return 0;
	case 26:
		*cur = p->v26.current_socket_power;
		*avg = p->v26.average_socket_power;
		return 0;
	default:
		return -1;
	}
}

enum amd_power_src
amd_power_source(unsigned abi, const amdsmi_power_info_any_t *p)
{
	uint32_t cur, avg;

	if (amd_power_fields(abi, p, &cur, &avg) != 0)
		return AMD_POWER_NONE;
	if (amd_power_valid(cur))
		return AMD_POWER_CURRENT;
	return amd_power_valid(avg) ? AMD_POWER_AVERAGE : AMD_POWER_NONE;
}

int
amd_power_mw(unsigned abi, const amdsmi_power_info_any_t *p,
    enum amd_power_src src, uint32_t *mw)
{
	uint32_t cur, avg, w;

	if (amd_power_fields(abi, p, &cur, &avg) != 0)
		return -1;
	switch (src) {
	case AMD_POWER_ANY:
		w = amd_power_valid(cur) ? cur : avg;
		break;
	case AMD_POWER_CURRENT:
		w = cur;
		break;
	case AMD_POWER_AVERAGE:
		w = avg;
		break;
	default:
		return -1;
	}
	if (!amd_power_valid(w))
		return -1;
	*mw = w * 1000;
	return 0;
}

const char *
amd_power_source_name(enum amd_power_src src)
{
	switch (src) {
	case AMD_POWER_ANY:
		return "any";
	case AMD_POWER_CURRENT:
		return "current";
	case AMD_POWER_AVERAGE:
		return "average";
	default:
		return "none";
	}
}

int
amd_energy_verdict(double expected_mj, double measured_mj)
{
	double ratio;

	if (expected_mj < 0.001)
		return 0;
	ratio = measured_mj / expected_mj;
	return ratio > 0.1 && ratio < 10.0 ? 1 : -1;
}

/* ------------------------------------------------------------------------
 * Calls, errors.
 */

static void
amd_lock(struct amd_ctx *c)
{
	if (c->serialize)
		pthread_mutex_lock(&c->lock);
}

static void
amd_unlock(struct amd_ctx *c)
{
	if (c->serialize)
		pthread_mutex_unlock(&c->lock);
}

static void
amd_text(struct amd_ctx *c, amdsmi_status_t rc, char *buf, size_t size)
{
	const char *s = NULL;
	size_t i = 0;

	if (c->fn.status_string != NULL && c->fn.status_string(rc, &s) !=
	    AMDSMI_STATUS_SUCCESS)
		s = NULL;
	if (s != NULL)
		for (; i + 1 < size && s[i] != '\0'; i++)
			buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	if (i == 0)
		snprintf(buf, size, "AMD SMI status %u", (unsigned)rc);
}

/* Fails a call on one GPU with the library's status mapped (gpu.h). */
static int
amd_fail(struct amd_ctx *c, struct zerr *err, unsigned gpu,
    const char *what, amdsmi_status_t rc)
{
	char text[AMD_TEXT_MAX];

	amd_text(c, rc, text, sizeof(text));
	switch (rc) {
	case AMDSMI_STATUS_NO_PERM:
		return zerr_set(err, ZERR_FORBIDDEN, "GPU %u: %s failed: %s "
		    "(the AMD driver lets only root change or read this; "
		    "zeusd runs as uid %u)", gpu, what, text,
		    (unsigned)geteuid());
	case AMDSMI_STATUS_NOT_SUPPORTED:
	case AMDSMI_STATUS_NOT_YET_IMPLEMENTED:
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: %s "
		    "(not supported by this GPU)", gpu, what, text);
	case AMDSMI_STATUS_INVAL:
	case AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS:
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: %s", gpu,
		    what, text);
	case AMDSMI_STATUS_BUSY:
	case AMDSMI_STATUS_RETRY:
		return zerr_set(err, ZERR_BUSY, "GPU %u: %s failed: %s (retry "
		    "later)", gpu, what, text);
	default:
		return zerr_set(err, ZERR_INTERNAL, "GPU %u: %s failed: %s", gpu,
		    what, text);
	}
}

static struct amd_gpu *
amd_gpu_at(struct gpu_backend *b, unsigned gpu, struct zerr *err)
{
	struct amd_ctx *c = b->ctx;

	if (gpu >= c->count) {
		zerr_set(err, ZERR_INVALID, "GPU %u does not exist (%u GPUs)",
		    gpu, c->count);
		return NULL;
	}
	return &c->gpus[gpu];
}

static int
amd_fail_lacks(struct zerr *err, unsigned gpu, const char *what,
    const char *why)
{
	return zerr_set(err, ZERR_INVALID, "GPU %u: %s is not supported: %s",
	    gpu, what, why);
}

/* ------------------------------------------------------------------------
 * The gpu_backend_ops.
 */

static const char *
amd_read_lacks(struct gpu_backend *b, enum gpu_read_op op)
{
	struct amd_ctx *c = b->ctx;

	switch (op) {
	case GPU_GET_CUMULATIVE_ENERGY:
		return c->fn.energy == NULL ? "amdsmi_get_energy_count" : NULL;
	case GPU_GET_POWER_LIMIT:
	case GPU_GET_POWER_LIMIT_CONSTRAINTS:
		return c->fn.cap_info == NULL ? "amdsmi_get_power_cap_info" :
		    NULL;
	case GPU_GET_PERSISTENCE_MODE:
		return amd_no_persistence;
	default:
		return NULL;
	}
}

static const char *
amd_write_lacks(struct gpu_backend *b, enum gpu_write_op op)
{
	struct amd_ctx *c = b->ctx;

	switch (op) {
	case GPU_SET_POWER_LIMIT:
		return c->fn.set_cap == NULL ? "amdsmi_set_power_cap" : NULL;
	case GPU_SET_PERSISTENCE_MODE:
		return amd_no_persistence;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		return c->fn.clk_limit == NULL ? "amdsmi_set_gpu_clk_limit" :
		    NULL;
	case GPU_RESET_GPU_LOCKED_CLOCKS:
	case GPU_RESET_MEM_LOCKED_CLOCKS:
		return amd_no_single_reset;
	case GPU_RESET_LOCKED_CLOCKS:
		return c->fn.perf_level == NULL ? "amdsmi_set_gpu_perf_level" :
		    NULL;
	default:
		return NULL;
	}
}

static bool
amd_lost(struct gpu_backend *b, unsigned gpu)
{
	return false;	/* AMD SMI has no "GPU is lost" status */
}

static unsigned
amd_count(struct gpu_backend *b)
{
	return ((struct amd_ctx *)b->ctx)->count;
}

static int
amd_info(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
    struct zerr *err)
{
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);

	if (g == NULL)
		return -1;
	*out = g->info;
	return 0;
}

static int
amd_read_power(struct amd_ctx *c, struct amd_gpu *g, unsigned gpu,
    uint32_t *mw, struct zerr *err)
{
	amdsmi_power_info_any_t p;
	amdsmi_status_t rc;

	memset(&p, 0, sizeof(p));
	amd_lock(c);
	rc = c->fn.power_info(g->h, &p);
	amd_unlock(c);
	if (rc != AMDSMI_STATUS_SUCCESS)
		return amd_fail(c, err, gpu, "get_power", rc);
	if (amd_power_mw(c->abi, &p, g->power, mw) == 0)
		return 0;
	/*
	 * 400, as upstream answers (AMD SMI's NOT_SUPPORTED): asking again
	 * will not help, and streams and /metrics leave the GPU out.
	 */
	if (g->power == AMD_POWER_NONE)
		return zerr_set(err, ZERR_INVALID, "GPU %u: get_power failed: "
		    "not supported by this GPU: it reports its socket power as "
		    "not available (current and average), as the second die of "
		    "an MI250 does; its package's power is reported by its "
		    "other die", gpu);
	return zerr_set(err, ZERR_INVALID, "GPU %u: get_power failed: the GPU "
	    "reported its %s socket power as not available", gpu,
	    g->power == AMD_POWER_AVERAGE ? "average" : "current");
}

static int
amd_get_power_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);

	return g == NULL ? -1 : amd_read_power(b->ctx, g, gpu, mw, err);
}

/* The counter in microjoules. */
static amdsmi_status_t
amd_read_energy(struct amd_ctx *c, struct amd_gpu *g, double *uj)
{
	uint64_t acc = 0, ts = 0;
	float res = 0;
	amdsmi_status_t rc;

	amd_lock(c);
	rc = c->fn.energy(g->h, &acc, &res, &ts);
	amd_unlock(c);
	*uj = (double)acc * (double)res;
	return rc;
}

static int
amd_get_energy_mj(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
    struct zerr *err)
{
	static const char what[] = "get_cumulative_energy";
	struct amd_ctx *c = b->ctx;
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);
	amdsmi_status_t rc;
	double uj;

	if (g == NULL)
		return -1;
	if (c->fn.energy == NULL)
		return amd_fail_lacks(err, gpu, what,
		    "AMD SMI lacks amdsmi_get_energy_count");
	if (!g->info.energy_available)
		return amd_fail_lacks(err, gpu, what, "this GPU's energy "
		    "counter is unsupported or disagreed with its power "
		    "readings when zeusd started (ROCm/amdsmi issue 38); poll "
		    "get_power and integrate instead");
	if ((rc = amd_read_energy(c, g, &uj)) != AMDSMI_STATUS_SUCCESS)
		return amd_fail(c, err, gpu, what, rc);
	*mj = (uint64_t)(uj / 1000.0);
	return 0;
}

static int
amd_cap_info(struct amd_ctx *c, struct amd_gpu *g, unsigned gpu,
    const char *what, amdsmi_power_cap_info_t *ci, struct zerr *err)
{
	amdsmi_status_t rc;

	if (c->fn.cap_info == NULL)
		return amd_fail_lacks(err, gpu, what,
		    "AMD SMI lacks amdsmi_get_power_cap_info");
	memset(ci, 0, sizeof(*ci));
	amd_lock(c);
	rc = c->fn.cap_info(g->h, 0, ci);
	amd_unlock(c);
	return rc == AMDSMI_STATUS_SUCCESS ? 0 : amd_fail(c, err, gpu, what,
	    rc);
}

static uint32_t
amd_uw_to_mw(uint64_t uw)
{
	return uw / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(uw / 1000);
}

static int
amd_get_power_limit_mw(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
    struct zerr *err)
{
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);
	amdsmi_power_cap_info_t ci;

	if (g == NULL || amd_cap_info(b->ctx, g, gpu, "get_power_limit", &ci,
	    err) != 0)
		return -1;
	*mw = amd_uw_to_mw(ci.power_cap);
	return 0;
}

static int
amd_get_power_limit_constraints(struct gpu_backend *b, unsigned gpu,
    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err)
{
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);
	amdsmi_power_cap_info_t ci;

	if (g == NULL || amd_cap_info(b->ctx, g, gpu,
	    "get_power_limit_constraints", &ci, err) != 0)
		return -1;
	*min_mw = amd_uw_to_mw(ci.min_power_cap);
	*max_mw = amd_uw_to_mw(ci.max_power_cap);
	return 0;
}

static int
amd_get_persistence_mode(struct gpu_backend *b, unsigned gpu, bool *enabled,
    struct zerr *err)
{
	return amd_fail_lacks(err, gpu, "get_persistence_mode",
	    amd_no_persistence);
}

/* The domain's current range from the library; under the caller's lock. */
static amdsmi_status_t
amd_query_bounds(struct amd_ctx *c, struct amd_gpu *g, amdsmi_clk_type_t type,
    struct amd_bounds *out)
{
	amdsmi_clk_info_t ci;
	amdsmi_status_t rc;

	out->valid = false;
	if (c->fn.clock_info == NULL)
		return AMDSMI_STATUS_NOT_SUPPORTED;
	memset(&ci, 0, sizeof(ci));
	if ((rc = c->fn.clock_info(g->h, type, &ci)) == AMDSMI_STATUS_SUCCESS) {
		out->valid = true;
		out->min = ci.min_clk;
		out->max = ci.max_clk;
	}
	return rc;
}

/*
 * The driver checks each limit against the other one as it stands, so the
 * order matters: the minimum first (lowering a range, or overlapping the
 * old one), except when the new minimum is above the old maximum, where
 * setting it first would cross the limits: then the maximum first.
 */
bool
amd_clk_max_first(bool known, uint32_t old_max, uint32_t new_min)
{
	return known && new_min > old_max;
}

static amdsmi_status_t
amd_write_limits(struct amd_ctx *c, struct amd_gpu *g, amdsmi_clk_type_t type,
    const struct amd_bounds *old, uint32_t min, uint32_t max)
{
	bool max_first = amd_clk_max_first(old->valid, old->max, min);
	amdsmi_clk_limit_type_t first = max_first ? CLK_LIMIT_MAX :
	    CLK_LIMIT_MIN;
	amdsmi_clk_limit_type_t second = max_first ? CLK_LIMIT_MIN :
	    CLK_LIMIT_MAX;
	amdsmi_status_t rc;

	rc = c->fn.clk_limit(g->h, type, first, max_first ? max : min);
	if (rc == AMDSMI_STATUS_SUCCESS)
		rc = c->fn.clk_limit(g->h, type, second, max_first ? min : max);
	return rc;
}

/*
 * Locks one clock domain to [min, max]. The range zeusd knows can be stale
 * (someone else changed it), so a failed write is retried once with the
 * range read back from the library, and if that fails too the old range
 * is put back before the error is reported.
 */
static int
amd_lock_clocks(struct amd_ctx *c, struct amd_gpu *g, unsigned gpu,
    const char *what, amdsmi_clk_type_t type, const struct gpu_write *w,
    struct zerr *err)
{
	struct amd_bounds *b = &g->clk[type == AMDSMI_CLK_TYPE_MEM];
	struct amd_bounds before, now = { .valid = false };
	amdsmi_status_t rc;

	if (c->fn.clk_limit == NULL)
		return amd_fail_lacks(err, gpu, what,
		    "AMD SMI lacks amdsmi_set_gpu_clk_limit");
	if (w->min_clock_mhz > w->max_clock_mhz)
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s failed: "
		    "min_clock_mhz %u is above max_clock_mhz %u", gpu, what,
		    w->min_clock_mhz, w->max_clock_mhz);
	amd_lock(c);
	if (!b->valid)
		(void)amd_query_bounds(c, g, type, b);
	before = *b;
	rc = amd_write_limits(c, g, type, &before, w->min_clock_mhz,
	    w->max_clock_mhz);
	if (rc != AMDSMI_STATUS_SUCCESS) {
		zlog(ZLOG_WARN, "amdsmi_clock_retry", "gpu=%u domain=%s "
		    "status=%u", gpu, type == AMDSMI_CLK_TYPE_MEM ? "mem" :
		    "gfx", (unsigned)rc);
		(void)amd_query_bounds(c, g, type, &now);
		rc = amd_write_limits(c, g, type, &now, w->min_clock_mhz,
		    w->max_clock_mhz);
		if (rc != AMDSMI_STATUS_SUCCESS && before.valid && now.valid)
			(void)amd_write_limits(c, g, type, &now, before.min,
			    before.max);
	}
	if (rc == AMDSMI_STATUS_SUCCESS) {
		b->valid = true;
		b->min = w->min_clock_mhz;
		b->max = w->max_clock_mhz;
	} else
		b->valid = false;
	amd_unlock(c);
	return rc == AMDSMI_STATUS_SUCCESS ? 0 : amd_fail(c, err, gpu, what,
	    rc);
}

static int
amd_write(struct gpu_backend *b, unsigned gpu, const struct gpu_write *w,
    struct zerr *err)
{
	struct amd_ctx *c = b->ctx;
	struct amd_gpu *g = amd_gpu_at(b, gpu, err);
	const char *what = gpu_write_op_name(w->op);
	const char *lacks;
	amdsmi_status_t rc;

	if (g == NULL)
		return -1;
	if ((lacks = amd_write_lacks(b, w->op)) != NULL)
		return amd_fail_lacks(err, gpu, what, lacks);
	switch (w->op) {
	case GPU_SET_POWER_LIMIT:
		amd_lock(c);
		rc = c->fn.set_cap(g->h, 0, (uint64_t)w->power_limit_mw * 1000);
		amd_unlock(c);
		break;
	case GPU_SET_GPU_LOCKED_CLOCKS:
		return amd_lock_clocks(c, g, gpu, what, AMDSMI_CLK_TYPE_SYS, w,
		    err);
	case GPU_SET_MEM_LOCKED_CLOCKS:
		return amd_lock_clocks(c, g, gpu, what, AMDSMI_CLK_TYPE_MEM, w,
		    err);
	case GPU_RESET_LOCKED_CLOCKS:
		/* the driver restores its default limits, read again later */
		amd_lock(c);
		rc = c->fn.perf_level(g->h, AMDSMI_DEV_PERF_LEVEL_AUTO);
		g->clk[0].valid = g->clk[1].valid = false;
		amd_unlock(c);
		break;
	default:
		return zerr_set(err, ZERR_INVALID, "GPU %u: %s is not supported "
		    "on AMD GPUs", gpu, what);
	}
	return rc == AMDSMI_STATUS_SUCCESS ? 0 : amd_fail(c, err, gpu, what,
	    rc);
}

static void
amd_close(struct amd_ctx *c)
{
	c->fn.shut_down();
	dlclose(c->dl);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void
amd_destroy(struct gpu_backend *b)
{
	if (b->ctx != NULL)
		amd_close(b->ctx);
	b->ctx = NULL;
	b->ops = NULL;
}

static const struct gpu_backend_ops amd_ops = {
	.name = "amdsmi",
	.count = amd_count,
	.info = amd_info,
	.get_power_mw = amd_get_power_mw,
	.get_energy_mj = amd_get_energy_mj,
	.get_power_limit_mw = amd_get_power_limit_mw,
	.get_power_limit_constraints = amd_get_power_limit_constraints,
	.get_persistence_mode = amd_get_persistence_mode,
	.write = amd_write,
	.read_lacks = amd_read_lacks,
	.write_lacks = amd_write_lacks,
	.lost = amd_lost,
	.destroy = amd_destroy,
};

/* ------------------------------------------------------------------------
 * Opening.
 */

static int
amd_resolve(void *dl, const char *lib, struct amd_fns *fn,
    struct zerr *err)
{
	memset(fn, 0, sizeof(*fn));
	for (size_t i = 0; i < AMD_NSYMS; i++) {
		void *p = dlsym(dl, amd_syms[i].name);

		if (p == NULL && amd_syms[i].required)
			return zerr_set(err, ZERR_INTERNAL, "AMD SMI library "
			    "'%.512s' lacks symbol %s", lib, amd_syms[i].name);
		memcpy((char *)fn + amd_syms[i].offset, &p, sizeof(p));
	}
	return 0;
}

/*
 * Loads the first candidate that opens and has the required symbols:
 * .26, .25, .24 in each search directory, then by soname from the
 * loader's path when no variable restricts the search. A library that
 * opens but lacks a symbol does not end the search (a later one may do).
 */
static void *
amd_load(unsigned *abi, struct amd_fns *fn, char *used, size_t usedsize,
    struct zerr *err)
{
	char dirs[AMD_DIRS_MAX][AMD_PATH_MAX];
	/* tried: as large as the zerr, so only zerr_set's cut shows */
	char path[AMD_PATH_MAX + 32], tried[ZERR_MSG_MAX] = "";
	bool loader;
	size_t n = amd_search_dirs(getenv("AMDSMI_LIB_DIR"),
	    getenv("ROCM_PATH"), "/opt", dirs, AMD_DIRS_MAX, &loader);
	size_t len = 0;
	void *dl;

	for (size_t i = 0; i < n + (loader ? 1 : 0); i++) {
		for (unsigned a = AMD_ABI_NEWEST; a >= AMD_ABI_OLDEST; a--) {
			struct zerr why;

			if (i < n)
				snprintf(path, sizeof(path),
				    "%s/libamd_smi.so.%u", dirs[i], a);
			else
				snprintf(path, sizeof(path),
				    "libamd_smi.so.%u", a);
			if ((dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
				continue;
			if (amd_resolve(dl, path, fn, &why) == 0) {
				*abi = a;
				snprintf(used, usedsize, "%s", path);
				return dl;
			}
			dlclose(dl);
			if (len < sizeof(tried))
				len += (size_t)snprintf(tried + len,
				    sizeof(tried) - len, "; %s", why.msg);
		}
	}
	zerr_set(err, ZERR_NOT_FOUND, "cannot load the AMD SMI library: no "
	    "usable libamd_smi.so.26, .25 or .24 in %.512s%s%.512s%s%s",
	    n > 0 ? dirs[0] : "?", n > 1 ? " or " : "", n > 1 ? dirs[n - 1] :
	    "", loader ? " nor on the loader's path" : " ($AMDSMI_LIB_DIR "
	    "or $ROCM_PATH, when set, is the whole search)", tried);
	return NULL;
}

static int
amd_enumerate(struct amd_ctx *c, struct zerr *err)
{
	amdsmi_socket_handle sockets[AMD_GPUS_MAX];
	amdsmi_processor_handle procs[AMD_GPUS_MAX];
	uint32_t ns = AMD_GPUS_MAX, np;
	amdsmi_status_t rc;

	if ((rc = c->fn.socket_handles(&ns, sockets)) != AMDSMI_STATUS_SUCCESS)
		return amd_fail(c, err, 0, "amdsmi_get_socket_handles", rc);
	for (uint32_t s = 0; s < ns && s < AMD_GPUS_MAX; s++) {
		np = AMD_GPUS_MAX;
		rc = c->fn.processor_handles(sockets[s], &np, procs);
		if (rc != AMDSMI_STATUS_SUCCESS)
			return amd_fail(c, err, c->count,
			    "amdsmi_get_processor_handles", rc);
		for (uint32_t p = 0; p < np && p < AMD_GPUS_MAX &&
		    c->count < AMD_GPUS_MAX; p++)
			c->gpus[c->count++].h = procs[p];
	}
	return 0;
}

/*
 * Which reading a GPU's power comes from, decided once from its first
 * power info as upstream decides it, so that one GPU's readings never mix
 * the instantaneous value with the average. A first read that fails
 * decides nothing: that GPU then takes the current power, else the
 * average, at every read.
 */
static void
amd_choose_power(struct amd_ctx *c, struct amd_gpu *g, unsigned i)
{
	amdsmi_power_info_any_t p;
	amdsmi_status_t rc;

	memset(&p, 0, sizeof(p));
	g->power = AMD_POWER_ANY;
	if ((rc = c->fn.power_info(g->h, &p)) != AMDSMI_STATUS_SUCCESS) {
		zlog(ZLOG_WARN, "amdsmi_power_source", "gpu=%u source=any "
		    "reason=power_info_failed status=%u", i, (unsigned)rc);
		return;
	}
	g->power = amd_power_source(c->abi, &p);
	if (g->power != AMD_POWER_CURRENT)
		zlog(ZLOG_INFO, "amdsmi_power_source", "gpu=%u source=%s "
		    "reason=current_not_available", i,
		    amd_power_source_name(g->power));
}

static void
amd_identify(struct amd_ctx *c, struct amd_gpu *g, unsigned i)
{
	struct gpu_info *in = &g->info;
	amdsmi_power_cap_info_t ci;
	unsigned int len;
	amdsmi_bdf_t bdf;

	amdsmi_asic_info_t *asic = calloc(1, sizeof(*asic));

	snprintf(in->name, sizeof(in->name), "AMD GPU");
	if (asic != NULL && c->fn.asic_info != NULL &&
	    c->fn.asic_info(g->h, asic) == AMDSMI_STATUS_SUCCESS &&
	    asic->market_name[0] != '\0') {
		size_t k = 0;

		for (; k + 1 < sizeof(in->name) && k < AMDSMI_MARKET_NAME_LEN &&
		    asic->market_name[k] != '\0'; k++)
			in->name[k] = asic->market_name[k] >= 0x20 &&
			    asic->market_name[k] < 0x7f ? asic->market_name[k] :
			    '?';
		in->name[k] = '\0';
	}
	free(asic);
	snprintf(in->architecture, sizeof(in->architecture), "unknown");
	if (c->fn.bdf != NULL && c->fn.bdf(g->h, &bdf) ==
	    AMDSMI_STATUS_SUCCESS)
		snprintf(in->pci_address, sizeof(in->pci_address),
		    "%04x:%02x:%02x.%x", (unsigned)bdf.fields.domain_number,
		    (unsigned)bdf.fields.bus_number,
		    (unsigned)bdf.fields.device_number,
		    (unsigned)bdf.fields.function_number);
	len = sizeof(in->uuid);
	if (c->fn.uuid == NULL || c->fn.uuid(g->h, &len, in->uuid) !=
	    AMDSMI_STATUS_SUCCESS)
		in->uuid[0] = '\0';
	in->uuid[sizeof(in->uuid) - 1] = '\0';
	memset(&ci, 0, sizeof(ci));
	if (c->fn.cap_info != NULL && c->fn.cap_info(g->h, 0, &ci) ==
	    AMDSMI_STATUS_SUCCESS) {
		in->caps.limit_min_mw = amd_uw_to_mw(ci.min_power_cap);
		in->caps.limit_max_mw = amd_uw_to_mw(ci.max_power_cap);
		in->caps.limit_default_mw = amd_uw_to_mw(ci.default_power_cap);
		in->caps.power_limit = c->fn.set_cap != NULL;
	}
	for (int d = 0; d < 2; d++)
		if (amd_query_bounds(c, g, d ? AMDSMI_CLK_TYPE_MEM :
		    AMDSMI_CLK_TYPE_SYS, &g->clk[d]) != AMDSMI_STATUS_SUCCESS)
			g->clk[d].valid = false;
	if (g->clk[0].valid) {
		in->caps.gpu_clock_min_mhz = g->clk[0].min;
		in->caps.gpu_clock_max_mhz = g->clk[0].max;
	}
	if (g->clk[1].valid) {
		in->caps.mem_clock_min_mhz = g->clk[1].min;
		in->caps.mem_clock_max_mhz = g->clk[1].max;
	}
	in->caps.persistence_mode = false;
	in->caps.gpu_locked_clocks = c->fn.clk_limit != NULL;
	in->caps.mem_locked_clocks = c->fn.clk_limit != NULL;
	amd_choose_power(c, g, i);
	zlog(ZLOG_DEBUG, "amdsmi_gpu", "gpu=%u pci=%s power=%s", i,
	    in->pci_address, amd_power_source_name(g->power));
}

static double
amd_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Keeps a GPU's energy counter only when the energy it counts over half a
 * second is within a factor of ten of what the GPU's power reading implies
 * (AMD SMI's counter is known to be wildly off on some releases and parts;
 * ROCm/amdsmi issue 38). A GPU whose power reads as zero or not available
 * cannot be checked and gets no counter either: clients integrate power.
 */
static void
amd_check_energy(struct amd_ctx *c)
{
	struct timespec pause = { (time_t)(c->check_ms / 1000),
	    (long)(c->check_ms % 1000) * 1000000L };
	double e0[AMD_GPUS_MAX], p0[AMD_GPUS_MAX], e1, t0, t1, expected;
	bool ok[AMD_GPUS_MAX];
	struct zerr err;
	uint32_t mw;
	int verdict;

	if (c->fn.energy == NULL || c->count == 0)
		return;
	zlog(ZLOG_INFO, "amdsmi_energy_check", "gpus=%u ms=%u", c->count,
	    c->check_ms);
	for (unsigned i = 0; i < c->count; i++) {
		p0[i] = amd_read_power(c, &c->gpus[i], i, &mw, &err) == 0 ?
		    (double)mw : 0;
		ok[i] = amd_read_energy(c, &c->gpus[i], &e0[i]) ==
		    AMDSMI_STATUS_SUCCESS;
	}
	t0 = amd_now_s();
	nanosleep(&pause, NULL);
	t1 = amd_now_s();
	for (unsigned i = 0; i < c->count; i++) {
		struct amd_gpu *g = &c->gpus[i];

		if (!ok[i] || amd_read_energy(c, g, &e1) !=
		    AMDSMI_STATUS_SUCCESS) {
			zlog(ZLOG_INFO, "amdsmi_energy_unavailable",
			    "gpu=%u reason=counter_unreadable", i);
			continue;
		}
		expected = p0[i] * (t1 - t0);		/* mW x s = mJ */
		verdict = amd_energy_verdict(expected, (e1 - e0[i]) / 1000.0);
		g->info.energy_available = verdict > 0;
		if (verdict > 0)
			continue;
		zlog(ZLOG_WARN, "amdsmi_energy_unavailable", "gpu=%u reason=%s "
		    "expected_mj=%.3f measured_mj=%.3f", i, verdict == 0 ?
		    "power_unreadable" : "counter_disagrees_with_power", expected,
		    (e1 - e0[i]) / 1000.0);
	}
}

/*
 * Everything after loading: the version check, init, enumeration, each
 * GPU's facts and the energy check. Takes `dl` over (closed on failure).
 */
static int
amd_open_loaded(void *dl, unsigned abi, const struct amd_fns *fn,
    const char *lib, unsigned check_ms, struct gpu_backend *out,
    struct zerr *err)
{
	char ver[64], why[512];
	amdsmi_version_any_t v;
	amdsmi_status_t rc;
	struct amd_ctx *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		dlclose(dl);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	c->dl = dl;
	c->abi = abi;
	c->fn = *fn;
	c->check_ms = check_ms;
	pthread_mutex_init(&c->lock, NULL);
	memset(&v, 0, sizeof(v));
	if ((rc = c->fn.lib_version(&v)) != AMDSMI_STATUS_SUCCESS) {
		amd_fail(c, err, 0, "amdsmi_get_lib_version", rc);
		goto fail_loaded;
	}
	if (amd_version_check(abi, &v, &c->serialize, ver, sizeof(ver), why,
	    sizeof(why)) != 0) {
		zerr_set(err, ZERR_INVALID, "AMD SMI library '%.512s' is not "
		    "usable: %s", lib, why);
		goto fail_loaded;
	}
	if ((rc = c->fn.init(AMDSMI_INIT_AMD_GPUS)) != AMDSMI_STATUS_SUCCESS) {
		char text[AMD_TEXT_MAX];

		amd_text(c, rc, text, sizeof(text));
		zerr_set(err, rc == AMDSMI_STATUS_DRIVER_NOT_LOADED ?
		    ZERR_NOT_FOUND : ZERR_INTERNAL, "amdsmi_init failed: %s",
		    text);
		goto fail_loaded;
	}
	if (amd_enumerate(c, err) != 0) {
		amd_close(c);
		return -1;
	}
	for (unsigned i = 0; i < c->count; i++)
		amd_identify(c, &c->gpus[i], i);
	amd_check_energy(c);
	{
		char q[AMD_PATH_MAX + 64];

		zlog(ZLOG_INFO, "amdsmi_opened", "library=%s version=%s abi=%u "
		    "gpus=%u serialized=%s", zlog_quote(q, sizeof(q), lib), ver,
		    abi, c->count, c->serialize ? "yes" : "no");
	}
	out->ops = &amd_ops;
	out->ctx = c;
	return 0;
fail_loaded:
	dlclose(dl);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return -1;
}

int
amd_backend_open(struct gpu_backend *out, struct zerr *err)
{
	char lib[AMD_PATH_MAX + 32];
	struct amd_fns fn;
	unsigned abi = 0;
	void *dl;

	if ((dl = amd_load(&abi, &fn, lib, sizeof(lib), err)) == NULL)
		return -1;
	return amd_open_loaded(dl, abi, &fn, lib, AMD_ENERGY_CHECK_MS, out,
	    err);
}

int
amd_backend_open_lib(const char *path, unsigned abi, unsigned check_ms,
    struct gpu_backend *out, struct zerr *err)
{
	struct amd_fns fn;
	const char *dlerr;
	void *dl;

	if (abi < AMD_ABI_OLDEST || abi > AMD_ABI_NEWEST)
		return zerr_set(err, ZERR_INVALID, "AMD SMI ABI %u is not one "
		    "of %u..%u", abi, AMD_ABI_OLDEST, AMD_ABI_NEWEST);
	if (check_ms == 0 || check_ms > 60000)
		return zerr_set(err, ZERR_INVALID, "energy check of %u ms is "
		    "not 1..60000", check_ms);
	if ((dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		dlerr = dlerror();
		return zerr_set(err, ZERR_NOT_FOUND, "cannot load the AMD SMI "
		    "library '%.1024s': %.512s", path, dlerr != NULL ? dlerr :
		    "?");
	}
	if (amd_resolve(dl, path, &fn, err) != 0) {
		dlclose(dl);
		return -1;
	}
	return amd_open_loaded(dl, abi, &fn, path, check_ms, out, err);
}
