/* SPDX-License-Identifier: Apache-2.0 */
/*
 * measure_cap.c - GPU settings for the measured command only (zeus
 * measure --power-limit, --gpu-clocks, --mem-clocks; measure_cap.h).
 *
 * Every request goes over one libzeus client, so over one kept-alive
 * connection of this process: zeusd (--gpu-leases) gives a non-root Unix
 * socket peer that changes a GPU a lease held while the process that
 * connected lives. So a SIGKILLed zeus is restored by zeusd itself, and
 * at the end POST /gpu/release restores the GPUs before it answers, with
 * the ledger's own energy figure for the lease. Where zeusd keeps no lease
 * for us (root, TCP, no --gpu-leases, or a GPU our user already held from
 * another process), zeus restores what it changed itself: the power limit
 * it read before, and a reset of the clocks it locked.
 *
 * Settings go GPU by GPU and one at a time, so a refusal names one GPU
 * and one setting, and what was applied before it is known exactly and
 * given back before the command would have started.
 */
#include "measure_cap.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cap_value.h"
#include "tool.h"

#define CAP_KEEPALIVE_S 15	/* below zeusd's idle timeout (60 s) and
				 * libcurl's reuse age (118 s) */

enum cap_how { CAP_UNSET, CAP_RELEASE, CAP_SELF };

struct cap_gpu {
	unsigned index;			/* the monitor's (CUDA's) */
	unsigned id;			/* zeusd's */
	unsigned applied;		/* ZEUS_SETTING_* changed by us */
	bool has_before;
	uint64_t before_mw;		/* the limit before, for CAP_SELF */
	bool held_before;		/* our uid held it already */
	enum cap_how how;
	const char *why_self;		/* why zeusd keeps no lease for us */
	bool restored;
	bool has_ledger;
	struct zeus_lease ledger;	/* the release's record */
};

struct cap {
	struct cap_settings set;
	struct zeus_client *c;
	bool unix_sock;
	bool leases_on;			/* GET /gpu/leases answered 200 */
	bool leases_off;		/* ... 404: zeusd without --gpu-leases */
	size_t n;
	struct cap_gpu gpu[ZEUS_MAX_DEVICES];
	pthread_t ka;
	bool ka_running, ka_stop;
	pthread_mutex_t ka_lock;
	pthread_cond_t ka_cond;
};

/* ---- options ------------------------------------------------------------ */

int
cap_parse_watts(const char *s, struct cap_settings *set)
{
	if (cap_value_watts(s, &set->limit_mw) != 0)
		return -1;
	set->has_limit = true;
	return 0;
}

bool
cap_any(const struct cap_settings *set)
{
	return set->has_limit || set->has_gpu_clocks || set->has_mem_clocks;
}

/* ---- refusals ----------------------------------------------------------- */

/* zeusd's answer as an exit status (tool.h). */
static int
cap_status(const struct zeus_error *e)
{
	if (e->code != ZEUS_ERR_HTTP)
		return EXIT_FAIL;
	switch (e->http_status) {
	case 401:
	case 403:
		return EXIT_DENIED;
	case 409:
		return EXIT_LEASED;
	default:
		return e->http_status >= 400 && e->http_status < 500 ?
		    EXIT_HTTP_4XX : EXIT_FAIL;
	}
}

static void
cap_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
cap_say(const char *fmt, ...)
{
	va_list ap;

	tool_prefix(stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- before and after --------------------------------------------------- */

/*
 * What zeusd's ledger says before we change anything: whether it keeps
 * leases at all, and which GPUs our own user holds already (from another
 * process: releasing would end that process's lease too).
 */
static void
cap_look(struct cap *cap)
{
	static struct zeus_leases l;
	struct zeus_error e;

	if (zeus_client_gpu_leases(cap->c, &l, &e) != 0) {
		cap->leases_off = e.code == ZEUS_ERR_HTTP &&
		    e.http_status == 404;
		return;
	}
	cap->leases_on = true;
	for (size_t k = 0; k < l.count; k++)
		for (size_t i = 0; i < cap->n; i++)
			if (l.leases[k].gpu == cap->gpu[i].id &&
			    l.leases[k].uid == tool_uid())
				cap->gpu[i].held_before = true;
}

/* Why zeusd would keep no lease for us on g, or NULL if it will. */
static const char *
cap_why_self(const struct cap *cap, const struct cap_gpu *g)
{
	if (!cap->unix_sock)
		return "TCP clients take no lease";
	if (tool_is_root())
		return "root takes no lease";
	if (cap->leases_off)
		return "zeusd runs without --gpu-leases";
	if (g->held_before)
		return "this user held a lease on it already";
	if (!cap->leases_on)
		return "GET /gpu/leases was refused";
	return NULL;
}

/*
 * After the settings: a GPU is released through zeusd when the lease on it
 * is this process's (its pid, or our uid on a GPU nobody of ours held
 * before: zeusd's pid namespace may not be ours).
 */
static void
cap_decide(struct cap *cap)
{
	static struct zeus_leases l;
	bool have = cap->leases_on && zeus_client_gpu_leases(cap->c, &l,
	    NULL) == 0;

	for (size_t i = 0; i < cap->n; i++) {
		struct cap_gpu *g = &cap->gpu[i];

		g->why_self = cap_why_self(cap, g);
		g->how = g->why_self == NULL ? CAP_RELEASE : CAP_SELF;
		if (g->how != CAP_RELEASE || !have)
			continue;
		g->how = CAP_SELF;
		g->why_self = "zeusd shows no lease of this process on it";
		for (size_t k = 0; k < l.count; k++)
			if (l.leases[k].gpu == g->id &&
			    l.leases[k].uid == tool_uid() &&
			    (l.leases[k].pid == tool_pid() ||
			    !g->held_before)) {
				g->how = CAP_RELEASE;
				g->why_self = NULL;
			}
	}
}

/* zeus's own restore of g; 0 or -1 (said). */
static int
cap_restore_self(struct cap *cap, struct cap_gpu *g)
{
	struct zeus_error e;
	int rc = 0;

	if ((g->applied & ZEUS_SETTING_POWER_LIMIT) && !g->has_before) {
		cap_say("GPU %u: power limit not restored: its value before "
		    "is unknown", g->id);
		rc = -1;
	} else if ((g->applied & ZEUS_SETTING_POWER_LIMIT) &&
	    zeus_client_gpu_set_power_limit(cap->c, &g->id, 1,
	    (uint32_t)g->before_mw, true, &e) != 0) {
		cap_say("GPU %u: power limit not restored: %s", g->id,
		    e.message);
		rc = -1;
	}
	if ((g->applied & ZEUS_SETTING_GPU_CLOCKS) &&
	    zeus_client_gpu_reset_gpu_locked_clocks(cap->c, &g->id, 1, true,
	    &e) != 0) {
		cap_say("GPU %u: GPU clocks not reset: %s", g->id, e.message);
		rc = -1;
	}
	if ((g->applied & ZEUS_SETTING_MEM_CLOCKS) &&
	    zeus_client_gpu_reset_mem_locked_clocks(cap->c, &g->id, 1, true,
	    &e) != 0) {
		cap_say("GPU %u: memory clocks not reset: %s", g->id,
		    e.message);
		rc = -1;
	}
	return rc;
}

int
cap_finish(struct cap *cap)
{
	static struct zeus_release rel;
	unsigned ids[ZEUS_MAX_DEVICES];
	struct zeus_error e;
	size_t nrel = 0;
	int rc = 0;

	for (size_t i = 0; i < cap->n; i++)
		if (cap->gpu[i].applied != 0 &&
		    cap->gpu[i].how == CAP_RELEASE)
			ids[nrel++] = cap->gpu[i].id;
	if (nrel > 0 && zeus_client_gpu_release(cap->c, ids, nrel, &rel,
	    &e) != 0) {
		cap_say("release failed, settings may be left changed: %s",
		    e.message);
		rc = -1;
		nrel = 0;	/* do not also restore over a failed release */
		for (size_t i = 0; i < cap->n; i++)
			if (cap->gpu[i].how == CAP_RELEASE)
				cap->gpu[i].applied = 0;
	}
	for (size_t k = 0; k < rel.count && nrel > 0; k++)
		for (size_t i = 0; i < cap->n; i++)
			if (cap->gpu[i].id == rel.released[k].gpu &&
			    cap->gpu[i].how == CAP_RELEASE &&
			    cap->gpu[i].applied != 0) {
				cap->gpu[i].ledger = rel.released[k];
				cap->gpu[i].has_ledger = true;
				cap->gpu[i].restored = true;
			}
	for (size_t i = 0; i < cap->n; i++) {
		struct cap_gpu *g = &cap->gpu[i];

		if (g->applied == 0 || g->restored)
			continue;
		if (g->how == CAP_RELEASE && nrel > 0) {
			/* not_leased: zeusd had no lease after all */
			g->how = CAP_SELF;
			g->why_self = "zeusd had no lease on it at release";
		}
		if (g->how == CAP_SELF) {
			if (cap_restore_self(cap, g) == 0)
				g->restored = true;
			else
				rc = -1;
		}
	}
	return rc;
}

/* ---- applying ----------------------------------------------------------- */

static int
cap_apply_one(struct cap *cap, struct cap_gpu *g, struct zeus_error *e,
    const char **what)
{
	const struct cap_settings *s = &cap->set;

	if (s->has_limit) {
		*what = "power limit";
		if (zeus_client_gpu_set_power_limit(cap->c, &g->id, 1,
		    s->limit_mw, true, e) != 0)
			return -1;
		g->applied |= ZEUS_SETTING_POWER_LIMIT;
	}
	if (s->has_gpu_clocks) {
		*what = "GPU locked clocks";
		if (zeus_client_gpu_set_gpu_locked_clocks(cap->c, &g->id, 1,
		    s->gpu_clocks[0], s->gpu_clocks[1], true, e) != 0)
			return -1;
		g->applied |= ZEUS_SETTING_GPU_CLOCKS;
	}
	if (s->has_mem_clocks) {
		*what = "memory locked clocks";
		if (zeus_client_gpu_set_mem_locked_clocks(cap->c, &g->id, 1,
		    s->mem_clocks[0], s->mem_clocks[1], true, e) != 0)
			return -1;
		g->applied |= ZEUS_SETTING_MEM_CLOCKS;
	}
	return 0;
}

/* The power limits before: needed where zeus restores them itself. */
static int
cap_read_before(struct cap *cap, struct zeus_error *e)
{
	static struct zeus_gpu_readings r;
	unsigned ids[ZEUS_MAX_DEVICES];
	bool need = false;

	for (size_t i = 0; i < cap->n; i++) {
		ids[i] = cap->gpu[i].id;
		need |= cap_why_self(cap, &cap->gpu[i]) != NULL;
	}
	if (zeus_client_gpu_get_power_limit(cap->c, ids, cap->n, &r, e) != 0)
		return need ? -1 : 0;
	for (size_t k = 0; k < r.count; k++)
		for (size_t i = 0; i < cap->n; i++)
			if (cap->gpu[i].id == r.gpu[k].id) {
				cap->gpu[i].has_before = true;
				cap->gpu[i].before_mw = r.gpu[k].power_limit_mw;
			}
	return 0;
}

int
cap_start(const struct cap_settings *set,
    const struct zeus_client_options *co, const unsigned *index,
    const unsigned *ids, size_t n, struct cap **out)
{
	struct zeus_client_options o = *co;
	struct cap *cap;
	struct zeus_error e;
	const char *what = "";
	int rc;

	*out = NULL;
	if (n == 0 || n > ZEUS_MAX_DEVICES)
		return EXIT_FAIL;
	cap = calloc(1, sizeof(*cap));
	if (cap == NULL)
		return EXIT_FAIL;
	pthread_mutex_init(&cap->ka_lock, NULL);
	pthread_cond_init(&cap->ka_cond, NULL);
	cap->set = *set;
	cap->n = n;
	for (size_t i = 0; i < n; i++) {
		cap->gpu[i].index = index[i];
		cap->gpu[i].id = ids[i];
	}
	if (o.socket_path == NULL && o.host_port == NULL &&
	    o.pipe_name == NULL) {
		const char *sp = getenv("ZEUSD_SOCK_PATH");

		cap->unix_sock = sp != NULL && *sp != '\0';
	} else {
		cap->unix_sock = o.socket_path != NULL;
	}
	if (zeus_client_open(&o, &cap->c, &e) != 0 ||
	    (set->lease_label != NULL &&
	    zeus_client_set_lease_label(cap->c, set->lease_label, &e) != 0)) {
		cap_say("%s", e.message);
		cap_free(cap);
		return EXIT_FAIL;
	}
	cap_look(cap);
	if (set->has_limit && cap_read_before(cap, &e) != 0) {
		cap_say("cannot read the power limits to restore later: %s",
		    e.message);
		rc = cap_status(&e);
		cap_free(cap);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if (cap_apply_one(cap, &cap->gpu[i], &e, &what) == 0)
			continue;
		bool any = false;

		rc = cap_status(&e);
		cap_say("GPU %u: %s refused: %s", cap->gpu[i].id, what,
		    e.message);
		for (size_t k = 0; k <= i; k++)
			any |= cap->gpu[k].applied != 0;
		cap_decide(cap);
		if (cap_finish(cap) != 0)
			rc = EXIT_FAIL;
		else if (any)
			cap_say("what was applied before has been restored; "
			    "the command was not run");
		else
			cap_say("nothing was changed; the command was not run");
		cap_free(cap);
		return rc;
	}
	cap_decide(cap);
	*out = cap;
	return 0;
}

/* ---- keepalive ---------------------------------------------------------- */

static void *
cap_keepalive(void *arg)
{
	struct cap *cap = arg;
	struct timespec t;
	int64_t ms;

	pthread_mutex_lock(&cap->ka_lock);
	while (!cap->ka_stop) {
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += CAP_KEEPALIVE_S;
		while (!cap->ka_stop && pthread_cond_timedwait(&cap->ka_cond,
		    &cap->ka_lock, &t) != ETIMEDOUT)
			;
		if (cap->ka_stop)
			break;
		pthread_mutex_unlock(&cap->ka_lock);
		/* the answer does not matter: the request keeps the socket */
		(void)zeus_client_time(cap->c, &ms, NULL);
		pthread_mutex_lock(&cap->ka_lock);
	}
	pthread_mutex_unlock(&cap->ka_lock);
	return NULL;
}

void
cap_keepalive_start(struct cap *cap)
{
	cap->ka_stop = false;
	cap->ka_running = pthread_create(&cap->ka, NULL, cap_keepalive,
	    cap) == 0;
}

void
cap_keepalive_stop(struct cap *cap)
{
	if (!cap->ka_running)
		return;
	pthread_mutex_lock(&cap->ka_lock);
	cap->ka_stop = true;
	pthread_cond_signal(&cap->ka_cond);
	pthread_mutex_unlock(&cap->ka_lock);
	pthread_join(cap->ka, NULL);
	cap->ka_running = false;
}

void
cap_free(struct cap *cap)
{
	if (cap == NULL)
		return;
	cap_keepalive_stop(cap);
	zeus_client_close(cap->c);
	pthread_cond_destroy(&cap->ka_cond);
	pthread_mutex_destroy(&cap->ka_lock);
	free(cap);
}

/* ---- reports ------------------------------------------------------------ */

static const struct zeus_energy *
cap_measured(const struct zeus_measurement *m, unsigned index)
{
	for (size_t i = 0; i < m->gpu_count; i++)
		if (m->gpu[i].index == index)
			return &m->gpu[i];
	return NULL;
}

static void
cap_settings_text(FILE *f, const struct cap_settings *s)
{
	const char *sep = "";

	if (s->has_limit) {
		fprintf(f, "power limit %g W", s->limit_mw / 1000.0);
		sep = ", ";
	}
	if (s->has_gpu_clocks) {
		fprintf(f, "%sGPU clocks %u:%u MHz", sep,
		    (unsigned)s->gpu_clocks[0], (unsigned)s->gpu_clocks[1]);
		sep = ", ";
	}
	if (s->has_mem_clocks)
		fprintf(f, "%smemory clocks %u:%u MHz", sep,
		    (unsigned)s->mem_clocks[0], (unsigned)s->mem_clocks[1]);
}

/* GPUs are named by the monitor's index, as measure's own lines do, and
 * zeusd's id beside it where CUDA_VISIBLE_DEVICES renumbers them. */
void
cap_print_text(FILE *f, const struct cap *cap,
    const struct zeus_measurement *m)
{
	for (size_t i = 0; i < cap->n; i++) {
		const struct cap_gpu *g = &cap->gpu[i];
		const struct zeus_energy *me = cap_measured(m, g->index);
		const struct zeus_lease *l = &g->ledger;

		fprintf(f, "zeus: gpu %u ", g->index);
		if (g->index != g->id)
			fprintf(f, "(zeusd GPU %u) ", g->id);
		cap_settings_text(f, &cap->set);
		if (g->has_before && cap->set.has_limit)
			fprintf(f, " (limit was %g W)", g->before_mw / 1000.0);
		if (!g->restored)
			fprintf(f, ": NOT restored\n");
		else if (g->how == CAP_RELEASE)
			fprintf(f, ": restored by zeusd (lease released)\n");
		else
			fprintf(f, ": restored by zeus (%s)\n", g->why_self);
		if (!g->has_ledger)
			continue;
		if (l->energy != ZEUS_LEASE_ENERGY_OK) {
			fprintf(f, "zeus: gpu %u ledger: %s (%.3f s)\n", g->index,
			    zeus_lease_energy_name(l->energy), l->duration_s);
			continue;
		}
		fprintf(f, "zeus: gpu %u ledger %.3f J in %.3f s, %.1f W "
		    "average (lease: first setting to restore)\n", g->index,
		    l->energy_j, l->duration_s, l->duration_s > 0 ?
		    l->energy_j / l->duration_s : 0.0);
		if (me != NULL && me->joules > 0 && m->time_s > 0)
			fprintf(f, "zeus: gpu %u ledger vs measured: %+.3f J "
			    "(%+.2f%%), %+.3f s; average power %+.2f%%\n", g->index, l->energy_j - me->joules,
			    100 * (l->energy_j - me->joules) / me->joules,
			    l->duration_s - m->time_s, l->duration_s > 0 ?
			    100 * ((l->energy_j / l->duration_s) /
			    (me->joules / m->time_s) - 1) : 0.0);
	}
}

void
cap_print_json(FILE *f, const struct cap *cap,
    const struct zeus_measurement *m)
{
	const struct cap_settings *s = &cap->set;
	char num[64];
	bool all = true;

	(void)m;
	fputs(",\"settings\":{\"power_limit_w\":", f);
	if (s->has_limit) {
		fmt_num(num, sizeof(num), s->limit_mw / 1000.0, 3, "null");
		fputs(num, f);
	} else {
		fputs("null", f);
	}
	if (s->has_gpu_clocks)
		fprintf(f, ",\"gpu_clocks_mhz\":[%u,%u]",
		    (unsigned)s->gpu_clocks[0], (unsigned)s->gpu_clocks[1]);
	else
		fputs(",\"gpu_clocks_mhz\":null", f);
	if (s->has_mem_clocks)
		fprintf(f, ",\"mem_clocks_mhz\":[%u,%u]",
		    (unsigned)s->mem_clocks[0], (unsigned)s->mem_clocks[1]);
	else
		fputs(",\"mem_clocks_mhz\":null", f);
	fputs("},\"ledger\":{", f);
	for (size_t i = 0; i < cap->n; i++) {
		const struct cap_gpu *g = &cap->gpu[i];
		const struct zeus_lease *l = &g->ledger;

		all &= g->restored;
		fprintf(f, "%s\"%u\":", i ? "," : "", g->index);
		if (!g->has_ledger) {
			fputs("null", f);
			continue;
		}
		fmt_num(num, sizeof(num), l->energy_j, J_DECIMALS, "null");
		fprintf(f, "{\"energy\":\"%s\",\"energy_j\":%s",
		    zeus_lease_energy_name(l->energy),
		    l->energy == ZEUS_LEASE_ENERGY_OK ? num : "null");
		fmt_num(num, sizeof(num), l->duration_s, S_DECIMALS, "null");
		fprintf(f, ",\"duration_s\":%s", num);
		fmt_num(num, sizeof(num), l->avg_w, J_DECIMALS, "null");
		fprintf(f, ",\"avg_w\":%s,\"reason\":",
		    l->has_avg_w ? num : "null");
		/* zeusd's reasons are words ("release"); anything else is
		 * not repeated into the JSON */
		if (l->reason[0] != '\0' && strspn(l->reason,
		    "abcdefghijklmnopqrstuvwxyz_") == strlen(l->reason))
			fprintf(f, "\"%s\"}", l->reason);
		else
			fputs("null}", f);
	}
	fprintf(f, "},\"restored\":%s", all ? "true" : "false");
}

void
cap_print_csv(FILE *f, const struct cap *cap, bool header)
{
	char num[64];

	for (size_t i = 0; i < cap->n; i++) {
		const struct cap_gpu *g = &cap->gpu[i];

		if (header) {
			fprintf(f, ",ledger_gpu%u_j", g->index);
			continue;
		}
		if (g->has_ledger && g->ledger.energy == ZEUS_LEASE_ENERGY_OK)
			fmt_num(num, sizeof(num), g->ledger.energy_j,
			    J_DECIMALS, "");
		else
			num[0] = '\0';
		fprintf(f, ",%s", num);
	}
}
