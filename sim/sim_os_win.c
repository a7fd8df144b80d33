/*
 * sim_os_win.c - sim_os.h on Windows (mingw-w64). The C runtime's
 * descriptors: _O_NOINHERIT stands for O_CLOEXEC; the stamp is the file's
 * size and its write and change times as the runtime reports them (with
 * whole-second resolution, so a test that rewrites the control file within
 * one second with the same size is not seen; the simulator's tests on
 * Linux are the ones that do that). The shared state file (ZEUS_SIM_STATE)
 * is not supported: its open fails, and with it the simulator's init.
 */
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <sys/stat.h>

#include "sim_os.h"

int
sim_os_stamp(const char *path, struct sim_stamp *out)
{
	struct _stat64 st;

	if (_stat64(path, &st) != 0)
		return -1;
	*out = (struct sim_stamp){ true, (uint64_t)st.st_dev,
	    (uint64_t)st.st_ino, (uint64_t)st.st_size,
	    (int64_t)st.st_mtime, 0, (int64_t)st.st_ctime, 0 };
	return 0;
}

int
sim_os_open_log(const char *path)
{
	return _open(path, _O_WRONLY | _O_APPEND | _O_CREAT | _O_NOINHERIT |
	    _O_BINARY, _S_IREAD | _S_IWRITE);
}

int
sim_os_open_read(const char *path)
{
	return _open(path, _O_RDONLY | _O_NOINHERIT | _O_BINARY);
}

/* ZEUS_SIM_STATE is not supported on Windows: init fails and says so. */
int
sim_os_state_open(const char *path, char *why, size_t size)
{
	(void)path;
	if (size > 0)
		snprintf(why, size, "is not supported on Windows");
	return -1;
}

int
sim_os_state_lock(int fd, bool exclusive)
{
	(void)fd;
	(void)exclusive;
	return -1;
}

void
sim_os_state_unlock(int fd)
{
	(void)fd;
}

long
sim_os_state_read(int fd, void *buf, size_t size)
{
	(void)fd;
	(void)buf;
	(void)size;
	return -1;
}

int
sim_os_state_write(int fd, const void *buf, size_t size)
{
	(void)fd;
	(void)buf;
	(void)size;
	return -1;
}

void
sim_os_state_close(int fd)
{
	(void)fd;
}
