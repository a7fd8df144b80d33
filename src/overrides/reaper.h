/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reaper.h - zeusd's child processes: which ones are running override
 * commands, and what becomes of every other one.
 *
 * The daemon runs as root and its override commands (spawn.c) run with its
 * privileges, so none of them may outlive the request that started it, nor
 * the daemon. A command's process group is not enough to find everything
 * it started: a descendant that calls setsid() (or setpgid()) leaves the
 * group, and one whose parent exited used to be reparented to init, out of
 * reach. Hence this process-wide bookkeeping:
 *
 *   - the registry: spawn.c registers each command it starts, under one
 *     mutex held across posix_spawn and the insert, so no just-forked
 *     child is ever unknown, and removes it only after reaping it;
 *   - the subreaper (reaper_enable, at `zeusd serve` startup): an orphaned
 *     descendant is reparented to zeusd instead of to init;
 *   - the sweep: any child of zeusd that is not the direct child of a
 *     running command is an "escapee" (a leftover of a command that has
 *     finished, or the orphan of one still running); it gets SIGTERM, then
 *     SIGKILL after a grace, and is reaped. spawn_run sweeps after each
 *     command, the daemon at shutdown;
 *   - shutdown: no new command starts, running commands' process groups
 *     get SIGTERM, then SIGKILL after the grace, then a last sweep.
 *
 * Children are found by reading /proc/<pid>/stat (ppid == getpid()), which
 * needs no CONFIG_PROC_CHILDREN. Only pids chosen here are ever waited
 * for, never waitpid(-1), so the sweep never steals the exit status of a
 * command spawn.c is waiting for. A pid is signalled only while it is an
 * unreaped child of ours, so it can never have been reused by an unrelated
 * process. A daemon without root cannot signal an escapee that became
 * root through sudo: it is logged (override_escapee_kill_failed) and left.
 * The caller's process must not set SIGCHLD to SIG_IGN.
 */
#ifndef ZEUS_REAPER_H
#define ZEUS_REAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

#define REAPER_GRACE_MS 1000	/* between SIGTERM and SIGKILL */
#define REAPER_REAP_MS 2000	/* after SIGKILL, before giving up on one */

/* One running command; lives in the caller's frame while it runs. */
struct reaper_entry {
	pid_t pid;
	bool reaping;		/* being waited for: never signal it again */
	struct reaper_entry *prev, *next;
};

/*
 * Makes the process a child subreaper (prctl PR_SET_CHILD_SUBREAPER) and
 * turns sweeping on; before this, reaper_sweep does nothing, so that a
 * program that merely runs commands never has its own children killed.
 */
int reaper_enable(struct zerr *err);
bool reaper_enabled(void);

/*
 * Turns sweeping off again, for a process forked from an enabled one that
 * runs no commands (the network process of a split daemon: the
 * subreaper attribute is not inherited, and it cannot read /proc).
 */
void reaper_disable(void);

/*
 * Brackets one posix_spawn: begin takes the registry lock and returns 0,
 * or returns -1 (lock not taken) once reaper_shutdown has begun; end
 * registers e with pid when pid > 0 and releases the lock.
 */
int reaper_spawn_begin(void);
void reaper_spawn_end(struct reaper_entry *e, pid_t pid);

/*
 * Children that are not commands and must survive every sweep: the network
 * process and the janitor of a split daemon (docs/design.md, "Two
 * processes"). reaper_spare adds pid (> 0) and returns 0, or -1 when
 * REAPER_MAX_SPARED are spared already; reaper_unspare forgets it (do so
 * once it is reaped, or to let the next sweep reap it). Either may be
 * called while another thread sweeps.
 */
#define REAPER_MAX_SPARED 2
int reaper_spare(pid_t pid);
void reaper_unspare(pid_t pid);

/* Before waiting for e's pid: shutdown will not signal it any more. */
void reaper_reaping(struct reaper_entry *e);

/* After e's pid has been reaped. */
void reaper_remove(struct reaper_entry *e);

/*
 * Kills and reaps every escapee (see above), following descendants that
 * are reparented while it runs; SIGKILL after grace_ms. Sweeps run one at
 * a time. Returns how many processes it signalled.
 */
unsigned reaper_sweep(unsigned grace_ms);

/*
 * For shutdown (and the daemon's exit paths): refuses new commands from
 * now on (spawn_run reports ECANCELED), sends SIGTERM to every running
 * command's process group, SIGKILL after grace_ms to those still running,
 * waits for their threads to reap them, then sweeps. Returns 0 when no
 * command is left running, -1 otherwise (logged).
 */
int reaper_shutdown(unsigned grace_ms);

/* One line of /proc/<pid>/stat, as far as the sweep needs it. */
struct reaper_stat {
	pid_t pid, ppid, pgrp;
	char state;		/* R, S, D, Z, T, ... */
	char comm[32];
};

/* Parses buf (len bytes, no NUL needed); 0, or -1 when malformed. */
int reaper_parse_stat(const char *buf, size_t len, struct reaper_stat *st);

#endif
