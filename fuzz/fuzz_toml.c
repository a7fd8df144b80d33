/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_toml.c - libFuzzer target for the override file: the TOML subset
 * parser (toml.c) and, on top of it, the override validation (tables,
 * keys, word splitting, placeholders, PCRE2 compile) of overrides/load.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "overrides/overrides.h"
#include "overrides/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct toml_doc *doc = NULL;
	struct overrides *ov = NULL;
	struct zerr err;

	if (toml_parse((const char *)data, size, &doc, &err) == 0) {
		/* every table but the root has a name; values are typed */
		for (size_t i = 0; i < doc->n_tables; i++)
			for (size_t k = 0; k < doc->tables[i].n_keys; k++)
				if (doc->tables[i].keys[k].name == NULL)
					__builtin_trap();
		toml_free(doc);
	}
	if (overrides_parse((const char *)data, size, "fuzz", &ov, &err) == 0)
		overrides_free(ov);
	return 0;
}
