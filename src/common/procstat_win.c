/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat_win.c - procstat.h on Windows, for /metrics: the process's
 * creation time and CPU time (GetProcessTimes), its working set as rss
 * (K32GetProcessMemoryInfo), its address space in use as vsize, and
 * its open handles as open descriptors (GetProcessHandleCount). Windows
 * has no per-process descriptor limit, so max_fds is never set.
 */
#include "common/procstat.h"

#include <string.h>
#include <windows.h>
#include <psapi.h>

/* 100 ns ticks from 1601-01-01 to 1970-01-01 */
#define PROCSTAT_EPOCH_DIFF 116444736000000000ull

static uint64_t
procstat_ticks(FILETIME ft)
{
	return ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
}

/*
 * Virtual size: the process's user address space in use (total less
 * available, as GlobalMemoryStatusEx reports them for the calling
 * process); the commit charge when that cannot be read.
 */
static uint64_t
procstat_vsize(uint64_t commit)
{
	MEMORYSTATUSEX ms = { .dwLength = sizeof(ms) };

	if (!GlobalMemoryStatusEx(&ms) ||
	    ms.ullAvailVirtual > ms.ullTotalVirtual)
		return commit;
	return ms.ullTotalVirtual - ms.ullAvailVirtual;
}

void
procstat_self(struct procstat *out)
{
	HANDLE self = GetCurrentProcess();
	FILETIME created, exited, kernel, user;
	PROCESS_MEMORY_COUNTERS_EX mem;
	DWORD handles;

	memset(out, 0, sizeof(*out));
	memset(&mem, 0, sizeof(mem));
	if (GetProcessTimes(self, &created, &exited, &kernel, &user) &&
	    K32GetProcessMemoryInfo(self, (PROCESS_MEMORY_COUNTERS *)&mem,
	    sizeof(mem)) && procstat_ticks(created) >= PROCSTAT_EPOCH_DIFF) {
		out->start_ms = (procstat_ticks(created) -
		    PROCSTAT_EPOCH_DIFF) / 10000;
		out->cpu_ms = (procstat_ticks(kernel) + procstat_ticks(user)) /
		    10000;
		out->rss_bytes = mem.WorkingSetSize;
		/* the address space in use, not the commit charge */
		out->vsize_bytes = procstat_vsize(mem.PrivateUsage);
		out->ok |= PROCSTAT_STAT;
	}
	if (GetProcessHandleCount(self, &handles)) {
		out->open_fds = handles;
		out->ok |= PROCSTAT_FDS;
	}
}

int
procstat_keep(void)
{
	return 0;		/* nothing to open ahead: no /proc here */
}

int
procstat_count_fds(pid_t pid, uint64_t *out)
{
	HANDLE h = pid == 0 ? GetCurrentProcess() :
	    OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
	DWORD n;
	BOOL ok;

	if (h == NULL)
		return -1;
	ok = GetProcessHandleCount(h, &n);
	if (pid != 0)
		CloseHandle(h);
	if (!ok)
		return -1;
	*out = n;
	return 0;
}

int
procstat_start_ticks(pid_t pid, uint64_t *out)
{
	HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE,
	    (DWORD)pid);
	FILETIME created, exited, kernel, user;
	BOOL ok;

	if (h == NULL)
		return -1;
	ok = GetProcessTimes(h, &created, &exited, &kernel, &user);
	CloseHandle(h);
	if (!ok)
		return -1;
	/* its creation time, in 100 ns since 1601: told apart as Linux's */
	*out = (uint64_t)created.dwHighDateTime << 32 | created.dwLowDateTime;
	return 0;
}
