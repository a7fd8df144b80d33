/* SPDX-License-Identifier: Apache-2.0 */
/*
 * argv_echo.c - prints each argument it was given, hex-encoded, one a line,
 * then exits with the status in ZEUS_ECHO_EXIT (default 0). Under wine,
 * tests/integration/test_windows.py runs it through `zeus.exe measure` to
 * see that a Windows command line built from argv splits back into the
 * same arguments (tools/os_win.c's quoting).
 */
#include <stdio.h>
#include <stdlib.h>

int
main(int argc, char **argv)
{
	const char *e = getenv("ZEUS_ECHO_EXIT");

	for (int i = 1; i < argc; i++) {
		printf("arg=");
		for (const unsigned char *p = (const unsigned char *)argv[i];
		    *p != '\0'; p++)
			printf("%02x", *p);
		printf("\n");
	}
	return e != NULL ? atoi(e) : 0;
}
