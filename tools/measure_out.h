/* SPDX-License-Identifier: Apache-2.0 */
/*
 * measure_out.h - the three forms of `zeus measure`'s report (text, --json,
 * --csv; docs/libzeus.md), with the GPU settings' report (measure_cap.h)
 * beside the measurement when --power-limit etc. were given.
 */
#ifndef ZEUS_MEASURE_OUT_H
#define ZEUS_MEASURE_OUT_H

#include <stdio.h>

#include "measure_cap.h"
#include "zeus/zeus.h"

/* cap: the settings' report, or NULL without settings. `status`: the
 * command's exit status. */
void measure_print_text(FILE *f, const struct zeus_measurement *m,
    int status, const struct cap *cap);
/* push_error: the first push failure, or NULL. */
void measure_print_json(FILE *f, const struct zeus_measurement *m,
    int status, const char *push_error, const struct cap *cap);
/* The header line, then one row per window (measure has one). */
void measure_print_csv(FILE *f, const char *window,
    const struct zeus_measurement *m, int status, const struct cap *cap);

#endif
