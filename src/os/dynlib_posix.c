/* SPDX-License-Identifier: Apache-2.0 */
/* dynlib_posix.c - dynlib.h with dlopen (Linux). */
#include "common/dynlib.h"

#include <dlfcn.h>
#include <stddef.h>

struct dynlib *
dynlib_open(const char *name, bool now)
{
	return dlopen(name, (now ? RTLD_NOW : RTLD_LAZY) | RTLD_LOCAL);
}

void *
dynlib_sym(struct dynlib *lib, const char *sym)
{
	dlerror();
	return dlsym(lib, sym);
}

void
dynlib_close(struct dynlib *lib)
{
	dlclose(lib);
}

const char *
dynlib_error(void)
{
	const char *why = dlerror();

	return why != NULL ? why : "?";
}
