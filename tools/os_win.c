/* SPDX-License-Identifier: Apache-2.0 */
/*
 * os_win.c - the zeus tool's platform part on Windows (tool.h).
 *
 * zeus measure's command runs with CreateProcess. Its command line is built
 * by the rules the C runtime's (and CommandLineToArgvW's) parser undoes, so
 * each argv element arrives as one argument whatever spaces, quotes and
 * backslashes it holds. The program is found the way CreateProcess finds it
 * (the tool's folder, the current one, System32, Windows, PATH; ".exe"
 * added). ^C is ignored by zeus while the command runs: the console sends
 * it to both, and the command decides.
 */
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "tool.h"

/* Appends arg to cmd (of size cap) quoted; false when it does not fit. */
static bool
quote_arg(char *cmd, size_t cap, size_t *len, const char *arg)
{
	size_t n = *len;
	bool quote = arg[0] == '\0' || strpbrk(arg, " \t\n\v\"") != NULL;

#define PUT(c) do { if (n + 1 >= cap) return false; cmd[n++] = (c); } while (0)
	if (n > 0)
		PUT(' ');
	if (!quote) {
		for (const char *p = arg; *p != '\0'; p++)
			PUT(*p);
	} else {
		PUT('"');
		for (const char *p = arg;; p++) {
			size_t bs = 0;

			while (*p == '\\') {
				bs++;
				p++;
			}
			if (*p == '\0') {
				/* double them: the closing quote follows */
				for (size_t i = 0; i < 2 * bs; i++)
					PUT('\\');
				break;
			}
			if (*p == '"') {
				for (size_t i = 0; i < 2 * bs + 1; i++)
					PUT('\\');
			} else {
				for (size_t i = 0; i < bs; i++)
					PUT('\\');
			}
			PUT(*p);
		}
		PUT('"');
	}
#undef PUT
	cmd[n] = '\0';
	*len = n;
	return true;
}

int
tool_run_command(char **argv)
{
	STARTUPINFOA si = { .cb = sizeof(si) };
	PROCESS_INFORMATION pi;
	size_t cap = 32768, len = 0;	/* CreateProcess's own limit */
	DWORD code = 1;
	char *cmd;

	if ((cmd = malloc(cap)) == NULL)
		return 127;
	cmd[0] = '\0';
	for (char **a = argv; *a != NULL; a++)
		if (!quote_arg(cmd, cap, &len, *a)) {
			tool_prefix(stderr);
			fprintf(stderr, "cannot run '%s': command line too "
			    "long\n", argv[0]);
			free(cmd);
			return 127;
		}
	if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si,
	    &pi)) {
		DWORD err = GetLastError();

		tool_prefix(stderr);
		fprintf(stderr, "cannot run '%s': %s\n", argv[0],
		    err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND ?
		    "No such file or directory" : "CreateProcess failed");
		free(cmd);
		return 127;
	}
	free(cmd);
	SetConsoleCtrlHandler(NULL, TRUE);
	WaitForSingleObject(pi.hProcess, INFINITE);
	SetConsoleCtrlHandler(NULL, FALSE);
	GetExitCodeProcess(pi.hProcess, &code);
	CloseHandle(pi.hProcess);
	CloseHandle(pi.hThread);
	return (int)(code & 0xff) == (int)code ? (int)code : 1;
}

static HANDLE stop_event;

static BOOL WINAPI
on_ctrl(DWORD type)
{
	switch (type) {
	case CTRL_C_EVENT:
	case CTRL_BREAK_EVENT:
	case CTRL_CLOSE_EVENT:
		SetEvent(stop_event);
		return TRUE;
	default:
		return FALSE;
	}
}

void
tool_stop_prepare(void)
{
	stop_event = CreateEventA(NULL, TRUE, FALSE, NULL);
	SetConsoleCtrlHandler(on_ctrl, TRUE);
}

void
tool_stop_wait(void)
{
	WaitForSingleObject(stop_event, INFINITE);
}

uint32_t
tool_uid(void)
{
	return UINT32_MAX;
}

bool
tool_is_root(void)
{
	return false;
}

int64_t
tool_pid(void)
{
	return (int64_t)GetCurrentProcessId();
}
