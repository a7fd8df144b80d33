/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_spank_parse.c - libFuzzer target for the Slurm plugin's parsers
 * (src/slurm/spank_parse.c): the input as a GPU list, split at spaces as
 * plugstack.conf arguments, and as zeusd's answer to a step's start
 * (spank_step.c).
 *
 * Checks that a list either fails with a reason or yields at most
 * SPANK_GPUS_MAX distinct indices in range, and that accepted arguments
 * give an absolute socket path that fits sun_path; that an answer gives a
 * status of 100..599 and a printable text that fits, or fails.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/spank_parse.h"
#include "slurm/spank_step.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned ids[SPANK_GPUS_MAX];
	char why[SPANK_WHY_MAX], *s, *argv[16], *save = NULL;
	struct spank_conf c;
	size_t n = 0;
	int ac = 0;

	unsigned status;
	char said[64];

	if (spank_step_answer((const char *)data, size, &status, said,
	    sizeof(said)) == 0) {
		if (status < 100 || status > 599 ||
		    strnlen(said, sizeof(said)) >= sizeof(said))
			abort();
		for (size_t i = 0; said[i] != '\0'; i++)
			if (said[i] < 0x20 || said[i] > 0x7e)
				abort();
	}
	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	why[0] = '\0';
	if (spank_parse_gpus(s, ids, &n, why) == 0) {
		if (n > SPANK_GPUS_MAX)
			abort();
		for (size_t i = 0; i < n; i++) {
			if (ids[i] > SPANK_GPU_ID_MAX)
				abort();
			for (size_t k = 0; k < i; k++)
				if (ids[k] == ids[i])
					abort();
		}
	} else if (why[0] == '\0') {
		abort();
	}
	for (char *t = strtok_r(s, " ", &save); t != NULL && ac < 16;
	    t = strtok_r(NULL, " ", &save))
		argv[ac++] = t;
	why[0] = '\0';
	if (spank_parse_conf(ac, argv, &c, why) == 0) {
		if (c.socket[0] != '/' ||
		    strnlen(c.socket, sizeof(c.socket)) >= sizeof(c.socket))
			abort();
	} else if (why[0] == '\0') {
		abort();
	}
	free(s);
	return 0;
}
