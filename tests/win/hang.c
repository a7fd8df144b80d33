/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang.c - for the Job-object test (test_windows.py): with "child", starts
 * another copy of itself (which hangs too) and writes both pids to the file
 * named by its second argument, then hangs. With "spew N", writes N bytes
 * to stdout and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

int
main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "spew") == 0) {
		long n = atol(argv[2]);

		for (long i = 0; i < n; i++)
			putchar('x');
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "child") == 0) {
		STARTUPINFOA si = { .cb = sizeof(si) };
		PROCESS_INFORMATION pi;
		char self[MAX_PATH], cmd[2 * MAX_PATH];
		FILE *f;

		GetModuleFileNameA(NULL, self, sizeof(self));
		snprintf(cmd, sizeof(cmd), "\"%s\" sleep", self);
		if (!CreateProcessA(NULL, cmd, NULL, NULL, FALSE, 0, NULL,
		    NULL, &si, &pi))
			return 3;
		if ((f = fopen(argv[2], "w")) == NULL)
			return 4;
		fprintf(f, "%lu %lu\n", (unsigned long)GetCurrentProcessId(),
		    (unsigned long)pi.dwProcessId);
		fclose(f);
	}
	Sleep(INFINITE);
	return 0;
}
