/* SPDX-License-Identifier: Apache-2.0 */
/* wipe_posix.c - wipe.h with glibc's explicit_bzero. */
#include "common/wipe.h"

#include <string.h>

void
wipe(void *p, size_t n)
{
	explicit_bzero(p, n);
}
