/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_query.c - the query parser and path canonicalisation on arbitrary
 * bytes: no crash, no overread, and on success the invariants hold (ids
 * sorted and unique; a canonical path starts with '/', has no "//", no
 * "." or ".." segment and no trailing slash).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/query.h"
#include "http/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct query_spec spec[] = {
	{ "gpu_ids", Q_IDS, false },
	{ "cpu_ids", Q_IDS, false },
	{ "block", Q_BOOL, false },
	{ "power_limit_mw", Q_U32, false },
	{ NULL, Q_BOOL, false },
};

static void
check_path(const char *p)
{
	size_t n = strlen(p);

	if (p[0] != '/' || strstr(p, "//") != NULL || strstr(p, "/./") ||
	    strstr(p, "/../") || (n > 1 && p[n - 1] == '/'))
		abort();
	if ((n >= 2 && strcmp(p + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(p + n - 3, "/..") == 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct query_values v;
	struct zerr err;
	char path[256];

	if (query_parse((const char *)data, size, spec, &v, &err) == 0) {
		for (int k = 0; k < 2; k++) {
			const struct id_list *ids = v.v[k].ids;

			if (!v.v[k].present)
				continue;
			for (unsigned i = 1; i < ids->n; i++)
				if (ids->ids[i - 1] >= ids->ids[i])
					abort();
		}
	}
	if (router_canonical_path((const char *)data, size, path,
	    sizeof(path)) == 0)
		check_path(path);
	return 0;
}
