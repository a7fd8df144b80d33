/* SPDX-License-Identifier: Apache-2.0 */
/* wipe_win.c - wipe.h with Windows' SecureZeroMemory. */
#include "common/wipe.h"

#include <windows.h>

void
wipe(void *p, size_t n)
{
	SecureZeroMemory(p, n);
}
