/* SPDX-License-Identifier: Apache-2.0 */
/* lease_label.c - checks a lease label (lease_label.h). */
#include "common/lease_label.h"

#include <stdbool.h>
#include <string.h>

static bool
lease_label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' && strchr("._:@+/-", c));
}

const char *
lease_label_invalid(const char *s)
{
	size_t n;

	if (s == NULL || s[0] == '\0')
		return "a lease label may not be empty";
	for (n = 0; s[n] != '\0'; n++) {
		if (n == LEASE_LABEL_MAX)
			return "a lease label is at most 64 bytes";
		if (!lease_label_char(s[n]))
			return "a lease label may only contain letters, digits "
			    "and . _ : @ + / -";
	}
	return NULL;
}
