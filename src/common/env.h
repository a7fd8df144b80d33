/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env.h - bounded decimal integers from flags and from the environment.
 *
 * Every tuning knob of zeusd (ZEUSD_*_S, queue lengths, limits) and every
 * numeric flag goes through these two, so that a value out of range or
 * with trailing junk is one clear error naming it, never a silent default.
 */
#ifndef ZEUS_ENV_H
#define ZEUS_ENV_H

#include <stdint.h>

#include "common/err.h"

/*
 * A decimal unsigned integer in [min, max]: digits only (no sign, no
 * space, no base prefix). `what` names the flag or variable in errors.
 */
int env_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    const char *what, struct zerr *err);

/*
 * A tuning knob from the environment: `def` when unset or empty, else a
 * decimal integer in [min, max] (anything else is an error naming it).
 */
int env_uint(const char *name, uint64_t min, uint64_t max, uint64_t def,
    uint64_t *out, struct zerr *err);

#endif
