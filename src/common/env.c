/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env.c - bounded decimal integers from flags and from the environment
 * (env.h). strtoull alone accepts a sign, leading space and overflow
 * wrapped to ULLONG_MAX; the first character and errno are checked here.
 */
#include "common/env.h"

#include <errno.h>
#include <stdlib.h>

int
env_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    const char *what, struct zerr *err)
{
	char *end;
	unsigned long long v;

	if (s[0] < '0' || s[0] > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	return zerr_set(err, ZERR_INVALID,
	    "invalid value '%.64s' for %s: expected an integer from %llu to %llu",
	    s, what, (unsigned long long)min, (unsigned long long)max);
}

int
env_uint(const char *name, uint64_t min, uint64_t max, uint64_t def,
    uint64_t *out, struct zerr *err)
{
	const char *s = getenv(name);

	*out = def;
	if (s == NULL || *s == '\0')
		return 0;
	return env_parse_uint(s, min, max, out, name, err);
}
