/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load_file_win.c - overrides_load (overrides.h) on Windows: the file is
 * read whole through wfile.h, which refuses it unless its DACL lets only
 * SYSTEM, administrators, TrustedInstaller and zeusd's account write it
 * (upstream checks nothing there; whoever can write the file chooses the
 * commands zeusd runs).
 */
#include "internal.h"

#include <stdlib.h>

#include "common/log.h"
#include "common/wfile.h"
#include "toml.h"

int
overrides_load(const char *path, struct overrides **out, struct zerr *err)
{
	char *text;
	size_t len;
	int rc;

	*out = NULL;
	if (wfile_read(path, "overrides file", TOML_MAX_INPUT, true, &text,
	    &len, err) != 0)
		return -1;
	rc = overrides_parse(text, len, path, out, err);
	free(text);
	if (rc == 0)
		zlog(ZLOG_INFO, "overrides_loaded", "operations=%u",
		    overrides_count(*out));
	return rc;
}
