/* SPDX-License-Identifier: Apache-2.0 */
/* cap_value.c - power limit and clock range values (cap_value.h). */
#include "common/cap_value.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int
cap_value_watts(const char *s, uint32_t *mw)
{
	char *end;
	double w;

	/* plain decimals: strtod would also take "0x10" and "1e3" */
	if (*s < '0' || *s > '9' || s[strspn(s, "0123456789.")] != '\0')
		return -1;
	errno = 0;
	w = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !(w > 0) || w * 1000 > 4294967295.0)
		return -1;
	*mw = (uint32_t)llround(w * 1000);
	return 0;
}

static int
cap_value_mhz(const char *s, const char *stop, uint32_t *out)
{
	unsigned long long v = 0;

	if (s == stop || stop - s > 10)
		return -1;
	for (; s < stop; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > 0xffffffffULL)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int
cap_value_clocks(const char *s, uint32_t out[2])
{
	const char *colon = strchr(s, ':');
	uint32_t v[2];

	if (colon == NULL || cap_value_mhz(s, colon, &v[0]) != 0 ||
	    cap_value_mhz(colon + 1, colon + strlen(colon), &v[1]) != 0)
		return -1;
	out[0] = v[0];
	out[1] = v[1];
	return 0;
}
