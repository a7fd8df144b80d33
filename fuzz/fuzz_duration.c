/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_duration.c - libFuzzer target for duration_parse.
 *
 * Checks that any input either fails cleanly or yields a non-negative
 * number of seconds, and never reads past its terminator.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct zerr err;
	int64_t v = -1;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (duration_parse(s, &v, &err) == 0) {
		if (v < 0)
			abort();
	} else if (err.kind != ZERR_INVALID || err.msg[0] == '\0') {
		abort();
	}
	free(s);
	return 0;
}
