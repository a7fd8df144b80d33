/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membuf_win.c - membuf.h on Windows, which has no open_memstream: a
 * temporary file in the user's temporary folder, opened with
 * FILE_FLAG_DELETE_ON_CLOSE (gone when closed, even if zeusd dies) and
 * FILE_ATTRIBUTE_TEMPORARY (kept in the cache when memory allows), read
 * back whole when closed.
 */
#include "common/membuf.h"

#include <fcntl.h>
#include <io.h>
#include <stdint.h>
#include <stdlib.h>
#include <windows.h>

#define MEMBUF_MAX (64u * 1024 * 1024)	/* /metrics is far below this */

FILE *
membuf_open(struct membuf *mb)
{
	char dir[MAX_PATH + 1], path[MAX_PATH + 1];
	HANDLE h;
	DWORD n;
	int fd;

	mb->f = NULL;
	mb->text = NULL;
	mb->len = 0;
	n = GetTempPathA(sizeof(dir), dir);
	if (n == 0 || n >= sizeof(dir) ||
	    GetTempFileNameA(dir, "zsd", 0, path) == 0)
		return NULL;
	h = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, 0, NULL,
	    CREATE_ALWAYS, FILE_ATTRIBUTE_TEMPORARY |
	    FILE_FLAG_DELETE_ON_CLOSE, NULL);
	if (h == INVALID_HANDLE_VALUE) {
		(void)DeleteFileA(path);
		return NULL;
	}
	if ((fd = _open_osfhandle((intptr_t)h, _O_RDWR | _O_BINARY)) < 0) {
		CloseHandle(h);
		return NULL;
	}
	if ((mb->f = _fdopen(fd, "w+b")) == NULL)
		_close(fd);
	return mb->f;
}

int
membuf_close(struct membuf *mb, char **text, size_t *len)
{
	long end;
	char *buf = NULL;
	int rc = -1;

	if (fflush(mb->f) != 0 || ferror(mb->f) ||
	    (end = ftell(mb->f)) < 0 || (unsigned long)end > MEMBUF_MAX ||
	    fseek(mb->f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t)end + 1)) == NULL)
		goto out;
	if (fread(buf, 1, (size_t)end, mb->f) != (size_t)end)
		goto out;
	buf[end] = '\0';
	*text = buf;
	*len = (size_t)end;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	(void)fclose(mb->f);	/* closes the handle: the file is deleted */
	mb->f = NULL;
	return rc;
}
