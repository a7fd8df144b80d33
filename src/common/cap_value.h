/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cap_value.h - the values of a GPU setting as a user types them: a power
 * limit in watts and a MIN:MAX clock range in MHz. Shared by `zeus measure
 * --power-limit/--gpu-clocks/--mem-clocks` and the Slurm plugin's
 * --zeus-power-limit/--zeus-gpu-clocks/--zeus-mem-clocks (docs/slurm.md).
 */
#ifndef ZEUS_CAP_VALUE_H
#define ZEUS_CAP_VALUE_H

#include <stdint.h>

/*
 * WATTS: plain decimal ("250", "187.5"; no sign, exponent or hex), > 0,
 * at most 4294967 W, into milliwatts (rounded). 0, or -1 with *mw
 * untouched.
 */
int cap_value_watts(const char *s, uint32_t *mw);

/*
 * "MIN:MAX" MHz, each 1 to 10 decimal digits and at most 4294967295
 * (their order is zeusd's to judge). 0, or -1 with out[] untouched.
 */
int cap_value_clocks(const char *s, uint32_t out[2]);

#endif
