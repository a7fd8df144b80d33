/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dynlib.h - loading a shared library at run time and finding its symbols
 * (the NVML driver library or its simulator). os/dynlib_posix.c is dlopen
 * and dlsym; os/dynlib_win.c is LoadLibraryExA and GetProcAddress. meson
 * picks one by the host system (src/os/meson.build, meson.build).
 */
#ifndef ZEUS_DYNLIB_H
#define ZEUS_DYNLIB_H

#include <stdbool.h>

struct dynlib;

/*
 * Loads `name` (a file name searched the platform's way, or a path). With
 * `now`, every symbol is bound at load (RTLD_NOW; Windows always does).
 * NULL on failure; dynlib_error() then says why.
 */
struct dynlib *dynlib_open(const char *name, bool now);
/* The address of `sym`, NULL when the library does not export it. */
void *dynlib_sym(struct dynlib *lib, const char *sym);
void dynlib_close(struct dynlib *lib);
/* Why the last dynlib_open of this thread failed ("?" if unknown). */
const char *dynlib_error(void);

#endif
