/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - HS256 JWTs: key file, verification, signing, Bearer header.
 *
 * Verification runs in two stages. First, with nothing parsed yet, the token
 * is checked for shape (bounded length, base64url alphabet, three segments)
 * and its signature is recomputed with nettle's HMAC-SHA256 and compared with
 * memeql_sec, so the comparison time says nothing about the right signature.
 * Only a token that carries our HMAC-SHA256 is decoded (nettle's base64url)
 * and parsed (jansson): the header must say exactly "HS256" with no "crit",
 * and every claim is checked here.
 *
 * Why nettle and not libjwt + OpenSSL: libmicrohttpd already loads nettle
 * (through GnuTLS), while libcrypto alone cost 1.4 MiB of the daemon's
 * resident memory; and libjwt 1.10 checked no claims and was lax about the
 * algorithm (HS384 with the same key, "hs256", "none" without a key), so we
 * re-checked everything after it anyway. No base64 or HMAC is written here.
 */
#include "access/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <nettle/base64.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "common/log.h"
#include "common/wipe.h"

/* Base64url of a 32-byte HMAC-SHA256, without padding. */
#define AUTH_SIG_B64_LEN 43

/*
 * The key bytes can be replaced while the HTTP thread verifies tokens
 * (SIGHUP, auth_key_replace), so they sit behind a pointer and a
 * read-write lock. Readers hold it only for hmac_sha256_set_key, which
 * copies everything derived from the key into the caller's context;
 * auth_key_replace swaps the pointer under the write lock and wipes the old
 * bytes after it, when no reader can still hold them. The struct itself
 * never moves, so every `struct auth_key *` (srv->ctx.key) stays valid and
 * non-NULL: auth is never switched on or off by a reload.
 */
struct auth_key {
	pthread_rwlock_t lock;
	size_t len;
	unsigned char *bytes;
};

/* ---- key --------------------------------------------------------------- */

int
auth_key_from_bytes(const void *bytes, size_t len, struct auth_key **out,
    struct zerr *err)
{
	struct auth_key *k;

	if (len == 0)
		return zerr_set(err, ZERR_INVALID, "signing key is empty");
	if (len > AUTH_KEY_MAX)
		return zerr_set(err, ZERR_INVALID,
		    "signing key is larger than %d bytes", AUTH_KEY_MAX);
	if ((k = malloc(sizeof(*k))) == NULL)
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	if ((k->bytes = malloc(len)) == NULL) {
		free(k);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	k->len = len;
	memcpy(k->bytes, bytes, len);
	pthread_rwlock_init(&k->lock, NULL);
	*out = k;
	return 0;
}

void
auth_key_free(struct auth_key *key)
{
	if (key == NULL)
		return;
	wipe(key->bytes, key->len);
	free(key->bytes);
	pthread_rwlock_destroy(&key->lock);
	free(key);
}

bool
auth_key_replace(struct auth_key *key, struct auth_key *fresh)
{
	unsigned char *old;
	size_t old_len;
	bool changed;

	pthread_rwlock_wrlock(&key->lock);
	old = key->bytes;
	old_len = key->len;
	changed = old_len != fresh->len ||
	    !memeql_sec(old, fresh->bytes, old_len);
	key->bytes = fresh->bytes;
	key->len = fresh->len;
	pthread_rwlock_unlock(&key->lock);
	/* no reader can hold `old` now: it took the lock to see it */
	wipe(old, old_len);
	free(old);
	pthread_rwlock_destroy(&fresh->lock);
	free(fresh);
	return changed;
}

/* ---- verification, stage 1: shape and signature ------------------------ */

static bool
auth_is_b64url(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * Checks the three-segment shape; on success *signed_len is the length of
 * "header.payload" (the signed bytes) and the signature follows it.
 */
static int
auth_check_shape(const char *t, size_t len, size_t *signed_len,
    struct zerr *err)
{
	size_t dots[2] = { 0, 0 }, ndots = 0;

	if (len == 0)
		return zerr_set(err, ZERR_UNAUTHENTICATED, "Missing token.");
	if (len > AUTH_TOKEN_MAX)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token is too large (more than %d bytes).", AUTH_TOKEN_MAX);
	for (size_t i = 0; i < len; i++) {
		if (t[i] == '.') {
			if (ndots == 2)
				return zerr_set(err, ZERR_UNAUTHENTICATED,
				    "Malformed token.");
			dots[ndots++] = i;
		} else if (!auth_is_b64url((unsigned char)t[i])) {
			return zerr_set(err, ZERR_UNAUTHENTICATED,
			    "Malformed token.");
		}
	}
	if (ndots != 2 || dots[0] == 0 || dots[1] == dots[0] + 1)
		return zerr_set(err, ZERR_UNAUTHENTICATED, "Malformed token.");
	if (dots[1] + 1 == len)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Unsigned tokens are not accepted.");
	*signed_len = dots[1];
	return 0;
}

/*
 * Base64url without padding (JWS). `out` holds BASE64_ENCODE_LENGTH(len) +
 * BASE64_ENCODE_FINAL_LENGTH bytes; returns the encoded length.
 */
static size_t
auth_b64url_encode(const void *src, size_t len, char *out)
{
	struct base64_encode_ctx ctx;
	size_t n;

	base64url_encode_init(&ctx);
	n = base64_encode_update(&ctx, out, len, src);
	n += base64_encode_final(&ctx, out + n);
	while (n > 0 && out[n - 1] == '=')
		n--;
	return n;
}

/*
 * Decodes an unpadded base64url segment (already checked to hold only the
 * alphabet) into a NUL-terminated malloc'ed buffer; NULL when malformed.
 */
static char *
auth_b64url_decode(const char *src, size_t len, size_t *out_len)
{
	char padded[AUTH_TOKEN_MAX + 4];
	struct base64_decode_ctx ctx;
	size_t plen = len, n;
	uint8_t *dst;

	if (len % 4 == 1 || len > AUTH_TOKEN_MAX)
		return NULL;
	memcpy(padded, src, len);
	while (plen % 4 != 0)
		padded[plen++] = '=';
	if ((dst = malloc(BASE64_DECODE_LENGTH(plen) + 1)) == NULL)
		return NULL;
	base64url_decode_init(&ctx);
	n = BASE64_DECODE_LENGTH(plen);
	if (!base64_decode_update(&ctx, &n, dst, plen, padded) ||
	    !base64_decode_final(&ctx)) {
		free(dst);
		return NULL;
	}
	dst[n] = '\0';
	*out_len = n;
	return (char *)dst;
}

/* base64url(HMAC-SHA256(key, data)) into sig (AUTH_SIG_B64_LEN + slack). */
static void
auth_mac(const struct auth_key *key, const char *data, size_t len,
    char sig[BASE64_ENCODE_LENGTH(SHA256_DIGEST_SIZE) +
    BASE64_ENCODE_FINAL_LENGTH])
{
	struct hmac_sha256_ctx hctx;
	uint8_t mac[SHA256_DIGEST_SIZE];

	/* const: the lock is the only thing written, see struct auth_key */
	pthread_rwlock_rdlock((pthread_rwlock_t *)&key->lock);
	hmac_sha256_set_key(&hctx, key->len, key->bytes);
	pthread_rwlock_unlock((pthread_rwlock_t *)&key->lock);
	hmac_sha256_update(&hctx, len, (const uint8_t *)data);
	hmac_sha256_digest(&hctx, sizeof(mac), mac);
	auth_b64url_encode(mac, sizeof(mac), sig);
	wipe(mac, sizeof(mac));
	wipe(&hctx, sizeof(hctx));
}

/*
 * Recomputes HMAC-SHA256 over the signed part, encodes it as base64url and
 * compares it with the token's signature in constant time. Comparing the
 * encodings (not the decoded bytes) also refuses non-canonical encodings.
 */
static int
auth_check_signature(const struct auth_key *key, const char *t,
    size_t signed_len, const char *sig, size_t sig_len, struct zerr *err)
{
	char enc[BASE64_ENCODE_LENGTH(SHA256_DIGEST_SIZE) +
	    BASE64_ENCODE_FINAL_LENGTH];
	int ok;

	auth_mac(key, t, signed_len, enc);
	/* The length is public (it is the algorithm's); the bytes are not. */
	ok = sig_len == AUTH_SIG_B64_LEN &&
	    memeql_sec(enc, sig, AUTH_SIG_B64_LEN);
	wipe(enc, sizeof(enc));
	if (!ok)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Invalid token signature.");
	return 0;
}

/* ---- verification, stage 2: header and claims --------------------------- */

int
auth_check_sub(const char *sub, size_t len, struct zerr *err)
{
	json_t *utf8;

	if (len == 0)
		return zerr_set(err, ZERR_INVALID, "user name is empty");
	if (len > AUTH_SUB_MAX)
		return zerr_set(err, ZERR_INVALID,
		    "user name is longer than %d bytes", AUTH_SUB_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)sub[i];

		if (c < 0x20 || c == 0x7f)
			return zerr_set(err, ZERR_INVALID,
			    "user name contains a control character");
	}
	/* JSON strings are UTF-8; jansson refuses anything else. */
	utf8 = json_stringn(sub, len);
	if (utf8 == NULL)
		return zerr_set(err, ZERR_INVALID,
		    "user name is not valid UTF-8");
	json_decref(utf8);
	return 0;
}

/* Decodes one segment into a JSON object; NULL (with err) otherwise. */
static json_t *
auth_segment_json(const char *seg, size_t len, struct zerr *err)
{
	size_t n;
	char *text = auth_b64url_decode(seg, len, &n);
	json_t *o;

	if (text == NULL) {
		zerr_set(err, ZERR_UNAUTHENTICATED, "Malformed token.");
		return NULL;
	}
	o = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
	free(text);
	if (!json_is_object(o)) {
		json_decref(o);
		zerr_set(err, ZERR_UNAUTHENTICATED, "Malformed token.");
		return NULL;
	}
	return o;
}

/*
 * Only exactly "alg": "HS256" is accepted, a "typ" (when present) must name
 * a JWT (RFC 7519 5.1: "JWT", or the media type, case-insensitively; a JWE
 * or anything else is refused), and no "crit".
 */
static int
auth_check_header(const char *seg, size_t len, struct zerr *err)
{
	json_t *h = auth_segment_json(seg, len, err), *alg, *typ;
	int rc = -1;

	if (h == NULL)
		return -1;
	alg = json_object_get(h, "alg");
	typ = json_object_get(h, "typ");
	if (!json_is_string(alg) || strcmp(json_string_value(alg), "HS256") != 0)
		zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token algorithm must be HS256.");
	else if (typ != NULL && (!json_is_string(typ) ||
	    (strcasecmp(json_string_value(typ), "JWT") != 0 &&
	    strcasecmp(json_string_value(typ), "application/jwt") != 0)))
		zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token type must be JWT.");
	/* RFC 7515 4.1.11: we understand no extension, so any crit is fatal. */
	else if (json_object_get(h, "crit") != NULL)
		zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token has unsupported critical header parameters.");
	else
		rc = 0;
	json_decref(h);
	return rc;
}

static int
auth_claim_sub(json_t *claims, struct auth_claims *out, struct zerr *err)
{
	json_t *v = json_object_get(claims, "sub");
	struct zerr tmp;
	size_t len;

	if (!json_is_string(v))
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token has no string 'sub' claim.");
	len = json_string_length(v);
	if (auth_check_sub(json_string_value(v), len, &tmp) != 0 ||
	    strlen(json_string_value(v)) != len)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token has an invalid 'sub' claim.");
	memcpy(out->sub, json_string_value(v), len);
	out->sub[len] = '\0';
	return 0;
}

static int
auth_claim_scopes(json_t *claims, struct auth_claims *out, struct zerr *err)
{
	json_t *arr = json_object_get(claims, "scopes"), *v;
	size_t i;

	if (!json_is_array(arr))
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token has no 'scopes' array.");
	out->scopes = 0;
	json_array_foreach(arr, i, v) {
		enum api_group g;

		if (!json_is_string(v) || group_from_name(json_string_value(v),
		    json_string_length(v), &g) != 0)
			return zerr_set(err, ZERR_UNAUTHENTICATED,
			    "Token has an unknown scope.");
		out->scopes |= GROUP_BIT(g);
	}
	return 0;
}

/* Reads an optional integer NumericDate claim. */
static int
auth_claim_time(json_t *claims, const char *name, bool *has, int64_t *val,
    struct zerr *err)
{
	json_t *v = json_object_get(claims, name);

	*has = v != NULL;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v))
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Token '%s' claim must be an integer.", name);
	*val = (int64_t)json_integer_value(v);
	return 0;
}

static int
auth_check_claims(const char *seg, size_t len, time_t now,
    struct auth_claims *out, struct zerr *err)
{
	json_t *claims = auth_segment_json(seg, len, err);
	bool has_nbf;
	int64_t nbf = 0;
	int rc = -1;

	if (claims == NULL)
		return -1;
	if (auth_claim_sub(claims, out, err) != 0 ||
	    auth_claim_scopes(claims, out, err) != 0 ||
	    auth_claim_time(claims, "exp", &out->has_exp, &out->exp, err) != 0 ||
	    auth_claim_time(claims, "nbf", &has_nbf, &nbf, err) != 0)
		goto out;
	/* Written so that no extreme exp/nbf can overflow. */
	if (out->has_exp && out->exp < (int64_t)now - AUTH_LEEWAY_S) {
		zerr_set(err, ZERR_UNAUTHENTICATED, AUTH_MSG_EXPIRED);
		goto out;
	}
	if (has_nbf && nbf > (int64_t)now + AUTH_LEEWAY_S) {
		zerr_set(err, ZERR_UNAUTHENTICATED, "Token is not yet valid.");
		goto out;
	}
	rc = 0;
out:
	json_decref(claims);
	return rc;
}

int
auth_verify(const struct auth_key *key, const char *token, size_t len,
    time_t now, struct auth_claims *out, struct zerr *err)
{
	size_t signed_len = 0, hlen;
	int rc;

	memset(out, 0, sizeof(*out));
	if (auth_check_shape(token, len, &signed_len, err) != 0 ||
	    auth_check_signature(key, token, signed_len,
	    token + signed_len + 1, len - signed_len - 1, err) != 0)
		return -1;
	/* The signature is ours: only now is anything decoded. */
	hlen = (size_t)((const char *)memchr(token, '.', signed_len) - token);
	rc = auth_check_header(token, hlen, err);
	if (rc == 0)
		rc = auth_check_claims(token + hlen + 1, signed_len - hlen - 1,
		    now, out, err);
	if (rc != 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

/* ---- Authorization header ----------------------------------------------- */

static bool
auth_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int
auth_parse_bearer(const char *v, const char **token, size_t *len,
    struct zerr *err)
{
	const char *t;
	size_t n;

	if (v == NULL)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Missing Authorization: Bearer token.");
	while (auth_is_blank(*v))
		v++;
	if (*v == '\0')
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Missing Authorization: Bearer token.");
	/* RFC 7235: the scheme is case-insensitive. */
	if (strncasecmp(v, "Bearer", 6) != 0 ||
	    (v[6] != '\0' && !auth_is_blank(v[6])))
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Authorization header must use the Bearer scheme.");
	t = v + 6;
	while (auth_is_blank(*t))
		t++;
	n = strlen(t);
	while (n > 0 && auth_is_blank(t[n - 1]))
		n--;
	if (n == 0)
		return zerr_set(err, ZERR_UNAUTHENTICATED,
		    "Missing Authorization: Bearer token.");
	/* RFC 6750 b64token: no blanks inside. */
	for (size_t i = 0; i < n; i++) {
		if (auth_is_blank(t[i]))
			return zerr_set(err, ZERR_UNAUTHENTICATED,
			    "Malformed Authorization header.");
	}
	*token = t;
	*len = n;
	return 0;
}

/* ---- signing ------------------------------------------------------------- */

/* The claims object as compact JSON (malloc'd), or NULL. */
static char *
auth_claims_text(const char *sub, group_set scopes, bool has_exp, int64_t exp,
    bool with_iat)
{
	json_t *o = json_object(), *arr = json_array();
	char *text = NULL;
	int bad = o == NULL || arr == NULL;

	for (unsigned g = 0; !bad && g < GROUP_COUNT; g++) {
		if (scopes & GROUP_BIT(g))
			bad |= json_array_append_new(arr,
			    json_string(group_name((enum api_group)g)));
	}
	if (!bad) {
		bad |= json_object_set_new(o, "sub", json_string(sub));
		bad |= json_object_set(o, "scopes", arr);
		if (has_exp)
			bad |= json_object_set_new(o, "exp", json_integer(exp));
		if (with_iat)
			bad |= json_object_set_new(o, "iat",
			    json_integer((json_int_t)time(NULL)));
	}
	if (!bad)
		text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(arr);
	json_decref(o);
	return text;
}

int
auth_sign(const struct auth_key *key, const char *sub, group_set scopes,
    bool has_exp, int64_t exp, char **out_token, struct zerr *err)
{
	static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	char *claims, *tok;
	size_t clen, n;

	if (auth_check_sub(sub, strlen(sub), err) != 0)
		return -1;
	claims = auth_claims_text(sub, scopes, has_exp, exp, true);
	if (claims == NULL)
		return zerr_set(err, ZERR_INTERNAL, "cannot sign the token");
	clen = strlen(claims);
	tok = malloc(BASE64_ENCODE_LENGTH(sizeof(header)) +
	    BASE64_ENCODE_LENGTH(clen) + BASE64_ENCODE_LENGTH(SHA256_DIGEST_SIZE) +
	    3 * BASE64_ENCODE_FINAL_LENGTH + 3);
	if (tok == NULL) {
		free(claims);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	n = auth_b64url_encode(header, sizeof(header) - 1, tok);
	tok[n++] = '.';
	n += auth_b64url_encode(claims, clen, tok + n);
	free(claims);
	tok[n] = '.';
	auth_mac(key, tok, n, tok + n + 1);
	tok[n + 1 + AUTH_SIG_B64_LEN] = '\0';
	*out_token = tok;
	return 0;
}

/* ---- messages ------------------------------------------------------------ */

void
auth_format_forbidden(const struct auth_claims *c, enum api_group needed,
    char *buf, size_t size)
{
	char have[128];

	group_set_format(c->scopes, have, sizeof(have));
	snprintf(buf, size,
	    "User '%s' does not have the '%s' scope (token scopes: %s).",
	    c->sub, group_name(needed), have[0] ? have : "none");
}

char *
auth_claims_json(const struct auth_claims *c)
{
	return auth_claims_text(c->sub, c->scopes, c->has_exp, c->exp, false);
}
