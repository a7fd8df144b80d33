/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn_win.c - spawn.h on Windows (the Linux build's is spawn.c).
 *
 * The command runs with CreateProcessA, never through cmd.exe (a program
 * without a folder is searched the way CreateProcess does, so overrides
 * should name programs by full path): its command line is built from argv by the rules the C runtime
 * (and CommandLineToArgvW) undo, so a hostile query value stays one
 * argument. It runs in a Job object of its own with
 * JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, created suspended and assigned to
 * the job before its first instruction, so everything it starts is in the
 * job too: at the timeout, after the grace period when leftovers hold the
 * pipes, and if zeusd itself dies (the job handle closes), the whole tree
 * is killed. stdin is NUL; stdout and stderr are pipes read by one thread
 * each, captured up to SPAWN_CAPTURE_MAX bytes, the rest read and dropped.
 * Only the pipe ends the child needs are inheritable (an explicit
 * PROC_THREAD_ATTRIBUTE_HANDLE_LIST), so it gets none of zeusd's handles.
 * The environment is exactly PATH=<System32;Windows> and LANG=C; the
 * working directory is the Windows folder.
 *
 * Not here yet (docs/windows.md): the reaper registry (reaper.h) that
 * zeusd's shutdown uses; on Windows the job handles would be that.
 */
#include "spawn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "common/err.h"

/* Appends arg to the command line in b, quoted as the C runtime parses. */
static int
cmdline_add(char **b, size_t *len, size_t *cap, const char *arg)
{
	size_t need = *len + 2 * strlen(arg) + 4;
	bool quote = arg[0] == '\0' || strpbrk(arg, " \t\n\v\"") != NULL;
	char *p;

	if (need > 32767)
		return -1;
	if (need > *cap) {
		if ((p = realloc(*b, need * 2)) == NULL)
			return -1;
		*b = p;
		*cap = need * 2;
	}
	p = *b + *len;
	if (*len > 0)
		*p++ = ' ';
	if (!quote) {
		memcpy(p, arg, strlen(arg));
		p += strlen(arg);
	} else {
		*p++ = '"';
		for (const char *s = arg;; s++) {
			size_t bs = 0;

			while (*s == '\\') {
				bs++;
				s++;
			}
			if (*s == '\0') {
				while (bs-- > 0) {
					*p++ = '\\';
					*p++ = '\\';
				}
				break;
			}
			if (*s == '"') {
				while (bs-- > 0) {
					*p++ = '\\';
					*p++ = '\\';
				}
				*p++ = '\\';
			} else {
				while (bs-- > 0)
					*p++ = '\\';
			}
			*p++ = *s;
		}
		*p++ = '"';
	}
	*p = '\0';
	*len = (size_t)(p - *b);
	return 0;
}

struct reader {
	HANDLE pipe;
	struct spawn_output *out;
	HANDLE thread;
};

static DWORD WINAPI
reader_main(void *arg)
{
	struct reader *r = arg;
	char buf[4096];
	DWORD n;

	while (ReadFile(r->pipe, buf, sizeof(buf), &n, NULL) && n > 0) {
		size_t keep = 0;

		if (r->out->len < SPAWN_CAPTURE_MAX) {
			keep = SPAWN_CAPTURE_MAX - r->out->len;
			if (keep > n)
				keep = n;
			memcpy(r->out->data + r->out->len, buf, keep);
			r->out->len += keep;
			r->out->data[r->out->len] = '\0';
		}
		r->out->total += n;
	}
	r->out->truncated = r->out->total > r->out->len;
	return 0;
}

static int
win_fail(struct zerr *err, const char *what)
{
	return zerr_set(err, ZERR_INTERNAL, "%s failed: error %lu", what,
	    (unsigned long)GetLastError());
}

int
spawn_run(char *const argv[], unsigned timeout_ms, struct spawn_result *res,
    struct zerr *err)
{
	SECURITY_ATTRIBUTES sa = { .nLength = sizeof(sa),
	    .bInheritHandle = TRUE };
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION lim = { 0 };
	STARTUPINFOEXA si = { .StartupInfo.cb = sizeof(si) };
	PROCESS_INFORMATION pi = { 0 };
	struct reader rd[2] = { 0 };
	HANDLE out_r = NULL, out_w = NULL, err_r = NULL, err_w = NULL;
	HANDLE nul = INVALID_HANDLE_VALUE, job = NULL, inherit[3];
	char sysdir[MAX_PATH], windir[MAX_PATH], env[2 * MAX_PATH + 32];
	char *cmd = NULL;
	size_t len = 0, cap = 0, attr_size = 0;
	ULONGLONG t0 = GetTickCount64();
	DWORD wait, code = 0;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if ((res->out.data = calloc(1, SPAWN_CAPTURE_MAX + 1)) == NULL ||
	    (res->err.data = calloc(1, SPAWN_CAPTURE_MAX + 1)) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	for (char *const *a = argv; *a != NULL; a++)
		if (cmdline_add(&cmd, &len, &cap, *a) != 0) {
			res->status = SPAWN_EXEC_FAILED;
			res->code = E2BIG;
			free(cmd);
			return 0;
		}
	GetSystemDirectoryA(sysdir, sizeof(sysdir));
	GetWindowsDirectoryA(windir, sizeof(windir));
	/* a double-NUL-terminated block: PATH=...\0LANG=C\0\0 */
	len = (size_t)snprintf(env, sizeof(env) - 8, "PATH=%s;%s", sysdir,
	    windir);
	memcpy(env + len + 1, "LANG=C\0", 8);

	if (!CreatePipe(&out_r, &out_w, &sa, 0) ||
	    !CreatePipe(&err_r, &err_w, &sa, 0)) {
		win_fail(err, "CreatePipe");
		goto out;
	}
	SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
	SetHandleInformation(err_r, HANDLE_FLAG_INHERIT, 0);
	nul = CreateFileA("NUL", GENERIC_READ, FILE_SHARE_READ |
	    FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, NULL);
	if (nul == INVALID_HANDLE_VALUE) {
		win_fail(err, "opening NUL");
		goto out;
	}
	if ((job = CreateJobObjectA(NULL, NULL)) == NULL) {
		win_fail(err, "CreateJobObject");
		goto out;
	}
	lim.BasicLimitInformation.LimitFlags =
	    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
	SetInformationJobObject(job, JobObjectExtendedLimitInformation, &lim,
	    sizeof(lim));

	inherit[0] = nul;
	inherit[1] = out_w;
	inherit[2] = err_w;
	InitializeProcThreadAttributeList(NULL, 1, 0, &attr_size);
	if ((si.lpAttributeList = malloc(attr_size)) == NULL ||
	    !InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0,
	    &attr_size) ||
	    !UpdateProcThreadAttribute(si.lpAttributeList, 0,
	    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit, sizeof(inherit),
	    NULL, NULL)) {
		win_fail(err, "the handle list");
		goto out;
	}
	si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
	si.StartupInfo.hStdInput = nul;
	si.StartupInfo.hStdOutput = out_w;
	si.StartupInfo.hStdError = err_w;
	if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE,
	    CREATE_SUSPENDED | CREATE_NO_WINDOW |
	    EXTENDED_STARTUPINFO_PRESENT, env, windir, &si.StartupInfo,
	    &pi)) {
		DWORD e = GetLastError();

		res->status = SPAWN_EXEC_FAILED;
		res->code = e == ERROR_FILE_NOT_FOUND ||
		    e == ERROR_PATH_NOT_FOUND ? ENOENT :
		    e == ERROR_ACCESS_DENIED ? EACCES : ENOEXEC;
		rc = 0;
		goto out;
	}
	if (!AssignProcessToJobObject(job, pi.hProcess)) {
		TerminateProcess(pi.hProcess, 1);
		win_fail(err, "AssignProcessToJobObject");
		goto out;
	}
	ResumeThread(pi.hThread);
	/* only the child holds the write ends now: EOF when it is done */
	CloseHandle(out_w);
	CloseHandle(err_w);
	out_w = err_w = NULL;
	rd[0] = (struct reader){ out_r, &res->out, NULL };
	rd[1] = (struct reader){ err_r, &res->err, NULL };
	for (int i = 0; i < 2; i++)
		rd[i].thread = CreateThread(NULL, 0, reader_main, &rd[i], 0,
		    NULL);

	wait = WaitForSingleObject(pi.hProcess,
	    timeout_ms ? timeout_ms : INFINITE);
	if (wait == WAIT_TIMEOUT) {
		TerminateJobObject(job, 1);
		WaitForSingleObject(pi.hProcess, INFINITE);
		res->status = SPAWN_TIMED_OUT;
		res->code = 9;
	} else {
		GetExitCodeProcess(pi.hProcess, &code);
		res->status = SPAWN_EXITED;
		res->code = (int)code;
	}
	/* leftovers holding the pipes get the grace period, then the job */
	for (int i = 0; i < 2; i++)
		if (rd[i].thread != NULL &&
		    WaitForSingleObject(rd[i].thread, SPAWN_GRACE_MS) ==
		    WAIT_TIMEOUT) {
			TerminateJobObject(job, 1);
			res->killed_leftovers = true;
		}
	for (int i = 0; i < 2; i++)
		if (rd[i].thread != NULL) {
			WaitForSingleObject(rd[i].thread, INFINITE);
			CloseHandle(rd[i].thread);
		}
	res->duration_ms = GetTickCount64() - t0;
	rc = 0;
out:
	if (pi.hProcess != NULL) {
		CloseHandle(pi.hProcess);
		CloseHandle(pi.hThread);
	}
	if (job != NULL)
		CloseHandle(job);	/* kills whatever is left in it */
	if (si.lpAttributeList != NULL) {
		DeleteProcThreadAttributeList(si.lpAttributeList);
		free(si.lpAttributeList);
	}
	if (nul != INVALID_HANDLE_VALUE)
		CloseHandle(nul);
	if (out_r != NULL)
		CloseHandle(out_r);
	if (out_w != NULL)
		CloseHandle(out_w);
	if (err_r != NULL)
		CloseHandle(err_r);
	if (err_w != NULL)
		CloseHandle(err_w);
	free(cmd);
	return rc;
}

void
spawn_result_free(struct spawn_result *res)
{
	free(res->out.data);
	free(res->err.data);
	res->out.data = res->err.data = NULL;
}

const char *
spawn_describe(const struct spawn_result *res, unsigned timeout_ms,
    char *buf, size_t size)
{
	switch (res->status) {
	case SPAWN_EXITED:
		snprintf(buf, size, "exit code %d", res->code);
		break;
	case SPAWN_SIGNALED:
		snprintf(buf, size, "killed (code %d)", res->code);
		break;
	case SPAWN_TIMED_OUT:
		if (timeout_ms % 1000 == 0)
			snprintf(buf, size, "timed out after %u s",
			    timeout_ms / 1000);
		else
			snprintf(buf, size, "timed out after %u ms",
			    timeout_ms);
		break;
	default:
		snprintf(buf, size, "could not be executed: %s",
		    strerror(res->code));
		break;
	}
	return buf;
}
