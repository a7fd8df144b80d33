/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn_probe.c - runs one command through the overrides' spawn.h as built
 * for Windows (src/overrides/spawn_win.c) and prints the result, for
 * tests/integration/test_windows.py under wine:
 *
 *   spawn_probe.exe <timeout_ms> <program> [args...]
 *
 * Output: status=<exited|signaled|timed_out|exec_failed> code=<n>
 *         ms=<duration> leftovers=<0|1> out_total=<n> err_total=<n>
 *         truncated=<0|1>  describe="<spawn_describe>"
 * then the captured stdout after a line "--stdout--".
 */
#include <stdio.h>
#include <stdlib.h>

#include "overrides/spawn.h"

int
main(int argc, char **argv)
{
	static const char *names[] = { "exited", "signaled", "timed_out",
	    "exec_failed" };
	struct spawn_result res;
	struct zerr err = { 0 };
	unsigned t;
	char d[200];

	if (argc < 3) {
		fprintf(stderr, "usage: spawn_probe <timeout_ms> <program> "
		    "[args...]\n");
		return 2;
	}
	t = (unsigned)strtoul(argv[1], NULL, 10);
	if (spawn_run(argv + 2, t, &res, &err) != 0) {
		printf("error=\"%s\"\n", err.msg);
		spawn_result_free(&res);
		return 1;
	}
	printf("status=%s code=%d ms=%llu leftovers=%d out_total=%llu "
	    "err_total=%llu truncated=%d describe=\"%s\"\n",
	    names[res.status], res.code, (unsigned long long)res.duration_ms,
	    (int)res.killed_leftovers, (unsigned long long)res.out.total,
	    (unsigned long long)res.err.total, (int)res.out.truncated,
	    spawn_describe(&res, t, d, sizeof(d)));
	printf("--stdout--\n");
	fwrite(res.out.data, 1, res.out.len, stdout);
	spawn_result_free(&res);
	return 0;
}
