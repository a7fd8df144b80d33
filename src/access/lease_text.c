/* SPDX-License-Identifier: Apache-2.0 */
/* lease_text.c - the words of a GPU lease's refusals (lease_text.h). */
#include "access/lease_text.h"

#include <stdio.h>

#include "devices/gpu_cmd.h"

/* "user alice (uid 1000)", or "user ? (uid 1000)" without a name */
#define WHO_FMT "user %s (uid %u)"
#define WHO(user, uid) ((user) != NULL && (user)[0] ? (user) : "?"), \
	(unsigned)(uid)

int
lease_text_held(struct zerr *err, unsigned gpu, const char *user, uid_t uid,
    bool restoring)
{
	return zerr_set(err, ZERR_CONFLICT, "GPU %u is leased by " WHO_FMT
	    "%s; its settings are restored and the lease ends when that "
	    "user's processes that changed it exit", gpu, WHO(user, uid),
	    restoring ? " and being restored" : "");
}

int
lease_text_restore_failed(struct zerr *err, unsigned gpu, const char *user,
    uid_t uid, const char *why, unsigned attempts, unsigned retry_max_s)
{
	return zerr_set(err, ZERR_CONFLICT, "GPU %u is leased by " WHO_FMT
	    " and being restored, but its restore failed (%s); it stays "
	    "refused to other users until a retry succeeds (attempts so far: "
	    "%u; retried at least every %u s)", gpu, WHO(user, uid), why,
	    attempts, retry_max_s);
}

int
lease_text_not_yours(struct zerr *err, unsigned gpu, const char *user,
    uid_t uid)
{
	return zerr_set(err, ZERR_CONFLICT, "GPU %u is leased by " WHO_FMT
	    "; only that user or root can release it", gpu, WHO(user, uid));
}

int
lease_text_max(struct zerr *err, uid_t uid, unsigned held, unsigned taking,
    unsigned max)
{
	return zerr_set(err, ZERR_CONFLICT, "uid %u holds leases on %u GPU%s "
	    "and this write would lease %u more; the node policy allows %u "
	    "at once (max_leased_gpus): release one (POST /gpu/release) or "
	    "let its processes end", (unsigned)uid, held, held == 1 ? "" : "s",
	    taking, max);
}

void
lease_settings_format(unsigned settings, char *buf, size_t size)
{
	static const struct { unsigned bit; const char *name; } names[] = {
		{ GPU_SETTING_POWER_LIMIT, "power_limit" },
		{ GPU_SETTING_PERSISTENCE, "persistence" },
		{ GPU_SETTING_GPU_CLOCKS, "gpu_clocks" },
		{ GPU_SETTING_MEM_CLOCKS, "mem_clocks" },
	};
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int k;

		if (!(settings & names[i].bit))
			continue;
		k = snprintf(buf + len, size - len, "%s%s", len ? "," : "",
		    names[i].name);
		if (k < 0 || (size_t)k >= size - len)
			break;
		len += (size_t)k;
	}
}
