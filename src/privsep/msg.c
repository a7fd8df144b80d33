/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msg.c - decoding and checking the privilege-separation messages.
 *
 * psmsg_request_check is the whole attack surface the device process (root)
 * shows to the network process (unprivileged, possibly compromised): a fixed
 * 80-byte request, checked field by field against what the op may use,
 * before anything reaches a backend. It is fuzzed (fuzz/fuzz_privsep_msg.c)
 * together with the executor, to show that whatever it accepts is safe to
 * run. Every rule is a plain comparison; nothing here allocates, loops over
 * attacker-chosen lengths or formats message bytes as text.
 */
#include "msg.h"

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/lease_label.h"
#include "common/procstat.h"
#include "devices/gpu.h"
#include "devices/gpu_cmd.h"
#include "devices/rapl.h"

static const char *const op_names[PSMSG_OP_END] = {
	[PSMSG_GPU_POWER] = "gpu_power",
	[PSMSG_GPU_ENERGY] = "gpu_energy",
	[PSMSG_GPU_LIMIT] = "gpu_limit",
	[PSMSG_GPU_CONSTRAINTS] = "gpu_constraints",
	[PSMSG_GPU_PERSISTENCE] = "gpu_persistence",
	[PSMSG_GPU_WRITE] = "gpu_write",
	[PSMSG_RAPL_READ] = "rapl_read",
	[PSMSG_SAMPLE] = "sample",
	[PSMSG_PROC] = "proc",
	[PSMSG_PEER] = "peer",
	[PSMSG_PEER_END] = "peer_end",
	[PSMSG_TOKEN] = "token",
	[PSMSG_AUDIT] = "audit",
	[PSMSG_GPU_WRITES] = "gpu_writes",
	[PSMSG_TCP_OWNER] = "tcp_owner",
	[PSMSG_SLURM_STEP] = "slurm_step",
	[PSMSG_LEASES] = "leases",
	[PSMSG_LEDGER] = "ledger",
	[PSMSG_RELEASE] = "release",
	[PSMSG_LEASE_CHECK] = "lease_check",
};

const char *
psmsg_op_name(uint32_t op)
{
	return op > 0 && op < PSMSG_OP_END && op_names[op] != NULL ?
	    op_names[op] : "?";
}

void
psmsg_request_init(struct psmsg_request *r, enum psmsg_op op, uint64_t id)
{
	memset(r, 0, sizeof(*r));
	r->magic = PSMSG_MAGIC;
	r->op = (uint32_t)op;
	r->id = id;
}

void
psmsg_writes_init(struct psmsg_writes *w, uint32_t n, uint32_t gpu)
{
	assert(n <= PSMSG_WRITES_MAX);
	memset(w, 0, sizeof(*w));
	psmsg_request_init(&w->h, PSMSG_GPU_WRITES, 0);
	w->n = n;
	for (uint32_t i = 0; i < n; i++) {
		psmsg_request_init(&w->w[i], PSMSG_GPU_WRITE, 0);
		w->w[i].dev = gpu;
	}
}

void
psmsg_put_procstat(struct psmsg_reply *rep, const struct procstat *p)
{
	rep->p_ok = p->ok;
	rep->p_start_ms = p->start_ms;
	rep->p_cpu_ms = p->cpu_ms;
	rep->p_rss = p->rss_bytes;
	rep->p_vsize = p->vsize_bytes;
	rep->p_fds = p->open_fds;
	rep->p_max_fds = p->max_fds;
}

void
psmsg_get_procstat(const struct psmsg_reply *rep, struct procstat *p)
{
	memset(p, 0, sizeof(*p));
	p->ok = (unsigned)rep->p_ok;
	p->start_ms = rep->p_start_ms;
	p->cpu_ms = rep->p_cpu_ms;
	p->rss_bytes = rep->p_rss;
	p->vsize_bytes = rep->p_vsize;
	p->open_fds = rep->p_fds;
	p->max_fds = rep->p_max_fds;
}

void
psmsg_put_identity(struct psmsg_reply *rep, const struct identity *id)
{
	unsigned n = id->ngids <= IDENTITY_MAX_GROUPS ? id->ngids :
	    IDENTITY_MAX_GROUPS;

	memcpy(rep->i_user, id->user, strnlen(id->user,
	    sizeof(rep->i_user) - 1));
	memcpy(rep->i_comm, id->comm, strnlen(id->comm,
	    sizeof(rep->i_comm) - 1));
	memcpy(rep->i_cgroup, id->cgroup, strnlen(id->cgroup,
	    sizeof(rep->i_cgroup) - 1));
	rep->i_ngids = n;
	for (unsigned i = 0; i < n; i++)
		rep->i_gids[i] = (uint32_t)id->gids[i];
}

void
psmsg_get_identity(const struct psmsg_reply *rep, struct identity *id)
{
	unsigned n = rep->i_ngids <= IDENTITY_MAX_GROUPS ? rep->i_ngids :
	    IDENTITY_MAX_GROUPS;

	memset(id, 0, sizeof(*id));
	memcpy(id->user, rep->i_user, strnlen(rep->i_user,
	    sizeof(id->user) - 1));
	memcpy(id->comm, rep->i_comm, strnlen(rep->i_comm,
	    sizeof(id->comm) - 1));
	memcpy(id->cgroup, rep->i_cgroup, strnlen(rep->i_cgroup,
	    sizeof(id->cgroup) - 1));
	id->ngids = n;
	for (unsigned i = 0; i < n; i++)
		id->gids[i] = (gid_t)rep->i_gids[i];
}

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* Always returns -1 so that callers can `return refuse(...)`. */
__attribute__((format(printf, 3, 4))) static int
refuse(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || whysz == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* The bits below n: the valid part of a device mask. */
static uint64_t
low_bits(unsigned n)
{
	return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
}

/* The write fields (w_*) must all be 0: the op takes no write. */
static bool
no_write_fields(const struct psmsg_request *r)
{
	return r->w_op == 0 && r->w_power_limit_mw == 0 && r->w_enabled == 0 &&
	    r->w_min_mhz == 0 && r->w_max_mhz == 0;
}

/*
 * The w_* fields of a GPU_WRITE: w_op known, its own values in range, the
 * values of the other write ops 0.
 */
static int
check_write(const struct psmsg_request *r, char *why, size_t whysz)
{
	bool clocks = false, limit = false, enabled = false;

	switch (r->w_op) {
	/*
	 * A power limit or clock pair may be any u32: the driver judges it
	 * (400), as in one process. The network process sends whatever a
	 * user asked for, so refusing a value here would let any user stop
	 * the daemon with one request.
	 */
	case GPU_SET_POWER_LIMIT:
		limit = true;
		break;
	case GPU_SET_PERSISTENCE_MODE:
		if (r->w_enabled > 1)
			return refuse(why, whysz, "enabled %u is not 0 or 1",
			    r->w_enabled);
		enabled = true;
		break;
	case GPU_SET_GPU_LOCKED_CLOCKS:
	case GPU_SET_MEM_LOCKED_CLOCKS:
		clocks = true;
		break;
	case GPU_RESET_GPU_LOCKED_CLOCKS:
	case GPU_RESET_MEM_LOCKED_CLOCKS:
	case GPU_RESET_LOCKED_CLOCKS:
		break;
	default:
		return refuse(why, whysz, "unknown write op %u", r->w_op);
	}
	/*
	 * A restore names a setting a lease changed; the value it goes back
	 * to is the device process's own record (access/warden.c), never the
	 * sender's, so it carries none.
	 */
	if (r->w_from == PSMSG_FROM_RESTORE) {
		if (clocks || r->w_op == GPU_RESET_LOCKED_CLOCKS)
			return refuse(why, whysz, "a restore of write op %u",
			    r->w_op);
		limit = enabled = false;
	}
	if ((!limit && r->w_power_limit_mw != 0) ||
	    (!enabled && r->w_enabled != 0) ||
	    (!clocks && (r->w_min_mhz != 0 || r->w_max_mhz != 0)))
		return refuse(why, whysz, "write op %u with a value it does "
		    "not take", r->w_op);
	return 0;
}

/* Everything but magic, pad and size, which the caller checked. */
static int
check_fields(const struct psmsg_request *r, const struct psmsg_limits *lim,
    char *why, size_t whysz)
{
	switch (r->op) {
	case PSMSG_GPU_POWER:
	case PSMSG_GPU_ENERGY:
	case PSMSG_GPU_LIMIT:
	case PSMSG_GPU_CONSTRAINTS:
	case PSMSG_GPU_PERSISTENCE:
	case PSMSG_GPU_WRITE:
		if (r->dev >= lim->ngpu)
			return refuse(why, whysz, "gpu %u out of range (%u "
			    "gpus)", r->dev, lim->ngpu);
		if (r->zone != 0 || r->gpu_mask != 0 || r->pkg_mask != 0)
			return refuse(why, whysz, "op %u with a non-zero "
			    "zone or mask", r->op);
		if (r->op == PSMSG_GPU_WRITE)
			return check_write(r, why, whysz);
		if (!no_write_fields(r))
			return refuse(why, whysz, "op %u with non-zero write "
			    "fields", r->op);
		return 0;
	case PSMSG_RAPL_READ:
		if (r->dev >= lim->npkg)
			return refuse(why, whysz, "package %u out of range "
			    "(%u packages)", r->dev, lim->npkg);
		if (r->zone != RAPL_ZONE_CPU && r->zone != RAPL_ZONE_DRAM)
			return refuse(why, whysz, "zone %u is not 0 or 1",
			    r->zone);
		if (r->zone == RAPL_ZONE_DRAM &&
		    !(lim->dram_mask >> r->dev & 1))
			return refuse(why, whysz, "package %u has no dram "
			    "zone", r->dev);
		if (!no_write_fields(r) || r->gpu_mask != 0 ||
		    r->pkg_mask != 0)
			return refuse(why, whysz, "rapl_read with non-zero "
			    "unused fields");
		return 0;
	case PSMSG_SAMPLE:
		if ((r->gpu_mask | r->pkg_mask) == 0)
			return refuse(why, whysz, "sample of nothing");
		if (r->gpu_mask & ~low_bits(lim->ngpu))
			return refuse(why, whysz, "gpu mask 0x%llx beyond %u "
			    "gpus", (unsigned long long)r->gpu_mask,
			    lim->ngpu);
		if (r->pkg_mask & ~low_bits(lim->npkg))
			return refuse(why, whysz, "package mask 0x%llx beyond "
			    "%u packages", (unsigned long long)r->pkg_mask,
			    lim->npkg);
		if (r->dev != 0 || r->zone != 0 || !no_write_fields(r))
			return refuse(why, whysz, "sample with non-zero "
			    "unused fields");
		return 0;
	case PSMSG_TOKEN:
		return refuse(why, whysz, "a token request of %zu bytes, not "
		    "%zu", sizeof(*r), sizeof(struct psmsg_token));
	case PSMSG_GPU_WRITES:
		return refuse(why, whysz, "a writes request of %zu bytes, not "
		    "%zu", sizeof(*r), sizeof(struct psmsg_writes));
	case PSMSG_TCP_OWNER:
		return refuse(why, whysz, "a tcp_owner request of %zu bytes, "
		    "not %zu", sizeof(*r), sizeof(struct psmsg_tcp_owner));
	case PSMSG_SLURM_STEP:
		return refuse(why, whysz, "a slurm_step request of %zu bytes, "
		    "not %zu", sizeof(*r), sizeof(struct psmsg_slurm_step));
	case PSMSG_LEASE_CHECK:
	case PSMSG_RELEASE:
		if (r->gpu_mask == 0 || (r->gpu_mask & ~low_bits(lim->ngpu)))
			return refuse(why, whysz, "release of gpu mask 0x%llx "
			    "(%u gpus)", (unsigned long long)r->gpu_mask,
			    lim->ngpu);
		if (r->op == PSMSG_LEASE_CHECK &&
		    r->w_op >= GPU_WRITE_OP_COUNT)
			return refuse(why, whysz, "lease_check of write op %u",
			    r->w_op);
		if (r->dev != 0 || r->zone != 0 || r->pkg_mask != 0 ||
		    (r->op == PSMSG_RELEASE && r->w_op != 0) ||
		    r->w_power_limit_mw != 0 || r->w_enabled != 0 ||
		    r->w_min_mhz != 0 || r->w_max_mhz != 0)
			return refuse(why, whysz, "%s with non-zero unused "
			    "fields", psmsg_op_name(r->op));
		return 0;
	case PSMSG_LEDGER:	/* dev: the first user, any number */
	case PSMSG_LEASES:
	case PSMSG_PROC:
	case PSMSG_PEER:
	case PSMSG_PEER_END:
		/* PSMSG_PEER_END's dev: the writes it queued, any number */
		if ((r->dev != 0 && r->op != PSMSG_PEER_END &&
		    r->op != PSMSG_LEDGER) || r->zone != 0 ||
		    !no_write_fields(r) ||
		    r->gpu_mask != 0 || r->pkg_mask != 0)
			return refuse(why, whysz, "%s with non-zero fields",
			    psmsg_op_name(r->op));
		if (r->op == PSMSG_PEER_END && r->auth == 0)
			return refuse(why, whysz, "peer_end of handle 0");
		return 0;
	default:
		return refuse(why, whysz, "unknown op %u", r->op);
	}
}

static int check_h(const struct psmsg_request *rp,
    const struct psmsg_limits *lim, char *why, size_t whysz);

/*
 * A write's lease label: only a Unix writer's, a valid label or none,
 * NUL-terminated with nothing after the NUL.
 */
static int
label_check(const struct psmsg_request *r, char *why, size_t whysz)
{
	const char *nul = memchr(r->w_label, '\0', sizeof(r->w_label));
	size_t used;

	if (nul == NULL)
		return refuse(why, whysz, "a label without its end");
	used = (size_t)(nul - r->w_label);
	if (!all_zero((const uint8_t *)nul, sizeof(r->w_label) - used))
		return refuse(why, whysz, "bytes after a label's end");
	if (used == 0)
		return 0;
	if (r->op != PSMSG_GPU_WRITE || r->w_from != PSMSG_FROM_UNIX)
		return refuse(why, whysz, "a label with op %u from %u", r->op,
		    r->w_from);
	if (lease_label_invalid(r->w_label) != NULL)
		return refuse(why, whysz, "a bad label");
	return 0;
}

int
psmsg_request_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_request *out, char *why,
    size_t whysz)
{
	struct psmsg_request r;

	assert(lim->ngpu <= PSMSG_MAX_GPUS && lim->npkg <= PSMSG_MAX_PKGS);
	assert((lim->dram_mask & ~low_bits(lim->npkg)) == 0);
	memset(out, 0, sizeof(*out));
	if (len != sizeof(r))
		return refuse(why, whysz, "request of %zu bytes, not %zu",
		    len, sizeof(r));
	/* a copy: `buf` may be unaligned, and the checks see one snapshot */
	memcpy(&r, buf, sizeof(r));
	if (check_h(&r, lim, why, whysz) != 0)
		return -1;
	*out = r;
	return 0;
}

/* psmsg_request_check's checks of one request (a copy). */
static int
check_h(const struct psmsg_request *rp, const struct psmsg_limits *lim,
    char *why, size_t whysz)
{
	const struct psmsg_request r = *rp;

	if (r.magic != PSMSG_MAGIC)
		return refuse(why, whysz, "bad magic 0x%08x", r.magic);
	if (r.pad != 0 || r.pad1 != 0)
		return refuse(why, whysz, "non-zero pad");
	/*
	 * Who a write is for is judged by the device process (a write from
	 * nobody, or an unknown handle, is refused there, not a reason to
	 * stop); here only that the fields are where they belong.
	 */
	if (r.op != PSMSG_GPU_WRITE && ((r.tok != 0 && r.op != PSMSG_RELEASE) ||
	    r.w_reason != 0 ||
	    r.w_addr_kind != 0 || !all_zero(r.w_addr, sizeof(r.w_addr))))
		return refuse(why, whysz, "op %u with a token or audit field",
		    r.op);
	if (r.w_reason >= PSMSG_REASON_END ||
	    (r.w_reason != 0 && r.w_from != PSMSG_FROM_RESTORE))
		return refuse(why, whysz, "reason %u for a write from %u",
		    r.w_reason, r.w_from);
	if (label_check(&r, why, whysz) != 0)
		return -1;
	if ((r.w_addr_kind != 0 && r.w_addr_kind != 4 && r.w_addr_kind != 6) ||
	    (r.w_addr_kind != 0 && r.w_from != PSMSG_FROM_TCP) ||
	    (r.w_addr_kind != 6 && !all_zero(r.w_addr + 4,
	    sizeof(r.w_addr) - 4)) ||
	    (r.w_addr_kind == 0 && !all_zero(r.w_addr, 4)))
		return refuse(why, whysz, "address kind %u", r.w_addr_kind);
	if (r.op == PSMSG_GPU_WRITE) {
		/*
		 * PSMSG_FROM_RESTORE is no more: the device process restores
		 * a lease by itself (its holders' exit, a release, the stop).
		 */
		if (r.w_from == PSMSG_FROM_RESTORE || r.w_from >= PSMSG_FROM_END)
			return refuse(why, whysz, "write from %u", r.w_from);
	} else if (r.op == PSMSG_RELEASE || r.op == PSMSG_LEASE_CHECK) {
		/* who asks, as a write names them (judged by the warden) */
		if ((r.w_from != PSMSG_FROM_UNIX && r.w_from != PSMSG_FROM_TCP) ||
		    (r.w_from == PSMSG_FROM_TCP && r.auth != 0) ||
		    r.w_label[0] != '\0')
			return refuse(why, whysz, "release from %u", r.w_from);
	} else if (r.w_from != 0 || (r.auth != 0 && r.op != PSMSG_PEER &&
	    r.op != PSMSG_PEER_END)) {
		return refuse(why, whysz, "op %u with non-zero peer fields",
		    r.op);
	}
	return check_fields(&r, lim, why, whysz);
}

/*
 * The two larger requests laid out alike: a header, a u32 count, a u32
 * pad, the rest. Copies exactly `size` bytes of `buf` into `out` and
 * checks the header (nothing but magic, `op` and an id) and the pad;
 * -1 with `out` zeroed and a reason otherwise.
 */
_Static_assert(offsetof(struct psmsg_token, pad) == sizeof(struct
    psmsg_request) + 4 && offsetof(struct psmsg_writes, pad) ==
    sizeof(struct psmsg_request) + 4 && offsetof(struct psmsg_tcp_owner,
    pad) == sizeof(struct psmsg_request) + 4 && offsetof(struct
    psmsg_slurm_step, pad) == sizeof(struct psmsg_request) + 4,
    "larger requests' layout");

static int
big_header(const void *buf, size_t len, void *out, size_t size,
    enum psmsg_op op, const char *what, char *why, size_t whysz)
{
	struct psmsg_request zero, h;
	uint32_t pad;

	memset(out, 0, size);
	if (len != size)
		return refuse(why, whysz, "%s request of %zu bytes, not %zu",
		    what, len, size);
	memcpy(out, buf, size);
	memcpy(&h, out, sizeof(h));
	memcpy(&pad, (const char *)out + sizeof(h) + 4, sizeof(pad));
	psmsg_request_init(&zero, op, h.id);
	if (memcmp(&h, &zero, sizeof(zero)) != 0 || pad != 0) {
		memset(out, 0, size);
		return refuse(why, whysz, "%s request with a bad header or "
		    "non-zero fields", what);
	}
	return 0;
}

int
psmsg_token_check(const void *buf, size_t len, struct psmsg_token *out,
    char *why, size_t whysz)
{
	if (big_header(buf, len, out, sizeof(*out), PSMSG_TOKEN, "token", why,
	    whysz) != 0)
		return -1;
	if (out->len == 0 || out->len > PSMSG_TOKEN_MAX) {
		refuse(why, whysz, "token of %u bytes", out->len);
		goto bad;
	}
	for (size_t i = out->len; i < PSMSG_TOKEN_MAX; i++)
		if (out->token[i] != '\0') {
			refuse(why, whysz, "bytes after the token");
			goto bad;
		}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

int
psmsg_writes_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_writes *out, char *why,
    size_t whysz)
{
	if (big_header(buf, len, out, sizeof(*out), PSMSG_GPU_WRITES,
	    "writes", why, whysz) != 0)
		return -1;
	if (out->n < 2 || out->n > PSMSG_WRITES_MAX) {
		refuse(why, whysz, "%u writes", out->n);
		goto bad;
	}
	for (uint32_t i = 0; i < out->n; i++) {
		if (out->w[i].op != PSMSG_GPU_WRITE) {
			refuse(why, whysz, "write %u with op %u", i,
			    out->w[i].op);
			goto bad;
		}
		if (check_h(&out->w[i], lim, why, whysz) != 0)
			goto bad;
		if (out->w[i].dev != out->w[0].dev) {
			refuse(why, whysz, "writes of gpus %u and %u",
			    out->w[0].dev, out->w[i].dev);
			goto bad;
		}
	}
	if (!all_zero((const uint8_t *)&out->w[out->n],
	    (PSMSG_WRITES_MAX - out->n) * sizeof(out->w[0]))) {
		refuse(why, whysz, "bytes after write %u", out->n);
		goto bad;
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

/* One end of a PSMSG_TCP_OWNER: a loopback address of `family`, the
 * bytes it does not use 0, and a port. */
static bool
owner_end_ok(uint32_t family, const uint8_t *addr, uint32_t port)
{
	static const uint8_t v6_loopback[16] = { [15] = 1 };

	if (port == 0 || port > 65535)
		return false;
	if (family == 4)
		return addr[0] == 127 && all_zero(addr + 4, 12);
	return family == 6 && memcmp(addr, v6_loopback, 16) == 0;
}

int
psmsg_tcp_owner_check(const void *buf, size_t len,
    struct psmsg_tcp_owner *out, char *why, size_t whysz)
{
	if (big_header(buf, len, out, sizeof(*out), PSMSG_TCP_OWNER,
	    "tcp_owner", why, whysz) != 0)
		return -1;
	if (out->family != 4 && out->family != 6) {
		refuse(why, whysz, "tcp_owner of family %u", out->family);
		goto bad;
	}
	if (!owner_end_ok(out->family, out->client, out->client_port) ||
	    !owner_end_ok(out->family, out->server, out->server_port)) {
		refuse(why, whysz, "tcp_owner of a connection that is not "
		    "on loopback, or of port 0 or beyond 65535");
		goto bad;
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

int
psmsg_slurm_step_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_slurm_step *out, char *why,
    size_t whysz)
{
	/* Slurm's batch, extern and interactive steps (slurm.h) */
	bool step_ok;

	if (big_header(buf, len, out, sizeof(*out), PSMSG_SLURM_STEP,
	    "slurm_step", why, whysz) != 0)
		return -1;
	step_ok = out->step < 0xfffffff0u || out->step == 0xfffffffbu ||
	    out->step == 0xfffffffcu || out->step == 0xfffffffau;
	if (out->start > 1 || out->pad1 != 0 || out->who == 0 ||
	    out->job == 0 || !step_ok) {
		refuse(why, whysz, "slurm_step with a bad start, job, step, "
		    "handle or pad");
		goto bad;
	}
	if (out->start ? out->uid == UINT32_MAX || out->gpus == 0 ||
	    (out->gpus & ~low_bits(lim->ngpu)) != 0 :
	    out->uid != 0 || out->gpus != 0) {
		refuse(why, whysz, "slurm_step %s with uid %u, gpu mask 0x%llx "
		    "(%u gpus)", out->start ? "start" : "end", out->uid,
		    (unsigned long long)out->gpus, lim->ngpu);
		goto bad;
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

/* A NUL-terminated string in its field, nothing after the NUL. */
static bool
field_str(const char *f, size_t size)
{
	const char *nul = memchr(f, '\0', size);

	return nul != NULL && all_zero((const uint8_t *)nul,
	    size - (size_t)(nul - f));
}

static bool
op_name_ok(const char *op)
{
	if (op[0] == '\0')
		return false;
	for (; *op != '\0'; op++)
		if (!((*op >= 'a' && *op <= 'z') || *op == '_'))
			return false;
	return true;
}

int
psmsg_audit_check(const void *buf, size_t len,
    const struct psmsg_limits *lim, struct psmsg_audit *out, char *why,
    size_t whysz)
{
	struct psmsg_audit *a = out;
	struct psmsg_request h;
	bool ledger, holder;

	memset(out, 0, sizeof(*out));
	if (len != sizeof(*out))
		return refuse(why, whysz, "audit request of %zu bytes, not %zu",
		    len, sizeof(*out));
	memcpy(out, buf, sizeof(*out));
	h = a->h;
	if (h.magic != PSMSG_MAGIC || h.op != PSMSG_AUDIT) {
		refuse(why, whysz, "audit request with magic 0x%08x op %u",
		    h.magic, h.op);
		goto bad;
	}
	/*
	 * A lease's lines (its end, a restore not queued) and the refusals
	 * of a lease or a release are the device process's own now: it holds
	 * the only lease record.
	 */
	if (a->kind < PSMSG_AUDIT_REFUSED || a->kind >= PSMSG_AUDIT_KIND_END ||
	    a->kind == PSMSG_AUDIT_LEASE_END ||
	    a->kind == PSMSG_AUDIT_UNQUEUED || (a->kind ==
	    PSMSG_AUDIT_REFUSED && (a->code == PSMSG_REFUSAL_LEASE ||
	    a->code == PSMSG_REFUSAL_RELEASE))) {
		refuse(why, whysz, "audit kind %u (code %u)", a->kind, a->code);
		goto bad;
	}
	/* the header as a GPU write's, so the who fields are checked alike */
	h.op = PSMSG_GPU_WRITE;
	if (a->kind != PSMSG_AUDIT_SUPERSEDED &&
	    a->kind != PSMSG_AUDIT_UNQUEUED && h.w_op == 0)
		h.w_op = GPU_RESET_LOCKED_CLOCKS;	/* takes no value */
	if (a->no_gpu > 1 || (a->no_gpu && (a->kind != PSMSG_AUDIT_REFUSED ||
	    h.dev != 0)))
		h.dev = UINT32_MAX;
	else if (a->no_gpu)
		h.dev = 0;
	if (lim->ngpu == 0 && a->no_gpu) {
		struct psmsg_limits one = *lim;

		one.ngpu = 1;	/* a refusal that names no GPU, on no GPU */
		if (check_h(&h, &one, why, whysz) != 0)
			goto bad;
	} else if (check_h(&h, lim, why, whysz) != 0) {
		goto bad;
	}
	ledger = a->kind == PSMSG_AUDIT_LEASE_END;
	holder = ledger || a->kind == PSMSG_AUDIT_UNQUEUED;
	if ((a->kind == PSMSG_AUDIT_REFUSED) != op_name_ok(a->op) ||
	    (a->kind != PSMSG_AUDIT_REFUSED && !all_zero((const uint8_t *)
	    a->op, sizeof(a->op)))) {
		refuse(why, whysz, "audit operation name");
		goto bad;
	}
	if (!field_str(a->op, sizeof(a->op)) ||
	    !all_zero((const uint8_t *)a->user, sizeof(a->user)) ||
	    !field_str(a->cgroup, sizeof(a->cgroup)) ||
	    !field_str(a->label, sizeof(a->label)) ||
	    (a->label[0] != '\0' && lease_label_invalid(a->label) != NULL)) {
		refuse(why, whysz, "an audit string without its NUL, with "
		    "bytes after it, or a bad label");
		goto bad;
	}
	if (a->left > 1 || a->energy_ok > 1 || a->reason >= PSMSG_REASON_END ||
	    (!ledger && (a->settings | a->left | a->energy_ok) != 0) ||
	    (!ledger && (a->duration_us | a->energy_mj) != 0) ||
	    (!ledger && (a->cgroup[0] != '\0' || a->label[0] != '\0')) ||
	    (!holder && (a->holder_uid | a->holder_pid | a->reason) != 0) ||
	    (!holder && a->user[0] != '\0') ||
	    (a->holder_pid > INT32_MAX) || a->pad2 != 0 ||
	    (a->kind == PSMSG_AUDIT_REFUSED && (a->code == 0 ||
	    a->code >= PSMSG_REFUSAL_END)) ||
	    (a->kind == PSMSG_AUDIT_UNQUEUED && (a->code == 0 ||
	    a->code > ZERR_CONFLICT)) ||
	    ((a->kind == PSMSG_AUDIT_LEASE_END ||
	    a->kind == PSMSG_AUDIT_SUPERSEDED) && a->code != 0) ||
	    (a->kind == PSMSG_AUDIT_LEASE_END && (a->h.w_op != 0 ||
	    a->h.w_from != 0 || a->h.auth != 0 || a->h.tok != 0))) {
		refuse(why, whysz, "audit fields the kind does not use");
		goto bad;
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

int
psmsg_reply_check(const void *buf, size_t len, uint64_t id, uint32_t op,
    struct psmsg_reply *out, char *why, size_t whysz)
{
	const struct psmsg_reply *r = out;

	memset(out, 0, sizeof(*out));
	if (len != sizeof(*out))
		return refuse(why, whysz, "reply of %zu bytes, not %zu", len,
		    sizeof(*out));
	/* checked in the caller's copy, so `buf` may be unaligned */
	memcpy(out, buf, sizeof(*out));
	if (r->magic != PSMSG_MAGIC) {
		refuse(why, whysz, "bad magic 0x%08x", r->magic);
		goto bad;
	}
	if (r->id != id || r->op != op) {
		refuse(why, whysz, "reply to %s #%llu, expected %s #%llu",
		    psmsg_op_name(r->op), (unsigned long long)r->id,
		    psmsg_op_name(op), (unsigned long long)id);
		goto bad;
	}
	if (r->rc != 0 && r->rc != -1) {
		refuse(why, whysz, "rc %d", (int)r->rc);
		goto bad;
	}
	if (r->err_kind > ZERR_CONFLICT || r->err_gpu_kind > ZERR_CONFLICT) {
		refuse(why, whysz, "bad error kind %u/%u", r->err_kind,
		    r->err_gpu_kind);
		goto bad;
	}
	/* a failure without a kind would become a 200 */
	if ((r->rc == 0) != (r->err_kind == ZERR_NONE)) {
		refuse(why, whysz, "rc %d with error kind %u", (int)r->rc,
		    r->err_kind);
		goto bad;
	}
	/* not forced: a message without its NUL is a broken reply */
	if (memchr(r->err_msg, '\0', sizeof(r->err_msg)) == NULL) {
		refuse(why, whysz, "unterminated error message");
		goto bad;
	}
	if (memchr(r->i_user, '\0', sizeof(r->i_user)) == NULL ||
	    memchr(r->i_comm, '\0', sizeof(r->i_comm)) == NULL ||
	    memchr(r->i_cgroup, '\0', sizeof(r->i_cgroup)) == NULL) {
		refuse(why, whysz, "unterminated peer name");
		goto bad;
	}
	if (op == PSMSG_PEER && r->rc == 0 ? (r->i_ngids == 0 ||
	    r->i_ngids > IDENTITY_MAX_GROUPS) : r->i_ngids != 0) {
		refuse(why, whysz, "%u peer groups", r->i_ngids);
		goto bad;
	}
	if (memchr(r->t_sub, '\0', sizeof(r->t_sub)) == NULL ||
	    r->t_has_exp > 1) {
		refuse(why, whysz, "unterminated token subject or bad flag");
		goto bad;
	}
	if (r->p_ok > PROCSTAT_ALL || r->p_net_ok > 1 || r->a_down > 1 ||
	    r->pad3 != 0) {
		refuse(why, whysz, "bad procstat bits");
		goto bad;
	}
	if (r->lost > 1 || r->pad0 != 0 || r->pad != 0 || r->pad2 != 0) {
		refuse(why, whysz, "bad lost flag or non-zero pad");
		goto bad;
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

int
psmsg_writes_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t n, struct psmsg_writes_reply *out, char *why, size_t whysz)
{
	memset(out, 0, sizeof(*out));
	if (n < 2 || n > PSMSG_WRITES_MAX || len != psmsg_writes_reply_size(n))
		return refuse(why, whysz, "writes reply of %zu bytes for %u "
		    "writes", len, n);
	memcpy(out, buf, len);
	if (out->magic != PSMSG_MAGIC || out->op != PSMSG_GPU_WRITES ||
	    out->id != id || out->n != n || out->pad != 0) {
		refuse(why, whysz, "writes reply header (op %u #%llu of %u, "
		    "expected #%llu of %u)", out->op, (unsigned long long)
		    out->id, out->n, (unsigned long long)id, n);
		goto bad;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct psmsg_write_result *r = &out->r[i];

		/* as psmsg_reply_check: a failure without a kind is a 200 */
		if ((r->rc != 0 && r->rc != -1) || r->err_kind > ZERR_CONFLICT ||
		    (r->rc == 0) != (r->err_kind == ZERR_NONE) ||
		    r->lost > 1 || r->pad != 0 ||
		    !field_str(r->err_msg, sizeof(r->err_msg))) {
			refuse(why, whysz, "writes reply result %u", i);
			goto bad;
		}
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

/* A record's strings and flags as the device process fills them. */
static bool
lease_ok(const struct psmsg_lease *r, uint32_t ngpu, bool ended)
{
	return r->gpu < ngpu && r->state <= PSMSG_LEASE_ENDED &&
	    (r->state == PSMSG_LEASE_ENDED) == ended && r->energy_ok <= 1 &&
	    r->left <= 1 && r->reason < PSMSG_REASON_END &&
	    (r->settings & ~(uint32_t)GPU_SETTING_ALL) == 0 &&
	    r->pid >= 0 && field_str(r->user, sizeof(r->user)) &&
	    field_str(r->cgroup, sizeof(r->cgroup)) &&
	    field_str(r->label, sizeof(r->label)) &&
	    (ended || (r->end_ms == 0 && r->reason == 0 && r->left == 0)) &&
	    (r->energy_ok || r->energy_mj == 0);
}

/* The header every reply shares: magic, the request's id and op, rc. */
static int
reply_head(uint32_t magic, uint32_t op, uint64_t id, int32_t rc,
    uint32_t kind, const char *msg, uint64_t want_id, uint32_t want_op,
    char *why, size_t whysz)
{
	if (magic != PSMSG_MAGIC || op != want_op || id != want_id)
		return refuse(why, whysz, "reply to %s #%llu, expected %s "
		    "#%llu", psmsg_op_name(op), (unsigned long long)id,
		    psmsg_op_name(want_op), (unsigned long long)want_id);
	if ((rc != 0 && rc != -1) || kind > ZERR_CONFLICT ||
	    (rc == 0) != (kind == ZERR_NONE) ||
	    !field_str(msg, ZERR_MSG_MAX))
		return refuse(why, whysz, "rc %d with error kind %u", (int)rc,
		    kind);
	return 0;
}

int
psmsg_leases_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t op, uint32_t ngpu, struct psmsg_leases_reply *out, char *why,
    size_t whysz)
{
	bool release = op == PSMSG_RELEASE;

	memset(out, 0, sizeof(*out));
	if (len != sizeof(*out))
		return refuse(why, whysz, "leases reply of %zu bytes, not %zu",
		    len, sizeof(*out));
	memcpy(out, buf, sizeof(*out));
	if (reply_head(out->magic, out->op, out->id, out->rc, out->err_kind,
	    out->err_msg, id, op, why, whysz) != 0)
		goto bad;
	if (out->nopen > ngpu ||
	    out->nended > (release ? 0 : PSMSG_LEASES_ENDED) ||
	    (out->rc != 0 && (out->nopen | out->nended) != 0) ||
	    (out->unleased_ok & ~low_bits(ngpu)) != 0 ||
	    (out->not_leased & ~low_bits(ngpu)) != 0 ||
	    (release && out->unleased_ok != 0) ||
	    (!release && out->not_leased != 0)) {
		refuse(why, whysz, "leases reply of %u open, %u ended",
		    out->nopen, out->nended);
		goto bad;
	}
	for (uint32_t i = 0; i < ngpu; i++)
		if (!(out->unleased_ok >> i & 1) && out->unleased_mj[i] != 0) {
			refuse(why, whysz, "unleased energy of GPU %u", i);
			goto bad;
		}
	for (uint32_t i = 0; i < out->nopen + out->nended; i++)
		if (!lease_ok(&out->rec[i], ngpu, release || i >= out->nopen)) {
			refuse(why, whysz, "lease record %u", i);
			goto bad;
		}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}

int
psmsg_ledger_reply_check(const void *buf, size_t len, uint64_t id,
    uint32_t first, uint32_t ngpu, struct psmsg_ledger_reply *out,
    char *why, size_t whysz)
{
	memset(out, 0, sizeof(*out));
	if (len != sizeof(*out))
		return refuse(why, whysz, "ledger reply of %zu bytes, not %zu",
		    len, sizeof(*out));
	memcpy(out, buf, sizeof(*out));
	if (reply_head(out->magic, out->op, out->id, out->rc, out->err_kind,
	    out->err_msg, id, PSMSG_LEDGER, why, whysz) != 0)
		goto bad;
	if (out->n > PSMSG_LEDGER_USERS || out->nusers > PSMSG_LEDGER_MAX ||
	    (out->n != 0 && (first >= out->nusers ||
	    out->n > out->nusers - first)) || (out->rc != 0 && out->n != 0)) {
		refuse(why, whysz, "ledger reply of %u users from %u of %u",
		    out->n, first, out->nusers);
		goto bad;
	}
	for (uint32_t i = 0; i < out->n; i++) {
		const struct psmsg_ledger_user *u = &out->u[i];

		if (u->pad != 0 || !field_str(u->user, sizeof(u->user))) {
			refuse(why, whysz, "ledger user %u", i);
			goto bad;
		}
		for (uint32_t g = ngpu; g < PSMSG_MAX_GPUS; g++)
			if (u->mj[g] != 0) {
				refuse(why, whysz, "ledger user %u, GPU %u",
				    i, g);
				goto bad;
			}
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -1;
}
