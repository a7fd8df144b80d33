/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_calls.c - calls every function of include/zeus/client.h once
 * against a running zeusd and checks that the answers make sense: writes
 * are read back, limits lie within their constraints, the daemon's clock
 * is close to ours, error answers carry the daemon's status and message.
 *
 * The daemon comes from the environment as libzeus reads it
 * (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, and ZEUSD_TOKEN). What is expected
 * follows from /discover and /auth/whoami: a disabled group's calls must
 * answer 404, a group the token lacks 403. CLIENT_CALLS_SUB, when set, is
 * the `sub` whoami must report. tests/integration/test_libzeus_client.py
 * runs it against simulated daemons (at least 2 GPUs) and then checks,
 * through the simulator's call log, that the writes reached the "driver".
 *
 * One line per check on stdout; the first failure exits 1.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zeus/client.h"

#define WRITE_GROUPS ZEUS_GROUP_GPU_CONTROL

static struct zeus_client *cc_client;
static struct zeus_discovery cc_disc;
static unsigned cc_scopes;	/* groups the token grants (all: no auth) */
static unsigned cc_checks;

static void
cc_ok(const char *what)
{
	cc_checks++;
	printf("ok %s\n", what);
	fflush(stdout);
}

static void __attribute__((noreturn, format(printf, 2, 3)))
cc_fail(const struct zeus_error *err, const char *fmt, ...)
{
	va_list ap;

	printf("FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (err != NULL)
		printf(" [%s, http %ld: %s]", zeus_errc_name(err->code),
		    err->http_status, err->message);
	printf("\n");
	fflush(stdout);
	exit(1);
}

/* Fails unless rc is 0. */
static void
cc_want_ok(int rc, const struct zeus_error *err, const char *what)
{
	if (rc != 0)
		cc_fail(err, "%s: call failed", what);
}

/* Fails unless the call failed with HTTP `status` and `needle` in it. */
static void
cc_want_http(int rc, const struct zeus_error *err, long status,
    const char *needle, const char *what)
{
	if (rc != -1)
		cc_fail(NULL, "%s: succeeded, want HTTP %ld", what, status);
	if (err->code != ZEUS_ERR_HTTP || err->http_status != status)
		cc_fail(err, "%s: want HTTP %ld", what, status);
	if (needle != NULL && strstr(err->message, needle) == NULL)
		cc_fail(err, "%s: message lacks \"%s\"", what, needle);
	cc_checks++;
	printf("ok %s (%s)\n", what, err->message);
}

static int64_t
cc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * What a call of `group` must answer: 0 (allowed), 404 (group disabled)
 * or 403 (the token lacks the scope).
 */
static long
cc_expect(unsigned group)
{
	if (!(cc_disc.enabled_groups & group))
		return 404;
	if (!(cc_scopes & group))
		return 403;
	return 0;
}

/* Checks a denied call's answer; returns true when the call was denied. */
static bool
cc_denied(int rc, const struct zeus_error *err, unsigned group,
    const char *what)
{
	long want = cc_expect(group);

	if (want == 0)
		return false;
	cc_want_http(rc, err, want, want == 404 ? "is not enabled" : NULL,
	    what);
	return true;
}

/* ---- open, discover, time, whoami ---------------------------------------- */

static void
cc_open(void)
{
	struct zeus_client_options both = { .socket_path = "/nonexistent",
		.host_port = "127.0.0.1:1" };
	struct zeus_client *c = NULL;
	struct zeus_error err;

	if (!zeus_client_env_configured())
		cc_fail(NULL, "zeus_client_env_configured: false");
	cc_ok("env_configured");
	if (zeus_client_open(&both, &c, &err) != -1 || c != NULL ||
	    err.code != ZEUS_ERR_INVALID)
		cc_fail(&err, "open with socket and host:port: want invalid");
	cc_ok("open refuses two addresses");
	cc_want_ok(zeus_client_open(NULL, &cc_client, &err), &err, "open");
	cc_ok("open");
}

static void
cc_discover(void)
{
	struct zeus_error err;

	cc_want_ok(zeus_client_discover(cc_client, &cc_disc, &err), &err,
	    "discover");
	if (cc_disc.gpu_count < 2)
		cc_fail(NULL, "discover: %zu GPUs, want >= 2",
		    cc_disc.gpu_count);
	for (size_t i = 0; i < cc_disc.gpu_count; i++) {
		const struct zeus_discovered_gpu *g = &cc_disc.gpus[i];

		if (g->id != i || g->name[0] == '\0' ||
		    strlen(g->pci_address) != 12)
			cc_fail(NULL, "discover: gpu %zu: id %u name '%s' "
			    "pci '%s'", i, g->id, g->name, g->pci_address);
	}
	if (cc_disc.auth_required != (getenv("ZEUSD_TOKEN") != NULL))
		cc_fail(NULL, "discover: auth_required %d, token %s",
		    cc_disc.auth_required,
		    getenv("ZEUSD_TOKEN") ? "set" : "unset");
	printf("ok discover: %zu GPUs, %zu CPUs, groups 0x%x, auth %d\n",
	    cc_disc.gpu_count, cc_disc.cpu_count, cc_disc.enabled_groups,
	    cc_disc.auth_required);
	cc_checks++;
}

static void
cc_time(void)
{
	struct zeus_error err;
	int64_t ts = 0, now;

	cc_want_ok(zeus_client_time(cc_client, &ts, &err), &err, "time");
	now = cc_now_ms();
	if (ts < now - 5000 || ts > now + 5000)
		cc_fail(NULL, "time: daemon %lld, here %lld", (long long)ts,
		    (long long)now);
	cc_ok("time within 5 s of ours");
}

static void
cc_whoami(void)
{
	struct zeus_error err;
	struct zeus_whoami w;
	const char *sub = getenv("CLIENT_CALLS_SUB");
	int rc = zeus_client_whoami(cc_client, &w, &err);

	if (!cc_disc.auth_required) {
		cc_scopes = ZEUS_GROUP_GPU_CONTROL | ZEUS_GROUP_GPU_READ |
		    ZEUS_GROUP_CPU_READ;
		/* the Unix socket names the peer; TCP has no one to name */
		if (rc == 0 && strncmp(w.sub, "unix:", 5) == 0) {
			cc_checks++;
			printf("ok whoami on the Unix socket: sub '%s'\n",
			    w.sub);
			return;
		}
		cc_want_http(rc, &err, 404, NULL, "whoami without auth: 404");
		return;
	}
	cc_want_ok(rc, &err, "whoami");
	if (sub != NULL && strcmp(w.sub, sub) != 0)
		cc_fail(NULL, "whoami: sub '%s', want '%s'", w.sub, sub);
	if (w.scopes == 0)
		cc_fail(NULL, "whoami: no scopes");
	if (w.has_exp && w.exp * 1000 < cc_now_ms())
		cc_fail(NULL, "whoami: exp %lld is past", (long long)w.exp);
	cc_scopes = w.scopes;
	printf("ok whoami: sub '%s' scopes 0x%x exp %s\n", w.sub, w.scopes,
	    w.has_exp ? "set" : "none");
	cc_checks++;
}

/* ---- GPU reads ------------------------------------------------------------ */

typedef int (*cc_gpu_read_fn)(struct zeus_client *, const unsigned *,
    size_t, struct zeus_gpu_readings *, struct zeus_error *);

/* Reads all GPUs, or the given ones; checks ids come back ascending. */
static bool
cc_gpu_read(cc_gpu_read_fn fn, const unsigned *ids, size_t nids,
    size_t want, struct zeus_gpu_readings *out, const char *what)
{
	struct zeus_error err;
	int rc = fn(cc_client, ids, nids, out, &err);

	if (cc_denied(rc, &err, ZEUS_GROUP_GPU_READ, what))
		return false;
	cc_want_ok(rc, &err, what);
	if (out->count != want)
		cc_fail(NULL, "%s: %zu GPUs, want %zu", what, out->count,
		    want);
	for (size_t i = 1; i < out->count; i++)
		if (out->gpu[i].id <= out->gpu[i - 1].id)
			cc_fail(NULL, "%s: ids not ascending", what);
	return true;
}

static void
cc_gpu_reads(void)
{
	const unsigned last = (unsigned)cc_disc.gpu_count - 1;
	const unsigned pick[] = { last, 0, last };	/* duplicates collapse */
	struct zeus_gpu_readings r, e1, e2;
	int64_t now = cc_now_ms();

	if (!cc_gpu_read(zeus_client_gpu_get_power, NULL, 0,
	    cc_disc.gpu_count, &r, "gpu get_power (all)"))
		return;
	for (size_t i = 0; i < r.count; i++)
		if (r.gpu[i].power_mw == 0 || r.gpu[i].energy_mj != 0)
			cc_fail(NULL, "gpu get_power: gpu %u: %llu mW",
			    r.gpu[i].id, (unsigned long long)r.gpu[i].power_mw);
	if (r.timestamp_ms < now - 5000 || r.timestamp_ms > now + 5000)
		cc_fail(NULL, "gpu get_power: timestamp %lld",
		    (long long)r.timestamp_ms);
	cc_ok("gpu get_power (all)");
	cc_gpu_read(zeus_client_gpu_get_power, pick, 3, 2, &r,
	    "gpu get_power (ids)");
	if (r.gpu[0].id != 0 || r.gpu[1].id != last)
		cc_fail(NULL, "gpu get_power (ids): got %u,%u", r.gpu[0].id,
		    r.gpu[1].id);
	cc_ok("gpu get_power (ids, duplicate collapsed)");
	cc_gpu_read(zeus_client_gpu_get_cumulative_energy, NULL, 0,
	    cc_disc.gpu_count, &e1, "gpu get_cumulative_energy (all)");
	cc_gpu_read(zeus_client_gpu_get_cumulative_energy, &last, 1, 1, &e2,
	    "gpu get_cumulative_energy (ids)");
	if (e2.gpu[0].id != last || e2.gpu[0].energy_mj == 0 ||
	    e2.gpu[0].energy_mj < e1.gpu[last].energy_mj)
		cc_fail(NULL, "gpu energy: gpu %u went %llu -> %llu", last,
		    (unsigned long long)e1.gpu[last].energy_mj,
		    (unsigned long long)e2.gpu[0].energy_mj);
	cc_ok("gpu get_cumulative_energy never decreases");
}

/* Constraints and the current limit of every GPU; min <= limit <= max. */
static bool
cc_gpu_limits(struct zeus_gpu_readings *cons, struct zeus_gpu_readings *lim)
{
	if (!cc_gpu_read(zeus_client_gpu_get_power_limit_constraints, NULL, 0,
	    cc_disc.gpu_count, cons, "gpu get_power_limit_constraints"))
		return false;
	cc_gpu_read(zeus_client_gpu_get_power_limit, NULL, 0,
	    cc_disc.gpu_count, lim, "gpu get_power_limit");
	for (size_t i = 0; i < cc_disc.gpu_count; i++) {
		uint64_t lo = cons->gpu[i].min_power_limit_mw;
		uint64_t hi = cons->gpu[i].max_power_limit_mw;

		if (lo == 0 || lo > hi || lim->gpu[i].power_limit_mw < lo ||
		    lim->gpu[i].power_limit_mw > hi)
			cc_fail(NULL, "gpu %zu: limit %llu outside [%llu, %llu]",
			    i, (unsigned long long)lim->gpu[i].power_limit_mw,
			    (unsigned long long)lo, (unsigned long long)hi);
	}
	cc_ok("gpu constraints min <= limit <= max");
	return true;
}

/* ---- GPU writes ------------------------------------------------------------ */

/* True when writes are allowed; else checks every write is refused. */
static bool
cc_writes_allowed(void)
{
	const unsigned id0 = 0;
	struct zeus_error err;

	if (cc_expect(WRITE_GROUPS) == 0)
		return true;
	cc_denied(zeus_client_gpu_set_power_limit(cc_client, &id0, 1,
	    200000, true, &err), &err, WRITE_GROUPS, "denied set_power_limit");
	cc_denied(zeus_client_gpu_set_persistence_mode(cc_client, &id0, 1,
	    true, true, &err), &err, WRITE_GROUPS,
	    "denied set_persistence_mode");
	cc_denied(zeus_client_gpu_set_gpu_locked_clocks(cc_client, &id0, 1,
	    500, 1000, true, &err), &err, WRITE_GROUPS,
	    "denied set_gpu_locked_clocks");
	cc_denied(zeus_client_gpu_set_mem_locked_clocks(cc_client, &id0, 1,
	    500, 1000, true, &err), &err, WRITE_GROUPS,
	    "denied set_mem_locked_clocks");
	cc_denied(zeus_client_gpu_reset_gpu_locked_clocks(cc_client, &id0, 1,
	    true, &err), &err, WRITE_GROUPS, "denied reset_gpu_locked_clocks");
	cc_denied(zeus_client_gpu_reset_mem_locked_clocks(cc_client, &id0, 1,
	    true, &err), &err, WRITE_GROUPS, "denied reset_mem_locked_clocks");
	cc_denied(zeus_client_gpu_reset_locked_clocks(cc_client, &id0, 1,
	    true, &err), &err, WRITE_GROUPS, "denied reset_locked_clocks");
	return false;
}

/* Sets GPU 1's limit to the middle of its range, reads it, restores it. */
static void
cc_power_limit(const struct zeus_gpu_readings *cons,
    const struct zeus_gpu_readings *lim)
{
	const unsigned id1 = 1;
	const uint64_t lo = cons->gpu[1].min_power_limit_mw;
	const uint64_t hi = cons->gpu[1].max_power_limit_mw;
	const uint32_t mid = (uint32_t)((lo + hi) / 2 / 1000 * 1000);
	struct zeus_gpu_readings r;
	struct zeus_error err;

	cc_want_ok(zeus_client_gpu_set_power_limit(cc_client, &id1, 1, mid,
	    true, &err), &err, "set_power_limit");
	cc_gpu_read(zeus_client_gpu_get_power_limit, &id1, 1, 1, &r,
	    "get_power_limit (ids)");
	if (r.gpu[0].id != 1 || r.gpu[0].power_limit_mw != mid)
		cc_fail(NULL, "power limit of gpu 1 is %llu, set %u",
		    (unsigned long long)r.gpu[0].power_limit_mw, mid);
	cc_ok("set_power_limit read back");
	cc_want_http(zeus_client_gpu_set_power_limit(cc_client, &id1, 1,
	    (uint32_t)hi + 1000, true, &err), &err, 400, NULL,
	    "set_power_limit above max: 400");
	cc_want_ok(zeus_client_gpu_set_power_limit(cc_client, &id1, 1,
	    (uint32_t)lim->gpu[1].power_limit_mw, true, &err), &err,
	    "set_power_limit restore");
	cc_ok("set_power_limit restored");
}

/* Waits up to 3 s for a non-blocking write to show. */
static void
cc_wait_persistence(const unsigned *ids, size_t nids, bool want)
{
	struct zeus_gpu_readings r;
	struct zeus_error err;

	for (int i = 0; i < 300; i++) {
		bool all = true;

		cc_want_ok(zeus_client_gpu_get_persistence_mode(cc_client, ids,
		    nids, &r, &err), &err, "get_persistence_mode");
		for (size_t k = 0; k < r.count; k++)
			all = all && r.gpu[k].persistence_enabled == want;
		if (all && r.count == nids)
			return;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	cc_fail(NULL, "persistence did not become %d", want);
}

static void
cc_persistence(void)
{
	const unsigned ids[] = { 0, 1 };
	struct zeus_gpu_readings r;
	struct zeus_error err;

	cc_gpu_read(zeus_client_gpu_get_persistence_mode, NULL, 0,
	    cc_disc.gpu_count, &r, "get_persistence_mode (all)");
	cc_want_ok(zeus_client_gpu_set_persistence_mode(cc_client, ids, 2,
	    true, true, &err), &err, "set_persistence_mode on (block)");
	cc_gpu_read(zeus_client_gpu_get_persistence_mode, ids, 2, 2, &r,
	    "get_persistence_mode (ids)");
	if (!r.gpu[0].persistence_enabled || !r.gpu[1].persistence_enabled)
		cc_fail(NULL, "persistence not on after a blocking write");
	cc_ok("set_persistence_mode on, read back");
	cc_want_ok(zeus_client_gpu_set_persistence_mode(cc_client, ids, 2,
	    false, false, &err), &err, "set_persistence_mode off (no block)");
	cc_wait_persistence(ids, 2, false);
	cc_ok("set_persistence_mode off (non-blocking), read back");
}

static void
cc_clocks(void)
{
	const unsigned ids[] = { 0, 1 };
	struct zeus_error err;

	cc_want_ok(zeus_client_gpu_set_gpu_locked_clocks(cc_client, ids, 2,
	    510, 1110, true, &err), &err, "set_gpu_locked_clocks");
	cc_ok("set_gpu_locked_clocks");
	cc_want_ok(zeus_client_gpu_set_mem_locked_clocks(cc_client, ids, 2,
	    520, 1220, true, &err), &err, "set_mem_locked_clocks");
	cc_ok("set_mem_locked_clocks");
	cc_want_ok(zeus_client_gpu_reset_gpu_locked_clocks(cc_client, ids, 2,
	    true, &err), &err, "reset_gpu_locked_clocks");
	cc_ok("reset_gpu_locked_clocks");
	cc_want_ok(zeus_client_gpu_reset_mem_locked_clocks(cc_client, ids, 2,
	    true, &err), &err, "reset_mem_locked_clocks");
	cc_ok("reset_mem_locked_clocks");
	cc_want_ok(zeus_client_gpu_reset_locked_clocks(cc_client, &ids[1], 1,
	    true, &err), &err, "reset_locked_clocks");
	cc_ok("reset_locked_clocks");
	/* min > max: the driver's "Invalid Argument", per GPU. */
	cc_want_http(zeus_client_gpu_set_gpu_locked_clocks(cc_client, ids, 2,
	    1200, 600, true, &err), &err, 400, "Invalid Argument",
	    "set_gpu_locked_clocks min > max: 400");
	if (strstr(err.message, ": gpu 0: ") == NULL ||
	    strstr(err.message, "; gpu 1: ") == NULL)
		cc_fail(&err, "per-GPU errors not as \"gpu N: msg; ...\"");
	cc_ok("per-GPU errors joined as zeus.h says");
}

/* Bad ids: the daemon's 400 and message, or the client's own refusal. */
static void
cc_bad_ids(void)
{
	const unsigned bad = (unsigned)cc_disc.gpu_count + 7;
	char needle[64];
	struct zeus_gpu_readings r;
	struct zeus_error err;

	snprintf(needle, sizeof(needle), "Unknown GPU index %u", bad);
	if (cc_expect(ZEUS_GROUP_GPU_READ) == 0)
		cc_want_http(zeus_client_gpu_get_power_limit(cc_client, &bad,
		    1, &r, &err), &err, 400, needle,
		    "get_power_limit unknown GPU: 400");
	if (cc_expect(WRITE_GROUPS) == 0)
		cc_want_http(zeus_client_gpu_reset_locked_clocks(cc_client,
		    &bad, 1, true, &err), &err, 400, needle,
		    "reset_locked_clocks unknown GPU: 400");
	if (zeus_client_gpu_set_persistence_mode(cc_client, NULL, 0, true,
	    true, &err) != -1 || err.code != ZEUS_ERR_INVALID ||
	    err.http_status != 0)
		cc_fail(&err, "write without ids: want a client-side error");
	cc_ok("write without ids refused by the client");
}

/* ---- CPU ----------------------------------------------------------------------- */

static void
cc_cpu(void)
{
	struct zeus_cpu_readings r;
	struct zeus_error err;
	const unsigned id = cc_disc.cpu_count ? cc_disc.cpus[0].id : 0;
	int rc;

	rc = zeus_client_cpu_get_cumulative_energy(cc_client, NULL, 0, true,
	    true, &r, &err);
	if (cc_denied(rc, &err, ZEUS_GROUP_CPU_READ, "cpu denied energy"))
		return;
	cc_want_ok(rc, &err, "cpu get_cumulative_energy");
	if (cc_disc.cpu_count == 0 || r.count != cc_disc.cpu_count ||
	    !r.cpu[0].has_cpu || r.cpu[0].has_dram !=
	    cc_disc.cpus[0].dram_available)
		cc_fail(NULL, "cpu get_cumulative_energy: %zu packages",
		    r.count);
	cc_ok("cpu get_cumulative_energy");
	cc_want_ok(zeus_client_cpu_get_cumulative_energy(cc_client, &id, 1,
	    true, false, &r, &err), &err, "cpu energy (ids)");
	if (r.count != 1 || r.cpu[0].id != id || r.cpu[0].has_dram)
		cc_fail(NULL, "cpu energy (ids, no dram): wrong answer");
	cc_ok("cpu get_cumulative_energy (ids, cpu only)");
	cc_want_ok(zeus_client_cpu_get_power(cc_client, &id, 1, &r, &err),
	    &err, "cpu get_power");
	if (r.count != 1 || !r.cpu[0].has_cpu || r.timestamp_ms == 0)
		cc_fail(NULL, "cpu get_power: wrong answer");
	cc_ok("cpu get_power");
}

/* ---- streams -------------------------------------------------------------------- */

struct cc_stream {
	unsigned seen;
	unsigned want;
	bool bad;
	volatile bool stop;	/* set from the callback: the stop path */
};

static int
cc_sample(const struct zeus_power_sample *s, void *user)
{
	struct cc_stream *st = user;

	if (s->timestamp_ms <= 0 || (s->is_gpu && s->power_mw == 0))
		st->bad = true;
	if (++st->seen < st->want)
		return 0;
	st->stop = true;
	return 0;
}

static void
cc_streams(void)
{
	const unsigned id0 = 0;
	struct cc_stream g = { .want = 3 }, c = { .want = 1 };
	struct zeus_error err;
	int rc;

	rc = zeus_client_gpu_stream_power(cc_client, &id0, 1, cc_sample, &g,
	    &g.stop, &err);
	if (!cc_denied(rc, &err, ZEUS_GROUP_GPU_READ, "gpu stream denied")) {
		cc_want_ok(rc, &err, "gpu stream_power");
		if (g.seen < 3 || g.bad)
			cc_fail(NULL, "gpu stream: %u samples", g.seen);
		cc_ok("gpu stream_power (3 samples, stop flag)");
	}
	if (cc_disc.cpu_count == 0 && cc_expect(ZEUS_GROUP_CPU_READ) == 0)
		return;
	rc = zeus_client_cpu_stream_power(cc_client, NULL, 0, cc_sample, &c,
	    &c.stop, &err);
	if (!cc_denied(rc, &err, ZEUS_GROUP_CPU_READ, "cpu stream denied")) {
		cc_want_ok(rc, &err, "cpu stream_power");
		if (c.seen < 1 || c.bad)
			cc_fail(NULL, "cpu stream: %u samples", c.seen);
		cc_ok("cpu stream_power");
	}
}

int
main(void)
{
	struct zeus_gpu_readings cons, lim;
	bool reads;

	setvbuf(stdout, NULL, _IOLBF, 0);
	cc_open();
	cc_discover();
	cc_time();
	cc_whoami();
	cc_gpu_reads();
	reads = cc_gpu_limits(&cons, &lim);
	if (cc_writes_allowed() && reads) {
		cc_power_limit(&cons, &lim);
		cc_persistence();
		cc_clocks();
	}
	cc_bad_ids();
	cc_cpu();
	cc_streams();
	zeus_client_close(cc_client);
	printf("all %u checks passed\n", cc_checks);
	return 0;
}
