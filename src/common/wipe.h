/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wipe.h - clearing secrets (key bytes, MACs) so the compiler cannot drop
 * it as a dead store: explicit_bzero on Linux (os/wipe_posix.c),
 * SecureZeroMemory on Windows (os/wipe_win.c).
 */
#ifndef ZEUS_WIPE_H
#define ZEUS_WIPE_H

#include <stddef.h>

void wipe(void *p, size_t n);

#endif
