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
 *   ZEUS_SIM_FAULTS, ZEUS_SIM_CONTROL, ZEUS_SIM_LOG  as in the NVML
 *                                 simulator: fault rules
 *                                   fail  <function|*> <gpu|*> <code>
 *                                   delay <function|*> <gpu|*> <ms>
 *                                 with <code> an amdsmi_status_t name with
 *                                 or without AMDSMI_STATUS_ (NO_PERM,
 *                                 NOT_SUPPORTED, ...) or a number; control
 *                                 file rules first, re-read when it changes
 *                                 (stat on every call); the call log:
 *   <start_ns> <function> <gpu|-> [args...] rc=<CODE> end_ns=<ns>
 * Args: set_power_cap `<sensor> <cap_uw>`, set_gpu_clk_limit
 * `<SYS|MEM> <MIN|MAX> <mhz>`, set_gpu_perf_level `AUTO|...`.
 *
 * A malformed ZEUS_SIM_GPUS, ZEUS_SIM_PCI or ZEUS_AMDSMI_SIM_NO_POWER makes
 * amdsmi_init fail with INVAL after one line on stderr, as the NVML
 * simulator does with its settings.
 *
 * Thread safety: one mutex guards all state; delays sleep outside it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "devices/amdsmi_api.h"

#define SIM_MAX_GPUS	16
#define SIM_MAX_RULES	64
#define SIM_RES_UJ	15.259f
#define SIM_CAP_MIN	200000000ull
#define SIM_CAP_MAX	750000000ull

struct sim_gpu {
	unsigned index;
	uint64_t cap_uw;
	uint64_t clk[2][2];	/* [SYS=0|MEM=1][MIN|MAX] */
	int perf;
	bool no_power;		/* reports no power (ZEUS_AMDSMI_SIM_NO_POWER) */
	char name[AMDSMI_MARKET_NAME_LEN];
	amdsmi_bdf_t bdf;
	/* energy: e_uj counted up to t_ns, at the power drawn since then */
	double e_uj;
	uint64_t t_ns;
};

struct sim_rule {
	bool delay;
	char fn[64];
	int gpu;		/* -1: any */
	unsigned value;		/* status or ms */
};

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static int sim_inits;
static unsigned sim_ngpu;
static struct sim_gpu sim_gpus[SIM_MAX_GPUS];
static int sim_sockets[SIM_MAX_GPUS];
static double sim_scale = 1.0;
static bool sim_current_na;
static int sim_log_fd = -1;
static struct sim_rule sim_env_rules[SIM_MAX_RULES], sim_ctl_rules[SIM_MAX_RULES];
static unsigned sim_nenv, sim_nctl;
static struct stat sim_ctl_st;

static const struct {
	const char *name;
	amdsmi_status_t code;
} sim_codes[] = {
	{ "SUCCESS", AMDSMI_STATUS_SUCCESS },
	{ "INVAL", AMDSMI_STATUS_INVAL },
	{ "NOT_SUPPORTED", AMDSMI_STATUS_NOT_SUPPORTED },
	{ "NOT_YET_IMPLEMENTED", AMDSMI_STATUS_NOT_YET_IMPLEMENTED },
	{ "API_FAILED", AMDSMI_STATUS_API_FAILED },
	{ "TIMEOUT", AMDSMI_STATUS_TIMEOUT },
	{ "RETRY", AMDSMI_STATUS_RETRY },
	{ "NO_PERM", AMDSMI_STATUS_NO_PERM },
	{ "IO", AMDSMI_STATUS_IO },
	{ "INTERNAL_EXCEPTION", AMDSMI_STATUS_INTERNAL_EXCEPTION },
	{ "INPUT_OUT_OF_BOUNDS", AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS },
	{ "INIT_ERROR", AMDSMI_STATUS_INIT_ERROR },
	{ "BUSY", AMDSMI_STATUS_BUSY },
	{ "NOT_FOUND", AMDSMI_STATUS_NOT_FOUND },
	{ "NOT_INIT", AMDSMI_STATUS_NOT_INIT },
	{ "DRIVER_NOT_LOADED", AMDSMI_STATUS_DRIVER_NOT_LOADED },
	{ "NO_DATA", AMDSMI_STATUS_NO_DATA },
	{ "UNKNOWN_ERROR", AMDSMI_STATUS_UNKNOWN_ERROR },
};
#define SIM_NCODES (sizeof(sim_codes) / sizeof(sim_codes[0]))

static uint64_t
sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *
sim_code_name(amdsmi_status_t rc)
{
	for (size_t i = 0; i < SIM_NCODES; i++)
		if (sim_codes[i].code == rc)
			return sim_codes[i].name;
	return "OTHER";
}

static int
sim_parse_code(const char *s, unsigned *out)
{
	char *end;

	if (strncmp(s, "AMDSMI_STATUS_", 14) == 0)
		s += 14;
	for (size_t i = 0; i < SIM_NCODES; i++)
		if (strcmp(sim_codes[i].name, s) == 0) {
			*out = sim_codes[i].code;
			return 0;
		}
	*out = (unsigned)strtoul(s, &end, 10);
	return *s != '\0' && *end == '\0' ? 0 : -1;
}

/* One rule line into r; 1: a rule, 0: blank/comment, -1: malformed. */
static int
sim_parse_rule(const char *line, struct sim_rule *r)
{
	char kind[16], fn[64], gpu[16], val[48];

	while (*line == ' ' || *line == '\t')
		line++;
	if (*line == '\0' || *line == '#' || *line == '\n')
		return 0;
	if (sscanf(line, "%15s %63s %15s %47s", kind, fn, gpu, val) != 4)
		return -1;
	r->delay = strcmp(kind, "delay") == 0;
	if (!r->delay && strcmp(kind, "fail") != 0)
		return -1;
	snprintf(r->fn, sizeof(r->fn), "%s", fn);
	r->gpu = strcmp(gpu, "*") == 0 ? -1 : atoi(gpu);
	if (r->delay)
		r->value = (unsigned)strtoul(val, NULL, 10);
	else if (sim_parse_code(val, &r->value) != 0)
		return -1;
	return 1;
}

static unsigned
sim_parse_rules(char *text, const char *sep, struct sim_rule *rules)
{
	unsigned n = 0;
	char *save = NULL;

	for (char *l = strtok_r(text, sep, &save); l != NULL && n <
	    SIM_MAX_RULES; l = strtok_r(NULL, sep, &save))
		if (sim_parse_rule(l, &rules[n]) == 1)
			n++;
	return n;
}

/* Re-reads the control file when it changed; under sim_mu. */
static void
sim_reload_control(void)
{
	const char *path = getenv("ZEUS_SIM_CONTROL");
	char buf[8192];
	struct stat st;
	ssize_t n;
	int fd;

	if (path == NULL)
		return;
	if (stat(path, &st) != 0) {
		sim_nctl = 0;
		memset(&sim_ctl_st, 0, sizeof(sim_ctl_st));
		return;
	}
	if (st.st_ino == sim_ctl_st.st_ino && st.st_size == sim_ctl_st.st_size &&
	    st.st_mtim.tv_nsec == sim_ctl_st.st_mtim.tv_nsec &&
	    st.st_mtim.tv_sec == sim_ctl_st.st_mtim.tv_sec &&
	    st.st_ctim.tv_nsec == sim_ctl_st.st_ctim.tv_nsec)
		return;
	sim_ctl_st = st;
	sim_nctl = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	sim_nctl = sim_parse_rules(buf, "\n", sim_ctl_rules);
}

static bool
sim_rule_hit(const struct sim_rule *r, bool delay, const char *fn, int gpu)
{
	return r->delay == delay && (strcmp(r->fn, "*") == 0 ||
	    strcmp(r->fn, fn) == 0) && (r->gpu == -1 || r->gpu == gpu);
}

/* The injected status for a call (SUCCESS: none) and its delay in ms. */
static amdsmi_status_t
sim_fault(const char *fn, int gpu, unsigned *delay_ms)
{
	amdsmi_status_t rc = AMDSMI_STATUS_SUCCESS;
	bool got_fail = false, got_delay = false;

	*delay_ms = 0;
	pthread_mutex_lock(&sim_mu);
	sim_reload_control();
	for (unsigned pass = 0; pass < 2; pass++) {
		const struct sim_rule *rs = pass == 0 ? sim_ctl_rules :
		    sim_env_rules;
		unsigned n = pass == 0 ? sim_nctl : sim_nenv;

		for (unsigned i = 0; i < n; i++) {
			if (!got_fail && sim_rule_hit(&rs[i], false, fn, gpu)) {
				rc = rs[i].value;
				got_fail = true;
			}
			if (!got_delay && sim_rule_hit(&rs[i], true, fn, gpu)) {
				*delay_ms = rs[i].value;
				got_delay = true;
			}
		}
	}
	pthread_mutex_unlock(&sim_mu);
	return rc;
}

static void
sim_log(uint64_t start, const char *fn, int gpu, amdsmi_status_t rc,
    const char *args)
{
	char line[512], g[16];
	int n;

	if (sim_log_fd < 0)
		return;
	if (gpu < 0)
		snprintf(g, sizeof(g), "-");
	else
		snprintf(g, sizeof(g), "%d", gpu);
	n = snprintf(line, sizeof(line), "%llu %s %s%s%s rc=%s end_ns=%llu\n",
	    (unsigned long long)start, fn, g, args[0] ? " " : "", args,
	    sim_code_name(rc), (unsigned long long)sim_now_ns());
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!write(sim_log_fd, line, (size_t)n);
}

/*
 * The start of every call: the injected fault and delay. Returns the
 * status to answer with before doing anything (SUCCESS: carry on).
 */
static amdsmi_status_t
sim_enter(const char *fn, int gpu)
{
	unsigned ms;
	amdsmi_status_t rc = sim_fault(fn, gpu, &ms);

	if (ms > 0) {
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return rc;
}

#define SIM_BEGIN(fn, gpu)						\
	uint64_t sim_t0 = sim_now_ns();					\
	amdsmi_status_t sim_rc = sim_enter(fn, gpu);			\
	if (sim_rc == AMDSMI_STATUS_SUCCESS && sim_inits == 0 &&	\
	    strcmp(fn, "amdsmi_init") != 0 &&				\
	    strcmp(fn, "amdsmi_get_lib_version") != 0)			\
		sim_rc = AMDSMI_STATUS_NOT_INIT

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

/* Reads the environment; -1 after a line on stderr for a bad setting. */
static int
sim_configure(void)
{
	const char *s, *name, *list;
	unsigned long n = 2;
	char item[64];

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
		g->clk[0][0] = 500;
		g->clk[0][1] = 2100;
		g->clk[1][0] = 900;
		g->clk[1][1] = 1300;
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
	if (sim_log_fd < 0 && (s = getenv("ZEUS_SIM_LOG")) != NULL)
		sim_log_fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		    0644);
	sim_nenv = 0;
	if ((s = getenv("ZEUS_SIM_FAULTS")) != NULL) {
		char buf[4096];

		snprintf(buf, sizeof(buf), "%s", s);
		sim_nenv = sim_parse_rules(buf, ";", sim_env_rules);
	}
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

/* Energy counted so far, in uJ. Under sim_mu. */
static double
sim_energy_uj(const struct sim_gpu *g, uint64_t now)
{
	if (g->no_power)
		return 0;
	return g->e_uj + (double)(now - g->t_ns) / 1e9 * sim_watts(g) * 1e6 *
	    sim_scale;
}

/* ------------------------------------------------------------------------
 * The exported functions.
 */

amdsmi_status_t
amdsmi_init(uint64_t init_flags)
{
	SIM_BEGIN("amdsmi_init", -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		if (sim_inits > 0 || sim_configure() == 0)
			sim_inits++;
		else
			sim_rc = AMDSMI_STATUS_INVAL;
		pthread_mutex_unlock(&sim_mu);
	}
	sim_log(sim_t0, "amdsmi_init", -1, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_shut_down(void)
{
	SIM_BEGIN("amdsmi_shut_down", -1);
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		sim_inits--;
		pthread_mutex_unlock(&sim_mu);
	}
	sim_log(sim_t0, "amdsmi_shut_down", -1, sim_rc, "");
	return sim_rc;
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
	SIM_BEGIN("amdsmi_get_lib_version", -1);
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
	sim_log(sim_t0, "amdsmi_get_lib_version", -1, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles)
{
	SIM_BEGIN("amdsmi_get_socket_handles", -1);
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
	sim_log(sim_t0, "amdsmi_get_socket_handles", -1, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t *count,
    amdsmi_processor_handle *handles)
{
	int s = -1;

	for (unsigned i = 0; i < sim_ngpu; i++)
		if (socket == &sim_sockets[i])
			s = (int)i;
	SIM_BEGIN("amdsmi_get_processor_handles", s);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (s < 0 || count == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		if (handles != NULL && *count >= 1)
			handles[0] = &sim_gpus[s];
		*count = 1;
	}
	sim_log(sim_t0, "amdsmi_get_processor_handles", s, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, amdsmi_bdf_t *bdf)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_get_gpu_device_bdf", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || bdf == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS)
		*bdf = sim_gpus[gpu].bdf;
	sim_log(sim_t0, "amdsmi_get_gpu_device_bdf", gpu, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned int *len,
    char *uuid)
{
	int gpu = sim_gpu_index(h);
	char buf[64];

	SIM_BEGIN("amdsmi_get_gpu_device_uuid", gpu);
	snprintf(buf, sizeof(buf), "a1ff74a1-0000-1000-80c3-%012x", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || len == NULL ||
	    uuid == NULL || *len <= strlen(buf)))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		memcpy(uuid, buf, strlen(buf) + 1);
		*len = (unsigned)strlen(buf);
	}
	sim_log(sim_t0, "amdsmi_get_gpu_device_uuid", gpu, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_power_info(amdsmi_processor_handle h, amdsmi_power_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_get_power_info", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu];
		unsigned w;

		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		w = g->no_power ? AMDSMI_POWER_NA : sim_watts(g);
		info->power_limit = (uint32_t)(g->cap_uw / 1000000);
		pthread_mutex_unlock(&sim_mu);
		info->current_socket_power = sim_current_na ? AMDSMI_POWER_NA : w;
		info->average_socket_power = w;
#if AMDSMI_SIM_ABI >= 25
		info->socket_power = g->no_power ? AMDSMI_POWER_NA :
		    (uint64_t)w * 1000000;
#endif
	}
	sim_log(sim_t0, "amdsmi_get_power_info", gpu, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_energy_count(amdsmi_processor_handle h, uint64_t *acc,
    float *res, uint64_t *timestamp)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_get_energy_count", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || acc == NULL ||
	    res == NULL || timestamp == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		uint64_t now = sim_now_ns();
		double uj;

		pthread_mutex_lock(&sim_mu);
		uj = sim_energy_uj(&sim_gpus[gpu], now);
		pthread_mutex_unlock(&sim_mu);
		*acc = (uint64_t)(uj / SIM_RES_UJ);
		*res = SIM_RES_UJ;
		*timestamp = now;
	}
	sim_log(sim_t0, "amdsmi_get_energy_count", gpu, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_power_cap_info(amdsmi_processor_handle h, uint32_t sensor,
    amdsmi_power_cap_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_get_power_cap_info", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL ||
	    sensor != 0))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		info->power_cap = sim_gpus[gpu].cap_uw;
		pthread_mutex_unlock(&sim_mu);
		info->default_power_cap = SIM_CAP_MAX;
		info->dpm_cap = SIM_CAP_MAX;
		info->min_power_cap = SIM_CAP_MIN;
		info->max_power_cap = SIM_CAP_MAX;
	}
	sim_log(sim_t0, "amdsmi_get_power_cap_info", gpu, sim_rc, "");
	return sim_rc;
}

amdsmi_status_t
amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t sensor, uint64_t cap)
{
	int gpu = sim_gpu_index(h);
	char args[64];

	SIM_BEGIN("amdsmi_set_power_cap", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || sensor != 0 ||
	    cap < SIM_CAP_MIN || cap > SIM_CAP_MAX))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu];
		uint64_t now = sim_now_ns();

		/* what it drew up to now is counted at the old cap */
		pthread_mutex_lock(&sim_mu);
		g->e_uj = sim_energy_uj(g, now);
		g->t_ns = now;
		g->cap_uw = cap;
		pthread_mutex_unlock(&sim_mu);
	}
	snprintf(args, sizeof(args), "%u %llu", sensor,
	    (unsigned long long)cap);
	sim_log(sim_t0, "amdsmi_set_power_cap", gpu, sim_rc, args);
	return sim_rc;
}

amdsmi_status_t
amdsmi_set_gpu_clk_limit(amdsmi_processor_handle h, amdsmi_clk_type_t type,
    amdsmi_clk_limit_type_t limit, uint64_t mhz)
{
	static const uint64_t range[2][2] = { { 500, 2100 }, { 900, 1300 } };
	int gpu = sim_gpu_index(h);
	int d = type == AMDSMI_CLK_TYPE_SYS ? 0 : type == AMDSMI_CLK_TYPE_MEM ?
	    1 : -1;
	char args[64];

	SIM_BEGIN("amdsmi_set_gpu_clk_limit", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || d < 0 ||
	    (limit != CLK_LIMIT_MIN && limit != CLK_LIMIT_MAX)))
		sim_rc = AMDSMI_STATUS_INVAL;
	else if (sim_rc == AMDSMI_STATUS_SUCCESS && (mhz < range[d][0] ||
	    mhz > range[d][1]))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		uint64_t *c = sim_gpus[gpu].clk[d];

		pthread_mutex_lock(&sim_mu);
		if ((limit == CLK_LIMIT_MIN && mhz > c[1]) ||
		    (limit == CLK_LIMIT_MAX && mhz < c[0]))
			sim_rc = AMDSMI_STATUS_INVAL;
		pthread_mutex_unlock(&sim_mu);
	}
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		sim_gpus[gpu].clk[d][limit == CLK_LIMIT_MAX] = mhz;
		sim_gpus[gpu].perf = AMDSMI_DEV_PERF_LEVEL_MANUAL;
		pthread_mutex_unlock(&sim_mu);
	}
	snprintf(args, sizeof(args), "%s %s %llu", d == 0 ? "SYS" : d == 1 ?
	    "MEM" : "?", limit == CLK_LIMIT_MAX ? "MAX" : "MIN",
	    (unsigned long long)mhz);
	sim_log(sim_t0, "amdsmi_set_gpu_clk_limit", gpu, sim_rc, args);
	return sim_rc;
}

amdsmi_status_t
amdsmi_set_gpu_perf_level(amdsmi_processor_handle h,
    amdsmi_dev_perf_level_t level)
{
	static const char *const names[] = { "AUTO", "LOW", "HIGH", "MANUAL" };
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_set_gpu_perf_level", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 ||
	    (unsigned)level > AMDSMI_DEV_PERF_LEVEL_MANUAL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		struct sim_gpu *g = &sim_gpus[gpu];

		pthread_mutex_lock(&sim_mu);
		g->perf = level;
		if (level == AMDSMI_DEV_PERF_LEVEL_AUTO) {
			g->clk[0][0] = 500;
			g->clk[0][1] = 2100;
			g->clk[1][0] = 900;
			g->clk[1][1] = 1300;
		}
		pthread_mutex_unlock(&sim_mu);
	}
	sim_log(sim_t0, "amdsmi_set_gpu_perf_level", gpu, sim_rc,
	    (unsigned)level <= 3 ? names[level] : "?");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_clock_info(amdsmi_processor_handle h, amdsmi_clk_type_t type,
    amdsmi_clk_info_t *info)
{
	int gpu = sim_gpu_index(h);
	int d = type == AMDSMI_CLK_TYPE_SYS ? 0 : type == AMDSMI_CLK_TYPE_MEM ?
	    1 : -1;

	SIM_BEGIN("amdsmi_get_clock_info", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || d < 0 ||
	    info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		memset(info, 0, sizeof(*info));
		pthread_mutex_lock(&sim_mu);
		info->min_clk = (uint32_t)sim_gpus[gpu].clk[d][0];
		info->max_clk = (uint32_t)sim_gpus[gpu].clk[d][1];
		info->clk = info->max_clk;
		info->clk_locked = sim_gpus[gpu].perf !=
		    AMDSMI_DEV_PERF_LEVEL_AUTO;
		pthread_mutex_unlock(&sim_mu);
	}
	sim_log(sim_t0, "amdsmi_get_clock_info", gpu, sim_rc,
	    d == 0 ? "SYS" : d == 1 ? "MEM" : "?");
	return sim_rc;
}

amdsmi_status_t
amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, amdsmi_asic_info_t *info)
{
	int gpu = sim_gpu_index(h);

	SIM_BEGIN("amdsmi_get_gpu_asic_info", gpu);
	if (sim_rc == AMDSMI_STATUS_SUCCESS && (gpu < 0 || info == NULL))
		sim_rc = AMDSMI_STATUS_INVAL;
	if (sim_rc == AMDSMI_STATUS_SUCCESS) {
		/* the real struct is smaller: write only what .24 has */
		memset(info, 0, 448);
		snprintf(info->market_name, sizeof(info->market_name), "%s",
		    sim_gpus[gpu].name);
	}
	sim_log(sim_t0, "amdsmi_get_gpu_asic_info", gpu, sim_rc, "");
	return sim_rc;
}
