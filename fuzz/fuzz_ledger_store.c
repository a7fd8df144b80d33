/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ledger_store.c - the energy ledger file's reader
 * (access/ledger_store.h) on arbitrary bytes: what it takes is a ledger in
 * range that formats back to exactly the bytes it was read from (one
 * file, one meaning); what it refuses leaves nothing behind and says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access/ledger_store.h"

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
	static const struct ledger_store zero;
	static struct ledger_store s;
	static char back[LEDGER_STORE_MAX_BYTES];
	char boot[JOURNAL_BOOT_LEN + 1], why[128];
	int n;

	if (ledger_store_parse((const char *)data, size, &s, boot, why,
	    sizeof(why)) != JOURNAL_OK) {
		must(why[0] != '\0' && boot[0] == '\0');
		must(memcmp(&s, &zero, sizeof(s)) == 0);
		return 0;
	}
	must(s.ngpu <= LEDGER_STORE_GPUS && s.nusers <= LEDGER_STORE_USERS);
	for (unsigned u = 0; u < s.nusers; u++) {
		must((s.users[u].uid == LEDGER_STORE_OTHER) ==
		    (u == LEDGER_STORE_USERS - 1));
		for (unsigned v = 0; v < u; v++)
			must(s.users[v].uid != s.users[u].uid);
	}
	must(strlen(boot) == JOURNAL_BOOT_LEN);
	n = ledger_store_format(&s, boot, back, sizeof(back));
	must(n >= 0 && (size_t)n == size && memcmp(back, data, size) == 0);
	return 0;
}
