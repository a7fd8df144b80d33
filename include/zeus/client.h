/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.h - the zeusd client: every read and write of the zeusd HTTP API
 * (docs in docs/api.md terms: discover, time, whoami, GPU reads and
 * writes, GPU leases and their release, CPU reads, and the two power
 * streams), over a Unix socket, TCP or (Windows) a named pipe, with an
 * optional bearer token.
 * Uses libcurl.
 *
 * A client may be used from several threads: requests on one client are
 * serialised on its kept-alive connection, and each stream opens its own.
 */
#ifndef ZEUS_CLIENT_H
#define ZEUS_CLIENT_H

#include "zeus.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zeus_client;

/*
 * Where the daemon is. socket_path, host_port and pipe_name all NULL: the
 * environment decides: ZEUSD_SOCK_PATH (UDS), ZEUSD_HOST_PORT
 * ("host:port", TCP) or ZEUSD_PIPE_NAME (a Windows named pipe,
 * "\\.\pipe\NAME"), and ZEUSD_TOKEN; on Windows, with none of the
 * three set, zeusd's default pipe \\.\pipe\zeusd when it exists. Naming
 * more than one of the three (fields, or variables) is an error; so is
 * naming none when no default applies. A pipe name on Linux is an error.
 */
struct zeus_client_options {
	const char *socket_path;	/* UDS path */
	const char *host_port;		/* "127.0.0.1:4938", "[::1]:4938" */
	const char *token;		/* bearer token; NULL: ZEUSD_TOKEN */
	unsigned timeout_ms;		/* per request; 0: 10000 */
	const char *pipe_name;		/* Windows: "\\.\pipe\zeusd" */
};

/*
 * True when ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT or ZEUSD_PIPE_NAME is set and
 * non-empty, or (Windows) zeusd's default pipe exists.
 */
ZEUS_API bool zeus_client_env_configured(void);

/* Does not connect yet: the first request does. */
ZEUS_API int zeus_client_open(const struct zeus_client_options *opt,
    struct zeus_client **out, struct zeus_error *err);
ZEUS_API void zeus_client_close(struct zeus_client *c);

/* ---- discover, time, whoami --------------------------------------------- */

struct zeus_discovered_gpu {
	unsigned id;
	char name[96];
	char pci_address[32];
	bool cumulative_energy_available;
};

struct zeus_discovered_cpu {
	unsigned id;
	bool dram_available;
};

/* API groups as a bitmask. */
#define ZEUS_GROUP_GPU_CONTROL 0x1u
#define ZEUS_GROUP_GPU_READ 0x2u
#define ZEUS_GROUP_CPU_READ 0x4u

struct zeus_discovery {
	size_t gpu_count;
	struct zeus_discovered_gpu gpus[ZEUS_MAX_DEVICES];
	size_t cpu_count;
	struct zeus_discovered_cpu cpus[ZEUS_MAX_DEVICES];
	unsigned enabled_groups;	/* ZEUS_GROUP_* */
	bool auth_required;
};

ZEUS_API int zeus_client_discover(struct zeus_client *c,
    struct zeus_discovery *out, struct zeus_error *err);
/* GET /time: the daemon's unix time in ms. */
ZEUS_API int zeus_client_time(struct zeus_client *c, int64_t *timestamp_ms,
    struct zeus_error *err);

struct zeus_whoami {
	char sub[ZEUS_NAME_MAX];
	unsigned scopes;		/* ZEUS_GROUP_* */
	bool has_exp;
	int64_t exp;
};
ZEUS_API int zeus_client_whoami(struct zeus_client *c, struct zeus_whoami *out,
    struct zeus_error *err);

/*
 * What this caller may use, from GET /auth/whoami: its "devices" for a
 * Unix-socket peer without a token (the node policy's grants), every
 * device of each scope for a token. Bit i of gpu_read / gpu_control is
 * GPU i, bit i of cpu_read CPU package id i (ids of 64 and above are left
 * out). `known` is false when zeusd did not say (TCP without auth, where
 * /auth/whoami is 404 and every device is served): then every device may
 * be tried.
 * Returns 0, or -1 with err for a transport failure or another HTTP error.
 */
struct zeus_access {
	bool known;
	uint64_t gpu_read, gpu_control, cpu_read;
};
ZEUS_API int zeus_client_access(struct zeus_client *c, struct zeus_access *out,
    struct zeus_error *err);

/* ---- GPU reads ---------------------------------------------------------- */

/*
 * One GPU's answer. Each read fills the fields it is about and leaves the
 * others 0. `ids`/`nids`: the GPUs to ask for; ids NULL means all.
 */
struct zeus_gpu_reading {
	unsigned id;
	uint64_t power_mw;		/* get_power */
	uint64_t energy_mj;		/* get_cumulative_energy */
	uint64_t power_limit_mw;	/* get_power_limit */
	uint64_t min_power_limit_mw;	/* get_power_limit_constraints */
	uint64_t max_power_limit_mw;
	bool persistence_enabled;	/* get_persistence_mode */
};

struct zeus_gpu_readings {
	int64_t timestamp_ms;		/* get_power only */
	size_t count;			/* ascending ids */
	struct zeus_gpu_reading gpu[ZEUS_MAX_DEVICES];
};

ZEUS_API int zeus_client_gpu_get_power(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err);
ZEUS_API int zeus_client_gpu_get_cumulative_energy(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err);
ZEUS_API int zeus_client_gpu_get_power_limit(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err);
ZEUS_API int zeus_client_gpu_get_power_limit_constraints(
    struct zeus_client *c, const unsigned *ids, size_t nids,
    struct zeus_gpu_readings *out, struct zeus_error *err);
ZEUS_API int zeus_client_gpu_get_persistence_mode(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err);

/* ---- GPU writes (POST; ids required, nids > 0) -------------------------- */

/*
 * A label for the GPU leases this client's writes take or extend (zeusd
 * --gpu-leases): sent with every later write as the X-Zeus-Lease-Label
 * header, shown in GET /gpu/leases and the ledger's audit line, e.g.
 * "slurm:42.0". 1..64 bytes of letters, digits and . _ : @ + / -;
 * anything else is ZEUS_ERR_INVALID and changes nothing. NULL: no label
 * from now on. A daemon without leases ignores it.
 */
ZEUS_API int zeus_client_set_lease_label(struct zeus_client *c,
    const char *label, struct zeus_error *err);

ZEUS_API int zeus_client_gpu_set_power_limit(struct zeus_client *c,
    const unsigned *ids, size_t nids, uint32_t power_limit_mw, bool block,
    struct zeus_error *err);
ZEUS_API int zeus_client_gpu_set_persistence_mode(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool enabled, bool block,
    struct zeus_error *err);
ZEUS_API int zeus_client_gpu_set_gpu_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, uint32_t min_clock_mhz,
    uint32_t max_clock_mhz, bool block, struct zeus_error *err);
ZEUS_API int zeus_client_gpu_reset_gpu_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err);
ZEUS_API int zeus_client_gpu_set_mem_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, uint32_t min_clock_mhz,
    uint32_t max_clock_mhz, bool block, struct zeus_error *err);
ZEUS_API int zeus_client_gpu_reset_mem_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err);
ZEUS_API int zeus_client_gpu_reset_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err);

/* ---- GPU leases and the energy ledger (zeusd serve --gpu-leases) --------- */

/*
 * A non-root client on the Unix socket that changes a GPU setting takes a
 * lease on that GPU, held while the process that opened the connection
 * lives; zeusd restores the settings when the lease ends and charges the
 * GPU's energy over the lease to it (docs/security.md). These two calls
 * read that ledger and end one's own leases. A zeusd without
 * --gpu-leases answers 404 (ZEUS_ERR_HTTP, http_status 404).
 */

/* What a lease changed (struct zeus_lease.settings). */
#define ZEUS_SETTING_POWER_LIMIT 0x1u
#define ZEUS_SETTING_PERSISTENCE 0x2u
#define ZEUS_SETTING_GPU_CLOCKS 0x4u
#define ZEUS_SETTING_MEM_CLOCKS 0x8u

enum zeus_lease_state {
	ZEUS_LEASE_HELD,		/* open */
	ZEUS_LEASE_RESTORING,		/* its holder is gone, restore running */
	ZEUS_LEASE_ENDED,
};

enum zeus_lease_energy {
	ZEUS_LEASE_ENERGY_OK,		/* energy_j is the GPU's over the span */
	ZEUS_LEASE_ENERGY_UNAVAILABLE,	/* the GPU has no energy counter */
	ZEUS_LEASE_ENERGY_PENDING,	/* not started: no reading yet */
};

/* Strings too long for their field are cut to fit (always terminated). */
struct zeus_lease {
	unsigned gpu;
	uint32_t uid;
	char user[64];			/* "": zeusd sent null */
	/* pid, cgroup and label: zeusd shows them to root and the holder
	 * only; another user gets 0, "" and "" (docs/api.md) */
	int64_t pid;			/* the process that took it */
	char cgroup[256];		/* "": unknown */
	char label[ZEUS_NAME_MAX];	/* "": none */
	enum zeus_lease_state state;
	bool has_start, has_end;	/* false: null (not started, open) */
	double start, end;		/* unix seconds */
	double duration_s;		/* so far, while open */
	enum zeus_lease_energy energy;
	double energy_j;		/* ZEUS_LEASE_ENERGY_OK only, else 0 */
	bool has_avg_w;
	double avg_w;			/* energy_j / duration_s */
	unsigned settings;		/* ZEUS_SETTING_* */
	char reason[32];		/* how it ended ("release", ...), or "" */
};

/* Most ended leases zeus_client_gpu_leases keeps (zeusd keeps 32). */
#define ZEUS_LEASES_ENDED_MAX 64

struct zeus_unleased {
	unsigned gpu;
	bool has_energy;		/* false: no counter, or never read */
	double energy_j;		/* charged to nobody since zeusd started */
};

/* GET /gpu/leases (needs gpu-read): only GPUs the caller may see. */
struct zeus_leases {
	size_t count;			/* open leases */
	struct zeus_lease leases[ZEUS_MAX_DEVICES];
	size_t ended_count;		/* newest first; older ones dropped */
	struct zeus_lease ended[ZEUS_LEASES_ENDED_MAX];
	size_t unleased_count;
	struct zeus_unleased unleased[ZEUS_MAX_DEVICES];
};

ZEUS_API int zeus_client_gpu_leases(struct zeus_client *c,
    struct zeus_leases *out, struct zeus_error *err);

/* POST /gpu/release: the leases it ended and the GPUs that had none. */
struct zeus_release {
	size_t count;
	struct zeus_lease released[ZEUS_MAX_DEVICES];
	size_t not_leased_count;
	unsigned not_leased[ZEUS_MAX_DEVICES];
};

/*
 * Ends the caller's leases on `ids` (NULL: every GPU; root: anyone's).
 * zeusd restores the settings before it answers, so on 0 they are back.
 * A GPU leased by another user is 409 and ends nothing; a restore that
 * failed (zeusd retries it) is 409 too, naming the driver's error.
 * Needs gpu-control. A lease is the user's, not the connection's: any
 * of the user's connections may end it.
 */
ZEUS_API int zeus_client_gpu_release(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_release *out,
    struct zeus_error *err);

/* "held", "restoring", "ended"; "ok", "unavailable", "pending". */
ZEUS_API const char *zeus_lease_state_name(enum zeus_lease_state s);
ZEUS_API const char *zeus_lease_energy_name(enum zeus_lease_energy e);

/* ---- CPU reads ---------------------------------------------------------- */

struct zeus_cpu_reading {
	unsigned id;
	bool has_cpu, has_dram;		/* false: the daemon sent null */
	uint64_t cpu_energy_uj;		/* get_cumulative_energy */
	uint64_t dram_energy_uj;
	uint64_t cpu_mw;		/* get_power */
	uint64_t dram_mw;
};

struct zeus_cpu_readings {
	int64_t timestamp_ms;		/* get_power only */
	size_t count;
	struct zeus_cpu_reading cpu[ZEUS_MAX_DEVICES];
};

ZEUS_API int zeus_client_cpu_get_cumulative_energy(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool cpu, bool dram,
    struct zeus_cpu_readings *out, struct zeus_error *err);
ZEUS_API int zeus_client_cpu_get_power(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_cpu_readings *out,
    struct zeus_error *err);

/* ---- streams ------------------------------------------------------------ */

/* One SSE event. GPU events set power_mw; CPU events cpu_mw/dram_mw. */
struct zeus_power_sample {
	bool is_gpu;
	unsigned id;
	int64_t timestamp_ms;
	uint64_t power_mw;
	uint64_t cpu_mw;
	bool has_dram;
	uint64_t dram_mw;
};

/* Return non-zero to stop the stream. */
typedef int (*zeus_sample_fn)(const struct zeus_power_sample *s, void *user);

/*
 * Opens /gpu/stream_power (or /cpu/...) and calls `fn` once per sample
 * until `fn` returns non-zero (then returns 0), `stop` (may be NULL)
 * becomes true (checked at least every 100 ms; returns 0), or the stream
 * fails or ends (-1 with err). Comment events (": keepalive") are skipped;
 * a malformed event is an error.
 */
ZEUS_API int zeus_client_gpu_stream_power(struct zeus_client *c,
    const unsigned *ids, size_t nids, zeus_sample_fn fn, void *user,
    const volatile bool *stop, struct zeus_error *err);
ZEUS_API int zeus_client_cpu_stream_power(struct zeus_client *c,
    const unsigned *ids, size_t nids, zeus_sample_fn fn, void *user,
    const volatile bool *stop, struct zeus_error *err);

#ifdef __cplusplus
}
#endif

#endif
