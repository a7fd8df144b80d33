/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service_win.h - `zeusd.exe serve` under the Service Control Manager.
 * When the SCM started the process, serving runs as the service's main
 * (StartServiceCtrlDispatcher), its status reported as the SCM expects
 * (START_PENDING, RUNNING, STOP_PENDING, STOPPED with the exit status);
 * the stop and shutdown controls stop zeusd as Ctrl-C does
 * (console_service_stop). Started from a console, serving runs as before.
 */
#ifndef ZEUS_SERVICE_WIN_H
#define ZEUS_SERVICE_WIN_H

/*
 * Runs serve(argc, argv) as the service when the SCM started this
 * process, and returns its status once the service stopped; -1 when the
 * SCM did not start it (then the caller serves from the console).
 * serve's command line is the process's own (the service's binary path),
 * not the service's start parameters.
 */
int service_run(int (*serve)(int argc, char **argv), int argc, char **argv);

/* Serving has started: RUNNING (nothing outside a service). */
void service_running(void);

/* Stopping: STOP_PENDING, with a wait hint (nothing outside a service). */
void service_stopping(void);

#endif
