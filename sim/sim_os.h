/*
 * sim_os.h - what the NVML simulator needs of the operating system and does
 * differently per platform: the control file's identity (to re-read it only
 * when it changes) and opening the control file and the call log.
 * sim_os_posix.c (Linux) and sim_os_win.c (Windows, mingw-w64) implement
 * it; sim/meson.build picks one. Hidden on ELF, so the simulator's exported
 * symbols stay NVML's own (tests/unit/test_nvml_abi.c checks the list).
 */
#ifndef ZEUS_SIM_OS_H
#define ZEUS_SIM_OS_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__ELF__)
#define SIM_OS_API __attribute__((visibility("hidden")))
#else
#define SIM_OS_API
#endif

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

#endif
