/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.h - the GPU backend interface.
 *
 * A backend is a table of function pointers plus an opaque context, so the
 * NVML backend, a future AMD backend and the command-overrides wrapper
 * compose: the wrapper holds an inner `struct gpu_backend` and forwards what
 * it does not override.
 *
 * Every call addresses a GPU by its index (0..count-1) and reports failures
 * through `struct zerr` with the kind already mapped from the driver's error
 * (no permission -> ZERR_FORBIDDEN, invalid argument / not supported ->
 * ZERR_INVALID, GPU lost -> ZERR_UNAVAILABLE, anything else ->
 * ZERR_INTERNAL) and a message that names the GPU and the operation and
 * carries the driver's error string, followed by what it means where that
 * is not obvious (which privilege is missing, that the GPU fell off the
 * bus).
 *
 * Drivers differ in what they can do at all (an old NVML lacks entry
 * points) and GPUs in what they support. The first is known without
 * asking a GPU (read_lacks / write_lacks), so a request for an operation
 * the driver cannot do is refused before anything is queued; the second is
 * probed once at open (struct gpu_caps) and otherwise left to the driver,
 * which is the authority: a GPU that says "not supported" gets a 400.
 *
 * Threading: the daemon calls writes and reads of one GPU from that GPU's
 * worker thread only, and power reads for streams from a sampler thread.
 * Backends must therefore tolerate concurrent calls on different GPUs and a
 * concurrent get_power_mw with any other call on the same GPU (NVML is
 * thread-safe).
 */
#ifndef ZEUS_GPU_H
#define ZEUS_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/lease_label.h"

/* The seven write operations of the API, in docs/api.md's order. */
enum gpu_write_op {
	GPU_SET_POWER_LIMIT,
	GPU_SET_PERSISTENCE_MODE,
	GPU_SET_GPU_LOCKED_CLOCKS,
	GPU_RESET_GPU_LOCKED_CLOCKS,
	GPU_SET_MEM_LOCKED_CLOCKS,
	GPU_RESET_MEM_LOCKED_CLOCKS,
	GPU_RESET_LOCKED_CLOCKS,
	GPU_WRITE_OP_COUNT
};

/* A write as plain data. Fields not used by `op` are ignored. */
/*
 * Who a write is for. Local backends ignore it; the network process's
 * remote backend (privsep/remote_gpu.c) passes it on, and the device
 * process decides the write again from it (access/warden.h). The values
 * are privsep's enum psmsg_from.
 */
enum gpu_writer {
	GPU_WRITER_UNSET = 0,		/* refused by the device process */
	GPU_WRITER_UNIX,		/* writer_handle: the peer's */
	GPU_WRITER_TCP,
	GPU_WRITER_RESTORE,		/* writer_handle: who released, or 0 */
	GPU_WRITER_PIPE,		/* a Windows named-pipe client */
};

struct gpu_write {
	enum gpu_write_op op;
	uint32_t power_limit_mw;	/* GPU_SET_POWER_LIMIT */
	bool enabled;			/* GPU_SET_PERSISTENCE_MODE */
	uint32_t min_clock_mhz;		/* GPU_SET_*_LOCKED_CLOCKS */
	uint32_t max_clock_mhz;
	enum gpu_writer writer;
	uint64_t writer_handle;
	uint64_t token_handle;		/* the request's verified token */
	/* for the device process's audit line: */
	const char *writer_reason;	/* a restore's: "process_exit", ... */
	uint8_t writer_addr_kind;	/* a TCP writer's address: 4, 6; 0 */
	uint8_t writer_addr[16];
	/* a Unix writer's lease label (X-Zeus-Lease-Label), "" for none */
	char writer_label[LEASE_LABEL_MAX + 1];
};

/* The API name of an operation ("set_power_limit", ...). */
const char *gpu_write_op_name(enum gpu_write_op op);

/* The five reads of the API, in docs/api.md's order. */
enum gpu_read_op {
	GPU_GET_POWER,
	GPU_GET_CUMULATIVE_ENERGY,
	GPU_GET_POWER_LIMIT,
	GPU_GET_POWER_LIMIT_CONSTRAINTS,
	GPU_GET_PERSISTENCE_MODE,
	GPU_READ_OP_COUNT
};

/* The API name of a read ("get_power", ...). */
const char *gpu_read_op_name(enum gpu_read_op op);

/*
 * What one GPU supports, probed once at open without changing anything.
 * A bool is true when the driver has the entry points and nothing read
 * from the GPU says it cannot (its architecture, a "not supported" from a
 * related read); the driver still has the last word when the operation
 * runs. A value of 0 is "could not be read".
 */
struct gpu_caps {
	bool power_limit;		/* set_power_limit */
	bool persistence_mode;		/* set_persistence_mode */
	bool gpu_locked_clocks;		/* set/reset_gpu_locked_clocks */
	bool mem_locked_clocks;		/* set/reset_mem_locked_clocks */
	uint32_t limit_min_mw, limit_max_mw, limit_default_mw;
	uint32_t gpu_clock_min_mhz, gpu_clock_max_mhz;	/* graphics clocks */
	uint32_t mem_clock_min_mhz, mem_clock_max_mhz;
};

/* Static facts about one GPU, gathered once at startup. */
struct gpu_info {
	char name[96];			/* "NVIDIA A40" */
	char pci_address[32];		/* "0000:01:00.0", lower-case hex */
	char uuid[96];			/* "GPU-8-4-4-4-12 hex"; "" unknown */
	char architecture[16];		/* "ampere", ...; "unknown" */
	bool energy_available;		/* cumulative energy counter works */
	struct gpu_caps caps;
};

struct gpu_backend;

struct gpu_backend_ops {
	const char *name;		/* "nvml", "overrides", ... */
	unsigned (*count)(struct gpu_backend *b);
	int (*info)(struct gpu_backend *b, unsigned gpu, struct gpu_info *out,
	    struct zerr *err);
	int (*get_power_mw)(struct gpu_backend *b, unsigned gpu, uint32_t *mw,
	    struct zerr *err);
	/*
	 * Optional (NULL: get_power_mw for each): the power of gpus[0..n-1]
	 * in one call, rc[i] and errs[i] as get_power_mw would set them. For
	 * a backend whose every call costs a round trip (the network process
	 * of a split daemon): a request for every GPU's power is then one.
	 */
	void (*get_power_many)(struct gpu_backend *b, const unsigned *gpus,
	    unsigned n, uint32_t *mw, int *rc, struct zerr *const *errs);
	int (*get_energy_mj)(struct gpu_backend *b, unsigned gpu, uint64_t *mj,
	    struct zerr *err);
	int (*get_power_limit_mw)(struct gpu_backend *b, unsigned gpu,
	    uint32_t *mw, struct zerr *err);
	int (*get_power_limit_constraints)(struct gpu_backend *b, unsigned gpu,
	    uint32_t *min_mw, uint32_t *max_mw, struct zerr *err);
	int (*get_persistence_mode)(struct gpu_backend *b, unsigned gpu,
	    bool *enabled, struct zerr *err);
	/*
	 * Runs one write. GPU_RESET_LOCKED_CLOCKS resets both clock domains,
	 * trying the memory domain even if the GPU domain failed, and reports
	 * the first error.
	 */
	int (*write)(struct gpu_backend *b, unsigned gpu,
	    const struct gpu_write *w, struct zerr *err);
	/*
	 * Optional (NULL: write for each): the writes w[0..n-1] to `gpu`, in
	 * that order, in one call, rc[i] and errs[i] as write would set them.
	 * For the network process of a split daemon: the writes queued on a
	 * GPU are then one round trip, not one each.
	 */
	void (*write_many)(struct gpu_backend *b, unsigned gpu,
	    const struct gpu_write *const *w, unsigned n, int *rc,
	    struct zerr *const *errs);
	/*
	 * With write_many: how many queued writes of `gpu` it should take
	 * at once now (at least 1), from what its writes took so far: a
	 * read queued behind a batch waits for all of it.
	 */
	unsigned (*write_batch)(struct gpu_backend *b, unsigned gpu);
	/*
	 * The driver entry point an operation needs and this backend lacks,
	 * whatever the GPU ("nvmlDeviceSetMemoryLockedClocks"), or a sentence
	 * (it contains a space) when the vendor has no such operation at all
	 * (persistence mode on AMD); NULL when the operation can be tried.
	 * Any thread, no driver call.
	 */
	const char *(*read_lacks)(struct gpu_backend *b, enum gpu_read_op op);
	const char *(*write_lacks)(struct gpu_backend *b, enum gpu_write_op op);
	/*
	 * True while the driver says the GPU is lost: its last call answered
	 * "GPU is lost" (calls still go to the driver, and the first that
	 * succeeds clears it). Any thread, no driver call.
	 */
	bool (*lost)(struct gpu_backend *b, unsigned gpu);
	void (*destroy)(struct gpu_backend *b);
};

struct gpu_backend {
	const struct gpu_backend_ops *ops;
	void *ctx;
};

#endif
