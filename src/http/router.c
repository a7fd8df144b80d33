/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.c - route look-up in the table it is handed, and path
 * canonicalisation (see router.h).
 */
#include "http/router.h"

#include <string.h>

#include "http/query.h"

const struct route *
router_lookup(const struct routes *rt, const char *path)
{
	for (size_t i = 0; i < rt->n; i++)
		if (strcmp(rt->table[i].path, path) == 0)
			return &rt->table[i];
	return NULL;
}

int
router_canonical_path(const char *raw, size_t len, char *out, size_t size)
{
	char dec[1024];
	long n;
	size_t o = 0, i = 0;

	if (len >= sizeof(dec) || size < 2)
		return -1;
	n = query_unescape(raw, len, false, dec, sizeof(dec));
	if (n < 0)
		return -1;
	out[o++] = '/';
	while ((size_t)i < (size_t)n) {
		size_t start, seg;

		while ((size_t)i < (size_t)n && dec[i] == '/')
			i++;
		start = i;
		while ((size_t)i < (size_t)n && dec[i] != '/')
			i++;
		seg = i - start;
		if (seg == 0 || (seg == 1 && dec[start] == '.'))
			continue;
		if (seg == 2 && dec[start] == '.' && dec[start + 1] == '.') {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--;	/* the slash before the segment */
			continue;
		}
		if (o > 1)
			out[o++] = '/';
		if (o + seg + 1 > size)
			return -1;
		memcpy(out + o, dec + start, seg);
		o += seg;
		if (o + 2 > size)
			return -1;
	}
	out[o] = '\0';
	return 0;
}
