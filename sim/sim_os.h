/*
 * sim_os.h - what the simulators need of the operating system and do
 * differently per platform: the control file's identity (to re-read it only
 * when it changes) and opening the control file and the call log (for
 * faults.c). sim_os_posix.c (Linux) and sim_os_win.c (Windows, mingw-w64)
 * implement it; sim/meson.build picks one.
 *
 * Also what every module of the simulators shares: SIM_HIDDEN, which marks
 * their functions hidden on ELF, so that a simulator's exported symbols
 * stay its library's own (tests/unit/test_nvml_abi.c checks NVML's list),
 * and the clock they all run on.
 */
#ifndef ZEUS_SIM_OS_H
#define ZEUS_SIM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#if defined(__ELF__)
#define SIM_HIDDEN __attribute__((visibility("hidden")))
#else
#define SIM_HIDDEN
#endif
#define SIM_OS_API SIM_HIDDEN

/* CLOCK_MONOTONIC in ns: the call log's times and the power model's. */
static inline uint64_t
sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What identifies one version of the control file. */
struct sim_stamp {
	bool valid;
	uint64_t dev, ino, size;
	int64_t mtim_s, mtim_ns, ctim_s, ctim_ns;
};

/* Fills *st for path; -1 if it cannot be looked at (missing). */
SIM_OS_API int sim_os_stamp(const char *path, struct sim_stamp *st);
/* The call log, opened for appending (created 0644); -1 and errno set. */
SIM_OS_API int sim_os_open_log(const char *path);
/* A file opened for reading, not inherited by children; -1 on failure. */
SIM_OS_API int sim_os_open_read(const char *path);

/*
 * The state file shared by processes (ZEUS_SIM_STATE, nvml_state.c), opened
 * read-write and not inherited: never through a symbolic link (the last
 * component), created 0600 when missing (a create race with another
 * process is handled), and refused unless it is a regular file with one
 * link, owned by this user or root and writable by neither group nor
 * others. -1 with the reason in `why` (Windows: not supported).
 */
SIM_OS_API int sim_os_state_open(const char *path, char *why, size_t size);
/* Takes the whole file's lock, exclusive or shared, waiting for it; -1 on
 * failure. Only one thread of a process may hold or wait for it. */
SIM_OS_API int sim_os_state_lock(int fd, bool exclusive);
SIM_OS_API void sim_os_state_unlock(int fd);
/* Reads up to `size` bytes from offset 0: the count read, or -1. */
SIM_OS_API long sim_os_state_read(int fd, void *buf, size_t size);
/* Writes `size` bytes at offset 0: 0, or -1. */
SIM_OS_API int sim_os_state_write(int fd, const void *buf, size_t size);
SIM_OS_API void sim_os_state_close(int fd);

#endif
