/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_file.h - a fixed-layout state file shared by processes
 * (ZEUS_SIM_STATE): what the NVML simulator (nvml_state.c) and the AMD SMI
 * simulator (amdsmi_state.c) share of theirs. The file is a 48-byte header
 * (an 8-byte magic, version, header size, record size, record count, an
 * FNV-1a 64 checksum of the whole file computed with that field 0, 16
 * reserved zero bytes; host byte order), then `count` records of
 * `record_size` bytes, nothing after. This module opens, locks, reads,
 * checks the header, size and checksum of, and writes the file (through
 * sim_os.h's sim_os_state_* functions), and complains once per run of
 * failures with one line on stderr, "<prefix>: ZEUS_SIM_STATE <path>:
 * <why>". A simulator keeps what is its own (struct sim_state_file_def):
 * its magic, version and record layout, how a record is filled from a GPU
 * (encode), checked against this process's configuration (identify,
 * valid), and loaded once every record passed (load).
 *
 * Everything read from the file is untrusted: a file that fails any check
 * is refused whole: the callbacks see no record before the header, size
 * and checksum passed, and load none before every record passed.
 *
 * Locking: the file's lock is a POSIX record lock, which belongs to the
 * process, so only one thread of a process may hold or wait for it. The
 * module owns no mutex: each simulator calls every function here under
 * its own mutex.
 */
#ifndef ZEUS_SIM_STATE_FILE_H
#define ZEUS_SIM_STATE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_os.h"

/* The most bytes a file may have (header and records; the NVML
 * simulator's 64 GPUs take 4144): a def whose max_count records exceed it
 * is refused by sim_state_file_open. */
#define SIM_STATE_FILE_MAX	8192

struct sim_state_file;

/* One simulator's file: constant. */
struct sim_state_file_def {
	const char *prefix;	/* of the stderr lines: "nvml-sim" */
	const char *what;	/* "not <what> state file (bad magic)" */
	const char *magic;	/* 8 characters, stored without a NUL */
	uint32_t version;
	uint32_t record_size;	/* bytes of one record */
	unsigned max_count;	/* most records */
	/* Names what sets the count, for "made for N GPUs, this
	 * configuration has M <count_hint>": "(ZEUS_SIM_GPUS)". */
	const char *count_hint;
	/* The callbacks: rec is record i, record_size bytes, not aligned. */
	/* Fills record i (zeroed) from GPU i. */
	void (*encode)(unsigned i, unsigned char *rec);
	/* Whether record i is this configuration's GPU i: 0, or -1 after
	 * sim_state_file_complain(f, ...) with the difference. */
	int (*identify)(struct sim_state_file *f, unsigned i,
	    const unsigned char *rec);
	/* Whether record i holds values GPU i can be at (else the module
	 * complains "GPU <i>'s record holds values out of range"). */
	bool (*valid)(unsigned i, const unsigned char *rec);
	/* Loads record i into GPU i, once every record of the file passed
	 * both checks; true when what it loaded differs from the record (a
	 * time taken as now), so that the open writes the file back. */
	bool (*load)(unsigned i, const unsigned char *rec);
};

/* One simulator's open file: initialize with SIM_STATE_FILE_INIT. */
struct sim_state_file {
	const struct sim_state_file_def *def;
	int fd;			/* -1: no file */
	unsigned count;		/* records */
	bool failing;		/* the last use of the file failed */
	bool changed;		/* a load of the last good read said true */
	char path[256];		/* for messages */
};

#define SIM_STATE_FILE_INIT(d)	{ .def = (d), .fd = -1 }

/*
 * Opens the file `path` for `count` records (at most def->max_count) of
 * this process's configuration, which the GPUs hold at the power-on state:
 * a missing or empty file gets that state (encode); an existing one must
 * pass every check, and is loaded (and written back when load says so).
 * Closes a file open before. 0, or -1 after one line on stderr, no file
 * open.
 */
SIM_HIDDEN int sim_state_file_open(struct sim_state_file *f,
    const char *path, unsigned count);
/*
 * Starts a use: with a file, takes its lock (exclusive when the use may
 * write), reads it, checks it and loads it. 0: go on, and end with
 * sim_state_file_end; -1: the file failed (one line on stderr for the
 * first of a run of failures; nothing held), nothing loaded. Without a
 * file: 0 at once.
 */
SIM_HIDDEN int sim_state_file_begin(struct sim_state_file *f,
    bool exclusive);
/* Ends a use begun with 0: writes the records back when `write` (under an
 * exclusive lock only), and unlocks. -1 when the write failed (one line). */
SIM_HIDDEN int sim_state_file_end(struct sim_state_file *f, bool write);
/* Closes the file, if any. */
SIM_HIDDEN void sim_state_file_close(struct sim_state_file *f);
/* Whether a file is open. */
SIM_HIDDEN bool sim_state_file_is_open(const struct sim_state_file *f);
/* Whether a file is open and a load of the last good read of it said
 * that what it loaded differs from the file. */
SIM_HIDDEN bool sim_state_file_changed(const struct sim_state_file *f);
/* A CLOCK_MONOTONIC time read from a record, into *t: one ahead of this
 * process's clock (written before a reboot, or in another time namespace)
 * is taken as now. Whether it was. */
SIM_HIDDEN bool sim_state_file_time(uint64_t stored, uint64_t *t);
/* One line on stderr about the file, "<prefix>: ZEUS_SIM_STATE <path>:
 * <why>", unless a failure of this run already said one; a begin that
 * succeeds ends the run. */
SIM_HIDDEN void sim_state_file_complain(struct sim_state_file *f,
    const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
