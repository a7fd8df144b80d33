/* SPDX-License-Identifier: Apache-2.0 */
/*
 * duration.h - human durations for the command line ("90m", "1h 30m", "7d").
 *
 * Used by `zeusd token issue --expires`. A duration is one or more terms
 * `<digits><unit>`, optionally separated (and number and unit optionally
 * split) by spaces or tabs. Units, lower case only:
 *
 *   s sec secs second seconds        m min mins minute minutes
 *   h hr hrs hour hours              d day days
 *   w week weeks
 *
 * Months and years are deliberately absent (their length is ambiguous; write
 * `30d` or `365d`). Upper-case units are refused so that `1M` is never read
 * as a minute by someone who meant a month.
 *
 * `never` and a bare `0` mean "no expiry": duration_parse then stores 0 and
 * the caller decides what 0 means. Any other total of zero (`0s`, `0h 0m`)
 * is an error, so a typo cannot silently produce a token that never expires.
 */
#ifndef ZEUS_DURATION_H
#define ZEUS_DURATION_H

#include <stdint.h>

#include "err.h"

/* Longest accepted input; longer strings are refused before parsing. */
#define DURATION_INPUT_MAX 256

/*
 * Parses `s` into seconds (> 0), or 0 for `never` / `0`. Leading and
 * trailing spaces/tabs are ignored. Garbage, an empty string, a sign, a
 * fraction, a number without a unit (other than `0`), an unknown unit and
 * int64 overflow are ZERR_INVALID errors. Returns 0 or -1.
 */
int duration_parse(const char *s, int64_t *seconds, struct zerr *err);

#endif
