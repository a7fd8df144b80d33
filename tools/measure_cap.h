/* SPDX-License-Identifier: Apache-2.0 */
/*
 * measure_cap.h - `zeus measure --power-limit W [--gpu-clocks MIN:MAX]
 * [--mem-clocks MIN:MAX]`: GPU settings in force for the measured command
 * only, and the energy ledger's own figure beside the measurement
 * (docs/libzeus.md, "Measuring under a power limit").
 *
 * The order: cap_start (before the command: one client, one kept-alive
 * connection; settings applied GPU by GPU; on any refusal what was taken
 * is given back and the command is not run), cap_keepalive_start/stop
 * around the command, cap_finish (POST /gpu/release on that connection,
 * or zeus's own restore where zeusd keeps no lease), then the reports.
 */
#ifndef ZEUS_MEASURE_CAP_H
#define ZEUS_MEASURE_CAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zeus/zeus.h"

struct cap_settings {
	bool has_limit;
	uint32_t limit_mw;
	bool has_gpu_clocks;
	uint32_t gpu_clocks[2];		/* min, max MHz */
	bool has_mem_clocks;
	uint32_t mem_clocks[2];
	const char *lease_label;	/* checked; NULL: none */
};

/* WATTS (cap_value_watts) into set->limit_mw; 0 or -1. Clock ranges:
 * cap_value_clocks (common/cap_value.h). */
int cap_parse_watts(const char *s, struct cap_settings *set);
bool cap_any(const struct cap_settings *set);

struct cap;

/*
 * Applies `set` to the n GPUs `ids` (zeusd's ids; `index`: the monitor's
 * index of each, for the reports) through zeusd at `co`. Returns 0 with *out set, or an exit status after saying
 * why on stderr: EXIT_HTTP_4XX, EXIT_DENIED or EXIT_LEASED when zeusd
 * refused a setting (with its message; anything applied before it has
 * been given back), EXIT_FAIL when zeusd cannot be reached or giving back
 * failed too.
 */
int cap_start(const struct cap_settings *set,
    const struct zeus_client_options *co, const unsigned *index,
    const unsigned *ids, size_t n, struct cap **out);

/* While the command runs: a request every 15 s keeps the connection. */
void cap_keepalive_start(struct cap *cap);
void cap_keepalive_stop(struct cap *cap);

/* Gives every setting back (release, or zeus's own restore); 0, or -1
 * after saying on stderr what is left changed. */
int cap_finish(struct cap *cap);

/* The reports, next to measure's own (m: the command's window). */
void cap_print_text(FILE *f, const struct cap *cap,
    const struct zeus_measurement *m);
void cap_print_json(FILE *f, const struct cap *cap,
    const struct zeus_measurement *m);
void cap_print_csv(FILE *f, const struct cap *cap, bool header);

void cap_free(struct cap *cap);

#endif
