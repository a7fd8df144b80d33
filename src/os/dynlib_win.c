/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dynlib_win.c - dynlib.h with LoadLibraryExA (Windows). A bare name is
 * searched the safe way (the application's folder, then System32: no
 * current directory, no PATH); a name with a slash or backslash is loaded
 * from there, with that folder searched for its own dependencies.
 */
#include "common/dynlib.h"

#include <stdio.h>
#include <string.h>
#include <windows.h>

static _Thread_local char dynlib_why[256];

struct dynlib *
dynlib_open(const char *name, bool now)
{
	DWORD flags = LOAD_LIBRARY_SEARCH_DEFAULT_DIRS;
	HMODULE h;
	DWORD code;

	(void)now;
	if (strchr(name, '/') != NULL || strchr(name, '\\') != NULL)
		flags = LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR |
		    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS;
	if ((h = LoadLibraryExA(name, NULL, flags)) != NULL)
		return (struct dynlib *)h;
	code = GetLastError();
	if (FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM |
	    FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, dynlib_why,
	    sizeof(dynlib_why), NULL) == 0)
		snprintf(dynlib_why, sizeof(dynlib_why), "error %lu",
		    (unsigned long)code);
	dynlib_why[strcspn(dynlib_why, "\r\n")] = '\0';
	return NULL;
}

void *
dynlib_sym(struct dynlib *lib, const char *sym)
{
	FARPROC p = GetProcAddress((HMODULE)lib, sym);
	void *v;

	_Static_assert(sizeof(p) == sizeof(v), "FARPROC must fit in void *");
	memcpy(&v, &p, sizeof(v));
	return v;
}

void
dynlib_close(struct dynlib *lib)
{
	FreeLibrary((HMODULE)lib);
}

const char *
dynlib_error(void)
{
	return dynlib_why[0] != '\0' ? dynlib_why : "?";
}
