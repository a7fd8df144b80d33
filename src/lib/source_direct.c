/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source_direct.c - the monitor's in-process source: NVML through the
 * project's dlopen backend (src/devices/nvml.c) and RAPL through the
 * powercap reader (src/devices/rapl.c), the same code zeusd runs.
 *
 * Library and tree: the options' paths, else ZEUS_NVML_LIBRARY and
 * ZEUS_RAPL_DIR, else the driver's libnvidia-ml.so.1 and the detected
 * powercap root.
 *
 * Logging: the device code logs through src/common/log.c, which writes to
 * stderr at a process-wide level (zeusd's, from ZEUSD_LOG). Inside someone
 * else's program that is wrong on both counts, so the lines go to
 * libzeus's log handler instead (lib_log; the default shows warnings and
 * errors only), through log.c's sink hook zlog_set_sink. The reference to
 * the hook is weak and hidden: libzeus also links against a log.c without
 * it, and then only quiets the logger (its level, in libzeus's own hidden
 * copy of log.c, to errors). The host program's state is never touched.
 */
#include "source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "devices/gpu.h"
#include "devices/nvml.h"
#include "devices/rapl.h"
#include "lib.h"

/* log.c's sink hook; NULL when this build's log.c has none. */
typedef void (*direct_sink_fn)(enum zlog_level level, const char *event,
    const char *fields);
extern void zlog_set_sink(direct_sink_fn fn)
    __attribute__((weak, visibility("hidden")));

static pthread_once_t direct_log_once = PTHREAD_ONCE_INIT;

struct direct {
	struct gpu_backend gpu;
	bool have_gpu;
	struct rapl *rapl;
};

/* A device log line ("event k=v ...") to the library's log handler. */
static void
direct_log_sink(enum zlog_level level, const char *event, const char *fields)
{
	static const enum zeus_log_level map[] = {
		[ZLOG_DEBUG] = ZEUS_LOG_DEBUG, [ZLOG_INFO] = ZEUS_LOG_INFO,
		[ZLOG_WARN] = ZEUS_LOG_WARN, [ZLOG_ERROR] = ZEUS_LOG_ERROR,
	};

	lib_log((unsigned)level <= ZLOG_ERROR ? map[level] : ZEUS_LOG_ERROR,
	    "%s%s%s", event, fields[0] != '\0' ? " " : "", fields);
}

static void
direct_log_init(void)
{
	if (zlog_set_sink != NULL)
		zlog_set_sink(direct_log_sink);
	else
		zlog_set_level(ZLOG_ERROR);
}

static int
direct_fail(struct zeus_error *err, const struct zerr *z)
{
	return lib_err(err, z->kind == ZERR_NOT_FOUND ? ZEUS_ERR_NOT_FOUND :
	    ZEUS_ERR_DEVICE, "%s", z->msg);
}

static int
direct_gpu_energy(void *ctx, const unsigned *ids, size_t n, uint64_t *mj,
    struct zeus_error *err)
{
	struct direct *d = ctx;
	struct zerr z;

	for (size_t i = 0; i < n; i++) {
		if (d->gpu.ops->get_energy_mj(&d->gpu, ids[i], &mj[i], &z))
			return direct_fail(err, &z);
	}
	return 0;
}

static int
direct_gpu_power(void *ctx, const unsigned *ids, size_t n, uint64_t *mw,
    struct zeus_error *err)
{
	struct direct *d = ctx;
	struct zerr z;

	for (size_t i = 0; i < n; i++) {
		uint32_t v;

		if (d->gpu.ops->get_power_mw(&d->gpu, ids[i], &v, &z))
			return direct_fail(err, &z);
		mw[i] = v;
	}
	return 0;
}

static int
direct_cpu_energy(void *ctx, const unsigned *ids, size_t n, uint64_t *cpu,
    uint64_t *dram, struct zeus_error *err)
{
	struct direct *d = ctx;
	struct zerr z;

	for (size_t i = 0; i < n; i++) {
		int k = rapl_index_of(d->rapl, ids[i]);

		dram[i] = 0;
		if (k < 0)
			return lib_err(err, ZEUS_ERR_NOT_FOUND,
			    "no RAPL package %u", ids[i]);
		if (rapl_read(d->rapl, (unsigned)k, &cpu[i],
		    rapl_has_dram(d->rapl, (unsigned)k) ? &dram[i] : NULL,
		    &z) != 0)
			return direct_fail(err, &z);
	}
	return 0;
}

static void
direct_destroy(void *ctx)
{
	struct direct *d = ctx;

	if (d == NULL)
		return;
	if (d->have_gpu)
		d->gpu.ops->destroy(&d->gpu);
	rapl_close(d->rapl);
	free(d);
}

static const struct mon_source_ops direct_ops = {
	.gpu_energy = direct_gpu_energy,
	.gpu_power = direct_gpu_power,
	.cpu_energy = direct_cpu_energy,
	.destroy = direct_destroy,
};

static const char *
direct_pick(const char *given, const char *env)
{
	const char *v;

	if (given != NULL)
		return given;
	v = getenv(env);
	return v != NULL && *v != '\0' ? v : NULL;
}

static int
direct_open_gpus(struct direct *d, const struct mon_source_want *w,
    struct mon_inventory *inv, struct zeus_error *err)
{
	const char *lib = direct_pick(w->nvml_library, "ZEUS_NVML_LIBRARY");
	struct zerr z;
	unsigned n;

	if (nvml_backend_open(lib, &d->gpu, &z) != 0) {
		if (z.kind == ZERR_NOT_FOUND && !w->gpus_required) {
			/*
			 * No NVML here: zero GPUs. The reason is for a
			 * caller that ends up measuring nothing.
			 */
			lib_log(ZEUS_LOG_INFO, "no GPUs: NVML: %s", z.msg);
			return 0;
		}
		return lib_err(err, z.kind == ZERR_NOT_FOUND ?
		    ZEUS_ERR_NOT_FOUND : ZEUS_ERR_DEVICE, "NVML: %s", z.msg);
	}
	d->have_gpu = true;
	n = d->gpu.ops->count(&d->gpu);
	if (n > ZEUS_MAX_DEVICES)
		n = ZEUS_MAX_DEVICES;
	for (unsigned i = 0; i < n; i++) {
		struct gpu_info info;

		if (d->gpu.ops->info(&d->gpu, i, &info, &z) != 0)
			return direct_fail(err, &z);
		inv->gpu_energy[i] = info.energy_available;
	}
	inv->ngpus = n;
	return 0;
}

static int
direct_open_cpus(struct direct *d, const struct mon_source_want *w,
    struct mon_inventory *inv, struct zeus_error *err)
{
	const char *root = direct_pick(w->rapl_dir, "ZEUS_RAPL_DIR");
	struct zerr z;
	unsigned n;

	if (root == NULL)
		root = rapl_default_root();
	if (rapl_open(root, &d->rapl, &z) != 0) {
		if (!w->cpus_required) {
			lib_log(ZEUS_LOG_INFO, "no CPUs: RAPL: %s", z.msg);
			return 0;
		}
		return lib_err(err, ZEUS_ERR_DEVICE, "RAPL: %s", z.msg);
	}
	n = rapl_count(d->rapl);
	if (n == 0)
		lib_log(ZEUS_LOG_INFO, "no CPUs: RAPL: no package under %s",
		    root);
	if (n > ZEUS_MAX_DEVICES)
		n = ZEUS_MAX_DEVICES;
	if (n > 0 && rapl_start_keepalive(d->rapl, 0, &z) != 0)
		return direct_fail(err, &z);
	for (unsigned i = 0; i < n; i++) {
		inv->cpu_id[i] = rapl_package_id(d->rapl, i);
		inv->cpu_dram[i] = rapl_has_dram(d->rapl, i);
	}
	inv->ncpus = n;
	return 0;
}

int
source_direct_open(const struct mon_source_want *w, struct mon_source *out,
    struct mon_inventory *inv, struct zeus_error *err)
{
	struct direct *d = calloc(1, sizeof(*d));

	memset(inv, 0, sizeof(*inv));
	if (d == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	pthread_once(&direct_log_once, direct_log_init);
	if ((w->gpus && direct_open_gpus(d, w, inv, err) != 0) ||
	    (w->cpus && direct_open_cpus(d, w, inv, err) != 0)) {
		direct_destroy(d);
		return -1;
	}
	out->ops = &direct_ops;
	out->ctx = d;
	return 0;
}
