/* SPDX-License-Identifier: Apache-2.0 */
/*
 * signals.h - the one signal loop of zeusd's processes.
 *
 * Every signal zeusd handles is blocked before any thread starts
 * (signals_block) and taken by sigwait(2) on the main thread: SIGTERM and
 * SIGINT stop the process; SIGHUP reloads (or, where the other process
 * reloads, is logged and ignored); SIGCHLD (the device process: its
 * network process died, or an override command ended) asks the wiring
 * whether to stop; SIGUSR2 stops a process that says so (usr2_restarts:
 * the device process and, sent by it, the network process; a restart that
 * hands GPU leases over to the next zeusd, docs/operations.md, "Signals")
 * and is otherwise logged and ignored, as SIGUSR1 always is; SIGPIPE is
 * ignored, so none of them can kill a daemon by accident.
 *
 * The device process, the network process and the one-process daemon run
 * this same loop with their own handlers (device_proc.c, network_proc.c,
 * main.c).
 */
#ifndef ZEUS_SIGNALS_H
#define ZEUS_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

struct signals_handlers {
	/* SIGHUP; NULL: logged as ignored with `reload_elsewhere` */
	void (*reload)(void *ctx);
	const char *reload_elsewhere;
	/* SIGCHLD (only when in the set): true when the process must stop */
	bool (*child)(void *ctx);
	void *ctx;
	/* SIGUSR2 stops the process (a restart); false: logged as ignored */
	bool usr2_restarts;
};

/*
 * Blocks SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 in the calling thread
 * (and so in every thread it starts from then on), ignores SIGPIPE, and
 * sets `sigs` to that set.
 */
void signals_block(sigset_t *sigs);

/*
 * Waits for signals in `sigs` and handles them until one says stop;
 * returns that signal (SIGCHLD when `child` said stop; SIGUSR2 only with
 * `usr2_restarts`).
 */
int signals_loop(const sigset_t *sigs, const struct signals_handlers *h);

#endif
