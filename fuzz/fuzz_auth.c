/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_auth.c - libFuzzer target for the token verifier and Bearer parser.
 *
 * The input is used three ways: as an Authorization header value, as a raw
 * token, and, so that the fuzzer also gets past the signature check, as a
 * header.payload pair that this harness signs with the key before verifying
 * (the first 0x01 byte splits header JSON from payload JSON). The signing
 * here uses OpenSSL directly, test-only.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "access/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_key[] = "fuzz-key\n";

static size_t
fuzz_b64url(char *out, const uint8_t *in, size_t len)
{
	size_t n = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)len);

	while (n > 0 && out[n - 1] == '=')
		n--;
	for (size_t i = 0; i < n; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	out[n] = '\0';
	return n;
}

static void
fuzz_signed(const struct auth_key *key, const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0x01, size);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	struct auth_claims c;
	struct zerr err;
	size_t hlen, n;
	char *tok;

	if (sep == NULL || size > 6000)
		return;
	hlen = (size_t)(sep - data);
	tok = malloc(2 * size + 128);
	if (tok == NULL)
		return;
	n = fuzz_b64url(tok, data, hlen);
	tok[n++] = '.';
	n += fuzz_b64url(tok + n, sep + 1, size - hlen - 1);
	HMAC(EVP_sha256(), fuzz_key, (int)strlen(fuzz_key),
	    (unsigned char *)tok, n, mac, &maclen);
	tok[n++] = '.';
	n += fuzz_b64url(tok + n, mac, maclen);
	if (auth_verify(key, tok, n, 1700000000, &c, &err) == 0) {
		char *json = auth_claims_json(&c);
		char msg[512];

		/* Whatever passes must satisfy the documented invariants. */
		if (strlen(c.sub) == 0 || strlen(c.sub) > AUTH_SUB_MAX ||
		    (c.scopes & ~GROUP_DEFAULT_SET) != 0 || json == NULL)
			abort();
		auth_format_forbidden(&c, GROUP_GPU_CONTROL, msg, sizeof(msg));
		free(json);
	}
	free(tok);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct auth_key *key;
	struct auth_claims c;
	struct zerr err;
	const char *t;
	size_t len;
	char *s;

	if (key == NULL &&
	    auth_key_from_bytes(fuzz_key, strlen(fuzz_key), &key, &err) != 0)
		abort();

	/* Raw token, not NUL-terminated: the verifier must respect len. */
	s = malloc(size ? size : 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	if (auth_verify(key, s, size, 1700000000, &c, &err) == 0)
		abort();	/* nobody can guess our HMAC */
	free(s);

	/* Header value. */
	s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (auth_parse_bearer(s, &t, &len, &err) == 0) {
		if (t < s || t + len > s + size || len == 0)
			abort();
		(void)auth_verify(key, t, len, 1700000000, &c, &err);
	}
	free(s);

	fuzz_signed(key, data, size);
	return 0;
}
