/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_policy.c - libFuzzer target for the node policy file: the TOML
 * parser with its policy-only extensions ([[tables]], integer array items)
 * and the grant validation of policy.c on top. Names in the input are
 * looked up through NSS like at load; a fuzzing host's passwd is small.
 */
#include <stddef.h>
#include <stdint.h>

#include "access/policy.h"
#include "overrides/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct toml_doc *doc = NULL;
	struct policy *p = NULL;
	struct policy_peer pp = { .uid = 1000, .ngids = 1, .gids = { 1000 } };
	struct zerr err;

	if (toml_parse_ext((const char *)data, size, TOML_ALLOW_TABLE_ARRAYS |
	    TOML_ALLOW_INT_ITEMS, &doc, &err) == 0) {
		for (size_t i = 0; i < doc->n_tables; i++)
			for (size_t k = 0; k < doc->tables[i].n_keys; k++)
				if (doc->tables[i].keys[k].name == NULL)
					__builtin_trap();
		toml_free(doc);
	}
	if (policy_parse((const char *)data, size, "fuzz", &p, &err) == 0) {
		(void)policy_scopes(p, &pp);
		for (unsigned g = 0; g < GROUP_COUNT; g++)
			(void)policy_allows(p, &pp, (enum api_group)g, g * 70);
		policy_free(p);
	}
	return 0;
}
