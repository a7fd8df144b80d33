/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl_sim.c - simulated RAPL packages (see rapl_sim.h).
 *
 * Power is a sum of slow sines around a base, so its integral, the energy,
 * is exact and cheap: E(t) = base*t + sum A/w * (cos(phi) - cos(w*t + phi)).
 * The counter is the energy since an arbitrary start value, modulo the
 * range, just like hardware. The sines are computed here (Taylor series
 * after range reduction) so the daemon does not need libm.
 */
#include "rapl_sim.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"

#define SIM_PI 3.14159265358979323846
#define SIM_TWO_PI (2.0 * SIM_PI)

/* One sine term of a power curve: amp * sin(2*pi*t/period + phase). */
struct sim_wave {
	double amp;		/* W */
	double period;		/* s */
};

struct sim_curve {
	double base;		/* W */
	struct sim_wave w[2];
};

/* CPU 40..120 W, DRAM 5..20 W. */
static const struct sim_curve sim_cpu_curve = { 80.0,
	{ { 30.0, 60.0 }, { 10.0, 7.0 } } };
static const struct sim_curve sim_dram_curve = { 12.5,
	{ { 5.0, 45.0 }, { 2.5, 11.0 } } };

struct sim_counter {
	struct sim_curve curve;
	double phase;		/* rad, per package so packages differ */
	uint64_t start_uj;	/* counter value at t = 0 */
	uint64_t last_total_uj;	/* never report less than this */
	uint64_t max_uj;
};

struct sim_pkg {
	struct sim_counter cpu;
	struct sim_counter dram;
};

struct sim_ctx {
	uint64_t t0_ns;		/* CLOCK_MONOTONIC at open */
	unsigned npkgs;
	struct sim_pkg *pkgs;
};

static double
sim_sin(double x)
{
	double k, x2;

	/* Reduce to [-pi, pi], then to [-pi/2, pi/2] by symmetry. */
	k = (double)(long long)(x / SIM_TWO_PI + (x >= 0 ? 0.5 : -0.5));
	x -= k * SIM_TWO_PI;
	if (x > SIM_PI / 2)
		x = SIM_PI - x;
	else if (x < -SIM_PI / 2)
		x = -SIM_PI - x;
	x2 = x * x;
	return x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 *
	    (1 - x2 / 110)))));
}

static double
sim_cos(double x)
{
	return sim_sin(x + SIM_PI / 2);
}

static double
sim_power(const struct sim_curve *c, double phase, double t)
{
	double p = c->base;
	unsigned i;

	for (i = 0; i < 2; i++)
		p += c->w[i].amp * sim_sin(SIM_TWO_PI * t / c->w[i].period +
		    phase * (i + 1));
	return p;
}

/* Energy in J from 0 to t: the exact integral of sim_power. */
static double
sim_energy_j(const struct sim_curve *c, double phase, double t)
{
	double e = c->base * t;
	unsigned i;

	for (i = 0; i < 2; i++) {
		double w = SIM_TWO_PI / c->w[i].period, ph = phase * (i + 1);

		e += c->w[i].amp / w * (sim_cos(ph) - sim_cos(w * t + ph));
	}
	return e;
}

static double
sim_phase(unsigned pkg)
{
	return 1.3 * pkg;
}

double
rapl_sim_curve_cpu_w(unsigned pkg, double t)
{
	return sim_power(&sim_cpu_curve, sim_phase(pkg), t);
}

double
rapl_sim_curve_dram_w(unsigned pkg, double t)
{
	return sim_power(&sim_dram_curve, sim_phase(pkg), t);
}

static int
sim_read(void *vctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct sim_ctx *ctx = vctx;
	struct sim_counter *c = zone == RAPL_ZONE_CPU ? &ctx->pkgs[pkg].cpu :
	    &ctx->pkgs[pkg].dram;
	double t = (double)(zclock_now_ns() - ctx->t0_ns) / 1e9;
	double e = sim_energy_j(&c->curve, c->phase, t);
	uint64_t total;

	/* The series can dip a hair below 0 near t = 0; casting that is UB. */
	total = c->start_uj + (e > 0 ? (uint64_t)(e * 1e6) : 0);
	/* Rounding must never look like a wrap. Called under the pkg mutex. */
	if (total < c->last_total_uj)
		total = c->last_total_uj;
	c->last_total_uj = total;
	*raw = total % (c->max_uj + 1);
	(void)err;
	return 0;
}

static void
sim_destroy(void *vctx)
{
	struct sim_ctx *ctx = vctx;

	if (ctx == NULL)
		return;
	free(ctx->pkgs);
	free(ctx);
}

static const struct rapl_source_ops sim_ops = {
	.name = "sim",
	.read = sim_read,
	.destroy = sim_destroy,
};

/* A constant curve of `w` watts, or the moving default when w <= 0. */
static struct sim_curve
sim_pick_curve(const struct sim_curve *dflt, double w)
{
	struct sim_curve c = *dflt;

	if (w > 0) {
		c.base = w;
		c.w[0].amp = 0;
		c.w[1].amp = 0;
	}
	return c;
}

static void
sim_init_pkg(struct sim_pkg *sp, struct rapl_package_desc *d, unsigned i,
    const struct rapl_sim_options *o)
{
	d->id = i;
	snprintf(d->name, sizeof(d->name), "package-%u", i);
	d->has_dram = i % 2 == 0;
	d->cpu_max_uj = o->cpu_max_uj != 0 ? o->cpu_max_uj :
	    RAPL_SIM_CPU_MAX_UJ;
	d->dram_max_uj = d->has_dram ? (o->dram_max_uj != 0 ? o->dram_max_uj :
	    RAPL_SIM_DRAM_MAX_UJ) : 0;
	sp->cpu.curve = sim_pick_curve(&sim_cpu_curve, o->cpu_w);
	sp->dram.curve = sim_pick_curve(&sim_dram_curve, o->dram_w);
	/* the curves' ceilings, with margin: the keepalive can then sleep
	 * ~20 s instead of assuming a 2 kW package */
	d->cpu_max_w = o->cpu_w > 0 ? (unsigned)(o->cpu_w * 2) + 1 : 150;
	d->dram_max_w = o->dram_w > 0 ? (unsigned)(o->dram_w * 2) + 1 : 25;
	sp->cpu.phase = sp->dram.phase = sim_phase(i);
	sp->cpu.max_uj = d->cpu_max_uj;
	sp->dram.max_uj = d->dram_max_uj != 0 ? d->dram_max_uj : 1;
	/* Start part-way through the range, as a host up for a while would. */
	sp->cpu.start_uj = d->cpu_max_uj / 10 * (3 + 2 * (i % 4));
	sp->dram.start_uj = sp->dram.max_uj / 10 * (5 + i % 4);
}

int
rapl_sim_open(const struct rapl_sim_options *opt, struct rapl **out,
    struct zerr *err)
{
	struct rapl_sim_options dflt = { .npkgs = 2 };
	const struct rapl_sim_options *o = opt != NULL ? opt : &dflt;
	struct rapl_package_desc *descs;
	struct sim_ctx *ctx;
	unsigned i;
	int rc;

	if (o->npkgs > 256)
		return zerr_set(err, ZERR_INVALID,
		    "simulated RAPL: at most 256 packages");
	ctx = calloc(1, sizeof(*ctx));
	descs = calloc(o->npkgs > 0 ? o->npkgs : 1, sizeof(*descs));
	if (ctx != NULL)
		ctx->pkgs = calloc(o->npkgs > 0 ? o->npkgs : 1,
		    sizeof(*ctx->pkgs));
	if (ctx == NULL || descs == NULL || ctx->pkgs == NULL) {
		sim_destroy(ctx);
		free(descs);
		return zerr_set(err, ZERR_INTERNAL,
		    "simulated RAPL: out of memory");
	}
	ctx->npkgs = o->npkgs;
	ctx->t0_ns = zclock_now_ns();
	for (i = 0; i < o->npkgs; i++)
		sim_init_pkg(&ctx->pkgs[i], &descs[i], i, o);
	rc = rapl_open_source(&sim_ops, ctx, descs, o->npkgs, out, err);
	free(descs);
	return rc;
}
