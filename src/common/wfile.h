/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wfile.h - reading a small configuration file whole on Windows
 * (os/wfile_win.c; the Windows build only): the signing key and the command
 * overrides. The Linux build reads them through fileio.h and pathwalk.h.
 */
#ifndef ZEUS_WFILE_H
#define ZEUS_WFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/*
 * Reads the regular file at the UTF-8 `path` whole into a new buffer
 * (NUL-terminated, the caller frees it; *len bytes). More than `max`
 * bytes, none, or not a regular file is an error naming `what` and the
 * path. With `trusted`, the file is also refused when its DACL lets anyone
 * but SYSTEM, the Administrators group, TrustedInstaller or zeusd's own
 * account write it, or when it has no DACL at all (everyone may).
 */
int wfile_read(const char *path, const char *what, size_t max, bool trusted,
    char **buf, size_t *len, struct zerr *err);

/* The system's message for an error code, without its line end. */
const char *wfile_error(unsigned long code, char *buf, size_t size);

#endif
