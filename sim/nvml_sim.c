/*
 * nvml_sim.c - a simulated NVIDIA node behind the NVML C ABI.
 *
 * Built as build/libnvml-sim.so, it exports the same (versioned) NVML
 * symbols that the NVML backend (src/devices/nvml.c) resolves with dlopen,
 * so the daemon, libzeus and the tests run unchanged on a machine without
 * GPUs: `zeusd serve --simulate` and the integration tests load it instead
 * of libnvidia-ml.so.1. docs/simulator.md is the user-facing version of
 * this comment.
 *
 * What it simulates, per GPU: a name and PCI address; power that follows a
 * 20 s idle/busy cycle with a wobble and noise, limited by the power limit
 * (never above it) and lowered by locked GPU/memory clocks; an energy
 * counter (mJ) that integrates that power over CLOCK_MONOTONIC time and
 * never decreases; the power limit (default 400 W, constraints 100..400 W,
 * writes outside them fail with NVML_ERROR_INVALID_ARGUMENT as the driver
 * does); persistence mode; locked clocks (min > max is invalid).
 *
 * Environment, read by the first nvmlInit_v2 (and again by an init that
 * follows a full shutdown):
 *   ZEUS_SIM_GPUS      number of GPUs, 0..64, default 4
 *   ZEUS_SIM_GPU_NAME  model name, default "NVIDIA A100-SXM4-80GB"
 *   ZEUS_SIM_PCI       comma-separated PCI addresses "DDDD:BB:DD.F" (hex)
 *                      for GPUs 0, 1, ...; missing ones default to
 *                      0000:<index+1>:00.0 (bus 01, 02, ...)
 *   ZEUS_SIM_FAULTS    fault rules (format below) separated by ';', fixed
 *                      for the life of the process (e.g. a pre-Volta GPU)
 *   ZEUS_SIM_CONTROL   path of a control file with fault rules, one per
 *                      line; re-read whenever its inode, size, mtime or
 *                      ctime changes (checked with stat() on every call).
 *                      Write a new file and rename() it over the old one so
 *                      a change is never missed. A missing file means no
 *                      rules from it.
 *   ZEUS_SIM_LOG       path of a call log to append to (format below)
 * A malformed setting makes nvmlInit_v2 fail with
 * NVML_ERROR_INVALID_ARGUMENT after one explanatory line on stderr.
 *
 * Fault rules ('#' starts a comment line; blank lines are ignored):
 *   fail  <function|*> <gpu|*> <code>   the call returns <code>
 *   delay <function|*> <gpu|*> <ms>     the call sleeps <ms> (0..600000)
 * <function> is an NVML symbol name as exported (nvmlDeviceGetCount_v2);
 * <gpu> is a decimal index; `*` matches anything. Calls that take no GPU
 * (nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2) match only `*` rules;
 * nvmlDeviceGetHandleByIndex_v2 matches its index argument. <code> is an
 * nvmlReturn_t name with or without its NVML_ERROR_ prefix (NO_PERMISSION,
 * NOT_SUPPORTED, GPU_IS_LOST, ..., SUCCESS) or a decimal number. Control-file
 * rules are checked before ZEUS_SIM_FAULTS rules and the first matching
 * `fail` rule wins, so `fail <f> <gpu> SUCCESS` in the control file lifts a
 * fault set in the environment; likewise for `delay`. For
 * nvmlDeviceGetFieldValues an injected NOT_SUPPORTED is reported in every
 * field's nvmlReturn while the call succeeds, which is how the driver
 * reports a field it does not support; other codes fail the call. Delays
 * are slept without holding any lock, so a slow call on one GPU does not
 * hold up calls on other GPUs.
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
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "devices/nvml_api.h"

#define SIM_MAX_GPUS 64
#define SIM_DEFAULT_GPUS 4
#define SIM_NAME_MAX NVML_DEVICE_NAME_V2_BUFFER_SIZE
#define SIM_DEFAULT_NAME "NVIDIA A100-SXM4-80GB"
#define SIM_MAX_RULES 256
#define SIM_LINE_MAX 512
#define SIM_CONTROL_MAX (64 * 1024)
#define SIM_MAX_DELAY_MS 600000u
#define SIM_MAX_FIELDS 1024

/* Power model (milliwatts) and clocks (MHz) of an A100-like part. */
#define SIM_TDP_MW 400000u
#define SIM_MIN_LIMIT_MW 100000u
#define SIM_IDLE_MW 55000u
#define SIM_GPU_CLK_MIN 210u
#define SIM_GPU_CLK_MAX 1410u
#define SIM_MEM_CLK_MIN 405u
#define SIM_MEM_CLK_MAX 1593u
#define SIM_CYCLE_MS 20000u		/* idle + busy period */
#define SIM_IDLE_MS 4000u		/* idle part of each cycle */
#define SIM_NOISE_SLOT_NS 25000000u	/* noise changes every 25 ms */
#define SIM_ENERGY_STEP_NS 50000000u	/* integration step */
#define SIM_MAX_STEPS 100000u

enum sim_fn {
	FN_INIT, FN_SHUTDOWN, FN_GET_COUNT, FN_GET_HANDLE, FN_GET_NAME,
	FN_GET_PCI, FN_GET_FIELDS, FN_GET_POWER_USAGE, FN_GET_ENERGY,
	FN_GET_LIMIT, FN_GET_CONSTRAINTS, FN_GET_PERSISTENCE, FN_SET_LIMIT,
	FN_SET_PERSISTENCE, FN_SET_GPU_CLOCKS, FN_RESET_GPU_CLOCKS,
	FN_SET_MEM_CLOCKS, FN_RESET_MEM_CLOCKS, FN_COUNT
};

static const char *const sim_fn_names[FN_COUNT] = {
	[FN_INIT] = "nvmlInit_v2",
	[FN_SHUTDOWN] = "nvmlShutdown",
	[FN_GET_COUNT] = "nvmlDeviceGetCount_v2",
	[FN_GET_HANDLE] = "nvmlDeviceGetHandleByIndex_v2",
	[FN_GET_NAME] = "nvmlDeviceGetName",
	[FN_GET_PCI] = "nvmlDeviceGetPciInfo_v3",
	[FN_GET_FIELDS] = "nvmlDeviceGetFieldValues",
	[FN_GET_POWER_USAGE] = "nvmlDeviceGetPowerUsage",
	[FN_GET_ENERGY] = "nvmlDeviceGetTotalEnergyConsumption",
	[FN_GET_LIMIT] = "nvmlDeviceGetPowerManagementLimit",
	[FN_GET_CONSTRAINTS] = "nvmlDeviceGetPowerManagementLimitConstraints",
	[FN_GET_PERSISTENCE] = "nvmlDeviceGetPersistenceMode",
	[FN_SET_LIMIT] = "nvmlDeviceSetPowerManagementLimit",
	[FN_SET_PERSISTENCE] = "nvmlDeviceSetPersistenceMode",
	[FN_SET_GPU_CLOCKS] = "nvmlDeviceSetGpuLockedClocks",
	[FN_RESET_GPU_CLOCKS] = "nvmlDeviceResetGpuLockedClocks",
	[FN_SET_MEM_CLOCKS] = "nvmlDeviceSetMemoryLockedClocks",
	[FN_RESET_MEM_CLOCKS] = "nvmlDeviceResetMemoryLockedClocks",
};

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
	char name[SIM_NAME_MAX];
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

/* What identifies one version of the control file. */
struct sim_stamp {
	bool valid;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
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
} sim = { .lock = PTHREAD_MUTEX_INITIALIZER, .log_fd = -1 };

/* One call in flight: what the log line needs. */
struct sim_call {
	enum sim_fn fn;
	int gpu;			/* -1: none */
	uint64_t start_ns;
	int log_fd;
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

/* Resets every GPU to its power-on state from the environment. */
static int
sim_configure(void)
{
	const char *s;
	unsigned long n = SIM_DEFAULT_GPUS;
	uint64_t now = sim_now_ns();

	s = getenv("ZEUS_SIM_GPUS");
	if (s != NULL && !sim_parse_uint(s, 10, SIM_MAX_GPUS, &n)) {
		fprintf(stderr, "nvml-sim: ZEUS_SIM_GPUS must be 0..%d\n",
		    SIM_MAX_GPUS);
		return -1;
	}
	sim.count = (unsigned)n;
	s = getenv("ZEUS_SIM_GPU_NAME");
	if (s == NULL || *s == '\0')
		s = SIM_DEFAULT_NAME;
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++) {
		struct nvmlDevice_st *g = &sim.gpus[i];

		memset(g, 0, sizeof(*g));
		g->index = i;
		snprintf(g->name, sizeof(g->name), "%s", s);
		g->bus = (i + 1) & 0xff;
		g->limit_mw = SIM_TDP_MW;
		/* The counter counts since driver load: start it somewhere. */
		g->energy_mj = (double)(i + 1) * 3600000000.0;
		g->energy_ns = now;
	}
	if (sim_configure_pci(getenv("ZEUS_SIM_PCI")) != 0)
		return -1;

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
		sim.log_fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		    0644);
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
	struct stat st;
	char *buf;
	ssize_t got;
	size_t len = 0;
	int fd;

	if (sim.control_path[0] == '\0')
		return;
	if (stat(sim.control_path, &st) != 0) {
		sim.stamp.valid = false;
		sim.file_rules.n = 0;
		return;
	}
	if (sim.stamp.valid && sim.stamp.dev == st.st_dev &&
	    sim.stamp.ino == st.st_ino && sim.stamp.size == st.st_size &&
	    sim.stamp.mtim.tv_sec == st.st_mtim.tv_sec &&
	    sim.stamp.mtim.tv_nsec == st.st_mtim.tv_nsec &&
	    sim.stamp.ctim.tv_sec == st.st_ctim.tv_sec &&
	    sim.stamp.ctim.tv_nsec == st.st_ctim.tv_nsec)
		return;
	sim.stamp = (struct sim_stamp){ true, st.st_dev, st.st_ino,
	    st.st_size, st.st_mtim, st.st_ctim };
	sim.file_rules.n = 0;
	if ((fd = open(sim.control_path, O_RDONLY | O_CLOEXEC)) < 0)
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
	c->args[0] = '\0';
	pthread_mutex_lock(&sim.lock);
	if (sim.refs == 0) {
		pthread_mutex_unlock(&sim.lock);
		return NVML_ERROR_UNINITIALIZED;
	}
	c->log_fd = sim.log_fd;
	sim_control_refresh();
	if ((r = sim_rule_match(SIM_FAIL, fn, gpu)) != NULL)
		rc = r->code;
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
 * a handle past the current count (after a reconfiguration).
 */
static nvmlReturn_t
sim_begin_dev(struct sim_call *c, enum sim_fn fn, nvmlDevice_t device)
{
	int gpu = sim_gpu_index(device);
	nvmlReturn_t rc = sim_begin(c, fn, gpu);

	if (rc == NVML_SUCCESS && (gpu < 0 || (unsigned)gpu >= sim.count))
		rc = NVML_ERROR_INVALID_ARGUMENT;
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

/* Power in mW at monotonic time t_ns. Called with sim.lock held. */
static unsigned
sim_power_at(const struct nvmlDevice_st *g, uint64_t t_ns)
{
	/* Stagger the GPUs so they do not move in lockstep. */
	uint64_t ms = t_ns / 1000000u + (uint64_t)g->index * 2750u;
	unsigned in_cycle = (unsigned)(ms % SIM_CYCLE_MS);
	unsigned gclk = SIM_GPU_CLK_MAX, mclk = SIM_MEM_CLK_MAX;
	double load, fclk, fmem, idle, p, noise;

	if (in_cycle < SIM_IDLE_MS)
		load = 0.03;
	else
		load = 0.80 + 0.12 * sim_wave((double)(ms % 3000u) / 3000.0);
	/* Locked clocks: dynamic power falls with the clock ceiling. */
	if (g->gpu_lock_max != 0)
		gclk = sim_clamp(g->gpu_lock_max, SIM_GPU_CLK_MIN,
		    SIM_GPU_CLK_MAX);
	if (g->mem_lock_max != 0)
		mclk = sim_clamp(g->mem_lock_max, SIM_MEM_CLK_MIN,
		    SIM_MEM_CLK_MAX);
	fclk = (double)gclk / SIM_GPU_CLK_MAX;
	fclk *= fclk;
	fmem = 0.8 + 0.2 * (double)mclk / SIM_MEM_CLK_MAX;
	idle = SIM_IDLE_MW + 1500.0 * (g->index % 4);
	/* A high locked minimum clock keeps an idle GPU warmer. */
	if (g->gpu_lock_min != 0) {
		double fmin = (double)sim_clamp(g->gpu_lock_min,
		    SIM_GPU_CLK_MIN, SIM_GPU_CLK_MAX) / SIM_GPU_CLK_MAX;

		idle += 30000.0 * fmin * fmin;
	}
	noise = sim_noise(g->index, t_ns / SIM_NOISE_SLOT_NS);
	p = idle + (SIM_TDP_MW - idle) * load * fclk * fmem;
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

nvmlReturn_t
nvmlInit_v2(void)
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

	rc = sim_begin(&c, FN_INIT, -1);
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

nvmlReturn_t
nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin(&c, FN_GET_COUNT, -1);

	if (rc == NVML_SUCCESS && deviceCount == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*deviceCount = sim.count;
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	struct sim_call c;
	int gpu = index < SIM_MAX_GPUS ? (int)index : -1;
	nvmlReturn_t rc = sim_begin(&c, FN_GET_HANDLE, gpu);

	sim_args(&c, "%u", index);
	if (rc == NVML_SUCCESS && (index >= sim.count || device == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS)
		*device = &sim.gpus[index];
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_NAME, device);

	if (rc == NVML_SUCCESS && name == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && strlen(device->name) >= length)
		rc = NVML_ERROR_INSUFFICIENT_SIZE;
	if (rc == NVML_SUCCESS)
		strcpy(name, device->name);
	return sim_end(&c, rc);
}

nvmlReturn_t
nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_PCI, device);

	if (rc == NVML_SUCCESS && pci == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS)
		return sim_end(&c, rc);
	memset(pci, 0, sizeof(*pci));
	pci->domain = device->domain;
	pci->bus = device->bus;
	pci->device = device->device;
	pci->pciDeviceId = 0x20b510de;		/* A100 80GB, NVIDIA */
	pci->pciSubSystemId = 0x154710de;
	/* The driver's own strings: upper-case, 4- and 8-digit domains. */
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0",
	    device->domain & 0xffffu, device->bus, device->device);
	snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0",
	    device->domain, device->bus, device->device);
	return sim_end(&c, rc);
}

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
		if (v->fieldId == NVML_FI_DEV_POWER_INSTANT)
			v->value.uiVal = sim_power_at(device, now);
		else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE)
			v->value.uiVal = sim_power_avg(device, now);
		else
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
	}
	pthread_mutex_unlock(&sim.lock);
	return sim_end(&c, rc);
}

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

nvmlReturn_t
nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_LIMIT, device);

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
nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
    unsigned int *minLimit, unsigned int *maxLimit)
{
	struct sim_call c;
	nvmlReturn_t rc = sim_begin_dev(&c, FN_GET_CONSTRAINTS, device);

	if (rc == NVML_SUCCESS && (minLimit == NULL || maxLimit == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS) {
		*minLimit = SIM_MIN_LIMIT_MW;
		*maxLimit = SIM_TDP_MW;
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
	    (limit < SIM_MIN_LIMIT_MW || limit > SIM_TDP_MW))
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

#ifndef NVML_SIM_OMIT_SETMEMCLOCKS
/* Left out of a test build to check that the loader names what is missing. */
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

nvmlReturn_t
nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device)
{
	return sim_reset_clocks(FN_RESET_MEM_CLOCKS, device, true);
}
