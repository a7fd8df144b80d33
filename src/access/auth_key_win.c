/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_key_win.c - reading the signing key file (auth.h) on Windows:
 * wfile.h reads it whole (a regular file, at most AUTH_KEY_MAX bytes, all
 * of them the key, as on Linux, so tokens are interchangeable). zeusd
 * serve's key must have a DACL that lets only SYSTEM, administrators,
 * TrustedInstaller and zeusd's account write it (whoever can write it can
 * mint any token); `zeusd token` reads any key its user can read.
 * auth_key_open and auth_key_load_fd are the split daemon's (Linux).
 */
#include "access/auth.h"

#include <stdlib.h>

#include "common/wfile.h"
#include "common/wipe.h"

static int
auth_key_read_win(const char *path, bool trusted, struct auth_key **out,
    struct zerr *err)
{
	char *buf;
	size_t len;
	int rc;

	if (wfile_read(path, "signing key file", AUTH_KEY_MAX, trusted, &buf,
	    &len, err) != 0)
		return -1;
	rc = auth_key_from_bytes(buf, len, out, err);
	wipe(buf, len);
	free(buf);
	return rc;
}

int
auth_key_load(const char *path, struct auth_key **out, struct zerr *err)
{
	return auth_key_read_win(path, false, out, err);
}

int
auth_key_load_trusted(const char *path, struct auth_key **out,
    struct zerr *err)
{
	return auth_key_read_win(path, true, out, err);
}
