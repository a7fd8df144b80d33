/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_words.c - libFuzzer target for shell-style word splitting
 * (words.c): no crash, no leak, and the argv invariants hold.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "overrides/words.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct words w;
	struct zerr err;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (words_split(s, &w, &err) == 0) {
		size_t total = 0;

		if (w.n > WORDS_MAX_COUNT || w.v[w.n] != NULL)
			__builtin_trap();
		for (size_t i = 0; i < w.n; i++)
			total += strlen(w.v[i]);
		if (total > strlen(s))	/* a word never grows */
			__builtin_trap();
		words_free(&w);
	} else if (w.v != NULL || w.n != 0) {
		__builtin_trap();
	}
	free(s);
	return 0;
}
