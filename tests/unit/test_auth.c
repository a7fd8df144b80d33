/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_auth.c - JWT verification, signing, key loading, Bearer parsing.
 *
 * Hostile tokens are built by hand here from base64url pieces (OpenSSL's
 * EVP_EncodeBlock plus the url alphabet, test-only) and signed with OpenSSL's
 * HMAC, so the tests do not trust the code they check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "access/auth.h"

#define NOW ((time_t)1700000000)

static const char *const hs256_hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
static const char *const good_payload =
    "{\"sub\":\"alice\",\"scopes\":[\"gpu-read\",\"cpu-read\"]}";

/* ---- helpers ------------------------------------------------------------- */

/* base64url without padding of len bytes, appended to out. */
static void
b64url_append(char *out, const void *in, size_t len)
{
	unsigned char *tmp = malloc(4 * ((len + 2) / 3) + 1);
	size_t o = strlen(out);
	int n;

	assert_non_null(tmp);
	n = EVP_EncodeBlock(tmp, in, (int)len);
	for (int i = 0; i < n && tmp[i] != '='; i++)
		out[o++] = tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' :
		    (char)tmp[i];
	out[o] = '\0';
	free(tmp);
}

/*
 * header.payload.signature; md NULL leaves the signature empty. Returns a
 * malloc'd string.
 */
static char *
make_token_key(const char *hdr, const char *payload, const EVP_MD *md,
    const void *key, size_t keylen)
{
	size_t cap = 2 * (strlen(hdr) + strlen(payload)) + 256;
	char *t = calloc(1, cap);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;

	assert_non_null(t);
	b64url_append(t, hdr, strlen(hdr));
	strcat(t, ".");
	b64url_append(t, payload, strlen(payload));
	if (md != NULL) {
		assert_non_null(HMAC(md, key, (int)keylen,
		    (unsigned char *)t, strlen(t), mac, &maclen));
	}
	strcat(t, ".");
	if (md != NULL)
		b64url_append(t, mac, maclen);
	return t;
}

static char *
make_token(const char *hdr, const char *payload, const EVP_MD *md)
{
	return make_token_key(hdr, payload, md, "secret", 6);
}

static struct auth_key *
key_of(const char *s)
{
	struct auth_key *k = NULL;
	struct zerr err;

	assert_int_equal(auth_key_from_bytes(s, strlen(s), &k, &err), 0);
	return k;
}

/* Verifies with key "secret" at NOW; returns rc and fills err/claims. */
static int
verify_str(const char *tok, struct auth_claims *c, struct zerr *err)
{
	struct auth_key *k = key_of("secret");
	int rc = auth_verify(k, tok, strlen(tok), NOW, c, err);

	auth_key_free(k);
	return rc;
}

static void
expect_reject(const char *tok, const char *msg_part)
{
	struct auth_claims c;
	struct zerr err = { 0 };

	if (verify_str(tok, &c, &err) == 0)
		fail_msg("accepted: %s", tok);
	assert_int_equal(err.kind, ZERR_UNAUTHENTICATED);
	if (msg_part != NULL && strstr(err.msg, msg_part) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, msg_part);
	/* The token (or any long piece of it) is never echoed. */
	if (strlen(tok) > 12) {
		char piece[13];

		memcpy(piece, tok, 12);
		piece[12] = '\0';
		assert_null(strstr(err.msg, piece));
	}
	assert_string_equal(c.sub, "");
	assert_int_equal(c.scopes, 0);
}

static void
expect_reject_payload(const char *payload, const char *msg_part)
{
	char *t = make_token(hs256_hdr, payload, EVP_sha256());

	expect_reject(t, msg_part);
	free(t);
}

static void
expect_accept_payload(const char *payload, struct auth_claims *c)
{
	char *t = make_token(hs256_hdr, payload, EVP_sha256());
	struct zerr err = { 0 };

	if (verify_str(t, c, &err) != 0)
		fail_msg("refused %s: %s", payload, err.msg);
	free(t);
}

/* ---- sign / verify -------------------------------------------------------- */

static void
test_round_trip(void **state)
{
	struct auth_key *k = key_of("secret");
	struct auth_claims c;
	struct zerr err;
	char *tok = NULL;
	time_t now = time(NULL);

	(void)state;
	assert_int_equal(auth_sign(k, "alice", GROUP_BIT(GROUP_GPU_READ) |
	    GROUP_BIT(GROUP_GPU_CONTROL), true, (int64_t)now + 3600, &tok,
	    &err), 0);
	assert_int_equal(auth_verify(k, tok, strlen(tok), now, &c, &err), 0);
	assert_string_equal(c.sub, "alice");
	assert_int_equal(c.scopes, GROUP_BIT(GROUP_GPU_READ) |
	    GROUP_BIT(GROUP_GPU_CONTROL));
	assert_true(c.has_exp);
	assert_int_equal(c.exp, (int64_t)now + 3600);
	/* After the hour plus leeway it is expired. */
	assert_int_equal(auth_verify(k, tok, strlen(tok), now + 3661, &c, &err),
	    -1);
	assert_string_equal(err.msg, "Token has expired.");
	free(tok);

	assert_int_equal(auth_sign(k, "bob", 0, false, 0, &tok, &err), 0);
	assert_int_equal(auth_verify(k, tok, strlen(tok), now, &c, &err), 0);
	assert_string_equal(c.sub, "bob");
	assert_int_equal(c.scopes, 0);
	assert_false(c.has_exp);
	free(tok);
	auth_key_free(k);
}

static void
test_sign_claims_shape(void **state)
{
	struct auth_key *k = key_of("secret");
	struct zerr err;
	char *tok = NULL;

	(void)state;
	assert_int_equal(auth_sign(k, "alice", GROUP_DEFAULT_SET, true, 42, &tok,
	    &err), 0);
	/* Header and payload are what the tests' own encoder makes of them. */
	assert_non_null(strchr(tok, '.'));
	assert_int_equal(strncmp(tok, "eyJ", 3), 0);
	free(tok);
	auth_key_free(k);
}

static void
test_sign_refuses_bad_sub(void **state)
{
	struct auth_key *k = key_of("secret");
	char long_sub[AUTH_SUB_MAX + 2];
	struct zerr err;
	char *tok = NULL;

	(void)state;
	memset(long_sub, 'a', sizeof(long_sub) - 1);
	long_sub[sizeof(long_sub) - 1] = '\0';
	assert_int_equal(auth_sign(k, "", 0, false, 0, &tok, &err), -1);
	assert_int_equal(err.kind, ZERR_INVALID);
	assert_int_equal(auth_sign(k, long_sub, 0, false, 0, &tok, &err), -1);
	assert_int_equal(auth_sign(k, "a\nb", 0, false, 0, &tok, &err), -1);
	assert_int_equal(auth_sign(k, "a\x7f", 0, false, 0, &tok, &err), -1);
	assert_int_equal(auth_sign(k, "\xff\xfe", 0, false, 0, &tok, &err), -1);
	assert_null(tok);
	long_sub[AUTH_SUB_MAX] = '\0';
	assert_int_equal(auth_sign(k, long_sub, 0, false, 0, &tok, &err), 0);
	free(tok);
	auth_key_free(k);
}

/* ---- time claims --------------------------------------------------------- */

static void
test_exp_leeway(void **state)
{
	struct auth_claims c;
	char p[256];

	(void)state;
	snprintf(p, sizeof(p), "{\"sub\":\"a\",\"scopes\":[],\"exp\":%lld}",
	    (long long)NOW - 60);
	expect_accept_payload(p, &c);
	assert_true(c.has_exp);
	assert_int_equal(c.exp, NOW - 60);
	snprintf(p, sizeof(p), "{\"sub\":\"a\",\"scopes\":[],\"exp\":%lld}",
	    (long long)NOW + 10);
	expect_accept_payload(p, &c);

	snprintf(p, sizeof(p), "{\"sub\":\"a\",\"scopes\":[],\"exp\":%lld}",
	    (long long)NOW - 61);
	{
		char *t = make_token(hs256_hdr, p, EVP_sha256());
		struct zerr err;

		assert_int_equal(verify_str(t, &c, &err), -1);
		assert_int_equal(err.kind, ZERR_UNAUTHENTICATED);
		assert_string_equal(err.msg, "Token has expired.");
		free(t);
	}
	expect_reject_payload(
	    "{\"sub\":\"a\",\"scopes\":[],\"exp\":-9223372036854775808}",
	    "expired");
	expect_accept_payload(
	    "{\"sub\":\"a\",\"scopes\":[],\"exp\":9223372036854775807}", &c);
}

static void
test_exp_type(void **state)
{
	(void)state;
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[],\"exp\":\"99999999999\"}",
	    "exp");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[],\"exp\":99999999999.5}",
	    "exp");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[],\"exp\":null}", "exp");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[],\"exp\":true}", "exp");
}

static void
test_nbf_honoured(void **state)
{
	struct auth_claims c;
	char p[256];

	(void)state;
	snprintf(p, sizeof(p), "{\"sub\":\"a\",\"scopes\":[],\"nbf\":%lld}",
	    (long long)NOW + 60);
	expect_accept_payload(p, &c);
	snprintf(p, sizeof(p), "{\"sub\":\"a\",\"scopes\":[],\"nbf\":%lld}",
	    (long long)NOW + 61);
	expect_reject_payload(p, "not yet valid");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[],\"nbf\":\"x\"}", "nbf");
	/* iat is informational and never checked. */
	expect_accept_payload("{\"sub\":\"a\",\"scopes\":[],\"iat\":\"whenever\"}",
	    &c);
}

/* ---- tampering, keys, algorithms --------------------------------------- */

static void
test_tampered(void **state)
{
	char *t = make_token(hs256_hdr, good_payload, EVP_sha256());
	char *dot1 = strchr(t, '.'), *dot2 = strrchr(t, '.');
	struct auth_claims c;
	struct zerr err;
	char *u;

	(void)state;
	assert_int_equal(verify_str(t, &c, &err), 0);
	assert_string_equal(c.sub, "alice");

	/* payload: change one character */
	u = strdup(t);
	u[dot1 - t + 3] = u[dot1 - t + 3] == 'A' ? 'B' : 'A';
	expect_reject(u, "signature");
	/* payload swapped for one granting more */
	free(u);
	{
		char *other = make_token(hs256_hdr,
		    "{\"sub\":\"alice\",\"scopes\":[\"gpu-control\"]}", NULL);
		size_t n = strlen(other);

		u = malloc(n + 64);
		memcpy(u, other, n);
		strcpy(u + n, dot2 + 1);
		expect_reject(u, "signature");
		free(other);
	}
	free(u);
	/* signature: each position flipped */
	for (size_t i = (size_t)(dot2 - t) + 1; t[i] != '\0'; i++) {
		u = strdup(t);
		u[i] = u[i] == 'A' ? 'B' : 'A';
		expect_reject(u, "signature");
		free(u);
	}
	/* signature: truncated, extended, padded */
	u = strdup(t);
	u[strlen(u) - 1] = '\0';
	expect_reject(u, "signature");
	free(u);
	u = malloc(strlen(t) + 3);
	if (u == NULL)
		abort();
	sprintf(u, "%sA", t);
	expect_reject(u, "signature");
	sprintf(u, "%s=", t);
	expect_reject(u, "Malformed");
	free(u);
	free(t);
}

static void
test_wrong_key(void **state)
{
	char *t = make_token_key(hs256_hdr, good_payload, EVP_sha256(),
	    "other", 5);

	(void)state;
	expect_reject(t, "signature");
	free(t);
}

static void
test_trailing_newline_is_key(void **state)
{
	char *t = make_token_key(hs256_hdr, good_payload, EVP_sha256(),
	    "secret\n", 7);
	struct auth_key *k = key_of("secret\n");
	struct auth_claims c;
	struct zerr err;

	(void)state;
	expect_reject(t, "signature");	/* "secret" != "secret\n" */
	assert_int_equal(auth_verify(k, t, strlen(t), NOW, &c, &err), 0);
	free(t);
	t = make_token(hs256_hdr, good_payload, EVP_sha256());
	assert_int_equal(auth_verify(k, t, strlen(t), NOW, &c, &err), -1);
	free(t);
	auth_key_free(k);
}

static void
test_alg_none(void **state)
{
	char *t;

	(void)state;
	t = make_token("{\"alg\":\"none\",\"typ\":\"JWT\"}", good_payload, NULL);
	expect_reject(t, "Unsigned");
	free(t);
	t = make_token("{\"alg\":\"none\"}", good_payload, NULL);
	expect_reject(t, NULL);
	free(t);
	/* none, but carrying a valid HS256 MAC: still refused */
	t = make_token("{\"alg\":\"none\",\"typ\":\"JWT\"}", good_payload,
	    EVP_sha256());
	expect_reject(t, NULL);
	free(t);
	t = make_token("{\"alg\":\"None\"}", good_payload, EVP_sha256());
	expect_reject(t, NULL);
	free(t);
	/* no alg at all */
	t = make_token("{\"typ\":\"JWT\"}", good_payload, EVP_sha256());
	expect_reject(t, NULL);
	free(t);
	t = make_token("{\"alg\":null}", good_payload, EVP_sha256());
	expect_reject(t, NULL);
	free(t);
}

static void
test_other_algs(void **state)
{
	static const char *const hdrs[] = {
		"{\"alg\":\"HS384\",\"typ\":\"JWT\"}",
		"{\"alg\":\"HS512\",\"typ\":\"JWT\"}",
		"{\"alg\":\"RS256\",\"typ\":\"JWT\"}",
		"{\"alg\":\"ES256\",\"typ\":\"JWT\"}",
		"{\"alg\":\"PS256\",\"typ\":\"JWT\"}",
		"{\"alg\":\"hs256\",\"typ\":\"JWT\"}",
		"{\"alg\":\"HS256 \",\"typ\":\"JWT\"}",
	};
	char *t;

	(void)state;
	/* Properly signed with their own algorithm (HMAC ones) and our key. */
	t = make_token(hdrs[0], good_payload, EVP_sha384());
	expect_reject(t, NULL);
	free(t);
	t = make_token(hdrs[1], good_payload, EVP_sha512());
	expect_reject(t, NULL);
	free(t);
	/* Header says X, signature is a valid HS256 MAC: alg confusion. */
	for (size_t i = 0; i < sizeof(hdrs) / sizeof(hdrs[0]); i++) {
		struct auth_claims c;
		struct zerr err;

		t = make_token(hdrs[i], good_payload, EVP_sha256());
		assert_int_equal(verify_str(t, &c, &err), -1);
		assert_int_equal(err.kind, ZERR_UNAUTHENTICATED);
		free(t);
	}
	/* libjwt maps "hs256" to HS256 (case-insensitively); we do not. */
	t = make_token(hdrs[5], good_payload, EVP_sha256());
	expect_reject(t, "HS256");
	free(t);
}

static void
test_header_rules(void **state)
{
	struct auth_claims c;
	char *t;

	(void)state;
	t = make_token("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", good_payload,
	    EVP_sha256());
	expect_reject(t, "critical");
	free(t);
	t = make_token("{\"alg\":\"HS256\"}", good_payload, EVP_sha256());
	{
		struct zerr err;

		assert_int_equal(verify_str(t, &c, &err), 0);
	}
	free(t);
	t = make_token("{\"alg\":\"HS256\",\"typ\":\"JWE\"}", good_payload,
	    EVP_sha256());
	expect_reject(t, NULL);
	free(t);
	t = make_token("[\"HS256\"]", good_payload, EVP_sha256());
	expect_reject(t, NULL);
	free(t);
	t = make_token("not json", good_payload, EVP_sha256());
	expect_reject(t, NULL);
	free(t);
}

/* ---- claims --------------------------------------------------------------- */

static void
test_scopes(void **state)
{
	struct auth_claims c;

	(void)state;
	expect_accept_payload("{\"sub\":\"a\",\"scopes\":[]}", &c);
	assert_int_equal(c.scopes, 0);
	expect_accept_payload("{\"sub\":\"a\",\"scopes\":[\"gpu-control\","
	    "\"gpu-read\",\"cpu-read\",\"gpu-read\"]}", &c);
	assert_int_equal(c.scopes, GROUP_BIT(GROUP_GPU_CONTROL) |
	    GROUP_BIT(GROUP_GPU_READ) | GROUP_BIT(GROUP_CPU_READ));
	expect_accept_payload("{\"sub\":\"a\",\"scopes\":[\"metrics\"]}", &c);
	assert_int_equal(c.scopes, GROUP_BIT(GROUP_METRICS));

	expect_reject_payload("{\"sub\":\"a\"}", "scopes");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":\"gpu-read\"}",
	    "scopes");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":\"gpu-read,cpu-read\"}",
	    "scopes");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":{\"gpu-read\":true}}",
	    "scopes");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":null}", "scopes");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[\"root\"]}", "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[\"gpu-read\",\"x\"]}",
	    "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[\"GPU-READ\"]}",
	    "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[\" gpu-read\"]}",
	    "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[1]}", "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[[\"gpu-read\"]]}",
	    "scope");
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[\"gpu-read\\u0000x\"]}",
	    NULL);
}

static void
test_sub(void **state)
{
	struct auth_claims c;
	char p[600];

	(void)state;
	expect_accept_payload("{\"sub\":\"\\u00e9l\\u00e8ve\",\"scopes\":[]}",
	    &c);
	assert_string_equal(c.sub, "\xc3\xa9l\xc3\xa8ve");
	expect_reject_payload("{\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":5,\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":null,\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":[\"a\"],\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":\"\",\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":\"a\\nb\",\"scopes\":[]}", "sub");
	expect_reject_payload("{\"sub\":\"a\\u001bb\",\"scopes\":[]}", "sub");

	snprintf(p, sizeof(p), "{\"sub\":\"%0*d\",\"scopes\":[]}",
	    AUTH_SUB_MAX, 0);
	expect_accept_payload(p, &c);
	assert_int_equal(strlen(c.sub), AUTH_SUB_MAX);
	snprintf(p, sizeof(p), "{\"sub\":\"%0*d\",\"scopes\":[]}",
	    AUTH_SUB_MAX + 1, 0);
	expect_reject_payload(p, "sub");
}

static void
test_payload_shape(void **state)
{
	(void)state;
	expect_reject_payload("[1,2]", NULL);
	expect_reject_payload("\"alice\"", NULL);
	expect_reject_payload("not json", NULL);
	expect_reject_payload("{\"sub\":\"a\",\"scopes\":[]", NULL);
	expect_reject_payload("", NULL);
}

/* ---- garbage and size --------------------------------------------------- */

static void
test_garbage(void **state)
{
	static const char *const bad[] = {
		"", "a", "abc", "a.b", "a..c", ".b.c", "a.b.c.d", "..", "....",
		"a.b.", "eyJ hbGc.e.f", "a.b.c\n", "a.b.c ", "a+b.c.d", "a/b.c.d",
		"a.b.c=", "\xff.\xfe.\xfd",
	};
	struct auth_claims c;
	struct zerr err;
	struct auth_key *k = key_of("secret");

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], NULL);
	/* Embedded NUL: len covers it, so it is not silently cut short. */
	{
		char *t = make_token(hs256_hdr, good_payload, EVP_sha256());
		size_t n = strlen(t);
		char *u = malloc(n + 2);

		memcpy(u, t, n + 1);
		u[n] = '\0';
		u[n + 1] = 'x';
		assert_int_equal(auth_verify(k, u, n + 1, NOW, &c, &err), -1);
		assert_int_equal(auth_verify(k, u, n, NOW, &c, &err), 0);
		free(u);
		free(t);
	}
	auth_key_free(k);
	expect_reject("", "Missing");
}

static void
test_oversized(void **state)
{
	char payload[AUTH_TOKEN_MAX];
	struct auth_claims c;
	struct zerr err;
	char *t;

	(void)state;
	/* A correctly signed token just over the limit is refused unparsed. */
	snprintf(payload, sizeof(payload), "{\"sub\":\"a\",\"scopes\":[],"
	    "\"pad\":\"%0*d\"}", (int)(AUTH_TOKEN_MAX * 3 / 4), 0);
	t = make_token(hs256_hdr, payload, EVP_sha256());
	assert_true(strlen(t) > AUTH_TOKEN_MAX);
	expect_reject(t, "too large");
	free(t);
	/* One that fits is fine. */
	snprintf(payload, sizeof(payload), "{\"sub\":\"a\",\"scopes\":[],"
	    "\"pad\":\"%0*d\"}", 5000, 0);
	t = make_token(hs256_hdr, payload, EVP_sha256());
	assert_true(strlen(t) <= AUTH_TOKEN_MAX);
	assert_int_equal(verify_str(t, &c, &err), 0);
	free(t);
}

/* ---- key loading -------------------------------------------------------- */

static char *
temp_file(const void *data, size_t len)
{
	char *path = strdup("/tmp/zeus_test_key_XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	return path;
}

static void
test_key_load(void **state)
{
	struct auth_key *k = NULL;
	struct auth_claims c;
	struct zerr err;
	char *path, *t;

	(void)state;
	path = temp_file("secret\n", 7);
	assert_int_equal(auth_key_load(path, &k, &err), 0);
	t = make_token_key(hs256_hdr, good_payload, EVP_sha256(), "secret\n",
	    7);
	assert_int_equal(auth_verify(k, t, strlen(t), NOW, &c, &err), 0);
	free(t);
	auth_key_free(k);
	unlink(path);
	free(path);

	/* Binary keys with NUL bytes are keys too. */
	path = temp_file("a\0b", 3);
	assert_int_equal(auth_key_load(path, &k, &err), 0);
	t = make_token_key(hs256_hdr, good_payload, EVP_sha256(), "a\0b", 3);
	assert_int_equal(auth_verify(k, t, strlen(t), NOW, &c, &err), 0);
	free(t);
	auth_key_free(k);
	unlink(path);
	free(path);

	path = temp_file("", 0);
	assert_int_equal(auth_key_load(path, &k, &err), -1);
	assert_non_null(strstr(err.msg, "empty"));
	unlink(path);
	free(path);

	assert_int_equal(auth_key_load("/nonexistent/zeus/key", &k, &err), -1);
	assert_non_null(strstr(err.msg, "/nonexistent/zeus/key"));
	assert_int_equal(auth_key_load("/tmp", &k, &err), -1);
	assert_non_null(strstr(err.msg, "directory"));
}

static void
test_key_size_bound(void **state)
{
	char *big = malloc(AUTH_KEY_MAX + 1);
	struct auth_key *k = NULL;
	struct zerr err;
	char *path;

	(void)state;
	memset(big, 'k', AUTH_KEY_MAX + 1);
	path = temp_file(big, AUTH_KEY_MAX);
	assert_int_equal(auth_key_load(path, &k, &err), 0);
	auth_key_free(k);
	unlink(path);
	free(path);
	path = temp_file(big, AUTH_KEY_MAX + 1);
	assert_int_equal(auth_key_load(path, &k, &err), -1);
	assert_non_null(strstr(err.msg, "larger"));
	unlink(path);
	free(path);
	free(big);
	assert_int_equal(auth_key_from_bytes("", 0, &k, &err), -1);
	auth_key_free(NULL);
}

/* ---- Bearer header --------------------------------------------------------- */

static void
bearer_ok(const char *v, const char *want)
{
	const char *t = NULL;
	size_t n = 0;
	struct zerr err;

	if (auth_parse_bearer(v, &t, &n, &err) != 0)
		fail_msg("'%s' refused: %s", v, err.msg);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(t, want, n);
}

static void
bearer_bad(const char *v)
{
	const char *t = NULL;
	size_t n = 0;
	struct zerr err;

	if (auth_parse_bearer(v, &t, &n, &err) == 0)
		fail_msg("'%s' accepted", v ? v : "(null)");
	assert_int_equal(err.kind, ZERR_UNAUTHENTICATED);
}

static void
test_bearer(void **state)
{
	(void)state;
	bearer_ok("Bearer abc.def.ghi", "abc.def.ghi");
	bearer_ok("bearer abc", "abc");
	bearer_ok("BEARER abc", "abc");
	bearer_ok("bEaReR abc", "abc");
	bearer_ok("Bearer    abc", "abc");
	bearer_ok("Bearer\tabc", "abc");
	bearer_ok("Bearer \t abc", "abc");
	bearer_ok("  Bearer abc  ", "abc");
	bearer_ok("Bearer abc\t", "abc");

	bearer_bad(NULL);
	bearer_bad("");
	bearer_bad("   ");
	bearer_bad("Bearer");
	bearer_bad("Bearer ");
	bearer_bad("Bearer \t ");
	bearer_bad("Bearerabc");
	bearer_bad("Basic YWxpY2U6cGFzcw==");
	bearer_bad("Token abc");
	bearer_bad("Bear abc");
	bearer_bad("abc.def.ghi");
	bearer_bad("Bearer abc def");
	bearer_bad("Bearer, abc");
}

/* ---- messages ----------------------------------------------------------- */

static void
test_messages(void **state)
{
	struct auth_claims c = { .sub = "alice", .scopes =
	    GROUP_BIT(GROUP_GPU_READ) | GROUP_BIT(GROUP_CPU_READ) };
	char buf[256], *json;

	(void)state;
	auth_format_forbidden(&c, GROUP_GPU_CONTROL, buf, sizeof(buf));
	assert_string_equal(buf, "User 'alice' does not have the 'gpu-control' "
	    "scope (token scopes: gpu-read, cpu-read).");
	c.scopes = 0;
	auth_format_forbidden(&c, GROUP_CPU_READ, buf, sizeof(buf));
	assert_string_equal(buf, "User 'alice' does not have the 'cpu-read' "
	    "scope (token scopes: none).");
	auth_format_forbidden(&c, GROUP_CPU_READ, buf, 8);
	assert_string_equal(buf, "User 'a");

	c.scopes = GROUP_BIT(GROUP_CPU_READ) | GROUP_BIT(GROUP_GPU_CONTROL);
	json = auth_claims_json(&c);
	assert_string_equal(json, "{\"sub\":\"alice\",\"scopes\":[\"gpu-control\","
	    "\"cpu-read\"]}");
	free(json);
	c.has_exp = true;
	c.exp = 1762864200;
	strcpy(c.sub, "a\"b");
	json = auth_claims_json(&c);
	assert_string_equal(json, "{\"sub\":\"a\\\"b\",\"scopes\":"
	    "[\"gpu-control\",\"cpu-read\"],\"exp\":1762864200}");
	free(json);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_sign_claims_shape),
		cmocka_unit_test(test_sign_refuses_bad_sub),
		cmocka_unit_test(test_exp_leeway),
		cmocka_unit_test(test_exp_type),
		cmocka_unit_test(test_nbf_honoured),
		cmocka_unit_test(test_tampered),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_trailing_newline_is_key),
		cmocka_unit_test(test_alg_none),
		cmocka_unit_test(test_other_algs),
		cmocka_unit_test(test_header_rules),
		cmocka_unit_test(test_scopes),
		cmocka_unit_test(test_sub),
		cmocka_unit_test(test_payload_shape),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_key_load),
		cmocka_unit_test(test_key_size_bound),
		cmocka_unit_test(test_bearer),
		cmocka_unit_test(test_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
