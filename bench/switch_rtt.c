/* SPDX-License-Identifier: Apache-2.0 */
/*
 * switch_rtt.c - what one round trip between two processes (and between
 * two threads) costs on this machine: the floor under a read that crosses
 * from zeusd's network process to its device process and back
 * (docs/performance-history.md, "Where a read's time goes").
 *
 *   cc -O2 -pthread -o switch_rtt bench/switch_rtt.c
 *   taskset -c 0 ./switch_rtt [ROUNDS]     (both ends on one CPU)
 *
 * One byte goes over a SOCK_SEQPACKET socket pair and comes back, ROUNDS
 * times (default 100,000); also one plain system call (getppid), timed
 * alone, for scale. Prints microseconds per round trip.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sv[2];
static long rounds = 100000;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The far end: answers every byte with itself. */
static void *
echo(void *arg)
{
	char c;

	(void)arg;
	for (long i = 0; i < rounds; i++)
		if (read(sv[1], &c, 1) != 1 || write(sv[1], &c, 1) != 1)
			break;
	return NULL;
}

static int
ping(const char *what)
{
	char c = 'x';
	double t0 = now_s();

	for (long i = 0; i < rounds; i++)
		if (write(sv[0], &c, 1) != 1 || read(sv[0], &c, 1) != 1) {
			perror(what);
			return 1;
		}
	printf("%-24s %.2f us per round trip\n", what,
	    (now_s() - t0) / (double)rounds * 1e6);
	return 0;
}

int
main(int argc, char **argv)
{
	pthread_t t;
	pid_t pid;
	double t0;
	int rc = 0;

	if (argc > 1 && (rounds = strtol(argv[1], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: switch_rtt [ROUNDS]\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
		perror("socketpair");
		return 1;
	}
	t0 = now_s();
	for (long i = 0; i < rounds; i++)
		(void)syscall(SYS_getppid);
	printf("%-24s %.2f us\n", "one system call",
	    (now_s() - t0) / (double)rounds * 1e6);
	if (pthread_create(&t, NULL, echo, NULL) != 0)
		return 1;
	rc |= ping("two threads");
	pthread_join(t, NULL);
	if ((pid = fork()) < 0)
		return 1;
	if (pid == 0) {
		echo(NULL);
		_exit(0);
	}
	rc |= ping("two processes");
	waitpid(pid, NULL, 0);
	return rc;
}
