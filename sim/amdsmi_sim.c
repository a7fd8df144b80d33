/* SPDX-License-Identifier: Apache-2.0 */
/*
 * amdsmi_sim.c - a simulated AMD SMI library (ROCm's libamd_smi) for tests
 * and demos on machines without AMD GPUs (docs/simulator.md, docs/amd.md).
 *
 * One source, compiled once per ABI with -DAMDSMI_SIM_ABI=24, 25 or 26:
 * each build exports the functions zeusd uses with that ABI's version and
 * power-info layouts (from src/devices/amdsmi_api.h, which it is compiled
 * against, so a signature that drifts does not build). `zeusd serve
 * --simulate --gpu-backend amdsmi` loads the build that ZEUS_AMDSMI_SIM_ABI
 * names (libamdsmi-simN.so, next to zeusd or installed in <libdir>/zeus);
 * tests also link a build under the library's soname (libamd_smi.so.N)
 * into a directory and point AMDSMI_LIB_DIR at it, as a ROCm install
 * would provide it.
 *
 * Simulated: one GPU per socket; GPU i draws 300 + 25*i W, or its power
 * cap when that is lower (constant between cap changes, so the daemon's
 * start-up energy check is exact), and its energy accumulator integrates
 * that over CLOCK_MONOTONIC time in 15.259 uJ counts; a power cap of
 * 200-750 W (750 by default) in microwatts; graphics (500-2100 MHz)
 * and memory (900-1300 MHz) clock limits, where a limit that would cross
 * the other one is refused with INVAL as the driver does (so the order of
 * the two writes matters); the performance level; the market name
 * "AMD Instinct MI300X".
 *
 * Environment, read by amdsmi_init:
 *   ZEUS_SIM_GPUS                 number of GPUs, 0..16; default 2
 *   ZEUS_SIM_GPU_NAME             market name of every GPU
 *   ZEUS_SIM_PCI                  comma-separated DDDD:BB:DD.F (hex) for
 *                                 GPUs 0, 1, ...; default 0000:c1:00.0,
 *                                 0000:c2:00.0, ...
 *   ZEUS_AMDSMI_SIM_VERSION       what amdsmi_get_lib_version reports:
 *                                 "year.major.minor.release" for .24 and
 *                                 .25 (default 24.7.1.0, 25.25.4.0),
 *                                 "major.minor.release" for .26 (26.2.1)
 *   ZEUS_AMDSMI_SIM_ENERGY_SCALE  the counter runs this much fast (a
 *                                 release with a wrong resolution); 1
 *   ZEUS_AMDSMI_SIM_CURRENT_NA    when set, current socket power reads as
 *                                 not available (0xFFFF), as on some parts
 *   ZEUS_AMDSMI_SIM_NO_POWER      comma-separated GPU indices that report
 *                                 no power at all: every power field of
 *                                 amdsmi_get_power_info is 0xFFFF and the
 *                                 energy accumulator stands still, as on
 *                                 the second die of an MI250, whose
 *                                 package reports through the first die
 *   ZEUS_SIM_FAULTS, ZEUS_SIM_CONTROL, ZEUS_SIM_LOG  fault rules and the
 *                                 call log, as in the NVML simulator: the
 *                                 same module (faults.h), in AMD SMI's
 *                                 dialect (sim_dialect below): <function>
 *                                 an exported name, <gpu> 0..15, <code> an
 *                                 amdsmi_status_t name with or without
 *                                 AMDSMI_STATUS_ (NO_PERM, NOT_SUPPORTED,
 *                                 ...) or a number; bad rules are skipped
 *                                 silently, words after a rule's fourth are
 *                                 ignored, and ZEUS_SIM_CONTROL is read on
 *                                 every call, so its rules apply before
 *                                 amdsmi_init too
 * Args: set_power_cap `<sensor> <cap_uw>`, set_gpu_clk_limit
 * `<SYS|MEM> <MIN|MAX> <mhz>`, set_gpu_perf_level `AUTO|...`,
 * get_clock_info `SYS|MEM`.
 *
 *   ZEUS_SIM_STATE                a file that keeps the GPUs' settings and
 *                                 energy accumulators across processes
 *                                 (below); empty is unset
 *
 * A malformed ZEUS_SIM_GPUS, ZEUS_SIM_PCI or ZEUS_AMDSMI_SIM_NO_POWER makes
 * amdsmi_init fail with INVAL after one line on stderr, as the NVML
 * simulator does with its settings.
 *
 * Shared state (ZEUS_SIM_STATE, amdsmi_state.c): without it every process
 * has its own GPUs, at the power-on state from its first amdsmi_init (the
 * first after a full shutdown). With it set when amdsmi_init configures,
 * every process that loads an AMD simulator (any of the three ABIs) and
 * names the same file sees one set of GPUs, as a real GPU's clients do:
 * each GPU's power cap, graphics and memory clock limits, performance
 * level and energy accumulator (its value in uJ and the CLOCK_MONOTONIC
 * time it was counted up to, so another process of the same boot counts
 * on from there at the cap in force) live in the file, read under the
 * file's lock before every use and written through after every change
 * (and after an energy reading that moved the accumulator's base: a
 * stored time ahead of this process's clock, taken as now), so they
 * outlive the process. The identity (count, PCI addresses, name,
 * ZEUS_AMDSMI_SIM_* behaviour) stays each process's own; the file must
 * match its count and PCI addresses. A missing or empty file starts at
 * the power-on state; an existing valid one is kept. A file that fails
 * any check (what sim_os_state_open refuses: a symbolic link, not a
 * regular file, more than one link, another owner, writable by group or
 * others; bad magic, version or sizes, another GPU count or PCI address,
 * a wrong size, a bad checksum, a value out of the ranges above or AUTO
 * with narrowed clocks) makes amdsmi_init fail with INVAL after one line
 * on stderr, "amdsmi-sim: ZEUS_SIM_STATE <path>: <why>", and is left as
 * it is. When the file fails later (garbled while in use), a change fails
 * with FILE_ERROR and is not made, and readings answer from the last good
 * copy, after one line on stderr for the first of a run of failures. The
 * file is closed at the last amdsmi_shut_down. Not available where
 * sim_os_state_open is not (Windows: init fails and says so; the AMD
 * simulator is not built for Windows today).
 *
 * Thread safety: one mutex (sim_mu) guards the GPUs' state and stands in
 * front of the state file's lock, a POSIX record lock held per process;
 * faults.c has its own; delays sleep outside both.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amdsmi_state.h"
#include "devices/amdsmi_api.h"
#include "faults.h"
#include "sim_os.h"

#define SIM_RES_UJ	15.259f

/* Guards the GPUs' state, and stands in front of the state file's lock
 * (amdsmi_state.h): one thread of the process at a time takes that. */
static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static int sim_inits;
static unsigned sim_ngpu;
static struct sim_gpu sim_gpus[SIM_MAX_GPUS];
static int sim_sockets[SIM_MAX_GPUS];
static double sim_scale = 1.0;
static bool sim_current_na;

/* The functions that fault rules name and the call log shows. */
enum sim_fn {
	FN_INIT, FN_SHUT_DOWN, FN_LIB_VERSION, FN_SOCKET_HANDLES,
	FN_PROCESSOR_HANDLES, FN_BDF, FN_UUID, FN_POWER_INFO, FN_ENERGY_COUNT,
	FN_POWER_CAP_INFO, FN_SET_POWER_CAP, FN_SET_CLK_LIMIT,
	FN_SET_PERF_LEVEL, FN_CLOCK_INFO, FN_ASIC_INFO, FN_COUNT
};

static const char *const sim_fn_names[FN_COUNT] = {
	[FN_INIT] = "amdsmi_init",
	[FN_SHUT_DOWN] = "amdsmi_shut_down",
	[FN_LIB_VERSION] = "amdsmi_get_lib_version",
	[FN_SOCKET_HANDLES] = "amdsmi_get_socket_handles",
	[FN_PROCESSOR_HANDLES] = "amdsmi_get_processor_handles",
	[FN_BDF] = "amdsmi_get_gpu_device_bdf",
	[FN_UUID] = "amdsmi_get_gpu_device_uuid",
	[FN_POWER_INFO] = "amdsmi_get_power_info",
	[FN_ENERGY_COUNT] = "amdsmi_get_energy_count",
	[FN_POWER_CAP_INFO] = "amdsmi_get_power_cap_info",
	[FN_SET_POWER_CAP] = "amdsmi_set_power_cap",
	[FN_SET_CLK_LIMIT] = "amdsmi_set_gpu_clk_limit",
	[FN_SET_PERF_LEVEL] = "amdsmi_set_gpu_perf_level",
	[FN_CLOCK_INFO] = "amdsmi_get_clock_info",
	[FN_ASIC_INFO] = "amdsmi_get_gpu_asic_info",
};

static const struct sim_code sim_codes[] = {
	{ AMDSMI_STATUS_SUCCESS, "SUCCESS", NULL },
	{ AMDSMI_STATUS_INVAL, "INVAL", NULL },
	{ AMDSMI_STATUS_NOT_SUPPORTED, "NOT_SUPPORTED", NULL },
	{ AMDSMI_STATUS_NOT_YET_IMPLEMENTED, "NOT_YET_IMPLEMENTED", NULL },
	{ AMDSMI_STATUS_API_FAILED, "API_FAILED", NULL },
	{ AMDSMI_STATUS_TIMEOUT, "TIMEOUT", NULL },
	{ AMDSMI_STATUS_RETRY, "RETRY", NULL },
	{ AMDSMI_STATUS_NO_PERM, "NO_PERM", NULL },
	{ AMDSMI_STATUS_IO, "IO", NULL },
	{ AMDSMI_STATUS_INTERNAL_EXCEPTION, "INTERNAL_EXCEPTION", NULL },
	{ AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS, "INPUT_OUT_OF_BOUNDS", NULL },
	{ AMDSMI_STATUS_INIT_ERROR, "INIT_ERROR", NULL },
	{ AMDSMI_STATUS_BUSY, "BUSY", NULL },
	{ AMDSMI_STATUS_NOT_FOUND, "NOT_FOUND", NULL },
	{ AMDSMI_STATUS_NOT_INIT, "NOT_INIT", NULL },
	{ AMDSMI_STATUS_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED", NULL },
	{ AMDSMI_STATUS_NO_DATA, "NO_DATA", NULL },
	{ AMDSMI_STATUS_UNKNOWN_ERROR, "UNKNOWN_ERROR", NULL },
};

/* AMD SMI's fault rules (faults.h): lenient, as they have always been. */
static const struct sim_dialect sim_dialect = {
	.tag = "amdsmi-sim",
	.fns = sim_fn_names,
	.nfns = FN_COUNT,
	.codes = sim_codes,
	.ncodes = sizeof(sim_codes) / sizeof(sim_codes[0]),
	.prefix = "AMDSMI_STATUS_",
	.success = NULL,
	.code_max = 0xFFFFFFFFu,
	.gpu_max = SIM_MAX_GPUS - 1,
	.other = "OTHER",
	.strict = false,
	.extra_words = true,
	.control_live = true,
};

static struct sim_faults sim_faults = SIM_FAULTS_INIT(&sim_dialect);

/*
 * The start of every call: the injected fault and delay, before or after
 * amdsmi_init alike; then NOT_INIT before it but for the two calls that
 * work then. sim_rc is the status to answer with before doing anything
 * (SUCCESS: carry on); SIM_END() logs the call and returns sim_rc.
 */
#define SIM_BEGIN(fn, gpu)						\
	struct sim_call sim_c;						\
	amdsmi_status_t sim_rc;						\
	sim_call_start(&sim_c, (fn), (gpu));				\
	sim_rc = sim_faults_begin(&sim_faults, &sim_c);			\
	if (sim_rc == AMDSMI_STATUS_SUCCESS && sim_inits == 0 &&	\
	    (fn) != FN_INIT && (fn) != FN_LIB_VERSION)			\
		sim_rc = AMDSMI_STATUS_NOT_INIT

#define SIM_END() sim_faults_end(&sim_faults, &sim_c, sim_rc)

static struct sim_gpu *
sim_gpu(amdsmi_processor_handle h)
{
	for (unsigned i = 0; i < sim_ngpu; i++)
		if (h == &sim_gpus[i])
			return &sim_gpus[i];
	return NULL;
}

static int
sim_gpu_index(amdsmi_processor_handle h)
{
	struct sim_gpu *g = sim_gpu(h);

	return g != NULL ? (int)g->index : -1;
}

/* A decimal or hex number no larger than max, the whole of s. */
static bool
sim_parse_uint(const char *s, int base, unsigned long max, unsigned long *out)
{
	char *end;

	if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	*out = strtoul(s, &end, base);
	return errno == 0 && *end == '\0' && *out <= max;
}

/* The next comma-separated item of *list into item; false at the end. */
static bool
sim_next_item(const char **list, char *item, size_t size)
{
	size_t len;

	if (*list == NULL || **list == '\0')
		return false;
	len = strcspn(*list, ",");
	snprintf(item, size, "%.*s", (int)(len < size ? len : size - 1),
	    *list);
	*list += len;
	if (**list == ',')
		(*list)++;
	return true;
}

/* "DDDD:BB:DD.F" (hex) into a bdf; false when malformed. */
static bool
sim_parse_bdf(const char *s, amdsmi_bdf_t *bdf)
{
	static const unsigned long max[4] = { 0xffff, 0xff, 0x1f, 0x7 };
	static const char *const seps[4] = { ":", ":", ".", "" };
	unsigned long v[4];
	char part[16];

	for (int i = 0; i < 4; i++) {
		size_t len = strcspn(s, seps[i]);

		if (len == 0 || len >= sizeof(part) || s[len] != seps[i][0])
			return false;
		memcpy(part, s, len);
		part[len] = '\0';
		if (!sim_parse_uint(part, 16, max[i], &v[i]))
			return false;
		s += len + (i < 3);
	}
	bdf->as_uint = 0;
	bdf->fields.domain_number = v[0];
	bdf->fields.bus_number = v[1];
	bdf->fields.device_number = v[2];
	bdf->fields.function_number = v[3];
	return true;
}

/* Reads the environment, then opens ZEUS_SIM_STATE if set; -1 after a
 * line on stderr for a bad setting or state file. Under sim_mu. */
static int
sim_configure(void)
{
	const char *s, *name, *list;
	unsigned long n = 2;
	char item[64];

	sim_state_close();
	if ((s = getenv("ZEUS_SIM_GPUS")) != NULL &&
	    !sim_parse_uint(s, 10, SIM_MAX_GPUS, &n)) {
		fprintf(stderr, "amdsmi-sim: ZEUS_SIM_GPUS must be 0..%d\n",
		    SIM_MAX_GPUS);
		return -1;
	}
	sim_ngpu = (unsigned)n;
	sim_scale = (s = getenv("ZEUS_AMDSMI_SIM_ENERGY_SCALE")) != NULL ?
	    atof(s) : 1.0;
	sim_current_na = getenv("ZEUS_AMDSMI_SIM_CURRENT_NA") != NULL;
	name = getenv("ZEUS_SIM_GPU_NAME");
	for (unsigned i = 0; i < SIM_MAX_GPUS; i++) {
		struct sim_gpu *g = &sim_gpus[i];

		memset(g, 0, sizeof(*g));
		g->index = i;
		g->cap_uw = SIM_CAP_MAX;
		g->clk[0][0] = SIM_CLK_SYS_MIN;
		g->clk[0][1] = SIM_CLK_SYS_MAX;
		g->clk[1][0] = SIM_CLK_MEM_MIN;
		g->clk[1][1] = SIM_CLK_MEM_MAX;
		g->perf = AMDSMI_DEV_PERF_LEVEL_AUTO;
		snprintf(g->name, sizeof(g->name), "%s", name != NULL &&
		    *name != '\0' ? name : "AMD Instinct MI300X");
		g->bdf.fields.bus_number = 0xc1 + i;
		g->t_ns = sim_now_ns();
	}
	list = getenv("ZEUS_SIM_PCI");
	for (unsigned i = 0; i < SIM_MAX_GPUS && sim_next_item(&list, item,
	    sizeof(item)); i++)
		if (!sim_parse_bdf(item, &sim_gpus[i].bdf)) {
			fprintf(stderr, "amdsmi-sim: bad ZEUS_SIM_PCI entry "
			    "%.40s (want DDDD:BB:DD.F)\n", item);
			return -1;
		}
	list = getenv("ZEUS_AMDSMI_SIM_NO_POWER");
	while (sim_next_item(&list, item, sizeof(item))) {
		if (!sim_parse_uint(item, 10, SIM_MAX_GPUS - 1, &n)) {
			fprintf(stderr, "amdsmi-sim: bad ZEUS_AMDSMI_SIM_NO_POWER "
			    "entry %.40s (want GPU indices 0..%d)\n", item,
			    SIM_MAX_GPUS - 1);
			return -1;
		}
		sim_gpus[n].no_power = true;
	}
	if (sim_faults_configure(&sim_faults) != 0)
		return -1;
	s = getenv("ZEUS_SIM_STATE");
	if (s != NULL && *s != '\0')
		return sim_state_open(s, sim_gpus, sim_ngpu);
	return 0;
}

/* What a GPU draws: its share, capped by its power cap. Under sim_mu. */
static unsigned
sim_watts(const struct sim_gpu *g)
{
	unsigned w = 300 + 25 * g->index;
	uint64_t cap_w = g->cap_uw / 1000000;

	return cap_w < w ? (unsigned)cap_w : w;
}

/* Energy counted so far, in uJ (now is never before t_ns, taken under
 * sim_mu and after loading the state; the guard is for safety). Under
 * sim_mu. */
static double
sim_energy_uj(const struct sim_gpu *g, uint64_t now)
{
	if (g->no_power)
		return 0;
	if (now < g->t_ns)
		now = g->t_ns;
	return g->e_uj + (double)(now - g->t_ns) / 1e9 * sim_watts(g) * 1e6 *
	    sim_scale;
}

/*
 * A reading of the GPUs' settings: loads the state file, if any, under its
 * shared lock (on failure the last good copy answers). Under sim_mu; end
 * with sim_read_end.
 */
static bool
sim_read_begin(void)
{
	return sim_state_begin(false) == 0;
}

static void
sim_read_end(bool loaded)
{
	if (loaded)
		(void)sim_state_end(false);
}

/*
 * A change of GPU g's settings: loads the state file under its exclusive
 * lock; false (FILE_ERROR, nothing changed) when it failed. Saves g so
 * that sim_change_end can undo a change the file did not take. Under
 * sim_mu.
 */
static bool
sim_change_begin(const struct sim_gpu *g, struct sim_gpu *saved)
{
	if (sim_state_begin(true) != 0)
		return false;
	*saved = *g;
	return true;
}

/* Writes a change through (write: it was made) and unlocks; the status:
 * rc, or FILE_ERROR when the write failed and the change was undone. */
static amdsmi_status_t
sim_change_end(struct sim_gpu *g, const struct sim_gpu *saved, bool write,
    amdsmi_status_t rc)
{
	if (sim_state_end(write) != 0) {
		*g = *saved;
		return AMDSMI_STATUS_FILE_ERROR;
	}
	return rc;
}

/* ------------------------------------------------------------------------
 * The exported functions.
 */

amdsmi_status_t
amdsmi_init(uint64_t init_flags)
{
	SIM_BEGIN(FN_INIT, -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		if (sim_inits > 0 || sim_configure() == 0)
			sim_inits++;
		else
			sim_rc = AMDSMI_STATUS_INVAL;
		pthread_mutex_unlock(&sim_mu);
	}
	sim_faults_take_log(&sim_faults, &sim_c);	/* the first opens it */
	return SIM_END();
}

amdsmi_status_t
amdsmi_shut_down(void)
{
	SIM_BEGIN(FN_SHUT_DOWN, -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		if (--sim_inits == 0)
			sim_state_close();
		pthread_mutex_unlock(&sim_mu);
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_status_code_to_string(amdsmi_status_t status, const char **s)
{
	static const char *const text[] = {
		[AMDSMI_STATUS_SUCCESS] = "Success",
		[AMDSMI_STATUS_INVAL] = "Invalid parameters",
		[AMDSMI_STATUS_NOT_SUPPORTED] = "Command not supported",
		[AMDSMI_STATUS_NO_PERM] = "Permission Denied",
		[AMDSMI_STATUS_BUSY] = "Device busy",
		[AMDSMI_STATUS_NOT_INIT] = "Device not initialized",
	};

	if (s == NULL)
		return AMDSMI_STATUS_INVAL;
	*s = status < sizeof(text) / sizeof(text[0]) && text[status] != NULL ?
	    text[status] : "An unknown error occurred";
	return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t
amdsmi_get_lib_version(amdsmi_version_t *v)
{
	/* Callable before init, as the library allows. */
	SIM_BEGIN(FN_LIB_VERSION, -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && v == NULL)
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		const char *s = getenv("ZEUS_AMDSMI_SIM_VERSION");
#if AMDSMI_SIM_ABI == 24
		unsigned ver[4] = { 24, 7, 1, 0 };	/* ROCm 6.3 */
#elif AMDSMI_SIM_ABI == 25
		unsigned ver[4] = { 25, 25, 4, 0 };	/* ROCm 6.4 */
#else
		unsigned ver[4] = { 26, 2, 1, 0 };	/* ROCm 7 */
#endif

		if (s != NULL)
			sscanf(s, "%u.%u.%u.%u", &ver[0], &ver[1], &ver[2],
			    &ver[3]);
		memset(v, 0, sizeof(*v));
#if AMDSMI_SIM_ABI == 26
		v->major = ver[0];
		v->minor = ver[1];
		v->release = ver[2];
#else
		v->year = ver[0];
		v->major = ver[1];
		v->minor = ver[2];
		v->release = ver[3];
#endif
		v->build = "zeus-sim";
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles)
{
	SIM_BEGIN(FN_SOCKET_HANDLES, -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && count == NULL)
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		if (handles != NULL) {
			for (unsigned i = 0; i < sim_ngpu && i < *count; i++)
				handles[i] = &sim_sockets[i];
			if (*count < sim_ngpu)
				sim_rc = AMDSMI_STATUS_INVAL;
		}
		*count = sim_ngpu;
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t *count,
    amdsmi_processor_handle *handles)
{
	int s = -1;

	for (unsigned i = 0; i < sim_ngpu; i++)
		if (socket == &sim_sockets[i])
			s = (int)i;
	SIM_BEGIN(FN_PROCESSOR_HANDLES, s);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (s < 0 || count == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		if (handles != NULL && *count >= 1)
			handles[0] = &sim_gpus[s];
		*count = 1;
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, amdsmi_bdf_t *bdf)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_BDF, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || bdf == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS)
		*bdf = sim_gpus[gpu].bdf;
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned int *len,
    char *uuid)
{
	int gpu = sim_gpu_index(h);
	char buf[64];

	SIM_BEGIN(FN_UUID, gpu);
	snprintf(buf, sizeof(buf), "a1ff74a1-0000-1000-80c3-%012x", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || len == NULL ||
	    uuid == NULL || *len <= strlen(buf)))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		memcpy(uuid, buf, strlen(buf) + 1);
		*len = (unsigned)strlen(buf);
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_power_info(amdsmi_processor_handle h, amdsmi_power_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_POWER_INFO, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu];
		unsigned w;
		bool loaded;

		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		loaded = sim_read_begin();
		w = g->no_power ? AMDSMI_POWER_NA : sim_watts(g);
		info->power_limit = (uint32_t)(g->cap_uw / 1000000);
		sim_read_end(loaded);
		pthread_mutex_unlock(&sim_mu);
		info->current_socket_power = sim_current_na ? AMDSMI_POWER_NA : w;
		info->average_socket_power = w;
#if AMDSMI_SIM_ABI >= 25
		info->socket_power = g->no_power ? AMDSMI_POWER_NA :
		    (uint64_t)w * 1000000;
#endif
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_energy_count(amdsmi_processor_handle h, uint64_t *acc,
    float *res, uint64_t *timestamp)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_ENERGY_COUNT, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || acc == NULL ||
	    res == NULL || timestamp == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		uint64_t now;
		double uj;
		bool loaded;

		/* exclusive: a load that moved the base writes it back */
		pthread_mutex_lock(&sim_mu);
		loaded = sim_state_begin(true) == 0;
		now = sim_now_ns();
		uj = sim_energy_uj(&sim_gpus[gpu], now);
		if (loaded)
			(void)sim_state_end(sim_state_moved());
		pthread_mutex_unlock(&sim_mu);
		*acc = (uint64_t)(uj / SIM_RES_UJ);
		*res = SIM_RES_UJ;
		*timestamp = now;
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_power_cap_info(amdsmi_processor_handle h, uint32_t sensor,
    amdsmi_power_cap_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_POWER_CAP_INFO, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL ||
	    sensor != 0))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		bool loaded;

		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		loaded = sim_read_begin();
		info->power_cap = sim_gpus[gpu].cap_uw;
		sim_read_end(loaded);
		pthread_mutex_unlock(&sim_mu);
		info->default_power_cap = SIM_CAP_MAX;
		info->dpm_cap = SIM_CAP_MAX;
		info->min_power_cap = SIM_CAP_MIN;
		info->max_power_cap = SIM_CAP_MAX;
	}
	return SIM_END();
}

amdsmi_status_t
amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t sensor, uint64_t cap)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_SET_POWER_CAP, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || sensor != 0 ||
	    cap < SIM_CAP_MIN || cap > SIM_CAP_MAX))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu], saved;
		uint64_t now;

		/* what it drew up to now is counted at the old cap */
		pthread_mutex_lock(&sim_mu);
		if (sim_change_begin(g, &saved)) {
			now = sim_now_ns();
			g->e_uj = sim_energy_uj(g, now);
			g->t_ns = now;
			g->cap_uw = cap;
			sim_rc = sim_change_end(g, &saved, true, sim_rc);
		} else {
			sim_rc = AMDSMI_STATUS_FILE_ERROR;
		}
		pthread_mutex_unlock(&sim_mu);
	}
	sim_call_args(&sim_c, "%u %llu", sensor, (unsigned long long)cap);
	return SIM_END();
}

amdsmi_status_t
amdsmi_set_gpu_clk_limit(amdsmi_processor_handle h, amdsmi_clk_type_t type,
    amdsmi_clk_limit_type_t limit, uint64_t mhz)
{
	static const uint64_t range[2][2] = {
		{ SIM_CLK_SYS_MIN, SIM_CLK_SYS_MAX },
		{ SIM_CLK_MEM_MIN, SIM_CLK_MEM_MAX },
	};
	int gpu = sim_gpu_index(h);
	int d = type == AMDSMI_CLK_TYPE_SYS ? 0 : type == AMDSMI_CLK_TYPE_MEM ?
	    1 : -1;

	SIM_BEGIN(FN_SET_CLK_LIMIT, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || d < 0 ||
	    (limit != CLK_LIMIT_MIN && limit != CLK_LIMIT_MAX)))
		sim_rc = AMDSMI_STATUS_INVAL;
	else if (sim_rc == AMDSMI_STATUS_SUCCESS && (mhz < range[d][0] ||
	    mhz > range[d][1]))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu], saved;
		uint64_t *c = g->clk[d];
		bool cross;

		pthread_mutex_lock(&sim_mu);
		if (sim_change_begin(g, &saved)) {
			cross = (limit == CLK_LIMIT_MIN && mhz > c[1]) ||
			    (limit == CLK_LIMIT_MAX && mhz < c[0]);
			if (cross) {
				sim_rc = AMDSMI_STATUS_INVAL;
			} else {
				c[limit == CLK_LIMIT_MAX] = mhz;
				g->perf = AMDSMI_DEV_PERF_LEVEL_MANUAL;
			}
			sim_rc = sim_change_end(g, &saved, !cross, sim_rc);
		} else {
			sim_rc = AMDSMI_STATUS_FILE_ERROR;
		}
		pthread_mutex_unlock(&sim_mu);
	}
	sim_call_args(&sim_c, "%s %s %llu", d == 0 ? "SYS" : d == 1 ? "MEM" :
	    "?", limit == CLK_LIMIT_MAX ? "MAX" : "MIN",
	    (unsigned long long)mhz);
	return SIM_END();
}

amdsmi_status_t
amdsmi_set_gpu_perf_level(amdsmi_processor_handle h,
    amdsmi_dev_perf_level_t level)
{
	static const char *const names[] = { "AUTO", "LOW", "HIGH", "MANUAL" };
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_SET_PERF_LEVEL, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 ||
	    (unsigned)level > AMDSMI_DEV_PERF_LEVEL_MANUAL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu], saved;

		pthread_mutex_lock(&sim_mu);
		if (sim_change_begin(g, &saved)) {
			g->perf = level;
			if (level == AMDSMI_DEV_PERF_LEVEL_AUTO) {
				g->clk[0][0] = SIM_CLK_SYS_MIN;
				g->clk[0][1] = SIM_CLK_SYS_MAX;
				g->clk[1][0] = SIM_CLK_MEM_MIN;
				g->clk[1][1] = SIM_CLK_MEM_MAX;
			}
			sim_rc = sim_change_end(g, &saved, true, sim_rc);
		} else {
			sim_rc = AMDSMI_STATUS_FILE_ERROR;
		}
		pthread_mutex_unlock(&sim_mu);
	}
	sim_call_args(&sim_c, "%s", (unsigned)level <= 3 ? names[level] :
	    "?");
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_clock_info(amdsmi_processor_handle h, amdsmi_clk_type_t type,
    amdsmi_clk_info_t *info)
{
	int gpu = sim_gpu_index(h);
	int d = type == AMDSMI_CLK_TYPE_SYS ? 0 : type == AMDSMI_CLK_TYPE_MEM ?
	    1 : -1;

	SIM_BEGIN(FN_CLOCK_INFO, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || d < 0 ||
	    info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		bool loaded;

		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		loaded = sim_read_begin();
		info->min_clk = (uint32_t)sim_gpus[gpu].clk[d][0];
		info->max_clk = (uint32_t)sim_gpus[gpu].clk[d][1];
		info->clk = info->max_clk;
		info->clk_locked = sim_gpus[gpu].perf !=
		    AMDSMI_DEV_PERF_LEVEL_AUTO;
		sim_read_end(loaded);
		pthread_mutex_unlock(&sim_mu);
	}
	sim_call_args(&sim_c, "%s", d == 0 ? "SYS" : d == 1 ? "MEM" : "?");
	return SIM_END();
}

amdsmi_status_t
amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, amdsmi_asic_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN(FN_ASIC_INFO, gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		/* the real struct is smaller: write only what .24 has */
		memset(info, 0, 448);
		snprintf(info->market_name, sizeof(info->market_name), "%s",
		    sim_gpus[gpu].name);
	}
	return SIM_END();
}
