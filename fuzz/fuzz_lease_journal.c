/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_lease_journal.c - the lease journal's reader (access/journal.h) on
 * arbitrary bytes: what it takes is a record in range that formats back
 * to exactly the bytes it was read from (one file, one meaning); what it
 * refuses leaves nothing behind and says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access/journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
must(int ok)
{
	if (!ok)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct journal_rec zero;
	struct journal_rec r;
	char boot[JOURNAL_BOOT_LEN + 1], why[128];
	char back[JOURNAL_MAX_BYTES];
	int n;

	if (journal_parse((const char *)data, size, &r, boot, why,
	    sizeof(why)) != JOURNAL_OK) {
		must(why[0] != '\0' && boot[0] == '\0');
		must(memcmp(&r, &zero, sizeof(r)) == 0);
		return 0;
	}
	must(r.gpu <= JOURNAL_MAX_GPU && r.npid <= JOURNAL_MAX_PIDS);
	must(journal_rec_pending(&r));
	for (unsigned i = 0; i < r.npid; i++)
		must(r.pid[i] > 0);
	must(strlen(boot) == JOURNAL_BOOT_LEN);
	n = journal_format(&r, boot, back, sizeof(back));
	must(n >= 0 && (size_t)n == size && memcmp(back, data, size) == 0);
	return 0;
}
