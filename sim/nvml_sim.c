/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml_sim.c - a simulated NVIDIA node behind the NVML C ABI.
 *
 * Built as build/libnvml-sim.so, it exports the NVML symbols that the NVML
 * backend (src/devices/nvml.c) resolves with dlopen, and those that NVML's
 * Python binding (nvidia-ml-py) and tools built on it call on start-up and
 * for power and energy work, with the signatures and struct layouts of
 * NVIDIA's nvml.h (declared in src/devices/nvml_api.h, which this file is
 * compiled against). So the daemon, libzeus, the tests and NVML-based tools
 * run unchanged on a machine without GPUs. docs/simulator.md is the
 * user-facing version of this comment.
 *
 * What it simulates, per GPU: a model (a profile: V100-, A100-, H100-,
 * H200-, P100- or RTX 4090-like, chosen by ZEUS_SIM_PROFILE) with its name,
 * architecture, power limits, clock tables, memory and the operations it
 * does not support; a PCI address and UUID; power that follows a 20 s
 * idle/busy cycle with a wobble and noise, limited by the power limit and
 * lowered by locked GPU/memory clocks; an energy counter (mJ) that
 * integrates that power over CLOCK_MONOTONIC time and never decreases; the
 * power limit (writes outside the constraints fail with
 * NVML_ERROR_INVALID_ARGUMENT as the driver does); persistence mode; locked
 * clocks (min > max is invalid); current clocks, utilization, temperature
 * and memory use that follow the load.
 *
 * Build variants stand for drivers: -DNVML_SIM_LEGACY leaves out every
 * entry point an old driver may lack (the versioned names, so only the
 * older ones remain, memory locked clocks, field values, the energy
 * counter, the architecture query, nvmlInitWithFlags), since what dlsym
 * finds cannot change at run time; -DNVML_SIM_OMIT_SETMEMCLOCKS leaves out
 * nvmlDeviceSetMemoryLockedClocks alone.
 *
 * Environment, read by the first init (and again by an init that follows a
 * full shutdown):
 *   ZEUS_SIM_PROFILE   a profile, a comma-separated list of them (GPU i
 *                      gets entry i modulo the length) or "mixed"; default
 *                      a100
 *   ZEUS_SIM_GPUS      number of GPUs, 0..64; default the list's length
 *                      when it has more than one entry, else 4
 *   ZEUS_SIM_GPU_NAME  model name of every GPU, instead of the profile's
 *   ZEUS_SIM_PCI       comma-separated PCI addresses "DDDD:BB:DD.F" (hex)
 *                      for GPUs 0, 1, ...; missing ones default to
 *                      0000:<index+1>:00.0 (bus 01, 02, ...)
 *   ZEUS_SIM_DRIVER_VERSION  what nvmlSystemGetDriverVersion answers
 *   ZEUS_SIM_FAULTS    fault rules (format below) separated by ';', fixed
 *                      for the life of the process (e.g. a pre-Volta GPU)
 *   ZEUS_SIM_CONTROL   path of a control file with fault rules, one per
 *                      line; re-read whenever its inode, size, mtime or
 *                      ctime changes (checked with stat() on every call).
 *                      Write a new file and rename() it over the old one so
 *                      a change is never missed. A missing file means no
 *                      rules from it.
 *   ZEUS_SIM_LOG       path of a call log to append to (format below)
 * A malformed setting makes init fail with NVML_ERROR_INVALID_ARGUMENT
 * after one explanatory line on stderr.
 *
 * Fault rules ('#' starts a comment line; blank lines are ignored):
 *   fail  <function|*> <gpu|*> <code>   the call returns <code>
 *   delay <function|*> <gpu|*> <ms>     the call sleeps <ms> (0..600000)
 * <function> is an NVML symbol name as exported (nvmlDeviceGetCount_v2);
 * <gpu> is a decimal index; `*` matches anything. Calls that take no GPU
 * (the inits, nvmlShutdown, the counts, the system queries) match only `*`
 * rules; the handle lookups match their index argument. <code> is an
 * nvmlReturn_t name with or without its NVML_ERROR_ prefix (NO_PERMISSION,
 * NOT_SUPPORTED, GPU_IS_LOST, ..., SUCCESS) or a decimal number. Control-file
 * rules are checked before ZEUS_SIM_FAULTS rules and the first matching
 * `fail` rule wins, so `fail <f> <gpu> SUCCESS` in the control file lifts a
 * fault set in the environment; likewise for `delay`. A profile's
 * unsupported operations answer NOT_SUPPORTED unless a rule says
 * otherwise. For nvmlDeviceGetFieldValues an injected NOT_SUPPORTED is
 * reported in every field's nvmlReturn while the call succeeds, which is
 * how the driver reports a field it does not support; other codes fail the
 * call. Delays are slept without holding any lock, so a slow call on one
 * GPU does not hold up calls on other GPUs.
 *
 * Call log: one line per call (nvmlErrorString excepted), written with a
 * single write() to an O_APPEND descriptor when the call returns:
 *   <start_ns> <function> <gpu|-> [args...] rc=<CODE> end_ns=<ns>
 * where the times are CLOCK_MONOTONIC nanoseconds, args are the values
 * passed (e.g. `nvmlDeviceSetPowerManagementLimit 1 250000`, clocks as
 * `<min> <max>`, persistence as 0/1, field ids for GetFieldValues), and
 * CODE is the returned code's name without prefix (SUCCESS, NO_PERMISSION).
 *
 * Thread safety: one mutex guards all state; NVML is thread-safe and so is
 * this library.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices/nvml_api.h"
#include "sim_os.h"

#define SIM_MAX_GPUS 64
#define SIM_DEFAULT_GPUS 4
#define SIM_NAME_MAX NVML_DEVICE_NAME_V2_BUFFER_SIZE
#define SIM_MAX_RULES 256
#define SIM_LINE_MAX 512
#define SIM_CONTROL_MAX (64 * 1024)
#define SIM_MAX_DELAY_MS 600000u
#define SIM_MAX_FIELDS 1024

#define SIM_MAX_PROFILES 16		/* entries of a ZEUS_SIM_PROFILE list */
#define SIM_MAX_CLOCKS 256		/* graphics clock table entries */

/* Power model and clocks. */
#define SIM_CYCLE_MS 20000u		/* idle + busy period */
#define SIM_IDLE_MS 4000u		/* idle part of each cycle */
#define SIM_NOISE_SLOT_NS 25000000u	/* noise changes every 25 ms */
#define SIM_ENERGY_STEP_NS 50000000u	/* integration step */
#define SIM_MAX_STEPS 100000u

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

_Static_assert(FN_COUNT <= 64, "sim_profile.unsupported is a 64-bit mask");

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

#define SIM_BIT(fn) (UINT64_C(1) << (fn))

/*
 * A GPU model. Values are plausible for the part, not its datasheet: the
 * point is the shape (which limits, which clocks, what is supported) that
 * code above NVML has to cope with.
 */
struct sim_profile {
	const char *key;		/* ZEUS_SIM_PROFILE name */
	const char *name;		/* nvmlDeviceGetName */
	nvmlDeviceArchitecture_t arch;
	unsigned pci_id;		/* pciDeviceId: device << 16 | 0x10de */
	unsigned tdp_mw;		/* default limit; busy draw at full clocks */
	unsigned min_limit_mw, max_limit_mw;
	unsigned idle_mw;
	unsigned gpu_clk_min, gpu_clk_max, gpu_clk_step;	/* MHz */
	unsigned mem_clks[6];		/* supported, descending, 0-ended */
	unsigned video_clk;
	unsigned mem_gib;
	uint64_t unsupported;		/* SIM_BIT(FN_*): NOT_SUPPORTED */
	bool no_instant_power;		/* field 186 not supported */
};

/* Locked clocks need Volta; memory locked clocks Ampere (NVML's docs). */
#define SIM_NO_MEM_LOCK (SIM_BIT(FN_SET_MEM_CLOCKS) | \
	SIM_BIT(FN_RESET_MEM_CLOCKS))
#define SIM_NO_GPU_LOCK (SIM_BIT(FN_SET_GPU_CLOCKS) | \
	SIM_BIT(FN_RESET_GPU_CLOCKS))

static const struct sim_profile sim_profiles[] = {
	{ "a100", "NVIDIA A100-SXM4-80GB", NVML_DEVICE_ARCH_AMPERE,
	    0x20b510de, 400000, 100000, 400000, 55000, 210, 1410, 15,
	    { 1593, 1512, 810, 405 }, 1275, 80, 0, false },
	{ "v100", "Tesla V100-SXM2-32GB", NVML_DEVICE_ARCH_VOLTA,
	    0x1db510de, 300000, 150000, 300000, 40000, 135, 1530, 15,
	    { 877 }, 1372, 32, SIM_NO_MEM_LOCK, false },
	{ "h100", "NVIDIA H100 80GB HBM3", NVML_DEVICE_ARCH_HOPPER,
	    0x233010de, 700000, 200000, 700000, 70000, 345, 1980, 15,
	    { 2619 }, 1755, 80, 0, false },
	{ "h200", "NVIDIA H200", NVML_DEVICE_ARCH_HOPPER,
	    0x233510de, 700000, 200000, 700000, 75000, 345, 1980, 15,
	    { 3201 }, 1755, 141, 0, false },
	{ "rtx4090", "NVIDIA GeForce RTX 4090", NVML_DEVICE_ARCH_ADA,
	    0x268410de, 450000, 150000, 600000, 20000, 210, 3105, 15,
	    { 10501, 10251, 5001, 810, 405 }, 1965, 24, 0, true },
	{ "p100", "Tesla P100-PCIE-16GB", NVML_DEVICE_ARCH_PASCAL,
	    0x15f810de, 250000, 125000, 250000, 30000, 545, 1325, 15,
	    { 715 }, 1240, 16, SIM_BIT(FN_GET_ENERGY) | SIM_NO_GPU_LOCK |
	    SIM_NO_MEM_LOCK, true },
};

#define SIM_NPROFILES (sizeof(sim_profiles) / sizeof(sim_profiles[0]))
#define SIM_MIXED "v100,a100,h100,rtx4090"

#ifdef NVML_SIM_LEGACY
#define SIM_DRIVER_VERSION "450.80.02"
#define SIM_NVML_VERSION "11.450.80.02"
#else
#define SIM_DRIVER_VERSION "570.124.06"
#define SIM_NVML_VERSION "12.570.124.06"
#endif

/* Return codes: the name used in rules and logs, and the driver's text. */
struct sim_code {
	nvmlReturn_t code;
	const char *name;
	const char *text;
};

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

#define SIM_NCODES (sizeof(sim_codes) / sizeof(sim_codes[0]))

/* One simulated GPU; the handle NVML hands out points at it. */
struct nvmlDevice_st {
	unsigned index;
	const struct sim_profile *prof;
	char name[SIM_NAME_MAX];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	unsigned domain, bus, device;
	/* Mutable state, guarded by sim.lock. */
	unsigned limit_mw;
	bool persistence;
	unsigned gpu_lock_min, gpu_lock_max;	/* 0, 0: not locked */
	unsigned mem_lock_min, mem_lock_max;
	double energy_mj;			/* integrated up to energy_ns */
	uint64_t energy_ns;
};

enum sim_rule_kind { SIM_FAIL, SIM_DELAY };

struct sim_rule {
	enum sim_rule_kind kind;
	int fn;			/* enum sim_fn, or -1 for any */
	int gpu;		/* index, or -1 for any */
	nvmlReturn_t code;	/* SIM_FAIL */
	unsigned delay_ms;	/* SIM_DELAY */
};

struct sim_rules {
	struct sim_rule r[SIM_MAX_RULES];
	unsigned n;
};

static struct {
	pthread_mutex_t lock;
	unsigned refs;			/* nvmlInit_v2 minus nvmlShutdown */
	unsigned count;
	struct nvmlDevice_st gpus[SIM_MAX_GPUS];
	struct sim_rules env_rules, file_rules;
	char control_path[PATH_MAX];
	struct sim_stamp stamp;
	int log_fd;
	char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
} sim = { .lock = PTHREAD_MUTEX_INITIALIZER, .log_fd = -1 };

/* One call in flight: what the log line needs. */
struct sim_call {
	enum sim_fn fn;
	int gpu;			/* -1: none */
	uint64_t start_ns;
	int log_fd;
	bool ruled;			/* a `fail` rule decided rc */
	char args[96];
};

static uint64_t
sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const struct sim_code *
sim_code_find(nvmlReturn_t code)
{
	for (size_t i = 0; i < SIM_NCODES; i++)
		if (sim_codes[i].code == code)
			return &sim_codes[i];
	return NULL;
}

/* ------------------------------------------------------------------------
 * Parsing of settings and rules. Everything here is untrusted input.
 */

static bool
sim_parse_uint(const char *s, int base, unsigned long max,
    unsigned long *out)
{
	char *end;
	unsigned long v;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

static bool
sim_parse_code(const char *s, nvmlReturn_t *out)
{
	unsigned long v;

	if (strncmp(s, "NVML_ERROR_", 11) == 0)
		s += 11;
	else if (strcmp(s, "NVML_SUCCESS") == 0)
		s = "SUCCESS";
	for (size_t i = 0; i < SIM_NCODES; i++) {
		if (strcmp(s, sim_codes[i].name) == 0) {
			*out = sim_codes[i].code;
			return true;
		}
	}
	if (!sim_parse_uint(s, 10, 999, &v))
		return false;
	*out = (nvmlReturn_t)v;
	return true;
}

/* Parses "fail|delay FUNC GPU ARG"; blank and comment lines give 0. */
static int
sim_parse_rule(char *line, struct sim_rules *rules)
{
	char *save = NULL, *tok[5];
	unsigned ntok = 0;
	struct sim_rule r = { .fn = -1, .gpu = -1 };
	unsigned long v;

	for (char *t = strtok_r(line, " \t\r\n", &save); t != NULL;
	    t = strtok_r(NULL, " \t\r\n", &save)) {
		if (ntok == 5)
			return -1;
		tok[ntok++] = t;
	}
	if (ntok == 0 || tok[0][0] == '#')
		return 0;
	if (ntok != 4)
		return -1;
	if (strcmp(tok[0], "fail") == 0)
		r.kind = SIM_FAIL;
	else if (strcmp(tok[0], "delay") == 0)
		r.kind = SIM_DELAY;
	else
		return -1;
	if (strcmp(tok[1], "*") != 0) {
		for (int i = 0; i < FN_COUNT; i++)
			if (strcmp(tok[1], sim_fn_names[i]) == 0)
				r.fn = i;
		if (r.fn < 0)
			return -1;
	}
	if (strcmp(tok[2], "*") != 0) {
		if (!sim_parse_uint(tok[2], 10, SIM_MAX_GPUS - 1, &v))
			return -1;
		r.gpu = (int)v;
	}
	if (r.kind == SIM_FAIL) {
		if (!sim_parse_code(tok[3], &r.code))
			return -1;
	} else {
		if (!sim_parse_uint(tok[3], 10, SIM_MAX_DELAY_MS, &v))
			return -1;
		r.delay_ms = (unsigned)v;
	}
	if (rules->n == SIM_MAX_RULES)
		return -1;
	rules->r[rules->n++] = r;
	return 0;
}

/*
 * Parses rules separated by any of `seps` into `rules`. Returns -1 at the
 * first bad rule when `strict`; otherwise skips bad rules with a warning.
 */
static int
sim_parse_rules(const char *text, const char *seps, bool strict,
    struct sim_rules *rules)
{
	char line[SIM_LINE_MAX];

	rules->n = 0;
	while (*text != '\0') {
		size_t len = strcspn(text, seps);

		if (len >= sizeof(line)) {
			fprintf(stderr, "nvml-sim: rule longer than %d bytes\n",
			    SIM_LINE_MAX - 1);
			if (strict)
				return -1;
		} else {
			memcpy(line, text, len);
			line[len] = '\0';
			if (sim_parse_rule(line, rules) != 0) {
				memcpy(line, text, len);
				line[len] = '\0';
				fprintf(stderr, "nvml-sim: bad rule: %.*s\n",
				    80, line);
				if (strict)
					return -1;
			}
		}
		text += len;
		if (*text != '\0')
			text++;
	}
	return 0;
}

/* Parses "DDDD:BB:DD.F" (hex). The function part is checked, then unused:
 * nvmlPciInfo_t has no function field. */
static bool
sim_parse_pci(const char *s, unsigned *domain, unsigned *bus, unsigned *dev)
{
	char buf[32], *p[4], *q;
	unsigned long v[4];
	const unsigned long max[4] = { 0xffffffffUL, 0xff, 0x1f, 0x7 };

	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	p[0] = buf;
	if ((q = strchr(p[0], ':')) == NULL)
		return false;
	*q = '\0';
	p[1] = q + 1;
	if ((q = strchr(p[1], ':')) == NULL)
		return false;
	*q = '\0';
	p[2] = q + 1;
	if ((q = strchr(p[2], '.')) == NULL)
		return false;
	*q = '\0';
	p[3] = q + 1;
	for (int i = 0; i < 4; i++)
		if (!sim_parse_uint(p[i], 16, max[i], &v[i]))
			return false;
	*domain = (unsigned)v[0];
	*bus = (unsigned)v[1];
	*dev = (unsigned)v[2];
	return true;
}

static int
sim_configure_pci(const char *list)
{
	unsigned i = 0;

	while (list != NULL && *list != '\0' && i < SIM_MAX_GPUS) {
		char item[64];
		size_t len = strcspn(list, ",");
		struct nvmlDevice_st *g = &sim.gpus[i];

		if (len >= sizeof(item))
			len = sizeof(item) - 1;
		memcpy(item, list, len);
		item[len] = '\0';
		if (!sim_parse_pci(item, &g->domain, &g->bus, &g->device)) {
			fprintf(stderr, "nvml-sim: bad ZEUS_SIM_PCI entry "
			    "%.40s (want DDDD:BB:DD.F)\n", item);
			return -1;
		}
		list += strcspn(list, ",");
		if (*list == ',')
			list++;
		i++;
	}
	return 0;
}

/*
 * Parses ZEUS_SIM_PROFILE ("a100", "v100,h100", "mixed") into `out`;
 * returns the number of entries, or 0 after a line on stderr.
 */
static unsigned
sim_parse_profiles(const char *list, const struct sim_profile **out)
{
	unsigned n = 0;

	if (list == NULL || *list == '\0')
		list = "a100";
	if (strcmp(list, "mixed") == 0)
		list = SIM_MIXED;
	while (*list != '\0') {
		size_t len = strcspn(list, ",");
		size_t k;

		for (k = 0; k < SIM_NPROFILES; k++)
			if (strlen(sim_profiles[k].key) == len &&
			    strncmp(sim_profiles[k].key, list, len) == 0)
				break;
		if (k == SIM_NPROFILES || n == SIM_MAX_PROFILES) {
			fprintf(stderr, "nvml-sim: bad ZEUS_SIM_PROFILE entry "
			    "%.*s (want at most %d of mixed, a100, v100, h100, "
			    "h200, rtx4090, p100)\n", (int)(len < 40 ? len : 40),
			    list, SIM_MAX_PROFILES);
			return 0;
		}
		out[n++] = &sim_profiles[k];
		list += len;
		if (*list == ',' && *++list == '\0') {
			fprintf(stderr, "nvml-sim: ZEUS_SIM_PROFILE ends with "
			    "a comma\n");
			return 0;
		}
	}
	return n;
}

/* A stable, unique "GPU-8-4-4-4-12" UUID from the GPU's place. */
static void
sim_make_uuid(struct nvmlDevice_st *g)
{
	uint64_t a = 0x5a3e0000u + g->index, b;

	a = (a ^ ((uint64_t)g->domain << 32) ^ ((uint64_t)g->bus << 8)) *
	    0x9e3779b97f4a7c15ULL;
	a ^= a >> 29;
	b = (a ^ g->prof->pci_id) * 0xbf58476d1ce4e5b9ULL;
	b ^= b >> 31;
	snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-%04x-%04x-%04x-%012llx",
	    (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffffu,
	    (unsigned)a & 0xffffu, (unsigned)(b >> 48),
	    (unsigned long long)(b & 0xffffffffffffULL));
}

/* Resets every GPU to its power-on state from the environment. */
static int
sim_configure(void)
{
	const struct sim_profile *profs[SIM_MAX_PROFILES];
	const char *s, *name;
	unsigned long n = SIM_DEFAULT_GPUS;
	unsigned nprof;
	uint64_t now = sim_now_ns();

	if ((nprof = sim_parse_profiles(getenv("ZEUS_SIM_PROFILE"),
	    profs)) == 0)
		return -1;
	if (nprof > 1)
		n = nprof;
	s = getenv("ZEUS_SIM_GPUS");
	if (s != NULL && !sim_parse_uint(s, 10, SIM_MAX_GPUS, &n)) {
		fprintf(stderr, "nvml-sim: ZEUS_SIM_GPUS must be 0..%d\n",
		    SIM_MAX_GPUS);
		return -1;
	}
	sim.count = (unsigned)n;
	name = getenv("ZEUS_SIM_GPU_NAME");
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++) {
		struct nvmlDevice_st *g = &sim.gpus[i];

		memset(g, 0, sizeof(*g));
		g->index = i;
		g->prof = profs[i % nprof];
		snprintf(g->name, sizeof(g->name), "%s",
		    name != NULL && *name != '\0' ? name : g->prof->name);
		g->bus = (i + 1) & 0xff;
		g->limit_mw = g->prof->tdp_mw;
		/* The counter counts since driver load: start it somewhere. */
		g->energy_mj = (double)(i + 1) * 3600000000.0;
		g->energy_ns = now;
	}
	s = getenv("ZEUS_SIM_DRIVER_VERSION");
	snprintf(sim.driver_version, sizeof(sim.driver_version), "%s",
	    s != NULL && *s != '\0' ? s : SIM_DRIVER_VERSION);
	if (sim_configure_pci(getenv("ZEUS_SIM_PCI")) != 0)
		return -1;
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++)
		sim_make_uuid(&sim.gpus[i]);

	s = getenv("ZEUS_SIM_FAULTS");
	if (sim_parse_rules(s != NULL ? s : "", ";\n", true,
	    &sim.env_rules) != 0)
		return -1;

	sim.file_rules.n = 0;
	sim.stamp.valid = false;
	sim.control_path[0] = '\0';
	s = getenv("ZEUS_SIM_CONTROL");
	if (s != NULL && *s != '\0') {
		if (strlen(s) >= sizeof(sim.control_path)) {
			fprintf(stderr, "nvml-sim: ZEUS_SIM_CONTROL too long\n");
			return -1;
		}
		strcpy(sim.control_path, s);
	}

	s = getenv("ZEUS_SIM_LOG");
	if (s != NULL && *s != '\0') {
		sim.log_fd = sim_os_open_log(s);
		if (sim.log_fd < 0) {
			fprintf(stderr, "nvml-sim: cannot open ZEUS_SIM_LOG: "
			    "%s\n", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Re-reads the control file if it changed. Called with sim.lock held. */
static void
sim_control_refresh(void)
{
	struct sim_stamp st;
	char *buf;
	ssize_t got;
	size_t len = 0;
	int fd;

	if (sim.control_path[0] == '\0')
		return;
	if (sim_os_stamp(sim.control_path, &st) != 0) {
		sim.stamp.valid = false;
		sim.file_rules.n = 0;
		return;
	}
	if (sim.stamp.valid && sim.stamp.dev == st.dev &&
	    sim.stamp.ino == st.ino && sim.stamp.size == st.size &&
	    sim.stamp.mtim_s == st.mtim_s && sim.stamp.mtim_ns == st.mtim_ns &&
	    sim.stamp.ctim_s == st.ctim_s && sim.stamp.ctim_ns == st.ctim_ns)
		return;
	sim.stamp = st;
	sim.file_rules.n = 0;
	if ((fd = sim_os_open_read(sim.control_path)) < 0)
		return;
	if ((buf = malloc(SIM_CONTROL_MAX + 1)) == NULL) {
		close(fd);
		return;
	}
	while (len < SIM_CONTROL_MAX &&
	    (got = read(fd, buf + len, SIM_CONTROL_MAX - len)) > 0)
		len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	sim_parse_rules(buf, "\n", false, &sim.file_rules);
	free(buf);
}

static const struct sim_rule *
sim_rule_find(const struct sim_rules *rules, enum sim_rule_kind kind,
    enum sim_fn fn, int gpu)
{
	for (unsigned i = 0; i < rules->n; i++) {
		const struct sim_rule *r = &rules->r[i];

		if (r->kind == kind && (r->fn < 0 || r->fn == (int)fn) &&
		    (r->gpu < 0 || r->gpu == gpu))
			return r;
	}
	return NULL;
}

/* The first matching rule of a kind, control file first. */
static const struct sim_rule *
sim_rule_match(enum sim_rule_kind kind, enum sim_fn fn, int gpu)
{
	const struct sim_rule *r;

	r = sim_rule_find(&sim.file_rules, kind, fn, gpu);
	if (r == NULL)
		r = sim_rule_find(&sim.env_rules, kind, fn, gpu);
	return r;
}

/* ------------------------------------------------------------------------
 * Calls: fault injection, delay, log.
 */

/*
 * Starts a call: checks that NVML is initialized, refreshes the rules and
 * returns the injected code (NVML_SUCCESS when none), after sleeping any
 * injected delay with no lock held.
 */
static nvmlReturn_t
sim_begin(struct sim_call *c, enum sim_fn fn, int gpu)
{
	const struct sim_rule *r;
	nvmlReturn_t rc = NVML_SUCCESS;
	unsigned delay_ms = 0;

	c->fn = fn;
	c->gpu = gpu;
	c->start_ns = sim_now_ns();
	c->log_fd = -1;
	c->ruled = false;
	c->args[0] = '\0';
	pthread_mutex_lock(&sim.lock);
	if (sim.refs == 0) {
		pthread_mutex_unlock(&sim.lock);
		return NVML_ERROR_UNINITIALIZED;
	}
	c->log_fd = sim.log_fd;
	sim_control_refresh();
	if ((r = sim_rule_match(SIM_FAIL, fn, gpu)) != NULL) {
		rc = r->code;
		c->ruled = true;
	}
	if ((r = sim_rule_match(SIM_DELAY, fn, gpu)) != NULL)
		delay_ms = r->delay_ms;
	pthread_mutex_unlock(&sim.lock);
	if (delay_ms > 0) {
		struct timespec ts = { delay_ms / 1000,
		    (long)(delay_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return rc;
}

static void sim_args(struct sim_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
sim_args(struct sim_call *c, const char *fmt, ...)
{
	va_list ap;

	if (c->log_fd < 0)	/* only the call log shows them */
		return;
	va_start(ap, fmt);
	vsnprintf(c->args, sizeof(c->args), fmt, ap);
	va_end(ap);
}

/* Ends a call: appends its log line, returns rc. */
static nvmlReturn_t
sim_end(const struct sim_call *c, nvmlReturn_t rc)
{
	char line[256], gpu[16];
	const struct sim_code *code;
	char num[16];
	int n;

	if (c->log_fd < 0)
		return rc;
	if (c->gpu < 0)
		strcpy(gpu, "-");
	else
		snprintf(gpu, sizeof(gpu), "%d", c->gpu);
	code = sim_code_find(rc);
	snprintf(num, sizeof(num), "%d", (int)rc);
	n = snprintf(line, sizeof(line), "%llu %s %s%s%s rc=%s end_ns=%llu\n",
	    (unsigned long long)c->start_ns, sim_fn_names[c->fn], gpu,
	    c->args[0] != '\0' ? " " : "", c->args,
	    code != NULL ? code->name : num,
	    (unsigned long long)sim_now_ns());
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!write(c->log_fd, line, (size_t)n);
	return rc;
}

/* The GPU index of a handle, or -1 when it is not one of ours. */
static int
sim_gpu_index(nvmlDevice_t device)
{
	uintptr_t p = (uintptr_t)device, base = (uintptr_t)sim.gpus;
	unsigned i;

	if (p < base || (p - base) % sizeof(sim.gpus[0]) != 0)
		return -1;
	i = (unsigned)((p - base) / sizeof(sim.gpus[0]));
	if (i >= SIM_MAX_GPUS)
		return -1;
	return (int)i;
}

/*
 * Starts a call on a device: an unknown handle is INVALID_ARGUMENT, as is
 * a handle past the current count (after a reconfiguration); an operation
 * the GPU's profile lacks is NOT_SUPPORTED unless a rule decided.
 */
static nvmlReturn_t
sim_begin_dev(struct sim_call *c, enum sim_fn fn, nvmlDevice_t device)
{
	int gpu = sim_gpu_index(device);
	nvmlReturn_t rc = sim_begin(c, fn, gpu);

	if (rc == NVML_SUCCESS && (gpu < 0 || (unsigned)gpu >= sim.count))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && !c->ruled &&
	    (device->prof->unsupported & SIM_BIT(fn)))
		rc = NVML_ERROR_NOT_SUPPORTED;
	return rc;
}

/* ------------------------------------------------------------------------
 * The power model.
 */

/* A smooth wave in [-1, 1] over phase [0, 1), without libm. */
static double
sim_wave(double phase)
{
	double tri = 4.0 * (phase < 0.5 ? phase : 1.0 - phase) - 1.0;

	return tri * (1.5 - 0.5 * tri * tri);
}

/* Deterministic noise in [-1, 1] for (gpu, slot): splitmix64. */
static double
sim_noise(unsigned gpu, uint64_t slot)
{
	uint64_t z = slot * 0x9e3779b97f4a7c15ULL + gpu * 0xbf58476d1ce4e5b9ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ULL << 52) - 1.0;
}

static unsigned
sim_clamp(unsigned v, unsigned lo, unsigned hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The lowest and highest supported memory clock of a profile. */
static unsigned
sim_mem_clk_max(const struct sim_profile *p)
{
	return p->mem_clks[0];
}

static unsigned
sim_mem_clk_min(const struct sim_profile *p)
{
	unsigned i = 0;

	while (i + 1 < sizeof(p->mem_clks) / sizeof(p->mem_clks[0]) &&
	    p->mem_clks[i + 1] != 0)
		i++;
	return p->mem_clks[i];
}

/* Load in [0, 1] at monotonic time t_ns: the idle/busy cycle. */
static double
sim_load_at(const struct nvmlDevice_st *g, uint64_t t_ns)
{
	/* Stagger the GPUs so they do not move in lockstep. */
	uint64_t ms = t_ns / 1000000u + (uint64_t)g->index * 2750u;
	unsigned in_cycle = (unsigned)(ms % SIM_CYCLE_MS);

	if (in_cycle < SIM_IDLE_MS)
		return 0.03;
	return 0.80 + 0.12 * sim_wave((double)(ms % 3000u) / 3000.0);
}

/* The GPU clock ceiling in force: the locked maximum, clamped. */
static unsigned
sim_gpu_clk(const struct nvmlDevice_st *g)
{
	const struct sim_profile *p = g->prof;

	if (g->gpu_lock_max == 0)
		return p->gpu_clk_max;
	return sim_clamp(g->gpu_lock_max, p->gpu_clk_min, p->gpu_clk_max);
}

static unsigned
sim_mem_clk(const struct nvmlDevice_st *g)
{
	const struct sim_profile *p = g->prof;

	if (g->mem_lock_max == 0)
		return sim_mem_clk_max(p);
	return sim_clamp(g->mem_lock_max, sim_mem_clk_min(p),
	    sim_mem_clk_max(p));
}

/* Power in mW at monotonic time t_ns. Called with sim.lock held. */
static unsigned
sim_power_at(const struct nvmlDevice_st *g, uint64_t t_ns)
{
	const struct sim_profile *pr = g->prof;
	double load = sim_load_at(g, t_ns), fclk, fmem, idle, p, noise;

	/* Locked clocks: dynamic power falls with the clock ceiling. */
	fclk = (double)sim_gpu_clk(g) / pr->gpu_clk_max;
	fclk *= fclk;
	fmem = 0.8 + 0.2 * (double)sim_mem_clk(g) / sim_mem_clk_max(pr);
	idle = pr->idle_mw + 1500.0 * (g->index % 4);
	/* A high locked minimum clock keeps an idle GPU warmer. */
	if (g->gpu_lock_min != 0) {
		double fmin = (double)sim_clamp(g->gpu_lock_min,
		    pr->gpu_clk_min, pr->gpu_clk_max) / pr->gpu_clk_max;

		idle += 30000.0 * fmin * fmin;
	}
	noise = sim_noise(g->index, t_ns / SIM_NOISE_SLOT_NS);
	p = idle + (pr->tdp_mw - idle) * load * fclk * fmem;
	p *= 1.0 + 0.02 * noise;
	/* The power limit caps power; capped GPUs hover just below it. */
	if (p > g->limit_mw)
		p = g->limit_mw * (0.985 + 0.01 * noise);
	if (p < 1000.0)
		p = 1000.0;
	return (unsigned)p;
}

/* The driver's "average over the last second". */
static unsigned
sim_power_avg(const struct nvmlDevice_st *g, uint64_t t_ns)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < 8; i++) {
		uint64_t back = (uint64_t)(2 * i + 1) * 62500000u;

		sum += sim_power_at(g, t_ns > back ? t_ns - back : 0);
	}
	return (unsigned)(sum / 8);
}

/*
 * Integrates power into the energy counter up to now. Called with the lock
 * held, before any change that alters power, so each stretch of time is
 * integrated with the settings that were in force during it.
 */
static void
sim_energy_advance(struct nvmlDevice_st *g, uint64_t now)
{
	uint64_t step = SIM_ENERGY_STEP_NS;

	if (now <= g->energy_ns)
		return;
	if ((now - g->energy_ns) / step > SIM_MAX_STEPS)
		step = (now - g->energy_ns) / SIM_MAX_STEPS + 1;
	while (g->energy_ns < now) {
		uint64_t dt = now - g->energy_ns < step ?
		    now - g->energy_ns : step;
		unsigned p = sim_power_at(g, g->energy_ns + dt / 2);

		g->energy_mj += (double)p * (double)dt / 1e9;
		g->energy_ns += dt;
	}
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
	if (sim.refs == 0 && sim_configure() != 0) {
		if (sim.log_fd >= 0)
			close(sim.log_fd);
		sim.log_fd = -1;
		pthread_mutex_unlock(&sim.lock);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	sim.refs++;
	pthread_mutex_unlock(&sim.lock);

	rc = sim_begin(&c, fn, -1);
	if (args != NULL)
		sim_args(&c, "%s", args);
	sim_end(&c, rc);
	if (rc != NVML_SUCCESS) {
		/* An injected failure: undo the reference. */
		pthread_mutex_lock(&sim.lock);
		if (--sim.refs == 0 && sim.log_fd >= 0) {
			close(sim.log_fd);
			sim.log_fd = -1;
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
	if (sim.refs > 0 && --sim.refs == 0 && sim.log_fd >= 0) {
		close(sim.log_fd);
		sim.log_fd = -1;
	}
	pthread_mutex_unlock(&sim.lock);
	return NVML_SUCCESS;
}

const char *
nvmlErrorString(nvmlReturn_t result)
{
	const struct sim_code *code = sim_code_find(result);

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
		char v[sizeof(sim.driver_version)];

		pthread_mutex_lock(&sim.lock);
		memcpy(v, sim.driver_version, sizeof(v));
		pthread_mutex_unlock(&sim.lock);
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
		*deviceCount = sim.count;
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

	sim_args(&c, "%u", index);
	if (rc == NVML_SUCCESS && (index >= sim.count || device == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*device = &sim.gpus[index];
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

	if (valuesCount >= 1 && values != NULL)
		sim_args(&c, "%u%s", values[0].fieldId,
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
	pthread_mutex_lock(&sim.lock);
	for (int i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *v = &values[i];

		v->timestamp = ts;
		v->latencyUsec = 0;
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
		v->nvmlReturn = per_field;
		if (per_field != NVML_SUCCESS)
			continue;
		if (v->fieldId == NVML_FI_DEV_POWER_INSTANT &&
		    !device->prof->no_instant_power)
			v->value.uiVal = sim_power_at(device, now);
		else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE)
			v->value.uiVal = sim_power_avg(device, now);
		else
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
	}
	pthread_mutex_unlock(&sim.lock);
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
		pthread_mutex_lock(&sim.lock);
		*power = sim_power_avg(device, sim_now_ns());
		pthread_mutex_unlock(&sim.lock);
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
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		sim_energy_advance(device, sim_now_ns());
		*energy = (unsigned long long)device->energy_mj;
		pthread_mutex_unlock(&sim.lock);
	}
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
		pthread_mutex_lock(&sim.lock);
		*limit = device->limit_mw;
		pthread_mutex_unlock(&sim.lock);
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
		pthread_mutex_lock(&sim.lock);
		*mode = device->persistence ? NVML_FEATURE_ENABLED :
		    NVML_FEATURE_DISABLED;
		pthread_mutex_unlock(&sim.lock);
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_SET_LIMIT, device);

	sim_args(&c, "%u", limit);
	if (rc == NVML_SUCCESS &&
	    (limit < device->prof->min_limit_mw ||
	    limit > device->prof->max_limit_mw))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		sim_energy_advance(device, sim_now_ns());
		device->limit_mw = limit;
		pthread_mutex_unlock(&sim.lock);
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t mode)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_SET_PERSISTENCE, device);

	sim_args(&c, "%d", (int)mode);
	if (rc == NVML_SUCCESS && mode != NVML_FEATURE_ENABLED &&
	    mode != NVML_FEATURE_DISABLED)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		device->persistence = mode == NVML_FEATURE_ENABLED;
		pthread_mutex_unlock(&sim.lock);
	}
	return sim_end(&c, rc);
}

/* Locks a clock pair; values outside the part's range are clamped when
 * they take effect, as the driver does, but min > max is rejected. */
static nvmlReturn_t
sim_set_clocks(enum sim_fn fn, nvmlDevice_t device, unsigned min,
    unsigned max, bool mem)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);

	sim_args(&c, "%u %u", min, max);
	if (rc == NVML_SUCCESS && (min > max || max == 0))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		sim_energy_advance(device, sim_now_ns());
		if (mem) {
			device->mem_lock_min = min;
			device->mem_lock_max = max;
		} else {
			device->gpu_lock_min = min;
			device->gpu_lock_max = max;
		}
		pthread_mutex_unlock(&sim.lock);
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
    unsigned int maxGpuClockMHz)
{
	return sim_set_clocks(FN_SET_GPU_CLOCKS, device, minGpuClockMHz,
	    maxGpuClockMHz, false);
}

#if !defined(NVML_SIM_OMIT_SETMEMCLOCKS) && !defined(NVML_SIM_LEGACY)
/* Left out of test builds: a driver without memory locked clocks. */
nvmlReturn_t
nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device,
    unsigned int minMemClockMHz, unsigned int maxMemClockMHz)
{
	return sim_set_clocks(FN_SET_MEM_CLOCKS, device, minMemClockMHz,
	    maxMemClockMHz, true);
}
#endif

static nvmlReturn_t
sim_reset_clocks(enum sim_fn fn, nvmlDevice_t device, bool mem)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, fn, device);

	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		sim_energy_advance(device, sim_now_ns());
		if (mem)
			device->mem_lock_min = device->mem_lock_max = 0;
		else
			device->gpu_lock_min = device->gpu_lock_max = 0;
		pthread_mutex_unlock(&sim.lock);
	}
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device)
{
	return sim_reset_clocks(FN_RESET_GPU_CLOCKS, device, false);
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t
nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device)
{
	return sim_reset_clocks(FN_RESET_MEM_CLOCKS, device, true);
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

/*
 * Current clocks: busy GPUs run at their ceiling (the locked maximum), idle
 * ones at the floor (the locked minimum, else the lowest clock).
 */
nvmlReturn_t
nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
    unsigned int *clock)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_CLOCK, device);

	sim_args(&c, "%d", (int)type);
	if (rc == NVML_SUCCESS && (clock == NULL || (unsigned)type >
	    NVML_CLOCK_VIDEO))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return sim_end(&c, rc);
	pthread_mutex_lock(&sim.lock);
	if (type == NVML_CLOCK_MEM) {
		*clock = sim_mem_clk(device);
	} else if (sim_load_at(device, sim_now_ns()) > 0.5) {
		*clock = sim_gpu_clk(device);
		if (type == NVML_CLOCK_VIDEO)
			*clock = device->prof->video_clk;
	} else {
		*clock = device->gpu_lock_min != 0 ? sim_clamp(
		    device->gpu_lock_min, device->prof->gpu_clk_min,
		    sim_gpu_clk(device)) : device->prof->gpu_clk_min;
		if (type == NVML_CLOCK_VIDEO)
			*clock = device->prof->gpu_clk_min;
	}
	pthread_mutex_unlock(&sim.lock);
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
    unsigned int *clock)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_MAX_CLOCK, device);

	sim_args(&c, "%d", (int)type);
	if (rc == NVML_SUCCESS && (clock == NULL || (unsigned)type >
	    NVML_CLOCK_VIDEO))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*clock = type == NVML_CLOCK_MEM ?
		    sim_mem_clk_max(device->prof) : type == NVML_CLOCK_VIDEO ?
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
	unsigned n = 0;

	if (rc == NVML_SUCCESS)
		while (n < sizeof(device->prof->mem_clks) /
		    sizeof(device->prof->mem_clks[0]) &&
		    device->prof->mem_clks[n] != 0)
			n++;
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

	sim_args(&c, "%u", memoryClockMHz);
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

/* Memory use that follows the load: a reserve, plus half when busy. */
static void
sim_memory(const struct nvmlDevice_st *g, unsigned long long *total,
    unsigned long long *reserved, unsigned long long *used)
{
	double load;

	pthread_mutex_lock(&sim.lock);
	load = sim_load_at(g, sim_now_ns());
	pthread_mutex_unlock(&sim.lock);
	*total = (unsigned long long)g->prof->mem_gib << 30;
	*reserved = *total / 64;
	*used = (unsigned long long)((double)(*total / 2) * load) + (1u << 28);
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
	double load;

	if (rc == NVML_SUCCESS && utilization == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		load = sim_load_at(device, sim_now_ns());
		pthread_mutex_unlock(&sim.lock);
		utilization->gpu = (unsigned)(load * 100.0 + 0.5);
		utilization->memory = (unsigned)(load * 60.0 + 0.5);
	}
	return sim_end(&c, rc);
}

/* Degrees C: 30 at idle, warming with the power drawn above idle. */
nvmlReturn_t
nvmlDeviceGetTemperature(nvmlDevice_t device,
    nvmlTemperatureSensors_t sensorType, unsigned int *temp)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_TEMPERATURE, device);
	double p, idle, span;

	sim_args(&c, "%d", (int)sensorType);
	if (rc == NVML_SUCCESS && (temp == NULL ||
	    sensorType != NVML_TEMPERATURE_GPU))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		pthread_mutex_lock(&sim.lock);
		p = sim_power_at(device, sim_now_ns());
		pthread_mutex_unlock(&sim.lock);
		idle = device->prof->idle_mw;
		span = device->prof->tdp_mw - idle;
		*temp = 30u + (unsigned)(p > idle ? 50.0 * (p - idle) / span :
		    0.0);
	}
	return sim_end(&c, rc);
}
