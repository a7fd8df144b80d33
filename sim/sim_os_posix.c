/* sim_os_posix.c - sim_os.h on Linux (and other POSIX systems). */
#include <fcntl.h>
#include <sys/stat.h>

#include "sim_os.h"

int
sim_os_stamp(const char *path, struct sim_stamp *out)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -1;
	*out = (struct sim_stamp){ true, (uint64_t)st.st_dev,
	    (uint64_t)st.st_ino, (uint64_t)st.st_size,
	    st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	    st.st_ctim.tv_sec, st.st_ctim.tv_nsec };
	return 0;
}

int
sim_os_open_log(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

int
sim_os_open_read(const char *path)
{
	return open(path, O_RDONLY | O_CLOEXEC);
}
