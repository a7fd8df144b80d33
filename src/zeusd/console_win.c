/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console_win.c - console_win.h with SetConsoleCtrlHandler. The handler
 * runs on a thread the system creates; it only records the event and sets
 * an event object that console_wait (main_win.c's thread) waits on. For
 * the events after which Windows terminates the process as soon as the
 * handler returns (close, logoff, shutdown), it then waits, at most
 * CONSOLE_CLOSE_WAIT_MS, for main_win.c to finish stopping (console_done),
 * so streams are ended and queued writes answered before the process goes.
 */
#include "zeusd/console_win.h"

#include <limits.h>
#include <stdatomic.h>
#include <windows.h>

/* Windows allows a close handler about 5 s (SPI_GETHUNGAPPTIMEOUT). */
#define CONSOLE_CLOSE_WAIT_MS 4500
/* events of our own, beside the console's CTRL_* */
#define CONSOLE_SERVICE_STOP 0x1000u
#define CONSOLE_SERVICE_SHUTDOWN 0x1001u

static HANDLE console_stop, console_stopped;
static atomic_uint console_event = UINT_MAX;

static bool
console_ends_process(unsigned type)
{
	return type == CTRL_CLOSE_EVENT || type == CTRL_LOGOFF_EVENT ||
	    type == CTRL_SHUTDOWN_EVENT;
}

static BOOL WINAPI
console_handler(DWORD type)
{
	unsigned none = UINT_MAX;

	switch (type) {
	case CTRL_C_EVENT:
	case CTRL_BREAK_EVENT:
	case CTRL_CLOSE_EVENT:
	case CTRL_LOGOFF_EVENT:
	case CTRL_SHUTDOWN_EVENT:
		break;
	default:
		return FALSE;
	}
	(void)atomic_compare_exchange_strong(&console_event, &none,
	    (unsigned)type);
	SetEvent(console_stop);
	if (console_ends_process(type))
		(void)WaitForSingleObject(console_stopped,
		    CONSOLE_CLOSE_WAIT_MS);
	return TRUE;
}

int
console_arm(struct zerr *err)
{
	console_stop = CreateEventW(NULL, TRUE, FALSE, NULL);
	console_stopped = CreateEventW(NULL, TRUE, FALSE, NULL);
	if (console_stop == NULL || console_stopped == NULL)
		return zerr_set(err, ZERR_INTERNAL, "cannot create the stop "
		    "events (error %lu)", (unsigned long)GetLastError());
	if (!SetConsoleCtrlHandler(console_handler, TRUE))
		return zerr_set(err, ZERR_INTERNAL, "cannot install the console "
		    "control handler (error %lu)",
		    (unsigned long)GetLastError());
	return 0;
}

void
console_service_stop(bool shutdown)
{
	unsigned none = UINT_MAX;

	(void)atomic_compare_exchange_strong(&console_event, &none,
	    shutdown ? CONSOLE_SERVICE_SHUTDOWN : CONSOLE_SERVICE_STOP);
	SetEvent(console_stop);
}

const char *
console_wait(void)
{
	(void)WaitForSingleObject(console_stop, INFINITE);
	switch (atomic_load(&console_event)) {
	case CTRL_C_EVENT:
		return "ctrl_c";
	case CTRL_BREAK_EVENT:
		return "ctrl_break";
	case CTRL_CLOSE_EVENT:
		return "console_close";
	case CTRL_LOGOFF_EVENT:
		return "logoff";
	case CONSOLE_SERVICE_STOP:
		return "service_stop";
	case CONSOLE_SERVICE_SHUTDOWN:
		return "service_shutdown";
	default:
		return "shutdown";
	}
}

bool
console_deadline(void)
{
	return console_ends_process(atomic_load(&console_event));
}

void
console_done(void)
{
	if (console_stopped != NULL)
		SetEvent(console_stopped);
}
