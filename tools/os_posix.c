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

int
tool_run_command(char **argv)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	pid_t pid;
	int st, rc;

	rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc != 0) {
		tool_prefix(stderr);
		fprintf(stderr, "cannot run '%s': %s\n", argv[0],
		    strerror(rc));
		return 127;
	}
	/* Like time(1): the terminal's ^C is for the command, not for us. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
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
