/* SPDX-License-Identifier: Apache-2.0 */
/*
 * signals.c - the one signal loop of zeusd's processes (signals.h).
 */
#include "zeusd/signals.h"

#include <pthread.h>

#include "common/log.h"

void
signals_block(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGHUP);
	sigaddset(sigs, SIGUSR1);
	sigaddset(sigs, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int
signals_loop(const sigset_t *sigs, const struct signals_handlers *h)
{
	int sig;

	for (;;) {
		if (sigwait(sigs, &sig) != 0)
			continue;
		switch (sig) {
		case SIGCHLD:
			if (h->child != NULL && h->child(h->ctx))
				return sig;
			break;
		case SIGHUP:
			if (h->reload != NULL)
				h->reload(h->ctx);
			else
				zlog(ZLOG_INFO, "signal_ignored", "signal=SIGHUP "
				    "msg=\"%s\"", h->reload_elsewhere != NULL ?
				    h->reload_elsewhere : "no reload here");
			break;
		case SIGUSR1:
		case SIGUSR2:
			if (sig == SIGUSR2 && h->usr2_restarts)
				return sig;	/* a restart: the caller's stop */
			zlog(ZLOG_INFO, "signal_ignored", "signal=%s",
			    sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
			break;
		default:
			return sig;	/* SIGTERM, SIGINT */
		}
	}
}
