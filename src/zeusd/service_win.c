/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service_win.c - service_win.h. StartServiceCtrlDispatcherW connects to
 * the SCM when it started this process, and fails with
 * ERROR_FAILED_SERVICE_CONTROLLER_CONNECT when it did not, but only after
 * a wait (about 10 s under wine), so it is called only when the parent
 * process is the SCM's, services.exe. The service's main runs on the dispatcher's thread; the main
 * thread waits in the dispatcher until the service reports STOPPED.
 *
 * The control handler only records a stop or shutdown (console_win.h's
 * stop event) and reports STOP_PENDING: main_win.c then stops as for
 * Ctrl-C (streams end, queued writes answered) and the service reports
 * STOPPED with zeusd's exit status (ERROR_SERVICE_SPECIFIC_ERROR and the
 * status when it is not 0).
 */
#include "zeusd/service_win.h"

#include <stdbool.h>
#include <windows.h>
#include <tlhelp32.h>

#include "zeusd/console_win.h"

#define SERVICE_START_HINT_MS 30000	/* devices may take a while */
#define SERVICE_STOP_HINT_MS 10000	/* the grace and stuck waits, 4 s */

static SERVICE_STATUS_HANDLE service_handle;
static SERVICE_STATUS service_status;
static CRITICAL_SECTION service_lock;
static int (*service_serve)(int, char **);
static int service_argc, service_rc;
static char **service_argv;

static void
service_report(DWORD state, DWORD exit_code, DWORD hint_ms)
{
	if (service_handle == NULL)
		return;
	EnterCriticalSection(&service_lock);
	service_status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
	service_status.dwCurrentState = state;
	service_status.dwControlsAccepted = state == SERVICE_RUNNING ?
	    SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN : 0;
	service_status.dwWin32ExitCode = exit_code != 0 ?
	    ERROR_SERVICE_SPECIFIC_ERROR : NO_ERROR;
	service_status.dwServiceSpecificExitCode = exit_code;
	service_status.dwWaitHint = hint_ms;
	service_status.dwCheckPoint = state == SERVICE_RUNNING ||
	    state == SERVICE_STOPPED ? 0 : service_status.dwCheckPoint + 1;
	(void)SetServiceStatus(service_handle, &service_status);
	LeaveCriticalSection(&service_lock);
}

static DWORD WINAPI
service_control(DWORD control, DWORD type, LPVOID data, LPVOID ctx)
{
	(void)type;
	(void)data;
	(void)ctx;
	switch (control) {
	case SERVICE_CONTROL_STOP:
	case SERVICE_CONTROL_SHUTDOWN:
		service_stopping();
		console_service_stop(control == SERVICE_CONTROL_SHUTDOWN);
		return NO_ERROR;
	case SERVICE_CONTROL_INTERROGATE:
		return NO_ERROR;
	default:
		return ERROR_CALL_NOT_IMPLEMENTED;
	}
}

static void WINAPI
service_main(DWORD argc, LPWSTR *argv)
{
	(void)argc;
	(void)argv;
	service_handle = RegisterServiceCtrlHandlerExW(L"", service_control,
	    NULL);
	if (service_handle == NULL) {
		service_rc = 1;
		return;
	}
	service_report(SERVICE_START_PENDING, 0, SERVICE_START_HINT_MS);
	service_rc = service_serve(service_argc, service_argv);
	service_report(SERVICE_STOPPED, (DWORD)service_rc, 0);
}

/* Whether the parent process is services.exe (the SCM starts services). */
static bool
service_parent_is_scm(void)
{
	PROCESSENTRY32W pe = { .dwSize = sizeof(pe) };
	DWORD self = GetCurrentProcessId(), parent = 0;
	bool scm = false;
	HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);

	if (snap == INVALID_HANDLE_VALUE)
		return false;
	for (BOOL ok = Process32FirstW(snap, &pe); ok;
	    ok = Process32NextW(snap, &pe))
		if (pe.th32ProcessID == self)
			parent = pe.th32ParentProcessID;
	pe.dwSize = sizeof(pe);
	for (BOOL ok = parent != 0 && Process32FirstW(snap, &pe); ok;
	    ok = Process32NextW(snap, &pe))
		if (pe.th32ProcessID == parent)
			scm = _wcsicmp(pe.szExeFile, L"services.exe") == 0;
	CloseHandle(snap);
	return scm;
}

int
service_run(int (*serve)(int argc, char **argv), int argc, char **argv)
{
	static wchar_t name[] = L"";
	SERVICE_TABLE_ENTRYW table[] = {
		{ name, service_main },
		{ NULL, NULL },
	};

	if (!service_parent_is_scm())
		return -1;	/* a console run */
	InitializeCriticalSection(&service_lock);
	service_serve = serve;
	service_argc = argc;
	service_argv = argv;
	if (!StartServiceCtrlDispatcherW(table))
		return -1;	/* not started by the SCM: a console run */
	return service_rc;
}

void
service_running(void)
{
	service_report(SERVICE_RUNNING, 0, 0);
}

void
service_stopping(void)
{
	service_report(SERVICE_STOP_PENDING, 0, SERVICE_STOP_HINT_MS);
}
