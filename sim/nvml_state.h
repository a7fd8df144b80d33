/*
 * nvml_state.h - the simulated NVIDIA GPUs' state: what each GPU is (its
 * part, name, PCI address and UUID, fixed by sim_state_configure) and its
 * settings (power limit, persistence, locked clocks) with their limits,
 * and its energy counter. The settings and the counter are read and
 * changed only through the functions here, under this module's own lock:
 * so state kept elsewhere (shared by processes, for instance) changes this
 * file alone.
 *
 * Environment, read by sim_state_configure (the first init, and the first
 * after a full shutdown), which resets every GPU to its power-on state:
 *   ZEUS_SIM_PROFILE   a profile (model.c), a comma-separated list of up to
 *                      16 (GPU i gets entry i modulo the length) or "mixed"
 *                      (v100,a100,h100,rtx4090); default a100
 *   ZEUS_SIM_GPUS      number of GPUs, 0..64; default the list's length
 *                      when it has more than one entry, else 4
 *   ZEUS_SIM_GPU_NAME  model name of every GPU, instead of the profile's
 *   ZEUS_SIM_PCI       comma-separated PCI addresses "DDDD:BB:DD.F" (hex)
 *                      for GPUs 0, 1, ...; missing ones default to
 *                      0000:<index+1>:00.0 (bus 01, 02, ...)
 *   ZEUS_SIM_DRIVER_VERSION  what nvmlSystemGetDriverVersion answers
 *
 *   ZEUS_SIM_STATE     a file that keeps the settings and the energy
 *                      counters across processes (below)
 *
 * Power-on state: the profile's default power limit, persistence off, no
 * locked clocks, the energy counter at (index + 1) * 3.6e9 mJ (a counter
 * "since driver load").
 *
 * With ZEUS_SIM_STATE every process that names the file sees one set of
 * GPUs, as a driver's clients do: the settings and the energy counter live
 * in the file (layout in nvml_state.c), read under its lock before every
 * use and written through after every change (and every energy reading,
 * which moves the counter on), so they outlive the process. A missing or
 * empty file starts at the power-on state; an existing one is kept (no
 * reset at configure). A file that fails a check (a symlink, not a regular
 * file, writable by group or others, another owner, bad magic or version,
 * another GPU count or GPU models or PCI addresses, wrong size, checksum,
 * a value out of range) makes configure fail after one line on stderr.
 * When it fails later (garbled while in use), changes of settings fail
 * (SIM_STATE_EFILE) and readings answer from the last state read or
 * written, after one line on stderr. Not supported on Windows (configure
 * fails).
 */
#ifndef ZEUS_SIM_NVML_STATE_H
#define ZEUS_SIM_NVML_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/nvml_api.h"
#include "model.h"
#include "sim_os.h"

#define SIM_MAX_GPUS 64

/* One simulated GPU; the handle NVML hands out points at it. */
struct nvmlDevice_st {
	/* Fixed by sim_state_configure until the next one. */
	unsigned index;
	const struct sim_profile *prof;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	unsigned domain, bus, device;
	/* nvml_state.c's alone, under its lock. */
	struct sim_settings set;
	double energy_mj;			/* integrated up to energy_ns */
	uint64_t energy_ns;
};

/* The clock domains that can be locked. */
enum sim_domain { SIM_DOMAIN_GPU, SIM_DOMAIN_MEM };

/*
 * Resets every GPU from the environment; `driver_version` is the default
 * for ZEUS_SIM_DRIVER_VERSION. -1 after one line on stderr for a bad
 * setting. The caller keeps other calls out (NVML is not initialized).
 */
SIM_HIDDEN int sim_state_configure(const char *driver_version);
/* The number of GPUs (ZEUS_SIM_GPUS). */
SIM_HIDDEN unsigned sim_state_count(void);
/* GPU `index`, below SIM_MAX_GPUS (past the count too). */
SIM_HIDDEN struct nvmlDevice_st *sim_state_gpu(unsigned index);
/* The index of a handle, or -1 when it is not one of ours. */
SIM_HIDDEN int sim_state_index(const struct nvmlDevice_st *g);
/* The driver version (ZEUS_SIM_DRIVER_VERSION), into buf. */
SIM_HIDDEN void sim_state_driver_version(char *buf, size_t size);

/* The GPU as the model sees it now: its part and current settings. */
SIM_HIDDEN void sim_state_view(const struct nvmlDevice_st *g,
    struct sim_model_gpu *out);
/* The energy counter in mJ, brought up to now. */
SIM_HIDDEN double sim_state_energy(struct nvmlDevice_st *g);

/*
 * The changes of settings answer 0, SIM_STATE_EINVAL for a value the call
 * refuses, or SIM_STATE_EFILE when the state file failed (the change is
 * not made; a line on stderr).
 */
#define SIM_STATE_EINVAL (-1)
#define SIM_STATE_EFILE (-2)
/* The power limit in mW; EINVAL outside the part's constraints. */
SIM_HIDDEN int sim_state_set_limit(struct nvmlDevice_st *g, unsigned mw);
SIM_HIDDEN int sim_state_set_persistence(struct nvmlDevice_st *g, bool on);
/*
 * Locks a domain's clocks to [min, max] MHz; EINVAL when min > max or max
 * is 0. Values outside the part's range are taken and clamped where they
 * take effect (model.c), as the driver does.
 */
SIM_HIDDEN int sim_state_lock_clocks(struct nvmlDevice_st *g,
    enum sim_domain d, unsigned min, unsigned max);
SIM_HIDDEN int sim_state_unlock_clocks(struct nvmlDevice_st *g,
    enum sim_domain d);
/* Closes the state file, if any (a full shutdown). */
SIM_HIDDEN void sim_state_release(void);

#endif
