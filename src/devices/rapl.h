/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl.h - CPU package and DRAM energy from RAPL counters.
 *
 * A `struct rapl` is the set of RAPL packages the daemon serves as "cpus".
 * Each package has a package counter and, optionally, a DRAM counter. The
 * raw counters are read from a source: the Linux powercap sysfs tree
 * (rapl_open, rapl_sysfs.c) or an in-memory simulation (rapl_sim.h). Both
 * go through the same wraparound compensation (rapl.c), so what callers see
 * is one monotonic, wrap-compensated cumulative energy per counter:
 *
 *     reported = raw + wraps * (max_energy_range_uj + 1)
 *
 * The counter takes the values 0..max_energy_range_uj, so one wrap is
 * max_energy_range_uj + 1 microjoules. A reading below the previous one is
 * exactly one wrap; the keepalive thread (rapl_start_keepalive) reads often
 * enough that no two wraps fall between reads. See docs/rapl.md.
 *
 * Threading: every call on a package takes that package's mutex, so a
 * per-package worker, a stream sampler and the keepalive may read the same
 * package concurrently.
 */
#ifndef ZEUS_RAPL_H
#define ZEUS_RAPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Keepalive bounds (ms). The automatic interval never exceeds the maximum. */
#define RAPL_KEEPALIVE_MAX_MS 30000u
#define RAPL_KEEPALIVE_MIN_MS 10u

/*
 * Power assumed when choosing the automatic keepalive interval: no RAPL
 * counter is expected to advance faster than this (W). Real packages draw
 * well under 1 kW; the margin buys safety for a few extra microseconds of
 * reading.
 */
#define RAPL_KEEPALIVE_WORST_W 2000u

struct rapl;

/*
 * Stops the keepalive (if started), closes files, frees. NULL is fine. No
 * other thread may be reading `r` any more.
 */
void rapl_close(struct rapl *r);

unsigned rapl_count(const struct rapl *r);

/* The N of intel-rapl:N (the API's cpu id) of package i (0..count-1). */
unsigned rapl_package_id(const struct rapl *r, unsigned i);

/* The zone's `name` ("package-0", "psys", "sim-package-0"). */
const char *rapl_package_name(const struct rapl *r, unsigned i);

bool rapl_has_dram(const struct rapl *r, unsigned i);

/* Index (0..count-1) of the package with id N, or -1. */
int rapl_index_of(const struct rapl *r, unsigned package_id);

/*
 * Reads package i: wrap-compensated cumulative energy in µJ. `cpu_uj` may be
 * NULL; `dram_uj` must be NULL for a package without DRAM (ZERR_INVALID
 * otherwise). Both counters are always read, so either read keeps wrap
 * tracking of both current, and the state only moves when both reads
 * succeed. A failed read is ZERR_INTERNAL naming the file.
 */
int rapl_read(struct rapl *r, unsigned i, uint64_t *cpu_uj,
    uint64_t *dram_uj, struct zerr *err);

/* One reading with the CLOCK_MONOTONIC time it was taken. */
struct rapl_sample {
	uint64_t mono_ns;
	uint64_t cpu_uj;
	uint64_t dram_uj;		/* 0 when !has_dram */
	bool has_dram;
};

/* Like rapl_read, timestamped right after the counters were read. */
int rapl_sample(struct rapl *r, unsigned i, struct rapl_sample *out,
    struct zerr *err);

/*
 * Average power between two samples of the same package, in mW (µJ per ns
 * times 1e6). Returns -1 when b is not later than a or its energy is lower.
 * DRAM is 0 without DRAM.
 */
int rapl_power_mw(const struct rapl_sample *a, const struct rapl_sample *b,
    uint64_t *cpu_mw, uint64_t *dram_mw);

/*
 * Starts a thread that reads every package each `interval_ms` (0 picks
 * rapl_keepalive_auto_ms) so wraps are seen even when nobody asks. A read
 * error is logged once per failing streak and does not stop the thread.
 * rapl_close stops it promptly. Starting twice is ZERR_INVALID. Over a
 * source that tracks wraps itself (tracks_wraps) there is nothing to keep
 * alive: no thread starts, and this returns 0.
 */
int rapl_start_keepalive(struct rapl *r, unsigned interval_ms,
    struct zerr *err);

/*
 * The interval the keepalive uses when given 0: half the time the smallest
 * counter range lasts at RAPL_KEEPALIVE_WORST_W, clamped to
 * [RAPL_KEEPALIVE_MIN_MS, RAPL_KEEPALIVE_MAX_MS].
 */
unsigned rapl_keepalive_auto_ms(const struct rapl *r);

/* Number of keepalive passes so far (for tests and logs). */
uint64_t rapl_keepalive_passes(struct rapl *r);

/* ---- Sources: where raw counters come from ------------------------------ */

enum rapl_zone { RAPL_ZONE_CPU, RAPL_ZONE_DRAM };

/* Raw counters of one package read together elsewhere (a batch). */
struct rapl_raw_sample {
	bool ok;			/* read; the values below are set */
	uint64_t cpu_raw, dram_raw;
	uint64_t mono_ns;		/* CLOCK_MONOTONIC right after */
};

/* What a source says about one package at open time. */
struct rapl_package_desc {
	unsigned id;			/* N of intel-rapl:N */
	char name[64];
	bool has_dram;
	uint64_t cpu_max_uj;		/* max_energy_range_uj, > 0 */
	uint64_t dram_max_uj;
	/*
	 * Highest power each zone can draw (W), when the source knows it (the
	 * simulator does); 0 means unknown and RAPL_KEEPALIVE_WORST_W is
	 * assumed. Only the automatic keepalive interval uses it.
	 */
	unsigned cpu_max_w, dram_max_w;
};

/*
 * A raw counter source. `read` returns the counter value (0..max) of one
 * zone of package `pkg` (an index); it is called with that package's mutex
 * held, so it needs no locking of its own for per-package state. Errors are
 * ZERR_INTERNAL naming what failed. `destroy` frees `ctx`.
 */
struct rapl_source_ops {
	const char *name;		/* "sysfs", "sim" */
	int (*read)(void *ctx, unsigned pkg, enum rapl_zone zone,
	    uint64_t *raw, struct zerr *err);
	/* What to name in errors (a file path); may be NULL. */
	const char *(*label)(void *ctx, unsigned pkg, enum rapl_zone zone);
	void (*destroy)(void *ctx);
	/*
	 * Optional: the counters of every package in pkg_mask (bit i: package
	 * index i) at once, into raw[i] (ok set for those read; both zones
	 * where the package has DRAM). For a source whose every read costs a
	 * round trip (the network process of a split daemon). 0, or -1 when
	 * nothing could be asked.
	 */
	int (*read_many)(void *ctx, uint64_t pkg_mask,
	    struct rapl_raw_sample *raw, struct zerr *err);
	/*
	 * The source's values are already wrap-compensated cumulative µJ
	 * (the network process of a split daemon, whose device process
	 * tracks wraps and runs the keepalive where the counters are): the
	 * core passes them through, refuses one that goes backwards, and
	 * rapl_start_keepalive starts no thread.
	 */
	bool tracks_wraps;
};

/*
 * Builds a `struct rapl` over any source (the sysfs reader and the simulator
 * use this). Takes ownership of ctx, also on failure. Reads every counter
 * once to prime wrap tracking. Package ids must be unique.
 */
int rapl_open_source(const struct rapl_source_ops *ops, void *ctx,
    const struct rapl_package_desc *pkgs, unsigned npkgs, struct rapl **out,
    struct zerr *err);

/* What package i was opened with (to open a core over another source). */
void rapl_describe(const struct rapl *r, unsigned i,
    struct rapl_package_desc *out);

/* What errors name for a counter (its file), or NULL. */
const char *rapl_zone_label(const struct rapl *r, unsigned i,
    enum rapl_zone zone);


/*
 * Samples packages idx[0..n-1] (ascending) with one fetch of raw counters:
 * the packages are locked, fetch(arg, raw) fills raw[0..n-1] (the same
 * order), the values go through wrap tracking into out[k], and rc[k] says
 * which worked (err holds the last failure). Holding the locks across the
 * fetch keeps a concurrent read (a worker, the keepalive) from applying a
 * newer counter first, which would make the batch's look like a wrap.
 * Returns fetch's result.
 */
/*
 * rapl_read of packages pkgs[0..n-1] (in any order, repeats allowed): one
 * read_many of the source for all when it has one, else one read each.
 * rc[k], cpu_uj[k], dram_uj[k] (0 without DRAM) and errs[k] as rapl_read
 * would set them.
 */
void rapl_read_many(struct rapl *r, const unsigned *pkgs, unsigned n,
    uint64_t *cpu_uj, uint64_t *dram_uj, int *rc, struct zerr *const *errs);

int rapl_sample_batch(struct rapl *r, const unsigned *idx, unsigned n,
    int (*fetch)(void *arg, struct rapl_raw_sample *raw), void *arg,
    struct rapl_raw_sample *raw, struct rapl_sample *out, int *rc,
    struct zerr *err);

/*
 * Applies counters read elsewhere, at one moment, to package i as
 * rapl_sample_batch would (its DRAM total is 0 without a DRAM zone), without
 * waiting: -1 when `raw` is not ok, when another thread holds the package
 * (a read in progress, which may be newer) or when the values are refused
 * (out of range, or behind the last ones applied). The caller then reads
 * the package again the usual way.
 */
int rapl_apply_try(struct rapl *r, unsigned i,
    const struct rapl_raw_sample *raw, uint64_t *cpu_uj, uint64_t *dram_uj);

/* ---- The sysfs source (rapl_sysfs.c) ----------------------------------- */

/* The two roots, in order of preference (containers bind-mount the host's). */
#define RAPL_ROOT_CONTAINER "/zeus_sys/class/powercap/intel-rapl"
#define RAPL_ROOT_HOST "/sys/class/powercap/intel-rapl"

/*
 * RAPL_ROOT_CONTAINER when that directory exists, else RAPL_ROOT_HOST.
 * Never NULL; the result need not exist (rapl_open then finds no package).
 */
const char *rapl_default_root(void);

/* rapl_default_root with the candidates given, for tests. */
const char *rapl_pick_root(const char *container, const char *host);

/*
 * Opens every package zone `intel-rapl:N` directly under `root` (N canonical
 * decimal, no leading zeros, fits u32), sorted by N, with its DRAM subzone
 * `intel-rapl:N:M` whose `name` is "dram". Other entries (subzones that sit
 * beside packages in /sys/class/powercap, `intel-rapl-mmio:*`, odd names)
 * are skipped. Each package must have readable `name`, `energy_uj` and
 * `max_energy_range_uj`; a missing, unreadable or malformed file is an error
 * naming the file. A missing root is not an error: it gives zero packages,
 * and the caller decides whether zero CPUs is acceptable.
 *
 * The counter files stay open and are re-read with pread. Everything is
 * read once here, so a broken counter fails startup rather than a request.
 */
int rapl_open(const char *root, struct rapl **out, struct zerr *err);

/*
 * Parses a sysfs counter: decimal digits only, at most one trailing '\n',
 * no sign or spaces, fits u64. Returns 0 or -1.
 */
int rapl_parse_u64(const char *buf, size_t len, uint64_t *out);

/* ---- Pure helpers, exposed for tests ------------------------------------ */

/* Wrap tracking of one counter. */
struct rapl_counter_state {
	uint64_t max;			/* max_energy_range_uj */
	uint64_t last_raw;
	uint64_t offset;		/* wraps * (max + 1) */
	bool primed;
};

/*
 * Feeds one raw reading; on success sets *total to the compensated energy.
 * Fails (state unchanged) when raw > max or the total would overflow u64.
 */
int rapl_counter_update(struct rapl_counter_state *s, uint64_t raw,
    uint64_t *total);

#endif
