/* SPDX-License-Identifier: Apache-2.0 */
/* os_posix.c - the zeus tool's platform part on Linux (tool.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

extern char **environ;

/* The command while it runs (0 before), and a stop asked of us before it
 * existed: for tool_pass_on, a signal handler. */
static volatile sig_atomic_t tool_child, tool_early;

/*
 * SIGTERM or SIGHUP for zeus (a scheduler cancelling the job, a closed
 * terminal) goes to the command: zeus outlives it, so its settings are
 * given back and its energy reported, rather than zeus dying first and
 * leaving the command running unmeasured and the GPU as it set it.
 */
static void
tool_pass_on(int sig)
{
	int saved = errno;

	if (tool_child > 0)
		(void)kill((pid_t)tool_child, sig);
	else
		tool_early = sig;
	errno = saved;
}

int
tool_run_command(char **argv)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	struct sigaction pass = { .sa_handler = tool_pass_on }, old_term,
	    old_hup;
	pid_t pid;
	int st, rc;

	sigemptyset(&pass.sa_mask);
	tool_child = 0;
	tool_early = 0;
	sigaction(SIGTERM, &pass, &old_term);
	sigaction(SIGHUP, &pass, &old_hup);
	/* the child starts with both at their defaults (exec) */
	rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc != 0) {
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGHUP, &old_hup, NULL);
		tool_prefix(stderr);
		fprintf(stderr, "cannot run '%s': %s\n", argv[0],
		    strerror(rc));
		return 127;
	}
	tool_child = pid;
	if (tool_early != 0)
		(void)kill(pid, tool_early);
	/* Like time(1): the terminal's ^C is for the command, not for us. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	tool_child = 0;		/* reaped: its number may be reused */
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

static sigset_t stop_set;

void
tool_stop_prepare(void)
{
	/* Block before any thread starts so only sigwait sees them. */
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGINT);
	sigaddset(&stop_set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
}

void
tool_stop_wait(void)
{
	int sig;

	while (sigwait(&stop_set, &sig) != 0)
		;
}

uint32_t
tool_uid(void)
{
	return (uint32_t)geteuid();
}

bool
tool_is_root(void)
{
	return geteuid() == 0;
}

int64_t
tool_pid(void)
{
	return (int64_t)getpid();
}
